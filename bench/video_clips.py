#!/usr/bin/env python3
"""Video clips: sluice's map_video against the PyTorch DataLoader with PyAV
(seeking as torchvision's VideoClips does) and with
torchvision.io.read_video, and against a ceiling and a limit, in one run.

    /usr/bin/python3 bench/video_clips.py [--videos 32] [--seconds 8]
        [--size 320x240] [--frames 8] [--stride 4] [--out 112]
        [--threads 2] [--rounds 3] [--passes 2] [--workers 0,1,2] [--dir DIR]

Makes --videos H.264 MP4 files with Debian's ffmpeg (pans and zooms over
the shared photos, 25 fps, x264's defaults: a GOP of up to 250 frames and
B-frames, as many real videos have) unless DIR holds them already. Every
case reads the same clips: one per video, T = --frames frames --stride
frames apart, at the random starts sluice's sampler draws for seed 7,
each frame resized to OUT x OUT RGB uint8 (the other cases get the frame
times sluice chose and pick the frame shown at each, as it does).

  sluice      from_tensor_slices(paths) -> map_video(T, "resize", OUT,
              stride) -> batch(8), --threads threads
  pyav        torch DataLoader (num_workers 0, 1, 2: the best kept) over a
              Dataset whose __getitem__ opens the file, seeks to the
              keyframe before the clip (container.seek, backward: what
              torchvision's VideoClips and PyTorchVideo's PyAV reader do),
              decodes forward to the clip's last frame, keeps the frame
              shown at each time, converts it to RGB (swscale) and resizes
              (torch's antialiased bilinear), batch 8
  read_video  the same Dataset with torchvision.io.read_video(start, end,
              pts_unit="sec") for the clip's span, then the clip's frames,
              resized the same
  ceiling     libavcodec (PyAV, frames not converted) decoding every frame
              of every file, --threads processes: whole files
  limit       the same decoding from the keyframe before each clip to its
              last frame, nothing else: the least a reader that decodes
              every frame it passes must do

Each case runs --passes timed passes over the clips after one untimed
(workers started, caches warm). Rates in clips/s; rounds alternate the
cases; medians, one JSON object per line, then the ratios.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import multiprocessing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import av  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sluice  # noqa: E402

PHOTOS = os.path.join(os.path.dirname(HERE), "..", "shared", "data", "photos")


def make_videos(a):
    os.makedirs(a.dir, exist_ok=True)
    photos = sorted(glob.glob(os.path.join(PHOTOS, "*.jpg")))
    w, h = a.size.split("x")
    paths = []
    for i in range(a.videos):
        p = os.path.join(a.dir, "v%03d_%s_%g.mp4" % (i, a.size, a.seconds))
        if not os.path.exists(p):
            zoom = ("zoompan=z='1+0.002*on':x='iw/2-(iw/zoom/2)+on':y='ih/2-(ih/zoom/2)':d=1:"
                    "s=%sx%s:fps=25" % (w, h))
            subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-loop", "1",
                            "-i", photos[i % len(photos)], "-vf",
                            "scale=%d:-2,%s" % (int(w) * 2, zoom), "-t", str(a.seconds),
                            "-c:v", "libx264", "-preset", "fast", "-pix_fmt", "yuv420p", p],
                           check=True)
        paths.append(p)
    return paths


# ---- sluice ----

def sluice_ds(a, paths, stamps=False):
    ds = sluice.Dataset.from_tensor_slices(paths).map_video(
        a.frames, "resize", a.out, stride=a.stride, with_timestamps=stamps)
    return ds.with_options(seed=7, threads=a.threads)


def clip_times(a, paths):
    """The frame times (s) of each video's clip, as sluice picks them."""
    return [t.tolist() for _, t in sluice_ds(a, paths, True).iterator(epoch=0)]


def run_sluice(a, paths, times):
    """Passes over the same clips (epoch 0 each time) through one
    pipeline; the first warms up (the controller, the page cache) and is
    not timed."""
    ds = sluice_ds(a, paths).batch(8)
    n, t0 = 0, None
    for p in range(a.passes + 1):
        if p == 1:
            t0 = time.perf_counter()
        for batch in ds.iterator(epoch=0):
            n += batch.shape[0] if p else 0
    return n / (time.perf_counter() - t0)


# ---- the DataLoader cases ----

def _resize(frames, out):
    x = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).float()
    x = F.interpolate(x, size=(out, out), mode="bilinear", antialias=True, align_corners=False)
    return x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)


def _pick(decoded, times):
    """The frame shown at each time: the last with pts time <= t."""
    out, i = [], 0
    for t in times:
        while i + 1 < len(decoded) and decoded[i + 1][0] <= t + 1e-9:
            i += 1
        out.append(decoded[i][1])
    return out


class PyAVClips(torch.utils.data.Dataset):
    def __init__(self, paths, times, out, reader):
        self.paths, self.times, self.out, self.reader = paths, times, out, reader

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        times = self.times[i]
        if self.reader == "read_video":
            import torchvision.io
            v, _, info = torchvision.io.read_video(self.paths[i], times[0], times[-1],
                                                   pts_unit="sec", output_format="THWC")
            fps = info.get("video_fps", 25.0)
            decoded = [(times[0] + k / fps, v[k].numpy()) for k in range(v.shape[0])]
            return _resize(_pick(decoded, times), self.out)
        with av.open(self.paths[i]) as c:
            st = c.streams.video[0]
            tb, start = float(st.time_base), st.start_time or 0
            c.seek(int(times[0] / tb) + start, backward=True, any_frame=False, stream=st)
            decoded = []
            for f in c.decode(st):
                t = (f.pts - start) * tb
                if t > times[-1] + 1e-9:
                    break
                decoded.append((t, f))
        # only the frames shown are converted (VideoClips converts the span)
        picked = _pick(decoded, times)
        return _resize([f.to_ndarray(format="rgb24") for f in picked], self.out)


def run_loader(a, paths, times, reader, workers):
    ds = PyAVClips(paths, times, a.out, reader)
    # forkserver: a worker forked from this process (which has run
    # FFmpeg's slice threads and sluice's pool) can hang in FFmpeg's locks
    dl = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=workers,
                                     multiprocessing_context="forkserver" if workers else None,
                                     persistent_workers=workers > 0)
    n, t0 = 0, None
    for p in range(a.passes + 1):  # the first starts the workers: not timed
        if p == 1:
            t0 = time.perf_counter()
        for b in dl:
            n += b.shape[0] if p else 0
    return n / (time.perf_counter() - t0)


# ---- ceiling and limit: libavcodec alone ----

def _decode(job):
    path, times = job
    n = 0
    with av.open(path) as c:
        st = c.streams.video[0]
        st.thread_type = "NONE"
        tb, start = float(st.time_base), st.start_time or 0
        if times is not None:
            c.seek(int(times[0] / tb) + start, backward=True, any_frame=False, stream=st)
        for f in c.decode(st):
            n += 1
            if times is not None and (f.pts - start) * tb >= times[-1] - 1e-9:
                break
    return n


def _ready(_):
    return os.getpid()


def run_decode(a, paths, times, pool):
    jobs = [(p, None if times is None else t) for p, t in zip(paths, times or paths)]
    pool.map(_decode, jobs[:a.threads], chunksize=1)  # the workers started
    t0 = time.perf_counter()
    frames = 0
    for _ in range(a.passes):
        frames = sum(pool.map(_decode, jobs, chunksize=1))
    return a.passes * len(paths) / (time.perf_counter() - t0), frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--videos", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--stride", type=int, default=4)
    ap.add_argument("--out", type=int, default=112)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=2, help="timed passes per case and round")
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "sluice-bench-videos"))
    a = ap.parse_args()
    paths = make_videos(a)
    times = clip_times(a, paths)
    torch.set_num_threads(1)
    workers = [int(w) for w in a.workers.split(",")]
    rates = {}
    frames = {}
    with multiprocessing.get_context("forkserver").Pool(a.threads) as pool:
        # the workers import this module (torch, PyAV) now, not during a case
        pool.map(_ready, range(4 * a.threads), chunksize=1)
        for r in range(a.rounds):
            cases = [("sluice", lambda: run_sluice(a, paths, times))]
            for w in workers:
                cases.append(("pyav_w%d" % w, lambda w=w: run_loader(a, paths, times, "pyav", w)))
                cases.append(("read_video_w%d" % w,
                              lambda w=w: run_loader(a, paths, times, "read_video", w)))
            cases.append(("ceiling", lambda: run_decode(a, paths, None, pool)))
            cases.append(("limit", lambda: run_decode(a, paths, times, pool)))
            if r % 2:
                cases.reverse()
            for name, fn in cases:
                v = fn()
                if isinstance(v, tuple):
                    v, frames[name] = v
                rates.setdefault(name, []).append(v)
    med = {k: statistics.median(v) for k, v in rates.items()}
    best = {}
    for kind in ("pyav", "read_video"):
        k = max((k for k in med if k.startswith(kind + "_w")), key=med.get)
        best[kind] = k
    for k, v in med.items():
        print(json.dumps({"case": k, "clips_per_s": round(v, 1),
                          "runs": [round(x, 1) for x in rates[k]],
                          **({"frames_decoded": frames[k]} if k in frames else {})}))
    s = med["sluice"]
    print(json.dumps({
        "summary": "video_clips", "videos": a.videos, "seconds": a.seconds, "size": a.size,
        "frames": a.frames, "stride": a.stride, "out": a.out, "threads": a.threads,
        "sluice_vs_limit": round(s / med["limit"], 3),
        "sluice_vs_ceiling": round(s / med["ceiling"], 3),
        "sluice_vs_pyav": round(s / med[best["pyav"]], 2), "best_pyav": best["pyav"],
        "sluice_vs_read_video": round(s / med[best["read_video"]], 2),
        "best_read_video": best["read_video"],
    }))


if __name__ == "__main__":
    main()
