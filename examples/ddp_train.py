#!/usr/bin/env python3
"""Data-parallel training (DDP, gloo, CPU) fed by sluice, without a sampler.

    PYTHONPATH=python SLUICE_LIBRARY=build/libsluice.so \\
        /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
        examples/ddp_train.py build/sample --epochs 2

Each process builds the same pipeline; ``distribute()`` reads its rank from
torchrun's environment (RANK, WORLD_SIZE, ...; mpirun's and srun's work
too) and keeps that rank's part of each epoch's global permutation:

    image_folder -> shuffle(ALL, seed) -> distribute -> map_image(train)
    -> batch(drop_remainder) -> sluice.torch.DataLoader

Every rank gets the same number of batches (the last ranks wrap around to
fill theirs, as DistributedSampler does), so no all-reduce waits for a rank
that has run out. ``loader.set_epoch(epoch)`` is DistributedSampler's call;
the loader would count epochs by itself anyway.

--check: also gathers, with torch.distributed.all_gather_object, the files
every rank saw in each epoch and checks on rank 0 that each epoch covers
the folder once (padding aside), that the epochs' orders differ, and that
the ranks' step counts are equal; exits 1 if not.
"""

import argparse
import datetime
import faulthandler
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import sluice
import sluice.torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="image folder (root/class/image.jpg)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=8, help="images per batch and rank")
    p.add_argument("--size", type=int, default=32, help="image side")
    p.add_argument("--steps", type=int, default=0,
                   help="stop each epoch after this many steps (0: the whole epoch)")
    p.add_argument("--threads", type=int, default=1, help="sluice threads per rank")
    p.add_argument("--check", action="store_true", help="verify the split (see above)")
    return p.parse_args(argv)


def model_for(classes):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                         nn.Flatten(), nn.Linear(8 * 16, classes))


def main(argv):
    args = parse_args(argv)
    if args.check:  # a test: a stuck rank prints where it is and fails
        faulthandler.dump_traceback_later(150, exit=True)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    ctx = sluice.distributed_context()
    assert (ctx.rank, ctx.world_size) == (rank, world), (ctx, rank, world)

    files = sluice.Dataset.image_folder(args.root, with_paths=args.check)
    classes = len([d for d in os.listdir(args.root) if os.path.isdir(os.path.join(args.root, d))])
    ds = (files.shuffle(sluice.ALL, seed=0)
          .distribute()
          .map_image(preset="train", size=args.size)
          .batch(args.batch, drop_remainder=True)
          .with_options(threads=args.threads))
    loader = sluice.torch.DataLoader(ds, dtype=torch.float32, mean=MEAN, std=STD)

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(model_for(classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    seen = []
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        paths, steps = [], 0
        for batch in loader:
            images, labels = batch[0], batch[1]
            if args.check:
                paths += batch[2]
            opt.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()  # the all-reduce: every rank must reach it equally often
            opt.step()
            steps += 1
            if steps == args.steps:
                break
        seen.append((steps, paths))
        print("rank %d/%d epoch %d: %d steps of %d, loss %.3f"
              % (rank, world, epoch, steps, len(loader), loss.item()), flush=True)

    ok = True
    if args.check:
        gathered = [None] * world
        dist.all_gather_object(gathered, seen)
        if rank == 0:
            ok = check(gathered, len(files), world, args)
    dist.barrier()
    dist.destroy_process_group()
    leave(0 if ok else 1)


def leave(rc):
    # Debian's torch 1.13 can deadlock when a DDP model is freed: the
    # reducer's destructor joins a gloo thread that waits for the GIL the
    # destructor's thread holds (seen here: a rank spinning after its last
    # line, at main's return). Leave while the model is still referenced,
    # without running destructors, once the work is done and flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def check(gathered, n, world, args):
    ok = True
    orders = []
    for epoch in range(args.epochs):
        steps = [g[epoch][0] for g in gathered]
        paths = [p for g in gathered for p in g[epoch][1]]
        orders.append([g[epoch][1] for g in gathered])
        per_rank = -(-n // world) // args.batch * args.batch
        if len(set(steps)) != 1:
            print("epoch %d: unequal steps %s" % (epoch, steps))
            ok = False
        if not args.steps:
            # only padding repeats (one per rank at most); with whole batches
            # on every rank, nothing is missing either
            distinct = len(set(paths))
            whole = n % (world * args.batch) == 0
            if (len(paths) != world * per_rank or distinct < len(paths) - (world - 1)
                    or (whole and distinct != n)):
                print("epoch %d: %d paths, %d distinct, of %d files" % (epoch, len(paths),
                                                                       distinct, n))
                ok = False
    if len(orders) > 1 and orders[0] == orders[1]:
        print("the epochs had the same order")
        ok = False
    print("check: %d ranks, %d files, %d epochs: %s" % (world, n, args.epochs,
                                                        "ok" if ok else "FAILED"))
    return ok


if __name__ == "__main__":
    main(sys.argv[1:])
