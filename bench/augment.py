#!/usr/bin/env python3
"""What each augmentation costs the train pipeline, measured side by side.

    /usr/bin/python3 bench/augment.py DIR [--batch 256] [--epochs 2]
        [--threads 2] [--rounds 3] [--classes N] [--cases a,b,...]

Each case is the train pipeline (image_folder -> shuffle(ALL) ->
repeat(epochs) -> map_image("train", 224) -> batch(drop_remainder) ->
prefetch(AUTOTUNE)) with one augmentation added; the rounds run the cases
alternately, and each case's images/s (first iterator's creation to the
last batch, the batches read as numpy arrays) is a median over rounds;
each round starts one case further on, as a case's place in the round
biases it.

  plain          the train preset alone
  plain_again    the same, run last in each round: the noise floor and any
                 bias from a case's place in the round
  color_jitter   + color_jitter=(0.4, 0.4, 0.4, 0.1) (DINO's), every image
  grayscale      + grayscale_prob=0.2
  blur           + gaussian_blur=(23, (0.1, 2.0)), every image
  solarize       + solarize_prob=0.2
  rotate         + rotate=15, bilinear
  erasing        + random_erasing_prob=0.25
  trivial        + auto_augment="trivial_augment_wide", bilinear
  rand_augment   + auto_augment="rand_augment" (2 ops, magnitude 9), bilinear
  auto_augment   + auto_augment="auto_augment" (ImageNet policy), bilinear
  tv_recipe      torchvision's reference recipe: TrivialAugmentWide
                 (bilinear) + random erasing 0.1
  timm_recipe    timm's: RandAugment m9 + colour jitter 0.4 + erasing 0.25
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

BILINEAR = {"interpolation": "bilinear"}
CASES = {
    "plain": {},
    "plain_again": {},
    "color_jitter": {"color_jitter": (0.4, 0.4, 0.4, 0.1)},
    "grayscale": {"grayscale_prob": 0.2},
    "blur": {"gaussian_blur": (23, (0.1, 2.0))},
    "solarize": {"solarize_prob": 0.2},
    "rotate": {"rotate": 15, **BILINEAR},
    "erasing": {"random_erasing_prob": 0.25},
    "trivial": {"auto_augment": "trivial_augment_wide", **BILINEAR},
    "rand_augment": {"auto_augment": "rand_augment", **BILINEAR},
    "auto_augment": {"auto_augment": "auto_augment", **BILINEAR},
    "tv_recipe": {"auto_augment": "trivial_augment_wide", "random_erasing_prob": 0.1,
                  **BILINEAR},
    "timm_recipe": {"auto_augment": "rand_augment", "color_jitter": (0.4, 0.4, 0.4),
                    "random_erasing_prob": 0.25, **BILINEAR},
    "mixup_cutmix": {},
    "mixup_only": {},
}


def pipeline(a, case):
    ds = (sluice.Dataset.image_folder(a.dir).shuffle(sluice.ALL, seed=0).repeat(a.epochs)
          .map_image("train", 224, **CASES[case]).batch(a.batch, drop_remainder=True))
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
    ap.add_argument("--cases", default=",".join(CASES),
                    help="comma-separated; plain is always run")
    a = ap.parse_args()
    cases = ["plain"] + [c for c in a.cases.split(",") if c != "plain"]
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error("unknown cases: " + ", ".join(sorted(unknown)))
    rates = {c: [] for c in cases}
    run(a, "plain")  # warm: the page cache, the allocator's pools
    for r in range(a.rounds):
        # each round starts one case later: a case's place in the round
        # biases it (the first ran ~6% faster than the same case last)
        for c in cases[r % len(cases):] + cases[:r % len(cases)]:
            rates[c].append(run(a, c))
            print(json.dumps({"round": r, "case": c, "images_per_s": round(rates[c][-1], 1)}),
                  flush=True)
    med = {c: statistics.median(v) for c, v in rates.items()}
    print(json.dumps({"summary": True, "batch": a.batch, "threads": a.threads,
                      "median_images_per_s": {c: round(v, 1) for c, v in med.items()},
                      "vs_plain": {c: round(med[c] / med["plain"], 3) for c in cases}}))


if __name__ == "__main__":
    main()
