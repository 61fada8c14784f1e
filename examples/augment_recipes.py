#!/usr/bin/env python3
"""Today's training recipes as sluice pipelines: the augmentations run in C
in the decode, the batches come out ready for the model.

    PYTHONPATH=python SLUICE_LIBRARY=build/libsluice.so \\
        /usr/bin/python3 examples/augment_recipes.py DIR [--recipe NAME]
        [--batches N] [--size S] [--classes N] [--save PNG]

DIR is an ImageFolder (root/class/image.jpg). The recipes:

  torchvision  torchvision's reference ResNet-50 recipe: random-resized
               crop, flip, TrivialAugmentWide (bilinear), normalise,
               RandomErasing 0.1, then MixUp 0.2 / CutMix 1.0
  timm         timm's: RandAugment (2 ops, magnitude 9), colour jitter 0.4,
               RandomErasing 0.25, MixUp/CutMix with label smoothing 0.1
  simclr       SimCLR/BYOL/DINO's view: crop 0.08-1, flip, colour jitter
               (0.4, 0.4, 0.2, 0.1) with p 0.8, grayscale 0.2, Gaussian
               blur (23, sigma 0.1-2) with p 0.5, solarize 0.2

It prints each batch's shapes and the images/s, and --save writes the first
batch's first images side by side as a PNG (needs PIL) to look at.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import sluice  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def recipe(name, root, size, batch, classes):
    ds = sluice.Dataset.image_folder(root).shuffle(sluice.ALL, seed=0).repeat()
    out = {"dtype": "float32", "layout": "CHW"}
    if name == "torchvision":
        ds = ds.map_image("train", size, auto_augment="trivial_augment_wide",
                          interpolation="bilinear", random_erasing_prob=0.1, **out)
        ds = ds.batch(batch, drop_remainder=True).mixup_cutmix(classes)
    elif name == "timm":
        ds = ds.map_image("train", size, auto_augment="rand_augment",
                          rand_augment_num_ops=2, rand_augment_magnitude=9,
                          interpolation="bilinear", color_jitter=(0.4, 0.4, 0.4),
                          random_erasing_prob=0.25, **out)
        ds = ds.batch(batch, drop_remainder=True).mixup_cutmix(classes, label_smoothing=0.1)
    elif name == "simclr":
        ds = ds.map_image("train", size, color_jitter=(0.4, 0.4, 0.2, 0.1),
                          color_jitter_prob=0.8, grayscale_prob=0.2,
                          gaussian_blur=(23, (0.1, 2.0)), blur_prob=0.5, solarize_prob=0.2,
                          **out)
        ds = ds.batch(batch, drop_remainder=True)
    else:
        raise SystemExit("unknown recipe %r (torchvision, timm or simclr)" % name)
    return ds.prefetch(sluice.AUTOTUNE)


def save(images, path, count=8):
    """The first images, denormalised, side by side."""
    from PIL import Image
    x = np.asarray(images[:count]).transpose(0, 2, 3, 1) * STD + MEAN
    strip = np.concatenate(list(np.clip(x * 255, 0, 255).astype(np.uint8)), axis=1)
    Image.fromarray(strip).save(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--recipe", default="torchvision")
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=None,
                    help="for the soft targets; default: the folder's class count")
    ap.add_argument("--save", default=None, help="write the first images here (PNG)")
    a = ap.parse_args()
    classes = a.classes or len([d for d in os.listdir(a.dir)
                                if os.path.isdir(os.path.join(a.dir, d))])
    ds = recipe(a.recipe, a.dir, a.size, a.batch, classes)
    t = time.perf_counter()
    n = 0
    for i, (images, targets) in enumerate(ds.take(a.batches)):
        if i == 0:
            print("images %s %s, targets %s %s" % (images.shape, images.dtype, targets.shape,
                                                   targets.dtype))
            if a.save:
                save(images, a.save)
        n += len(images)
    dt = time.perf_counter() - t
    print("%s: %d batches, %d images, %.0f images/s" % (a.recipe, a.batches, n, n / dt))


if __name__ == "__main__":
    main()
