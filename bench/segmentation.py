#!/usr/bin/env python3
"""Segmentation input: an image and its mask, cropped and flipped alike,
against the PyTorch DataLoader doing the same with PIL, side by side.

    /usr/bin/python3 bench/segmentation.py DIR [--masks MASKDIR] [--size 320]
        [--batch 32] [--workers 2] [--rounds 3]

DIR is an image folder (DIR/class/x.jpg). Each image gets a VOC-style mask
of its own size in MASKDIR (default DIR + "_masks"), made once, untimed: a
palette PNG of 21 classes in blocks, 255 on the borders.

  sluice  zip(from_files(images), from_files(masks)) -> shuffle(1024)
          -> map_image("train", size, mask_key=1): the image's window
          decoded (DCT-scaled) and resampled, the mask's window decoded
          raw and sampled by nearest neighbour, both flipped alike
          -> batch -> prefetch
  torch   a Dataset that opens both with PIL, draws RandomResizedCrop's
          parameters once, applies F.resized_crop to the image (bilinear,
          antialiased) and to the mask (nearest), flips both, and returns
          uint8 HWC arrays as tensors (the layout sluice gives), in a
          DataLoader(shuffle=True, num_workers=W)

  sluice_images_only  the same without the masks: what they cost

images/s from the first iteration to the last batch, one epoch a round,
rounds alternating the two; medians and the ratio. One JSON line per run
and a summary line. Run with SLUICE_LIBRARY and PYTHONPATH set.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np


def make_masks(images, out):
    from PIL import Image
    masks = []
    for i, path in enumerate(images):
        m = os.path.join(out, "%06d.png" % i)
        masks.append(m)
        if os.path.exists(m):
            continue
        w, h = Image.open(path).size
        rng = np.random.default_rng(i)
        blocks = rng.integers(0, 21, (h // 16 + 1, w // 16 + 1))
        mask = np.kron(blocks, np.ones((16, 16), np.uint8))[:h, :w].astype(np.uint8)
        mask[:2], mask[-2:], mask[:, :2], mask[:, -2:] = 255, 255, 255, 255
        img = Image.fromarray(mask, "P")
        img.putpalette([(k * 37 + c * 91) % 256 for k in range(256) for c in range(3)])
        os.makedirs(out, exist_ok=True)
        img.save(m)
    return masks


def run_sluice(a, images, masks, with_masks=True):
    import sluice
    if with_masks:
        ds = sluice.Dataset.zip((sluice.Dataset.from_files(images),
                                 sluice.Dataset.from_files(masks)))
        ds = ds.shuffle(1024, seed=0).map_image("train", a.size, image_key=0, mask_key=1)
    else:
        ds = sluice.Dataset.from_files(images).shuffle(1024, seed=0).map_image("train", a.size)
    ds = ds.batch(a.batch, drop_remainder=True).prefetch(2).with_options(threads=a.workers,
                                                                          seed=1)
    t = time.perf_counter()
    n = 0
    for batch in ds:
        n += len(batch[0] if with_masks else batch)
    return n / (time.perf_counter() - t)


def run_images_only(a, images, masks):
    return run_sluice(a, images, masks, with_masks=False)


def run_torch(a, images, masks):
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image

    class Pairs(torch.utils.data.Dataset):
        def __len__(self):
            return len(images)

        def __getitem__(self, i):
            img = Image.open(images[i]).convert("RGB")
            mask = Image.open(masks[i])
            top, left, h, w = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
            size = [a.size, a.size]
            img = F.resized_crop(img, top, left, h, w, size, T.InterpolationMode.BILINEAR)
            mask = F.resized_crop(mask, top, left, h, w, size, T.InterpolationMode.NEAREST)
            if torch.rand(1) < 0.5:
                img, mask = F.hflip(img), F.hflip(mask)
            return (torch.from_numpy(np.array(img)),
                    torch.from_numpy(np.array(mask)[..., None]))

    loader = torch.utils.data.DataLoader(Pairs(), batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers, drop_last=True)
    t = time.perf_counter()
    n = 0
    for images_b, masks_b in loader:
        n += len(images_b)
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--masks")
    ap.add_argument("--size", type=int, default=320)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    images = sorted(os.path.join(r, f) for r, _, fs in os.walk(a.dir) for f in fs
                    if f.lower().endswith((".jpg", ".jpeg")))
    masks = make_masks(images, a.masks or a.dir.rstrip("/") + "_masks")
    rates = {"sluice": [], "torch": [], "sluice_images_only": []}
    for r in range(a.rounds):
        for case, fn in (("torch", run_torch), ("sluice", run_sluice),
                         ("sluice_images_only", run_images_only)):
            rates[case].append(fn(a, images, masks))
            print(json.dumps({"round": r, "case": case,
                              "images_per_s": round(rates[case][-1], 1)}), flush=True)
    med = {c: statistics.median(v) for c, v in rates.items()}
    print(json.dumps({"summary": True, "images": len(images), "size": a.size,
                      "batch": a.batch, "workers": a.workers, "rounds": a.rounds,
                      "sluice_images_per_s": round(med["sluice"], 1),
                      "torch_images_per_s": round(med["torch"], 1),
                      "ratio": round(med["sluice"] / med["torch"], 2),
                      "sluice_images_only_per_s": round(med["sluice_images_only"], 1),
                      "mask_cost": round(1 - med["sluice"] / med["sluice_images_only"], 3),
                      "round_ratios": [round(s / t, 2) for s, t in
                                       zip(rates["sluice"], rates["torch"])]}))


if __name__ == "__main__":
    main()
