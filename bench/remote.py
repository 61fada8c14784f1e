#!/usr/bin/python3
"""Shards read over HTTP against the same shards on local disk.

    /usr/bin/python3 bench/remote.py SHARDS [--epochs 8] [--rounds 3]

SHARDS holds tfrecord/ and tar/ shard folders (sluice-bench DIR
--make-shards SHARDS/tfrecord --format tfrecord, the same with tar). The
train pipeline (shards read 4 at a time: tfrecord's num_parallel_reads,
an interleave of webdataset for tar; parse_example for TFRecord,
map_image("train", 224), batch 256, prefetch; 2 threads) runs over:

  local      the files
  nginx      the same files from nginx on loopback (HTTP/1.1 keep-alive)
  latency    from the loopback store of the tests (tests/python/
             remote_server.py) adding --latency-ms (default 20) to every
             request
  cache      from nginx with remote_cache_dir, after a first epoch filled
             the cache: every epoch reads the local copies

alternating, the order rotating each round; medians of the rounds and each
case over local. The servers run on the same cores as the pipeline: their
CPU time is printed with the figures (the client's too).
"""

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import sluice  # noqa: E402

STORE = """
import sys, time
sys.path.insert(0, sys.argv[1])
from remote_server import Server
with Server(sys.argv[2]) as srv:
    srv.delay = float(sys.argv[3])
    print(srv.url, flush=True)
    while True:
        time.sleep(3600)
"""

FEATURES = {"image/encoded": sluice.FixedLenFeature([], "string"),
            "image/class/label": sluice.FixedLenFeature([], "int64")}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(root, tmp):
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(exe):
        sys.exit("bench/remote.py: nginx is not installed (apt install nginx-light)")
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(("user root;\n" if os.geteuid() == 0 else "") + """
daemon off;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events {}
http {
    access_log off;
    sendfile on;
    keepalive_requests 100000;
    client_body_temp_path %(d)s/body;
    proxy_temp_path %(d)s/proxy;
    fastcgi_temp_path %(d)s/fastcgi;
    uwsgi_temp_path %(d)s/uwsgi;
    scgi_temp_path %(d)s/scgi;
    server { listen 127.0.0.1:%(port)d; root %(root)s; }
}
""" % {"d": tmp, "port": port, "root": root})
    p = subprocess.Popen([exe, "-c", conf, "-p", tmp])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return p, "http://127.0.0.1:%d" % port
        except OSError:
            time.sleep(0.05)
    p.kill()
    sys.exit("bench/remote.py: nginx did not start")


def pipeline(fmt, paths, a, **opts):
    if fmt == "tfrecord":
        ds = (sluice.Dataset.tfrecord(paths, num_parallel_reads=4).parse_example(FEATURES)
              .map_image("train", 224))
    else:  # as sluice-bench's tar preset: 4 shards at a time
        ds = (sluice.Dataset.from_tensor_slices(paths)
              .interleave(lambda u: sluice.Dataset.webdataset(u), cycle_length=4,
                          num_parallel_calls=sluice.AUTOTUNE)
              .map_image("train", 224))
    ds = ds.batch(a.batch, drop_remainder=True).prefetch(sluice.AUTOTUNE)
    return ds.with_options(threads=a.threads, **opts)


def cpu_of(pid):
    """CPU seconds of pid and its children (nginx's workers)."""
    total = 0.0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                v = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(p) == pid or int(v[1]) == pid:
            total += (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run(ds, epochs, servers):
    s0 = sum(cpu_of(p) for p in servers)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    n = 0
    for _ in range(epochs):
        for batch in ds:
            n += len(batch[0] if isinstance(batch, (tuple, list)) else batch["image/encoded"])
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return n / wall, cpu, sum(cpu_of(p) for p in servers) - s0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shards")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--formats", default="tfrecord,tar")
    ap.add_argument("--cases", default="local,nginx,latency,cache")
    a = ap.parse_args()
    root = os.path.abspath(a.shards)
    tmp = tempfile.mkdtemp(prefix="sluice-remote-bench-")
    nginx, nurl = start_nginx(root, tmp)
    # the store in a process of its own (its Python threads would take this
    # one's GIL), its CPU time counted as the server's
    store = subprocess.Popen(
        [sys.executable, "-c", STORE, os.path.join(HERE, "..", "tests", "python"), root,
         str(a.latency_ms / 1000)], stdout=subprocess.PIPE, text=True)
    store_url = store.stdout.readline().strip()
    cases = a.cases.split(",")
    try:
        for fmt in a.formats.split(","):
            names = sorted(os.listdir(os.path.join(root, fmt)))
            paths = {"local": [os.path.join(root, fmt, n) for n in names],
                     "nginx": ["%s/%s/%s" % (nurl, fmt, n) for n in names],
                     "latency": ["%s/%s/%s" % (store_url, fmt, n) for n in names]}
            paths["cache"] = paths["nginx"]
            cache_dir = os.path.join(tmp, "cache-" + fmt)
            opts = {"cache": {"remote_cache_dir": cache_dir}}
            # warm: the page cache, the pools; and the cache filled once
            run(pipeline(fmt, paths["local"], a), 1, [])
            run(pipeline(fmt, paths["cache"], a, **opts["cache"]), 1, [])
            rates = {c: [] for c in cases}
            for r in range(a.rounds):
                for c in cases[r % len(cases):] + cases[:r % len(cases)]:
                    servers = [nginx.pid] if c in ("nginx", "cache") else \
                        [store.pid] if c == "latency" else []
                    rate, cpu, scpu = run(pipeline(fmt, paths[c], a, **opts.get(c, {})),
                                          a.epochs, servers)
                    rates[c].append(rate)
                    print(json.dumps({"format": fmt, "round": r, "case": c,
                                      "images_per_s": round(rate, 1),
                                      "process_cpu_s": round(cpu, 2),
                                      "server_cpu_s": round(scpu, 2)}), flush=True)
            med = {c: statistics.median(v) for c, v in rates.items()}
            print(json.dumps({"summary": True, "format": fmt, "epochs": a.epochs,
                              "rounds": a.rounds, "latency_ms": a.latency_ms,
                              "median_images_per_s": {c: round(v, 1) for c, v in med.items()},
                              "vs_local": {c: round(v / med["local"], 3)
                                           for c, v in med.items()}}), flush=True)
    finally:
        store.kill()
        store.wait()
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
