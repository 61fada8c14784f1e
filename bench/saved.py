#!/usr/bin/env python3
"""Save and load rates of a preprocessed image dataset, beside what one
core does with the same bytes.

    /usr/bin/python3 bench/saved.py FOLDER [--size 224] [--limit 2000]
        [--rounds 3] [--dir /tmp]

The elements: FOLDER's images decoded and resized (map_image "eval", SIZE
square, uint8 HWC) with their labels, produced once and kept in memory
(cache), so each pass below costs reading memory, not decoding. Then, in
rounds that alternate the cases:

  save_none, save_gzip   Dataset.save of the pass, no compression / GZIP:
                         MB/s of tensor bytes, writer threads in parallel
  one_core_gzip          zlib.compress (level 6, as save uses) of the same
                         bytes on one thread in 1 MiB pieces: what one
                         core compresses; save_gzip / this is how far the
                         writer threads parallelise
  load_none, load_gzip   Dataset.load of each, read to the end: MB/s
  memory                 the cached pass itself, read to the end

Medians of --rounds; one JSON object per line, a summary last. The files
go under --dir (a fresh folder, removed at the end): their speed is the
page cache's, as for a dataset read again soon after it was saved.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import sluice  # noqa: E402


def drain(ds):
    n = 0
    for image, label in ds:
        n += image.nbytes + label.nbytes
    return n


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--limit", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()

    ds = (sluice.Dataset.image_folder(a.folder).take(a.limit)
          .map_image("eval", a.size).cache())
    total = drain(ds)  # fills the cache
    blob = b"".join(bytes(img) for img, _ in ds)
    work = tempfile.mkdtemp(prefix="sluice-bench-saved-", dir=a.dir)
    rates = {k: [] for k in ("memory", "save_none", "save_gzip", "one_core_gzip",
                             "load_none", "load_gzip")}
    try:
        for r in range(a.rounds):
            for case in rates:
                if case == "memory":
                    s, n = timed(lambda: drain(ds))
                elif case.startswith("save_"):
                    comp = None if case == "save_none" else "GZIP"
                    path = os.path.join(work, case)
                    s, _ = timed(lambda: ds.save(path, compression=comp))
                    n = total
                elif case == "one_core_gzip":
                    piece = 1 << 20
                    s, _ = timed(lambda: [zlib.compress(blob[i:i + piece], 6)
                                          for i in range(0, len(blob), piece)])
                    n = len(blob)
                else:
                    path = os.path.join(work, "save_" + case[5:])
                    s, n = timed(lambda: drain(sluice.Dataset.load(path)))
                rates[case].append(n / s / 1e6)
                print(json.dumps({"round": r, "case": case, "mb_per_s": round(n / s / 1e6, 1)}))
        sizes = {c: sum(os.path.getsize(os.path.join(work, c, f))
                        for f in os.listdir(os.path.join(work, c)))
                 for c in ("save_none", "save_gzip")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: round(statistics.median(v), 1) for k, v in rates.items()}
    print(json.dumps({
        "summary": True, "elements": min(a.limit, len(list(ds.take(a.limit)))),
        "tensor_mb": round(total / 1e6, 1), "cpus": os.cpu_count(),
        "median_mb_per_s": med,
        "gzip_ratio": round(sizes["save_gzip"] / sizes["save_none"], 3),
        "save_gzip_vs_one_core": round(med["save_gzip"] / med["one_core_gzip"], 2),
        "load_none_vs_memory": round(med["load_none"] / med["memory"], 2),
    }))


if __name__ == "__main__":
    main()
