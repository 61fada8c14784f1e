"""Dataset.service() with workers started as `python3 -m sluice.worker`:
the batches equal the pipeline's own, with a worker killed mid-epoch;
another pipeline is refused. The C tests (tests/test_service.c) cover the
rest: shared memory, stopped workers, added workers, checkpoints, mpirun."""

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest

import sluice

import service_pipeline

HERE = os.path.dirname(os.path.abspath(__file__))

if not sluice.build_options().get("ucx"):
    pytest.skip("a build without UCX (SLUICE_WITH_UCX=OFF)", allow_module_level=True)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("SLUICE_SERVICE_SECRET", "python-test-secret")
    monkeypatch.setenv("UCX_TLS", "tcp")


def _digests(ds):
    out = []
    for batch in ds:
        h = hashlib.sha256()
        for a in batch:
            h.update(a.tobytes())
            h.update(repr(a.shape).encode())
        out.append(h.hexdigest())
    return out


def _worker(port, func="service_pipeline:build", version="v1"):
    return subprocess.Popen([sys.executable, "-m", "sluice.worker", func, "--address",
                             "127.0.0.1:%d" % port, "--version", version, "--threads", "1"],
                            cwd=HERE, stderr=subprocess.PIPE, text=True)


def _wait(p, timeout=30):
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("a worker did not end")
    return p.returncode


def test_same_batches_and_a_killed_worker():
    want = _digests(service_pipeline.build())
    svc = service_pipeline.build().service("127.0.0.1:0", version="v1", heartbeat_ms=100,
                                           timeout_ms=1000)
    assert svc.cardinality() == len(want)
    workers = [_worker(svc.service_port) for _ in range(2)]
    got = []
    for k, batch in enumerate(svc):
        if k == 15:
            workers[0].send_signal(signal.SIGKILL)
        h = hashlib.sha256()
        for a in batch:
            h.update(a.tobytes())
            h.update(repr(a.shape).encode())
        got.append(h.hexdigest())
    assert got == want
    del svc  # goodbye: the surviving worker ends with 0
    assert _wait(workers[0]) == -signal.SIGKILL
    assert _wait(workers[1]) == 0


def test_another_pipeline_refused():
    svc = service_pipeline.build().service("127.0.0.1:0", version="v1")
    p = _worker(svc.service_port, func="service_pipeline:build_other")
    assert _wait(p) != 0
    assert "another pipeline" in p.stderr.read()
    p = _worker(svc.service_port, version="v2")
    assert _wait(p) != 0
    assert "\"v2\"" in p.stderr.read()
    del svc


def test_refuses_a_pipeline_workers_cannot_split():
    with pytest.raises(sluice.UnsupportedError, match="filter"):
        (sluice.Dataset.range(10).filter(lambda x: x % 2 == 0).batch(2)
         .service("127.0.0.1:0"))
