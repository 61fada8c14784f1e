#!/usr/bin/python3
"""The PyTorch DataLoader baseline for sluice-bench.

Runs torchvision's ImageFolder through a DataLoader with the transforms that
match sluice-bench's presets, and reports images/s for each num_workers
asked for, and the best:

  train: RandomResizedCrop(size) + RandomHorizontalFlip() + PILToTensor()
  eval:  Resize(size * 256 // 224) + CenterCrop(size) + PILToTensor()

--recipe torchvision adds the reference recipe after the crop and flip
(TrivialAugmentWide, float, Normalize, RandomErasing 0.1; float batches).

PILToTensor gives uint8 CHW without normalisation, the closest match to
sluice's uint8 output (sluice-bench emits HWC; the layout costs neither side
anything measurable). DataLoader(batch_size, shuffle=train, drop_last=train,
num_workers=w, persistent_workers=w > 0). Like sluice-bench, the consumer
only checks each batch's shape and drops it.

For each num_workers the loader is built once and iterated --epochs times.
images_per_s counts from the first iter() (worker start-up included, as
sluice-bench's includes its iterator's start); images_per_s_after_first_batch
starts the clock when the first batch arrives. The best num_workers is the
one with the highest images_per_s.

One JSON line on stdout (and in --json FILE):
  {"bench":"torch_dataloader","preset":...,"best_num_workers":...,
   "images_per_s":...,"per_workers":{...},"torch":...,"torchvision":...}

--versus PATH/sluice-bench alternates this baseline (its best num_workers)
with sluice-bench on the same folder, preset, batch and epochs (--threads
defaults to the largest num_workers), --rounds times, and prints a JSON line
with both medians, their ratio, and the median of the per-round ratios.

--malloc tuned runs the baseline with glibc's malloc told to keep what it
frees (GLIBC_TUNABLES: mmap_threshold at its 32 MiB maximum, trim_threshold
4 GiB, so freed image buffers are reused instead of returned and faulted in
again); the default is glibc's own behaviour. The JSON says which
("malloc").

Needs Debian's python3-torch and python3-torchvision (run it with
/usr/bin/python3).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# --malloc tuned: glibc reads its tunables at start-up, so set them and
# start again, before torch is loaded (the workers inherit them)
TUNED = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"
if "--malloc" in sys.argv[:-1] and sys.argv[sys.argv.index("--malloc") + 1] == "tuned" \
        and os.environ.get("GLIBC_TUNABLES") != TUNED:
    os.environ["GLIBC_TUNABLES"] = TUNED
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch
import torchvision
from torchvision import datasets, transforms


def make_transform(preset, size, recipe=None):
    if preset == "train":
        steps = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(size * 256 // 224), transforms.CenterCrop(size)]
    if recipe == "torchvision":  # references/classification/presets.py
        bilinear = transforms.InterpolationMode.BILINEAR
        return transforms.Compose(steps + [
            transforms.TrivialAugmentWide(interpolation=bilinear), transforms.PILToTensor(),
            transforms.ConvertImageDtype(torch.float),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
            transforms.RandomErasing(0.1)])
    return transforms.Compose(steps + [transforms.PILToTensor()])


def check_batch(batch, args):
    images, labels = batch
    shape = tuple(images.shape)
    want = torch.float32 if args.recipe else torch.uint8
    ok = (images.dtype == want and len(shape) == 4 and shape[1:] == (3, args.size, args.size)
          and 1 <= shape[0] <= args.batch and labels.shape == (shape[0],)
          and (args.preset != "train" or shape[0] == args.batch))
    if not ok:
        sys.exit("torch_dataloader: unexpected batch %s %s" % (shape, images.dtype))
    return shape[0]


def measure(dataset, args, workers):
    """images/s over args.epochs epochs of one DataLoader with `workers` workers."""
    train = args.preset == "train"
    torch.manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch, shuffle=train, drop_last=train,
        num_workers=workers, persistent_workers=workers > 0)
    images = 0
    first_batch_at = None
    epoch_rates = []
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        e0, n0 = time.perf_counter(), images
        for batch in loader:
            images += check_batch(batch, args)
            if first_batch_at is None:
                first_batch_at, first_images = time.perf_counter(), images
        epoch_rates.append((images - n0) / (time.perf_counter() - e0))
    seconds = time.perf_counter() - t0
    del loader  # joins persistent workers before the next setting starts
    after = seconds - (first_batch_at - t0)
    return {
        "images": images,
        "seconds": round(seconds, 3),
        "images_per_s": round(images / seconds, 1),
        "first_batch_seconds": round(first_batch_at - t0, 3),
        "images_per_s_after_first_batch":
            round((images - first_images) / after, 1) if after > 0 else None,
        "per_epoch_images_per_s": [round(r, 1) for r in epoch_rates],
    }


def baseline(args, workers_list):
    dataset = datasets.ImageFolder(args.dir,
                                   transform=make_transform(args.preset, args.size, args.recipe))
    per = {}
    for w in workers_list:
        per[str(w)] = measure(dataset, args, w)
        print("torch_dataloader: %s num_workers=%d: %.1f images/s (%.1f after the first batch)"
              % (args.preset, w, per[str(w)]["images_per_s"],
                 per[str(w)]["images_per_s_after_first_batch"] or 0), file=sys.stderr)
    best = max(workers_list, key=lambda w: per[str(w)]["images_per_s"])
    return {
        "bench": "torch_dataloader", "dir": args.dir, "preset": args.preset, "size": args.size,
        "batch": args.batch, "epochs": args.epochs, "files": len(dataset),
        "cpus": len(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(),
        "best_num_workers": best, "malloc": args.malloc,
        "images_per_s": per[str(best)]["images_per_s"],
        "images_per_s_after_first_batch": per[str(best)]["images_per_s_after_first_batch"],
        "per_workers": per,
        "torch": torch.__version__, "torchvision": torchvision.__version__,
    }


def run_sluice(args, threads):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [args.versus, args.dir, "--preset", args.preset, "--batch", str(args.batch),
               "--epochs", str(args.epochs), "--size", str(args.size), "--threads", str(threads),
               "--seed", str(args.seed), "--json", out.name]
        if args.ceiling:
            cmd.append("--ceiling")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out.name) as f:
            return json.load(f)


def versus(args, workers_list):
    threads = args.threads or max(max(workers_list), 1)
    torch_rates, sluice_rates, torch_best, ceilings = [], [], [], []
    for r in range(args.rounds):
        t = baseline(args, workers_list)
        s = run_sluice(args, threads)
        torch_rates.append(t["images_per_s"])
        torch_best.append(t["best_num_workers"])
        sluice_rates.append(s["images_per_s"])
        if args.ceiling:
            ceilings.append(s["ceiling_images_per_s"])
        print("round %d: torch %.1f images/s (num_workers=%d), sluice %.1f images/s (%d threads)%s"
              % (r + 1, t["images_per_s"], t["best_num_workers"], s["images_per_s"], threads,
                 ", ceiling %.1f" % ceilings[-1] if ceilings else ""),
              file=sys.stderr)
    tm, sm = statistics.median(torch_rates), statistics.median(sluice_rates)
    extra = {}
    if ceilings:
        # the ceiling: each format's library decoding the whole files, in
        # memory, on sluice-bench's threads (the best of before and after)
        cm = statistics.median(ceilings)
        extra = {"ceiling_images_per_s": ceilings, "ceiling_median_images_per_s": cm,
                 "sluice_ratio_to_ceiling": round(sm / cm, 2),
                 "torch_ratio_to_ceiling": round(tm / cm, 2)}
    return {**extra,
        "bench": "sluice_vs_torch", "dir": args.dir, "preset": args.preset, "size": args.size,
        "batch": args.batch, "epochs": args.epochs, "rounds": args.rounds,
        "sluice_threads": threads, "torch_num_workers": workers_list,
        "torch_best_num_workers": torch_best, "malloc": args.malloc,
        "torch_images_per_s": torch_rates, "sluice_images_per_s": sluice_rates,
        "torch_median_images_per_s": tm, "sluice_median_images_per_s": sm,
        "ratio": round(sm / tm, 2) if tm > 0 else None,
        # each round's two runs ran back to back: their ratio is the least
        # sensitive to load that drifts over the rounds
        "round_ratios": [round(s / t, 2) for s, t in zip(sluice_rates, torch_rates)],
        "median_round_ratio": round(statistics.median(
            s / t for s, t in zip(sluice_rates, torch_rates)), 2),
        "torch": torch.__version__, "torchvision": torchvision.__version__,
    }


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="an ImageFolder (DIR/class/image.jpg)")
    p.add_argument("--preset", choices=["train", "eval"], default="train")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--workers", default="0,1,2",
                   help="comma-separated num_workers values to try (default 0,1,2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recipe", choices=["torchvision"], default=None,
                   help="torchvision's reference recipe after the crop and flip: "
                        "TrivialAugmentWide (bilinear), float, Normalize, RandomErasing(0.1) "
                        "(compare with bench/augment.py's tv_recipe)")
    p.add_argument("--json", help="also write the JSON line to this file")
    p.add_argument("--versus", metavar="SLUICE_BENCH",
                   help="alternate with this sluice-bench binary and compare")
    p.add_argument("--rounds", type=int, default=3, help="--versus: rounds (default 3)")
    p.add_argument("--ceiling", action="store_true",
                   help="--versus: sluice-bench also measures the decode ceiling (each "
                        "format's library, whole files, in memory, on its threads)")
    p.add_argument("--malloc", choices=["default", "tuned"], default="default",
                   help="glibc malloc as it is, or told to keep freed memory")
    p.add_argument("--threads", type=int, default=0,
                   help="--versus: sluice-bench threads (default: the largest num_workers)")
    args = p.parse_args()
    try:
        workers = [int(w) for w in args.workers.split(",")]
    except ValueError:
        p.error("--workers wants comma-separated integers")
    if not workers or min(workers) < 0 or args.epochs < 1 or args.batch < 1 or args.rounds < 1:
        p.error("--workers >= 0, --epochs, --batch and --rounds >= 1")
    return args, workers


def main():
    args, workers = parse_args()
    result = versus(args, workers) if args.versus else baseline(args, workers)
    line = json.dumps(result, separators=(",", ":"))
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
