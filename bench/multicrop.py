#!/usr/bin/env python3
"""DINO's multi-crop (2 x 224 at scale 0.4-1 + 6 x 96 at 0.05-0.4) from one
decode against eight separate decodes, side by side.

    /usr/bin/python3 bench/multicrop.py DIR [--batch 64] [--epochs 1]
        [--threads 2] [--rounds 3]

  views     image_folder -> shuffle(ALL) -> repeat -> map_image(views=[...])
            -> batch: each file read and decoded once (the union of the
            eight windows, at the DCT scale the 224 crops need)
  separate  the same eight crops as eight map_image pipelines over the same
            shuffled folder, zipped -> batch: each file read and decoded
            eight times, each decode at its own crop and scale

Both flip, neither adds colour augmentations (they cost the same in both).
images/s counts source images (each giving eight crops), first iterator to
last batch, medians over rounds that alternate the cases. One JSON line per
run and a summary with the ratio. Run with SLUICE_LIBRARY and PYTHONPATH
set.
"""

import argparse
import json
import statistics
import time

import sluice

GLOBAL = {"size": 224, "scale": (0.4, 1.0), "count": 2}
LOCAL = {"size": 96, "scale": (0.05, 0.4), "count": 6}


def folder(a):
    return sluice.Dataset.image_folder(a.dir).shuffle(sluice.ALL, seed=0).repeat(a.epochs)


def pipeline(a, case):
    if case == "views":
        views = [sluice.View(**GLOBAL), sluice.View(**LOCAL)]
        ds = folder(a).map_image("train", 224, views=views)
    else:
        crops = [folder(a).map_image("train", v["size"], scale=v["scale"])
                 for v in (GLOBAL, LOCAL) for _ in range(v["count"])]
        ds = sluice.Dataset.zip(tuple(crops))
    return ds.batch(a.batch, drop_remainder=True).prefetch(2).with_options(threads=a.threads,
                                                                           seed=1)


def run(a, case):
    t = time.perf_counter()
    n = 0
    for batch in pipeline(a, case):
        first = batch[0] if case == "separate" else batch[0][0]
        n += len(first[0]) if case == "separate" else len(first)
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    cases = ("views", "separate")
    rates = {c: [] for c in cases}
    run(a, "views")  # warm the page cache and the pools
    for r in range(a.rounds):
        for c in cases:
            rates[c].append(run(a, c))
            print(json.dumps({"round": r, "case": c, "images_per_s": round(rates[c][-1], 1)}),
                  flush=True)
    med = {c: statistics.median(v) for c, v in rates.items()}
    print(json.dumps({"summary": True, "batch": a.batch, "threads": a.threads,
                      "median_images_per_s": {c: round(v, 1) for c, v in med.items()},
                      "views_over_separate": round(med["views"] / med["separate"], 3)}))


if __name__ == "__main__":
    main()
