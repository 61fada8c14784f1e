"""A worker of sluice's preprocessing service (Dataset.service).

    python3 -m sluice.worker module:function (--address HOST:PORT |
        --trainers H1,H2 --port P [--ranks-per-host N])
        [--version V] [--threads N] [--name NAME] [--connect-timeout MS]

imports module, and serves one trainer with the dataset function() builds:
the trainer's pipeline before .service(), built the same way (its
distribute() reads the trainer rank this worker serves). The map
functions of the pipeline run here, in this process. Exits 0 when the
trainer says goodbye; raises the library's error otherwise (refused: another
secret, pipeline or version).

--trainers: the trainers' hosts, ranks-per-host trainer ranks on each
(ports P, P+1, ...); worker i of the launch (srun, mpirun, torchrun) serves
trainer rank i mod (hosts x ranks-per-host).
"""

import argparse
import ctypes
import importlib
import os
import sys

from ._constants import SL_ECALLBACK
from ._errors import make_error
from ._header import sl_build_fn, sl_worker_spec
from ._lib import lib

__all__ = ["run"]


def run(build, address=None, version=None, *, threads=0, name=None, connect_timeout_ms=60000):
    """Serves one trainer with the dataset build() returns (a
    sluice.Dataset), until the trainer says goodbye. address: the
    trainer's "host:port" (None: $SLUICE_SERVICE_ADDRESS)."""
    made = []  # the datasets (and their Python callbacks) stay alive

    @sl_build_fn
    def _build(user):
        del user
        try:
            ds = build()
            made.append(ds)
            return lib.sl_dataset_retain(ds._ptr)
        except BaseException as e:  # the C side reports it with the trainer's refusal
            lib.sl_set_last_error(SL_ECALLBACK, ("%s: %s" % (type(e).__name__, e)).encode())
            return None

    spec = sl_worker_spec()
    if lib.sl_worker_spec_init(ctypes.byref(spec), ctypes.sizeof(spec)) < 0:
        raise make_error(lib.sl_last_error_code(), lib.sl_last_error().decode())
    keep = []
    for field, value in (("address", address), ("version", version), ("name", name)):
        if value is not None:
            keep.append(str(value).encode())
            setattr(spec, field, keep[-1])
    spec.threads = int(threads)
    spec.connect_timeout_ms = int(connect_timeout_ms)
    rc = lib.sl_worker_run(_build, None, ctypes.byref(spec))
    if rc < 0:
        raise make_error(rc, lib.sl_last_error().decode())


def _trainer_address(trainers, port, per):
    """Worker i of the launch serves trainer rank i mod (hosts x per)."""
    from .dataset import distributed_context
    me = distributed_context()
    hosts = trainers.split(",")
    t = me.rank % (len(hosts) * per)
    host = hosts[t // per]
    if ":" in host:
        host = "[%s]" % host
    return "%s:%d" % (host, port + t % per)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m sluice.worker",
                                description="A worker of sluice's preprocessing service.")
    p.add_argument("function", help="module:function that builds the trainer's pipeline")
    p.add_argument("--address", help="the trainer's host:port")
    p.add_argument("--trainers", help="the trainers' hosts, comma-separated")
    p.add_argument("--port", type=int, help="the first trainer port of each host")
    p.add_argument("--ranks-per-host", type=int, default=1)
    p.add_argument("--version")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--name")
    p.add_argument("--connect-timeout", type=int, default=60000)
    a = p.parse_args(argv)
    module, _, func = a.function.partition(":")
    if not func:
        p.error("give module:function")
    sys.path.insert(0, os.getcwd())
    build = getattr(importlib.import_module(module), func)
    address = a.address
    if a.trainers:
        if not a.port:
            p.error("--trainers needs --port")
        address = _trainer_address(a.trainers, a.port, a.ranks_per_host)
    run(build, address, a.version, threads=a.threads, name=a.name,
        connect_timeout_ms=a.connect_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
