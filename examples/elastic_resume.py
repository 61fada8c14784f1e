#!/usr/bin/env python3
"""A checkpoint taken on one number of ranks, resumed on another.

    # 4 ranks train 3 steps, then checkpoint (every rank's loader state)
    python3 -m torch.distributed.run --standalone --nproc_per_node 4 \\
        examples/elastic_resume.py --checkpoint /tmp/ckpt --steps 3
    # preempted; the job comes back on 3 ranks (or 6) and finishes the epoch
    python3 -m torch.distributed.run --standalone --nproc_per_node 3 \\
        examples/elastic_resume.py --resume /tmp/ckpt

Every rank builds the same pipeline, range(N) -> shuffle(ALL, seed) ->
distribute -> filter -> batch, with sluice.torch.DataLoader. The filter
drops a few elements, so ranks stand at different places of the global
order when the checkpoint is taken. Saving: each rank's
``loader.state_dict()`` is gathered with ``all_gather_object`` (Debian's
torch 1.13 has no distributed checkpoint module) and rank 0 writes the list
with ``torch.save``. Resuming: every rank loads the whole list and gives
it to ``loader.load_state_dict(list)``; distribute works out what the old
ranks consumed and splits the rest between the new ones, whatever their
number, and the batch size may change too.

--check: the elements each rank took (and the ones the filter dropped) are
gathered and written beside the checkpoint; the resume checks on rank 0
that the two runs together took every element of the epoch exactly once,
padding for equal steps aside, and prints "check: ... ok" (exit 1 if not).
"""

import argparse
import collections
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

import sluice
import sluice.torch

N = 1000
SEED = 7


def loader(batch):
    ds = (sluice.Dataset.range(N).shuffle(sluice.ALL, seed=SEED).distribute()
          .filter(lambda x: int(x) % 13 != 0).batch(batch))
    return sluice.torch.DataLoader(ds)


def gather(obj):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", help="save into this folder after --steps steps")
    p.add_argument("--resume", help="resume from this folder and finish the epoch")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    dl = loader(a.batch)
    dl.set_epoch(0)
    took = []
    if a.checkpoint:
        it = iter(dl)
        for _ in range(a.steps):
            took += next(it).tolist()
        states = gather(dl.state_dict())
        seen = gather(took)
        if rank == 0:
            os.makedirs(a.checkpoint, exist_ok=True)
            torch.save({"loader": states, "world": world}, os.path.join(a.checkpoint, "ckpt.pt"))
            with open(os.path.join(a.checkpoint, "seen.json"), "w") as f:
                json.dump([v for part in seen for v in part], f)
        print("rank %d/%d: %d elements, checkpoint written" % (rank, world, len(took)))
    else:
        ckpt = torch.load(os.path.join(a.resume, "ckpt.pt"))
        dl.load_state_dict(ckpt["loader"])  # every old rank's state
        for batch in dl:
            took += batch.tolist()
        padded = dl.iterator.stats()["padded"]
        parts, pads = gather(took), gather(padded)
        print("rank %d/%d: %d elements after resuming a checkpoint of %d ranks"
              % (rank, world, len(took), ckpt["world"]))
        if a.check and rank == 0:
            with open(os.path.join(a.resume, "seen.json")) as f:
                before = json.load(f)
            counts = collections.Counter(before + [v for part in parts for v in part])
            dropped = {v for v in range(N) if v % 13 == 0}
            missing = [v for v in range(N) if v not in dropped and counts[v] == 0]
            extra = sum(c - 1 for v, c in counts.items() if c > 1)
            ok = not missing and not (set(counts) & dropped) and extra <= sum(pads)
            print("check: %d ranks -> %d ranks, %d elements: %s"
                  % (ckpt["world"], world, N, "ok" if ok else
                     "FAILED (missing %s, %d repeated, padding %d)"
                     % (missing[:10], extra, sum(pads))))
            if not ok:
                sys.exit(1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
