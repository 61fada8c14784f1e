#!/usr/bin/env python3
"""The image pipeline from Python against sluice-bench's C loop, same run.

    /usr/bin/python3 bench/python_pipeline.py DIR --bench build/sluice-bench \\
        [--preset train|eval] [--batch 256] [--epochs 3] [--threads 2] [--rounds 3]

Each round runs, back to back: sluice-bench (the C consumer), the same
pipeline iterated from Python as numpy arrays (``for images, labels in
ds``), and through ``sluice.torch.DataLoader`` (torch tensors). The
pipeline is sluice-bench's: image_folder -> shuffle(ALL) (train) ->
repeat(epochs) -> map_image(preset, 224) -> batch(drop_remainder for
train) -> prefetch(AUTOTUNE), the given threads; --per-epoch iterates one
epoch per iterator instead (each pays its start-up: thread start, first
batch).
images/s counts from the first iterator's creation to the last batch in
all three. One JSON line per run, then the medians and the ratios to C.

--compare-epochs measures what an iterator per epoch costs instead: in
each round, sluice-bench and the numpy loop each run the epochs in one
iterator (repeat) and in one iterator per epoch over the same dataset (as
a PyTorch training loop does), back to back; the summary gives each
consumer's per-epoch / one-iterator ratio (medians, and the median of the
rounds' ratios).

--map-us X adds a Python map before map_image that does X us of numpy
work per element (a loop of small array operations: the GIL is held for
the calls and let go inside numpy), num_parallel_calls AUTOTUNE.
Run with SLUICE_LIBRARY and PYTHONPATH set (see python/README.md).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import sluice


def pipeline(args, per_epoch):
    ds = sluice.Dataset.image_folder(args.dir)
    if args.preset == "train":
        ds = ds.shuffle(sluice.ALL, seed=0)
    if not per_epoch:
        ds = ds.repeat(args.epochs)  # as sluice-bench builds it: one iterator
    if args.map_us > 0:
        ds = ds.map(numpy_work(args.map_us), num_parallel_calls=sluice.AUTOTUNE)
    ds = ds.map_image(preset=args.preset, size=224)
    ds = ds.batch(args.batch, drop_remainder=args.preset == "train")
    return ds.prefetch(sluice.AUTOTUNE).with_options(threads=args.threads)


def numpy_work(us):
    """A map of about `us` microseconds of numpy work per element (measured
    here, once): repeated operations on a small array, as per-sample
    feature code does."""
    import numpy as np
    a = np.arange(4096, dtype=np.float32)

    def step():
        return float(np.sqrt(a * 1.0001 + 1.0).sum())
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < 0.2:
        step()
        n += 1
    reps = max(1, round(us * 1e-6 / ((time.perf_counter() - t0) / n)))

    def work(image, label):
        for _ in range(reps):
            step()
        return image, label
    return work


def run_python(args, torch_loader, per_epoch):
    ds = pipeline(args, per_epoch)
    if torch_loader:
        import sluice.torch
        ds = sluice.torch.DataLoader(ds)
    images = 0
    t0 = time.perf_counter()
    for _ in range(args.epochs if per_epoch else 1):
        for batch in ds:
            images += len(batch[0])
    return images / (time.perf_counter() - t0), images


def run_c(args, per_epoch=False):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [args.bench, args.dir, "--preset", args.preset, "--batch", str(args.batch),
               "--epochs", str(args.epochs), "--threads", str(args.threads), "--json", f.name]
        if per_epoch:
            cmd.append("--per-epoch")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = json.load(open(f.name))
    return r["images_per_s"], r["images"]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--bench", required=True, help="the sluice-bench binary")
    p.add_argument("--preset", choices=["train", "eval"], default="train")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--per-epoch", action="store_true",
                   help="Python: one iterator per epoch (a training loop), not repeat(epochs)")
    p.add_argument("--compare-epochs", action="store_true",
                   help="each consumer with one iterator for all epochs and one per epoch")
    p.add_argument("--map-us", type=float, default=0,
                   help="a Python map of this much numpy work per element before map_image")
    args = p.parse_args(argv)
    if args.compare_epochs:
        return compare_epochs(args)
    kinds = {"c": lambda: run_c(args), "numpy": lambda: run_python(args, False, args.per_epoch),
             "torch": lambda: run_python(args, True, args.per_epoch)}
    rates = {k: [] for k in kinds}
    for r in range(args.rounds):
        for k, fn in kinds.items():
            ips, images = fn()
            rates[k].append(ips)
            print(json.dumps({"bench": "python_pipeline", "round": r, "consumer": k,
                              "preset": args.preset, "images": images,
                              "images_per_s": round(ips, 1)}), flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    per_round = {k: statistics.median(a / c for a, c in zip(rates[k], rates["c"]))
                 for k in ("numpy", "torch")}
    print(json.dumps({"bench": "python_pipeline", "summary": True, "preset": args.preset,
                      "epochs": args.epochs, "rounds": args.rounds, "threads": args.threads,
                      "c_images_per_s": round(med["c"], 1),
                      "numpy_images_per_s": round(med["numpy"], 1),
                      "torch_images_per_s": round(med["torch"], 1),
                      "numpy_ratio": round(med["numpy"] / med["c"], 3),
                      "torch_ratio": round(med["torch"] / med["c"], 3),
                      "numpy_median_round_ratio": round(per_round["numpy"], 3),
                      "torch_median_round_ratio": round(per_round["torch"], 3),
                      "cpus": os.cpu_count()}), flush=True)


def compare_epochs(args):
    kinds = {"c": lambda: run_c(args), "c_per_epoch": lambda: run_c(args, True),
             "numpy": lambda: run_python(args, False, False),
             "numpy_per_epoch": lambda: run_python(args, False, True)}
    rates = {k: [] for k in kinds}
    for r in range(args.rounds):
        order = list(kinds)
        if r % 2:  # each pair in both orders
            order = [order[1], order[0], order[3], order[2]]
        for k in order:
            ips, images = kinds[k]()
            rates[k].append(ips)
            print(json.dumps({"bench": "python_pipeline", "round": r, "consumer": k,
                              "preset": args.preset, "images": images,
                              "images_per_s": round(ips, 1)}), flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    out = {"bench": "python_pipeline", "summary": True, "compare": "epochs",
           "preset": args.preset, "epochs": args.epochs, "rounds": args.rounds,
           "threads": args.threads, "cpus": os.cpu_count()}
    for c in ("c", "numpy"):
        pe = c + "_per_epoch"
        out[c + "_images_per_s"] = round(med[c], 1)
        out[pe + "_images_per_s"] = round(med[pe], 1)
        out[pe + "_ratio"] = round(med[pe] / med[c], 3)
        out[pe + "_median_round_ratio"] = round(
            statistics.median(a / b for a, b in zip(rates[pe], rates[c])), 3)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
