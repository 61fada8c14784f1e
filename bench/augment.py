#!/usr/bin/env python3
"""What each augmentation costs the train pipeline, measured side by side.

    /usr/bin/python3 bench/augment.py DIR [--batch 256] [--epochs 2]
        [--threads 2] [--rounds 3] [--classes N]

Each case is the train pipeline (image_folder -> shuffle(ALL) ->
repeat(epochs) -> map_image("train", 224) -> batch(drop_remainder) ->
prefetch(AUTOTUNE)) with one augmentation added; the rounds run the cases
alternately, and each case's images/s (first iterator's creation to the
last batch, the batches read as numpy arrays) is a median over rounds.

  plain          the train preset alone
  mixup_cutmix   + mixup_cutmix(classes) after batch (timm's defaults:
                 mixup_alpha 0.2, cutmix_alpha 1.0, switch_prob 0.5)
  mixup_only     + mixup_cutmix(classes, cutmix_alpha=0): every batch a
                 full pass over its pixels, the costlier of the two

One JSON object per run and a summary with each case's rate as a fraction
of plain's (cost = 1 - that). Run with SLUICE_LIBRARY and PYTHONPATH set.
"""

import argparse
import json
import statistics
import time

import sluice

CASES = ("plain", "mixup_cutmix", "mixup_only")


def pipeline(a, case):
    ds = (sluice.Dataset.image_folder(a.dir).shuffle(sluice.ALL, seed=0).repeat(a.epochs)
          .map_image("train", 224).batch(a.batch, drop_remainder=True))
    if case == "mixup_cutmix":
        ds = ds.mixup_cutmix(a.classes)
    elif case == "mixup_only":
        ds = ds.mixup_cutmix(a.classes, cutmix_alpha=0.0)
    return ds.prefetch(sluice.AUTOTUNE).with_options(threads=a.threads)


def run(a, case):
    ds = pipeline(a, case)
    t = time.perf_counter()
    n = 0
    for images, labels in ds:
        n += len(images)
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--classes", type=int, default=1000)
    a = ap.parse_args()
    rates = {c: [] for c in CASES}
    for r in range(a.rounds):
        for c in CASES:
            rates[c].append(run(a, c))
            print(json.dumps({"round": r, "case": c, "images_per_s": round(rates[c][-1], 1)}),
                  flush=True)
    med = {c: statistics.median(v) for c, v in rates.items()}
    print(json.dumps({"summary": True, "batch": a.batch, "threads": a.threads,
                      "median_images_per_s": {c: round(v, 1) for c, v in med.items()},
                      "vs_plain": {c: round(med[c] / med["plain"], 3) for c in CASES}}))


if __name__ == "__main__":
    main()
