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
work per element (a sort, during which numpy lets go of the GIL),
num_parallel_calls AUTOTUNE.

--sweep (with --map-us) compares the autotune controller with static
splits of the cores: every (map, map_image) parallelism from 1 to
threads + 1 (prefetch 2, autotune off), once; then autotune and the two
fastest of them alternately, --rounds times; the numpy consumer, the
epochs in one iterator. The summary has autotune_vs_best_static (medians
of the rounds) and the best static configuration.
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


def pipeline(args, per_epoch, static=None):
    """static: (map parallelism, map_image parallelism) with autotune off."""
    auto = sluice.AUTOTUNE
    ds = sluice.Dataset.image_folder(args.dir)
    if args.preset == "train":
        ds = ds.shuffle(sluice.ALL, seed=0)
    if not per_epoch:
        ds = ds.repeat(args.epochs)  # as sluice-bench builds it: one iterator
    if args.map_us > 0:
        ds = ds.map(numpy_work(args.map_us), num_parallel_calls=static[0] if static else auto)
    ds = ds.map_image(preset=args.preset, size=224,
                      num_parallel_calls=static[1] if static else auto)
    ds = ds.batch(args.batch, drop_remainder=args.preset == "train")
    if static:
        return ds.prefetch(2).with_options(threads=args.threads, autotune=False)
    return ds.prefetch(auto).with_options(threads=args.threads)


def numpy_work(us):
    """A map of about `us` microseconds of numpy work per element (sized
    here, once): a sort of a float32 array, which numpy runs with the GIL
    let go, as most array work of any size is."""
    import numpy as np
    rng = np.random.default_rng(0)
    n = 4096
    while True:
        a = rng.random(n, dtype=np.float32)
        t0 = time.perf_counter()
        for _ in range(20):
            np.sort(a)
        took = (time.perf_counter() - t0) / 20
        if took >= us * 1e-6 or n > 1 << 26:
            break
        n = int(n * max(1.2, min(4.0, us * 1e-6 / took)))

    def work(image, label):
        np.sort(a)
        return image, label
    return work


def run_python(args, torch_loader, per_epoch, static=None):
    ds = pipeline(args, per_epoch, static)
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
    p.add_argument("--sweep", action="store_true",
                   help="with --map-us: autotune against static splits of the cores")
    args = p.parse_args(argv)
    if args.compare_epochs:
        return compare_epochs(args)
    if args.sweep:
        return sweep(args)
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


def sweep(args):
    if args.map_us <= 0:
        raise SystemExit("--sweep compares splits between the Python map and map_image: "
                         "give --map-us")

    def run(static):
        ips, images = run_python(args, False, False, static)
        print(json.dumps({"bench": "python_pipeline", "sweep": True,
                          "config": list(static) if static else "auto", "map_us": args.map_us,
                          "images": images, "images_per_s": round(ips, 1)}), flush=True)
        return ips
    grid = [(m, i) for m in range(1, args.threads + 2) for i in range(1, args.threads + 2)]
    once = {c: run(c) for c in grid}
    cands = sorted(grid, key=lambda c: -once[c])[:2]
    rates = {c: [] for c in cands + [None]}
    for r in range(args.rounds):
        order = [None] + cands
        order = order[r % 3:] + order[:r % 3]
        for c in order:
            rates[c].append(run(c))
    med = {c: statistics.median(v) for c, v in rates.items()}
    best = max(cands, key=lambda c: med[c])
    print(json.dumps({"bench": "python_pipeline", "summary": True, "sweep": True,
                      "map_us": args.map_us, "preset": args.preset, "epochs": args.epochs,
                      "rounds": args.rounds, "threads": args.threads, "cpus": os.cpu_count(),
                      "grid_images_per_s": {"%d,%d" % c: round(v, 1) for c, v in once.items()},
                      "best_static_config": {"map_parallelism": best[0],
                                             "map_image_parallelism": best[1]},
                      "best_static_images_per_s": round(med[best], 1),
                      "autotune_images_per_s": round(med[None], 1),
                      "autotune_vs_best_static": round(med[None] / med[best], 3),
                      "autotune_rounds": [round(v, 1) for v in rates[None]],
                      "best_static_rounds": [round(v, 1) for v in rates[best]]}), flush=True)


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
