#!/usr/bin/python3
"""The README's chart: sluice beside the PyTorch DataLoader and the decode
limits, measured in one run on this machine.

    /usr/bin/python3 bench/speed_chart.py [DIR] [--out docs/speed.svg]
        [--rounds 3] [--epochs 3] [--batch 256] [--threads N] [--workers 0,1,..]

DIR defaults to the sample folder ./run.sh uses (build/sample, written by
`sluice-bench --make-sample` when missing). Needs build/sluice-bench
(./run.sh builds it), Debian's python3-torch and python3-torchvision.

Three pipelines, each as sluice and as the DataLoader (torchvision's
ImageFolder, PIL, the best of --workers num_workers), at 224x224:

  train   RandomResizedCrop + RandomHorizontalFlip, uint8
          (sluice-bench --preset train; bench/torch_dataloader.py)
  eval    Resize(256) + CenterCrop(224), uint8 (--preset eval)
  recipe  train + torchvision's reference recipe: TrivialAugmentWide
          (bilinear), float32 normalised CHW, RandomErasing(0.1)
          (sluice's map_image with the same options through the Python
          binding; torch_dataloader.py --recipe torchvision)

Beside them, from the same sluice-bench runs: the decode ceiling
(libjpeg-turbo decoding each file whole, on the same threads) and each
preset's decode limit (decoding only the window the crop needs, at the DCT
scale it allows: what decoding alone allows that pipeline). A round runs
every case once, sluice and the DataLoader alternating, the order reversed
on odd rounds; the chart shows medians over rounds. Writes the SVG and,
beside it, the figures as JSON (FILE.json), and prints them.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from xml.sax.saxutils import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def recipe_run(a):
    """The recipe case in sluice, in this (child) process: images/s."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import sluice
    ds = (sluice.Dataset.image_folder(a.dir).shuffle(sluice.ALL, seed=0).repeat(a.epochs)
          .map_image("train", 224, auto_augment="trivial_augment_wide", interpolation="bilinear",
                     random_erasing_prob=0.1, dtype="float32", layout="CHW", mean=MEAN, std=STD)
          .batch(a.batch, drop_remainder=True).prefetch(sluice.AUTOTUNE)
          .with_options(threads=a.threads))
    t, n = time.perf_counter(), 0
    for images, labels in ds:
        assert images.shape[1:] == (3, 224, 224) and str(images.dtype) == "float32"
        n += len(images)
    print(json.dumps({"images_per_s": n / (time.perf_counter() - t),
                      "library": sluice.library_path}))


def run_json(cmd, what):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        r = subprocess.run(cmd + ["--json", f.name], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit("speed_chart: %s failed (%s):\n%s" % (what, " ".join(cmd), r.stderr[-2000:]))
        return json.load(f)


def sluice_bench(a, preset):
    d = run_json([a.bench, a.dir, "--preset", preset, "--epochs", str(a.epochs), "--batch",
                  str(a.batch), "--threads", str(a.threads), "--ceiling", "--decode-limit"],
                 "sluice-bench --preset " + preset)
    return {"images_per_s": d["images_per_s"], "ceiling": d["ceiling_images_per_s"],
            "limit": d["limit_images_per_s"], "files": d["files"]}


def dataloader(a, preset, recipe=False):
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench", "torch_dataloader.py"), a.dir,
           "--preset", preset, "--batch", str(a.batch), "--epochs", str(a.epochs),
           "--workers", a.workers]
    d = run_json(cmd + (["--recipe", "torchvision"] if recipe else []), "the DataLoader")
    return {"images_per_s": d["images_per_s"], "num_workers": d["best_num_workers"],
            "torch": d.get("torch"), "torchvision": d.get("torchvision")}


def sluice_recipe(a):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), a.dir, "--_recipe",
                        "--epochs", str(a.epochs), "--batch", str(a.batch),
                        "--threads", str(a.threads)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("speed_chart: the sluice recipe run failed:\n" + r.stderr[-2000:])
    return json.loads(r.stdout.splitlines()[-1])


def machine():
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0))
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return "%s, %d CPU%s, %.0f GiB" % (model, cpus, "s" if cpus != 1 else "", mem)


def commit():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return r.stdout.strip() or "?"


def svg(fig):
    """A horizontal bar chart, one group per pipeline."""
    colours = {"sluice": "#1f6fb4", "DataLoader": "#e07b28", "limit": "#9a9a9a",
               "ceiling": "#c8c8c8"}
    groups = []
    for key, title in (("train", "train: RandomResizedCrop(224) + flip, uint8"),
                       ("eval", "eval: Resize(256) + CenterCrop(224), uint8"),
                       ("recipe", "train + torchvision's recipe: TrivialAugmentWide, "
                                  "float32 normalised, RandomErasing(0.1)")):
        c = fig["cases"][key]
        ratio = c["sluice"] / c["dataloader"]
        bars = [("sluice", "sluice", c["sluice"], "%s images/s  (%.1fx the DataLoader)"
                 % (format(round(c["sluice"]), ","), ratio)),
                ("DataLoader", "DataLoader, num_workers=%d" % c["num_workers"], c["dataloader"],
                 "%s images/s" % format(round(c["dataloader"]), ","))]
        if "limit" in c:
            bars.append(("limit", "decode limit (the crops' windows)", c["limit"],
                         "%s images/s" % format(round(c["limit"]), ",")))
            bars.append(("ceiling", "decode ceiling (whole files)", fig["ceiling"],
                         "%s images/s" % format(round(fig["ceiling"]), ",")))
        groups.append((title, bars))
    top = max(v for _, bars in groups for _, _, v, _ in bars)
    W, label_w, bar_h, gap = 900, 250, 20, 6
    scale = (W - label_w - 250) / top
    out, y = [], 62
    for title, bars in groups:
        out.append('<text x="10" y="%d" class="g">%s</text>' % (y + 14, escape(title)))
        y += 24
        for kind, label, value, text in bars:
            w = max(1.0, value * scale)
            out.append('<text x="%d" y="%d" class="l" text-anchor="end">%s</text>'
                       % (label_w - 8, y + 15, escape(label)))
            out.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>'
                       % (label_w, y, w, bar_h, colours[kind]))
            out.append('<text x="%.1f" y="%d" class="v">%s</text>'
                       % (label_w + w + 6, y + 15, escape(text)))
            y += bar_h + gap
        y += 14
    foot = ["%d JPEGs (%s), %d epochs a run, batch %d; sluice on %d threads, the DataLoader's "
            "best of num_workers %s; medians of %d rounds"
            % (fig["files"], fig["dir_name"], fig["epochs"], fig["batch"], fig["threads"],
               fig["workers"], fig["rounds"]),
            "sluice %s, torch %s, torchvision %s. Draw it on your machine: "
            "/usr/bin/python3 bench/speed_chart.py [DIR]"
            % (fig["commit"], fig["torch"], fig["torchvision"])]
    head = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
        'viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">'
        % (W, y + 40, W, y + 40),
        '<style>.t{font-size:17px;font-weight:bold}.s{font-size:12px;fill:#444}'
        '.g{font-size:13px;font-weight:bold}.l{font-size:12px}.v{font-size:12px}'
        '.f{font-size:10.5px;fill:#555}</style>',
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="10" y="24" class="t">Images per second, 224x224 batches, measured side by '
        'side</text>',
        '<text x="10" y="44" class="s">%s (%s)</text>' % (escape(fig["machine"]), fig["date"]),
    ]
    tail = ['<text x="10" y="%d" class="f">%s</text>' % (y + 8 + 15 * i, escape(line))
            for i, line in enumerate(foot)] + ["</svg>"]
    return "\n".join(head + out + tail) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", default=os.path.join(ROOT, "build", "sample"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "speed.svg"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "sluice-bench"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--workers", default=None,
                    help="num_workers to try, comma-separated (default 0 to --threads)")
    ap.add_argument("--_recipe", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._recipe:
        return recipe_run(a)
    a.workers = a.workers or ",".join(str(w) for w in range(a.threads + 1))
    if not os.access(a.bench, os.X_OK):
        sys.exit("speed_chart: %s is not built; run ./run.sh (or cmake --build build "
                 "--target sluice-bench)" % a.bench)
    sample = os.path.abspath(a.dir) == os.path.join(ROOT, "build", "sample")
    if sample and not os.path.exists(os.path.join(a.dir, "files.txt")):
        subprocess.run([a.bench, "--make-sample", a.dir], check=True)

    cases = ("train", "eval", "recipe")
    got = {c: {"sluice": [], "dataloader": [], "num_workers": [], "limit": []} for c in cases}
    ceilings, files, versions = [], None, {}
    for r in range(a.rounds):
        steps = [(c, side) for c in cases for side in ("sluice", "dataloader")]
        for c, side in steps if r % 2 == 0 else steps[::-1]:
            if side == "sluice" and c != "recipe":
                d = sluice_bench(a, c)
                got[c]["sluice"].append(d["images_per_s"])
                got[c]["limit"].append(d["limit"])
                ceilings.append(d["ceiling"])
                files = d["files"]
            elif side == "sluice":
                got[c]["sluice"].append(sluice_recipe(a)["images_per_s"])
            else:
                d = dataloader(a, "eval" if c == "eval" else "train", recipe=c == "recipe")
                got[c]["dataloader"].append(d["images_per_s"])
                got[c]["num_workers"].append(d["num_workers"])
                versions = {"torch": d["torch"], "torchvision": d["torchvision"]}
            print(json.dumps({"round": r, "case": c, "side": side,
                              "images_per_s": round((got[c][side] or [0])[-1], 1)}), flush=True)

    fig = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "commit": commit(),
           "dir_name": "./run.sh's generated sample" if sample else
                       os.path.basename(os.path.normpath(a.dir)), "files": files,
           "epochs": a.epochs, "batch": a.batch, "threads": a.threads, "workers": a.workers,
           "rounds": a.rounds, "ceiling": statistics.median(ceilings), "cases": {}, **versions}
    for c in cases:
        g = got[c]
        case = {"sluice": statistics.median(g["sluice"]),
                "dataloader": statistics.median(g["dataloader"]),
                "num_workers": statistics.mode(g["num_workers"]),
                "round_ratios": [round(s / t, 3) for s, t in zip(g["sluice"], g["dataloader"])]}
        if g["limit"]:
            case["limit"] = statistics.median(g["limit"])
        fig["cases"][c] = case
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(svg(fig))
    with open(os.path.splitext(a.out)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(fig, f, indent=1)
        f.write("\n")
    print(json.dumps(fig))
    print("speed_chart: wrote %s" % a.out, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
