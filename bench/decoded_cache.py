#!/usr/bin/env python3
"""Later epochs from a cache of decoded pixels, against decoding every
epoch and against the decode limit, in the same run.

    /usr/bin/python3 bench/decoded_cache.py FOLDER [--epochs 4] [--size 224]
        [--resize 256] [--batch 256] [--threads 2] [--rounds 3]

Two pipelines over FOLDER's images (an ImageFolder), each `--epochs`
passes, batch, prefetch, the given threads:

  decode   image_folder -> shuffle(ALL) -> map_image("train", SIZE): every
           epoch decodes every file (only the crop's window, at the DCT
           scale it allows)
  cached   image_folder -> map_image("resize", RESIZE) -> cache() ->
           shuffle(256) -> map_image("train", SIZE): the first epoch
           decodes each file once, resized to RESIZE on its shorter side,
           and keeps those pixels; later epochs draw new crops from them

The rates are of epochs 2.. (the steady ones; the first is reported
apart). The limit is `sluice-bench --decode-limit` on the same folder
and thread count: decoding alone, each image's crop window at its DCT
scale, no resize and no pipeline. Rounds alternate the cases; medians,
one JSON object per line, a summary last. `cache_mb` is what the cache
holds: the resized images' bytes (each element's pixels), counted once
before the rounds; `rss_mb` the process's resident memory at the end.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import sluice  # noqa: E402


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def pipeline(a, kind):
    ds = sluice.Dataset.image_folder(a.folder)
    if kind == "cached":  # a cache is replayed in order: a buffer shuffles it
        ds = ds.map_image("resize", a.resize).cache().shuffle(256, seed=0)
    else:
        ds = ds.shuffle(sluice.ALL, seed=0)
    ds = ds.map_image("train", a.size).batch(a.batch).prefetch(sluice.AUTOTUNE)
    return ds.with_options(threads=a.threads, seed=1)


def run(a, kind):
    """(first-epoch images/s, later-epochs images/s)."""
    ds = pipeline(a, kind)
    rates = []
    for _ in range(a.epochs):
        t, n = time.perf_counter(), 0
        for images, _labels in ds:
            n += len(images)
        rates.append(n / (time.perf_counter() - t))
    del ds
    return rates[0], statistics.median(rates[1:])


def cache_mb(a):
    """The bytes of the pixels the cached case keeps."""
    ds = sluice.Dataset.image_folder(a.folder).map_image("resize", a.resize)
    return sum(img.nbytes for img, _ in ds.with_options(threads=a.threads)) / 2**20


def decode_limit(a):
    exe = os.path.join(os.path.dirname(HERE), "build", "sluice-bench")
    out = subprocess.run([exe, a.folder, "--preset", "train", "--size", str(a.size),
                          "--threads", str(a.threads), "--epochs", "1", "--decode-limit"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("{") and "limit_images_per_s" in line:
            return json.loads(line)["limit_images_per_s"]
    raise SystemExit("decoded_cache: sluice-bench gave no limit_images_per_s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--resize", type=int, default=256)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.epochs < 2:
        sys.exit("decoded_cache: --epochs must be at least 2")
    later = {"decode": [], "cached": []}
    first = {"decode": [], "cached": []}
    limits = []
    kept = cache_mb(a)
    for r in range(a.rounds):
        limits.append(decode_limit(a))
        for kind in ("decode", "cached") if r % 2 == 0 else ("cached", "decode"):
            f, l = run(a, kind)
            first[kind].append(f)
            later[kind].append(l)
            print(json.dumps({"round": r, "case": kind, "first_epoch_images_per_s": round(f, 1),
                              "later_epochs_images_per_s": round(l, 1),
                              "limit_images_per_s": round(limits[-1], 1)}), flush=True)
    med = {k: statistics.median(v) for k, v in later.items()}
    lim = statistics.median(limits)
    print(json.dumps({
        "summary": True, "threads": a.threads, "epochs": a.epochs, "size": a.size,
        "resize": a.resize,
        "later_epochs_images_per_s": {k: round(v, 1) for k, v in med.items()},
        "first_epoch_images_per_s": {k: round(statistics.median(v), 1)
                                     for k, v in first.items()},
        "limit_images_per_s": round(lim, 1),
        "cached_vs_limit": round(med["cached"] / lim, 2),
        "decode_vs_limit": round(med["decode"] / lim, 2),
        "cached_vs_decode": round(med["cached"] / med["decode"], 2),
        "cache_mb": round(kept, 1), "rss_mb": round(rss_mb(), 1)}))


if __name__ == "__main__":
    main()
