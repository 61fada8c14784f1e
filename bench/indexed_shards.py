#!/usr/bin/python3
"""shuffle(ALL) over indexed TFRecord shards against the sequential read of
the same shards, in the same run.

    /usr/bin/python3 bench/indexed_shards.py SHARDS_DIR [--epochs 3] [--batch 256]
        [--threads 2] [--rounds 3] [--cycle 4] [--cold]
        [--http DELAY] [--windowed BLOCK,WINDOW] [--io-depth N]

SHARDS_DIR holds train-*.tfrecord shards of tf.train.Example images
(`sluice-bench FOLDER --make-shards SHARDS_DIR --format tfrecord`). Two
pipelines, each -> parse_example -> map_image("train", 224) -> batch
(drop_remainder) -> prefetch(AUTOTUNE), the given threads:

  sequential  TFRecordDataset(shards, num_parallel_reads=cycle) (interleave
              of streamed shards, a record at a time from each), then a
              shuffle buffer of 1,024 records (what streamed shards need to
              mix at all)
  indexed     tfrecord_indexed(shards).shuffle(ALL): every record of every
              shard in one permutation, each fetched by its own read

--windowed BLOCK,WINDOW makes the indexed order shuffle_windowed (blocks
of BLOCK records permuted, then shuffled within runs of WINDOW blocks).
--http DELAY serves SHARDS_DIR from the remote tests' object store
(tests/python/remote_server.py, in a process of its own on loopback),
each request answered DELAY seconds late, and both pipelines read URLs:
the sequential one streams each shard in 1 MiB ranged GETs, the indexed
one asks for each record by its own ranged GET, io_depth of them in
flight (--io-depth; the default 32, which the controller may raise).

The rounds alternate the two; images/s from the first iterator's creation
to the last batch, medians, and indexed / sequential per round. --cold
drops the page cache (as root: /proc/sys/vm/drop_caches) before every
run, so each reads the disk. Run with PYTHONPATH=python (the checkout's
build/ library is found) or an installed package.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import sluice  # noqa: E402

FEATURES = {"image/encoded": sluice.FixedLenFeature([], "string"),
            "image/class/label": sluice.FixedLenFeature([], "int64")}


def pipeline(a, kind):
    if kind == "indexed":
        ds = sluice.Dataset.tfrecord_indexed(a.urls)
        ds = (ds.shuffle_windowed(a.block, a.window, seed=0) if a.block
              else ds.shuffle(sluice.ALL, seed=0))
    else:
        ds = (sluice.Dataset.tfrecord(a.urls, num_parallel_reads=a.cycle)
              .shuffle(1024, seed=0))
    ds = (ds.repeat(a.epochs).parse_example(FEATURES)
          .map_image("train", 224, image_key="image/encoded")
          .batch(a.batch, drop_remainder=True).prefetch(sluice.AUTOTUNE))
    opts = {"threads": a.threads}
    if a.io_depth:
        opts["io_depth"] = a.io_depth
    return ds.with_options(**opts)


SERVE = """
import sys, time
sys.path.insert(0, sys.argv[1])
from remote_server import Server
with Server(sys.argv[2]) as srv:
    srv.delay = float(sys.argv[3])
    print(srv.url, flush=True)
    sys.stdin.read()  # until the bench closes it
"""


def serve(a):
    """The shards' folder over HTTP in a process of its own: (proc, url)."""
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "tests", "python")
    proc = subprocess.Popen([sys.executable, "-c", SERVE, tests, a.dir, str(a.http)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run(a, kind):
    if a.cold:
        drop_caches()
    t = time.perf_counter()
    n = 0
    for batch in pipeline(a, kind):
        n += len(batch["image/encoded"])
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cycle", type=int, default=4)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--http", type=float, default=None, metavar="DELAY")
    ap.add_argument("--windowed", default=None, metavar="BLOCK,WINDOW")
    ap.add_argument("--io-depth", type=int, default=0)
    a = ap.parse_args()
    a.block, a.window = map(int, a.windowed.split(",")) if a.windowed else (0, 0)
    a.shards = sorted(glob.glob(os.path.join(a.dir, "train-*.tfrecord")))
    if not a.shards:
        sys.exit("indexed_shards: no train-*.tfrecord in %s" % a.dir)
    sluice.Dataset.tfrecord_indexed(a.shards)  # the indexes, written once
    a.urls, server = a.shards, None
    if a.http is not None:
        server, url = serve(a)
        a.urls = ["%s/%s" % (url, os.path.basename(s)) for s in a.shards]
    if not a.cold:
        run(a, "sequential")  # the page cache warm for both
    rates = {"sequential": [], "indexed": []}
    for r in range(a.rounds):
        for kind in ("sequential", "indexed") if r % 2 == 0 else ("indexed", "sequential"):
            rates[kind].append(run(a, kind))
            print(json.dumps({"round": r, "case": kind, "cold": a.cold, "http": a.http,
                              "images_per_s": round(rates[kind][-1], 1)}), flush=True)
    if server:
        server.stdin.close()
        server.wait()
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(json.dumps({"summary": True, "shards": len(a.shards), "cold": a.cold,
                      "http_delay_s": a.http, "windowed": a.windowed, "io_depth": a.io_depth,
                      "threads": a.threads, "epochs": a.epochs,
                      "median_images_per_s": {k: round(v, 1) for k, v in med.items()},
                      "indexed_vs_sequential": round(med["indexed"] / med["sequential"], 3),
                      "round_ratios": [round(i / s, 3) for i, s in
                                       zip(rates["indexed"], rates["sequential"])]}))


if __name__ == "__main__":
    main()
