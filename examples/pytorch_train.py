#!/usr/bin/env python3
"""Trains a small CNN on an image folder for N steps on the CPU, with
sluice feeding it, and prints images/s and the pipeline's report.

    PYTHONPATH=python SLUICE_LIBRARY=build/libsluice.so \\
        /usr/bin/python3 examples/pytorch_train.py build/sample --steps 50

The folder is a torchvision ImageFolder (root/class/image.jpg); any folder
`sluice-bench --make-sample DIR` wrote will do. The pipeline is the usual
ImageNet training one, all in C on sluice's worker threads:

    image_folder -> shuffle(ALL) -> map_image(train: random-resized crop,
    flip, resize) -> batch -> prefetch

and sluice.torch.DataLoader hands each batch to torch without a copy, as
float32 NCHW normalised with the ImageNet mean and std.

Preemption: --checkpoint PATH writes model, optimiser, step and the
loader's position (loader.state_dict()) with torch.save every
--checkpoint-every steps and at the end; --resume PATH loads them and goes
on with the very batches the interrupted run would have trained on next:

    ... pytorch_train.py build/sample --steps 40 --checkpoint /tmp/ck.pt
    ... pytorch_train.py build/sample --steps 100 --resume /tmp/ck.pt
"""

import argparse
import hashlib
import os
import sys
import time

import torch
import torch.nn as nn

import sluice
import sluice.torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def small_cnn(classes):
    """Four conv blocks and a linear head: enough to learn something, small
    enough for a CPU."""
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU(inplace=True), nn.MaxPool2d(2))
    return nn.Sequential(block(3, 16), block(16, 32), block(32, 64), block(64, 64),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="image folder (root/class/image.jpg)")
    p.add_argument("--steps", type=int, default=100, help="training steps (default 100)")
    p.add_argument("--batch", type=int, default=64, help="images per batch (default 64)")
    p.add_argument("--size", type=int, default=112, help="image side (default 112)")
    p.add_argument("--threads", type=int, default=0,
                   help="sluice worker threads (default: one per CPU)")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10, help="steps between progress lines")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="torch.save model, optimiser, step and loader position here")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="... every N steps as well as at the end (default: at the end)")
    p.add_argument("--resume", metavar="PATH", help="go on from a --checkpoint file")
    p.add_argument("--digest", action="store_true",
                   help="print a hash of each logged batch (to compare runs)")
    return p.parse_args(argv)


def make_loader(args):
    ds = (sluice.Dataset.image_folder(args.root)
          .shuffle(sluice.ALL, seed=args.seed)
          .repeat()  # as many epochs as the steps need
          .map_image(preset="train", size=args.size)
          .batch(args.batch, drop_remainder=True)
          .prefetch(sluice.AUTOTUNE)
          .with_options(threads=args.threads, seed=args.seed))
    # uint8 NHWC from the pipeline -> float32 NCHW (channels_last), normalised.
    return sluice.torch.DataLoader(ds, dtype=torch.float32, mean=MEAN, std=STD)


def count_classes(root):
    """Classes as ImageFolder (and sluice's image_folder) count them: the
    subdirectories that are not hidden."""
    return sum(1 for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))


def save_checkpoint(path, model, opt, step, loader):
    """Everything a resumed run needs, in one torch.save: the loader's part
    is a few hundred bytes (positions and counters, no images)."""
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "loader": loader.state_dict()}, tmp)
    os.replace(tmp, path)  # a crash mid-write leaves the previous checkpoint


def batch_digest(x, y):
    h = hashlib.sha1()
    h.update(x.contiguous().numpy().tobytes())
    h.update(y.numpy().tobytes())
    return h.hexdigest()[:12]


def train(args):
    torch.manual_seed(args.seed)
    classes = count_classes(args.root)
    model = small_cnn(classes).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    loader = make_loader(args)
    done = 0
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        loader.load_state_dict(ckpt["loader"])
        done = ckpt["step"]
        print("resumed from %s after step %d" % (args.resume, done), flush=True)
    print("sluice %s (%s), torch %s, %d classes, batch %d, %dx%d, %d steps"
          % (sluice.__version__, sluice.library_path, torch.__version__, classes,
             args.batch, args.size, args.size, args.steps), flush=True)

    t0 = time.perf_counter()
    images = 0
    window_t, window_images = t0, 0
    step = done
    for x, y in (loader if step < args.steps else ()):
        step += 1
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        images += x.shape[0]
        window_images += x.shape[0]
        if step % args.log_every == 0 or step == args.steps:
            now = time.perf_counter()
            print("step %4d  loss %.3f  %.1f images/s%s" % (
                step, loss.item(), window_images / (now - window_t),
                "  batch %s" % batch_digest(x, y) if args.digest else ""), flush=True)
            window_t, window_images = now, 0
        if args.checkpoint and args.checkpoint_every and step % args.checkpoint_every == 0:
            save_checkpoint(args.checkpoint, model, opt, step, loader)
        if step == args.steps:
            break
    if args.checkpoint:
        save_checkpoint(args.checkpoint, model, opt, step, loader)
    seconds = time.perf_counter() - t0
    print("trained %d steps, %d images in %.2f s: %.1f images/s"
          % (step - done, images, seconds, images / seconds if seconds > 0 else 0))
    try:
        print("\npipeline report:\n" + loader.report())
    except sluice.Error as e:  # a library without the statistics layer
        print("\npipeline report unavailable: %s" % e)
    loader.close()
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return train(args)
    except sluice.Error as e:
        print("pytorch_train: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pytorch_train: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
