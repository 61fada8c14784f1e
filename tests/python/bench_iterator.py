#!/usr/bin/env python3
"""Images/s through the Python iterator against sluice-bench, side by side.

    SLUICE_LIBRARY=build/libsluice.so PYTHONPATH=python /usr/bin/python3 \\
        tests/python/bench_iterator.py DIR --bench build/sluice-bench \\
        [--threads 2 --epochs 5 --runs 5 --batch 256 --size 224]

Runs sluice-bench (the C consumer) and the same pipeline through the
binding (numpy arrays, train preset) alternately, --runs times each, and
prints the medians and their ratio. Both time the same span: from creating
the iterator to the last batch. With --check it also compares the two
pipelines' batches byte for byte (through tests/python/c_pipeline, --c-pipeline).
Not a test: timing depends on the machine; the tests check correctness.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import sluice


def python_run(args):
    ds = sluice.Dataset.image_folder(args.dir)
    ds = ds.shuffle(sluice.ALL, seed=args.seed)
    if args.epochs != 1:
        ds = ds.repeat(args.epochs)
    ds = (ds.map_image(preset="train", size=args.size).batch(args.batch, drop_remainder=True)
          .prefetch(sluice.AUTOTUNE).with_options(threads=args.threads, seed=args.seed))
    images = 0
    t0 = time.perf_counter()
    it = ds.iterator()
    for x, labels in it:
        if x.shape != (args.batch, args.size, args.size, 3):
            raise SystemExit("unexpected batch shape %s" % (x.shape,))
        images += x.shape[0]
    seconds = time.perf_counter() - t0
    del x, labels
    it.close()
    return images / seconds, images


def bench_run(args):
    out = subprocess.run([args.bench, args.dir, "--preset", "train", "--batch", str(args.batch),
                          "--size", str(args.size), "--threads", str(args.threads),
                          "--epochs", str(args.epochs), "--seed", str(args.seed)],
                         check=True, capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    return res["images_per_s"], res["images"]


def check_identical(args):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "c.bin")
        subprocess.run([args.c_pipeline, args.dir, "train", str(args.size), str(args.batch),
                        str(args.seed), str(args.threads), "1", path], check=True)
        c = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                c.update(block)
    p = hashlib.sha256()
    ds = (sluice.Dataset.image_folder(args.dir).shuffle(sluice.ALL, seed=args.seed)
          .map_image(preset="train", size=args.size).batch(args.batch, drop_remainder=True)
          .prefetch(sluice.AUTOTUNE).with_options(threads=args.threads, seed=args.seed))
    n = 0
    for x, labels in ds:
        p.update(x)
        p.update(labels)
        n += 1
    print("byte-identical C vs Python (%d batches, sha256 %s): %s"
          % (n, p.hexdigest()[:16], "yes" if c.digest() == p.digest() else "NO"))
    return c.digest() == p.digest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--bench", required=True, help="path of sluice-bench")
    ap.add_argument("--c-pipeline", help="path of tests/python/c_pipeline (for --check)")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ok = True
    if args.check:
        ok = check_identical(args)
    c_rates, py_rates = [], []
    python_run(args)  # warm the page cache and the pools
    for i in range(args.runs):
        c, cn = bench_run(args)
        p, pn = python_run(args)
        if cn != pn:
            raise SystemExit("image counts differ: %d vs %d" % (cn, pn))
        c_rates.append(c)
        py_rates.append(p)
        print("run %d: sluice-bench %.1f images/s, python %.1f images/s (%d images)"
              % (i + 1, c, p, pn), flush=True)
    c, p = statistics.median(c_rates), statistics.median(py_rates)
    print("median: sluice-bench %.1f images/s, python iterator %.1f images/s, ratio %.3f"
          % (c, p, p / c))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
