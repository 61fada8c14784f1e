"""map_video against PyAV (python3-av): videos made here with Debian's
ffmpeg from the shared photos (pans and zooms), in the codecs and
containers training sets hold, constant and variable frame rate, with and
without audio. PyAV decodes every frame; the frame for time t is the last
whose timestamp is <= t. sluice's must be the same frame (its time exact,
its luma plane byte for byte), and its RGB close (the two resamplers
differ)."""

import glob
import math
import os
import shutil
import subprocess
import time

import numpy as np
import pytest

import sluice
from sluice import Dataset

av = pytest.importorskip("av", reason="PyAV (python3-av) is not installed")
if shutil.which("ffmpeg") is None:
    pytest.skip("no ffmpeg to make the test videos", allow_module_level=True)
if not sluice.build_options().get("ffmpeg"):
    pytest.skip("a build without FFmpeg (SLUICE_WITH_FFMPEG=OFF)", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
PHOTOS = os.path.join(os.environ.get("SLUICE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE)),
                      "..", "shared", "data", "photos")


def _photo(i=0):
    files = sorted(glob.glob(os.path.join(PHOTOS, "*.jpg")))
    if not files:
        pytest.skip("no shared photos")
    return files[i % len(files)]


def _ffmpeg(args, timeout=120):
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y"] + args, check=True,
                   timeout=timeout)


def _encoders():
    out = subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True,
                         text=True).stdout
    return {line.split()[1] for line in out.splitlines()[10:] if len(line.split()) > 1}


# name -> (file, codec args, extra inputs/filters)
def _make(path, codec, seconds=3.0, size="192x144", fps=25, gop=25, photo=0, vfr=False,
          audio=False, extra=()):
    """A pan and zoom over one photo, seconds long."""
    w, h = size.split("x")
    zoom = "zoompan=z='1+0.004*on':x='iw/2-(iw/zoom/2)+on*2':y='ih/2-(ih/zoom/2)':d=1:" \
           "s=%sx%s:fps=%d" % (w, h, fps)
    vf = "scale=%d:-2,%s" % (int(w) * 3, zoom)
    if vfr:  # gaps that grow and shrink: 40 ms, then 40 + 0-30 ms
        vf += ",settb=1/1000,setpts='(N*0.04+0.03*abs(sin(N*0.7))*N/(N+1))/TB'"
    args = ["-loop", "1", "-i", _photo(photo)]
    if audio:
        args += ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000"]
    args += ["-vf", vf, "-t", str(seconds)] + list(codec) + ["-g", str(gop)]
    if vfr:
        args += ["-fps_mode", "passthrough", "-enc_time_base", "1/1000"]
    if audio:
        args += ["-c:a", "aac", "-shortest"]
    args += list(extra) + [path]
    _ffmpeg(args)
    return path


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("videos")
    enc = _encoders()
    x264 = ["-c:v", "libx264", "-preset", "veryfast", "-bf", "2", "-pix_fmt", "yuv420p"]
    v = {
        "h264.mp4": _make(str(d / "h264.mp4"), x264),
        "h264_audio.mkv": _make(str(d / "h264_audio.mkv"), x264, audio=True, photo=1),
        "mpeg4.mkv": _make(str(d / "mpeg4.mkv"), ["-c:v", "mpeg4", "-q:v", "3"], photo=2),
        "mpeg4.mp4": _make(str(d / "mpeg4.mp4"), ["-c:v", "mpeg4", "-q:v", "5", "-bf", "1"],
                           seconds=2, photo=7),
        "vfr.mkv": _make(str(d / "vfr.mkv"), x264, vfr=True, photo=3),
    }
    if "libvpx-vp9" in enc:
        v["vp9.webm"] = _make(str(d / "vp9.webm"), ["-c:v", "libvpx-vp9", "-b:v", "300k",
                                                      "-deadline", "realtime", "-cpu-used", "8"],
                              seconds=2, photo=5)
    if "libsvtav1" in enc:
        v["av1.mkv"] = _make(str(d / "av1.mkv"), ["-c:v", "libsvtav1", "-preset", "12",
                                                    "-pix_fmt", "yuv420p"], seconds=2, photo=6)
    elif "libaom-av1" in enc:
        v["av1.mkv"] = _make(str(d / "av1.mkv"), ["-c:v", "libaom-av1", "-cpu-used", "8",
                                                    "-b:v", "200k"], seconds=1, photo=6)
    return v


def _reference(path):
    """Every frame of the video stream: (pts, time from the stream's
    start, luma plane, RGB (BT.601, the stream's range), time base, start)."""
    with av.open(path) as c:
        st = c.streams.video[0]
        tb = float(st.time_base)
        start = st.start_time if st.start_time is not None else 0
        frames = []
        for f in c.decode(st):
            planes = f.reformat(format="yuv420p").planes
            y = np.frombuffer(planes[0], np.uint8).reshape(f.height, planes[0].line_size)
            frames.append((f.pts, (f.pts - start) * tb, y[:, :f.width].copy(),
                           f.to_ndarray(format="rgb24")))
        dur = float(st.duration * st.time_base) if st.duration else float(c.duration) / 1e6
        rate = float(st.average_rate)
    return frames, tb, start, dur, rate


def _pick(frames, tick):
    best = frames[0]
    for f in frames:
        if f[0] <= tick:
            best = f
    return best


def _targets(dur, span, num_clips, sampler, frames, step, tb, start):
    room = max(dur - span, 0.0)
    out = []
    for c in range(num_clips):
        if sampler == "uniform":
            at = room * c / (num_clips - 1) if num_clips > 1 else 0.0
        else:
            at = room * (c + 1) / (num_clips + 1)
        out.append([start + math.floor((at + k * step) / tb + 0.5) for k in range(frames)])
    return out


@pytest.mark.parametrize("name", ["h264.mp4", "h264_audio.mkv", "mpeg4.mkv", "mpeg4.mp4",
                                  "vfr.mkv", "vp9.webm", "av1.mkv"])
@pytest.mark.parametrize("sampler", ["uniform", "center"])
def test_frames_match_pyav(videos, name, sampler):
    if name not in videos:
        pytest.skip("ffmpeg here has no encoder for " + name)
    path = videos[name]
    frames, tb, start, dur, rate = _reference(path)
    h, w = frames[0][2].shape
    T, stride, n = 6, 3, 3
    ds = Dataset.from_tensor_slices([path]).map_video(
        T, "resize", stride=stride, num_clips=n, clip_sampler=sampler, with_timestamps=True,
        height=h, width=w, decode="raw", channels=1, num_parallel_calls=1)
    (luma, times), = list(ds.as_numpy_iterator())
    assert luma.shape == (n, T, h, w, 1)
    want = _targets(dur, T * stride / rate, n, sampler, T, stride / rate, tb, start)
    for c in range(n):
        for k in range(T):
            ref = _pick(frames, want[c][k])
            assert times[c, k] == ref[1], (c, k, times[c, k], ref[1])
            assert np.array_equal(luma[c, k, :, :, 0], ref[2]), (name, c, k, ref[1])


def _up2(c, n):
    """A chroma axis (axis 0) doubled to n samples, centre-sited and
    linear (each output sample at i / 2 - 0.25 of the input's), the edges
    held."""
    x = np.clip(np.arange(n) / 2 - 0.25, 0, c.shape[0] - 1)
    i = np.floor(x).astype(int)
    j = np.minimum(i + 1, c.shape[0] - 1)
    f = (x - i).reshape((-1,) + (1,) * (c.ndim - 1))
    return c[i] * (1 - f) + c[j] * f


def _rgb601(frame):
    """BT.601 limited-range RGB of a frame's YCbCr planes, chroma
    upsampled linearly: the conversion sluice makes, in floats."""
    y, u, v = (np.frombuffer(q, np.uint8).reshape(-1, q.line_size)[:q.height, :q.width]
               .astype(float) for q in frame.planes)
    h, w = y.shape
    if u.shape[0] < h:  # 4:2:0
        u, v = _up2(u, h), _up2(v, h)
    if u.shape[1] < w:  # 4:2:0 and 4:2:2
        u, v = _up2(u.T, w).T, _up2(v.T, w).T
    yy, cb, cr = (y - 16) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
    return np.stack([yy + 1.402 * cr, yy - 0.344136 * cb - 0.714136 * cr, yy + 1.772 * cb],
                    -1).clip(0, 255)


@pytest.mark.parametrize("name", ["h264.mp4", "mpeg4.mkv", "vp9.webm", "av1.mkv"])
def test_rgb_close_to_pyav(videos, name):
    # the same frames in RGB, at the frame's own size. Against the BT.601
    # formula on PyAV's planes with linear chroma: within a level on
    # average, 3 at the 99th percentile. Against PyAV's own rgb24 (swscale's
    # unscaled path, which repeats each chroma sample over 2 x 2 pixels):
    # within 2.5 levels on average, the rest at chroma edges.
    if name not in videos:
        pytest.skip("ffmpeg here has no encoder for " + name)
    path = videos[name]
    frames, tb, start, dur, rate = _reference(path)
    h, w = frames[0][2].shape
    ds = Dataset.from_tensor_slices([path]).map_video(
        4, "resize", fps=4, clip_sampler="uniform", with_timestamps=True, height=h, width=w,
        num_parallel_calls=1)
    (rgb, times), = list(ds.as_numpy_iterator())
    refs = [_pick(frames, start + math.floor(k / 4 / tb + 0.5)) for k in range(4)]
    with av.open(path) as c:
        formula = {f.pts: _rgb601(f) for f in c.decode(video=0)
                   if f.pts in {r[0] for r in refs}}
    for k, ref in enumerate(refs):
        assert times[k] == ref[1]
        diff = np.abs(rgb[k].astype(float) - formula[ref[0]])
        assert diff.mean() < 1.0 and np.percentile(diff, 99) <= 3, (diff.mean(), diff.max())
        diff = np.abs(rgb[k].astype(int) - ref[3].astype(int))
        assert diff.mean() < 2.5, (diff.mean(), diff.max())


@pytest.mark.parametrize("matrix,full", [("bt709", False), ("bt709", True),
                                         ("bt470bg", True), ("bt2020nc", False)])
def test_stream_matrix_and_range(tmp_path, matrix, full):
    # tagged streams convert with their own matrix and range: against the
    # formula on PyAV's planes (chroma repeated), at the frame's size
    path = str(tmp_path / ("%s_%s.mp4" % (matrix, full)))
    rng = "pc" if full else "tv"
    _make(path, ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt",
                 "yuvj444p" if full and matrix == "bt470bg" else "yuv444p",
                 "-colorspace", matrix, "-color_range", rng], seconds=0.4, size="64x48")
    with av.open(path) as c:
        f = next(c.decode(video=0))
        y, u, v = (np.frombuffer(p, np.uint8).reshape(f.height, p.line_size)[:, :f.width]
                   .astype(float) for p in f.planes)
    kr, kb = {"bt709": (0.2126, 0.0722), "bt470bg": (0.299, 0.114),
              "bt2020nc": (0.2627, 0.0593)}[matrix]
    if full:
        yy, cb, cr = y, u - 128, v - 128
    else:
        yy, cb, cr = (y - 16) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
    kg = 1 - kr - kb
    want = np.stack([yy + 2 * (1 - kr) * cr,
                     yy - 2 * (1 - kb) * kb / kg * cb - 2 * (1 - kr) * kr / kg * cr,
                     yy + 2 * (1 - kb) * cb], -1).clip(0, 255)
    clip, = list(Dataset.from_tensor_slices([path]).map_video(
        1, "resize", height=48, width=64, clip_sampler="uniform").as_numpy_iterator())
    diff = np.abs(clip[0].astype(float) - want)
    assert diff.mean() < 1.0 and diff.max() <= 3, (diff.mean(), diff.max())


def test_vfr_frames_are_the_ones_shown(videos):
    # fps=10 over a file whose frame gaps vary: the frame shown at each
    # tenth of a second, not every n-th frame
    path = videos["vfr.mkv"]
    frames, tb, start, dur, rate = _reference(path)
    gaps = np.diff([f[0] for f in frames])
    assert len(set(gaps.tolist())) > 5  # the file is variable-rate indeed
    ds = Dataset.from_tensor_slices([path]).map_video(
        20, "resize", 32, fps=10, clip_sampler="uniform", with_timestamps=True,
        num_parallel_calls=1)
    (_, times), = list(ds.as_numpy_iterator())
    want = [_pick(frames, start + math.floor(k / 10 / tb + 0.5))[1] for k in range(20)]
    assert times.tolist() == want


def test_short_clip_pads_with_the_last_frame_or_fails(videos):
    path = videos["h264.mp4"]
    frames, *_ = _reference(path)
    ds = Dataset.from_tensor_slices([path]).map_video(
        10, "resize", 48, stride=10, clip_sampler="uniform", with_timestamps=True)
    (clip, times), = list(ds.as_numpy_iterator())  # 4 s of clip from 3 s of video
    last = frames[-1][1]
    assert times[-1] == last and times[-2] == last and times[-3] < last
    assert np.array_equal(clip[-1], clip[-2])
    bad = Dataset.from_tensor_slices([path]).map_video(
        10, "resize", 48, stride=10, short_clips="error")
    with pytest.raises(sluice.OutOfRangeError, match="h264.mp4.*longer than the video"):
        list(bad)


def test_random_clips_deterministic_across_threads(videos):
    paths = sorted(videos.values()) * 2

    def run(threads):
        ds = Dataset.from_tensor_slices(paths).map_video(
            4, "train", 64, stride=2, num_clips=2, with_timestamps=True,
            color_jitter=(0.4, 0.4, 0.4, 0.1), color_jitter_prob=0.8)
        ds = ds.with_options(seed=7, threads=threads)
        return list(ds.as_numpy_iterator())

    one, two = run(1), run(2)
    for (a, ta), (b, tb_) in zip(one, two):
        assert np.array_equal(a, b) and np.array_equal(ta, tb_)
    starts = {tuple(t[:, 0]) for _, t in one}
    assert len(starts) > 1  # random starts, not all the same
    # another epoch draws other clips
    ds = Dataset.from_tensor_slices(paths[:1]).map_video(4, "train", 64, with_timestamps=True)
    firsts = {float(list(ds.with_options(seed=7, epoch=e).as_numpy_iterator())[0][1][0])
              for e in range(6)}
    assert len(firsts) > 1


def test_frames_of_a_clip_move_together(videos):
    # one crop and flip per clip: a static-camera clip would match frame to
    # frame; here check that the crop is the one of the first frame for all
    # by decoding the same clip uncropped and comparing a resize of it
    path = videos["h264.mp4"]
    ds = Dataset.from_tensor_slices([path] * 8).map_video(
        4, "train", 40, stride=1, clip_sampler="center", flip_prob=0.5)
    clips = list(ds.with_options(seed=3).as_numpy_iterator())
    # consecutive frames of one clip are close (a slow pan), frames of
    # different crops are not
    for c in clips:
        within = np.abs(c[1].astype(int) - c[0].astype(int)).mean()
        assert within < 20, within
    across = np.mean([np.abs(clips[i][0].astype(int) - clips[i + 1][0].astype(int)).mean()
                      for i in range(7)])
    assert across > within


def test_bytes_and_path_and_dict_inputs_agree(videos):
    path = videos["mpeg4.mkv"]
    data = np.frombuffer(open(path, "rb").read(), np.uint8)
    kw = dict(frames=4, preset="resize", size=32, clip_sampler="center")
    a = list(Dataset.from_tensor_slices([path]).map_video(**kw).as_numpy_iterator())[0]
    b = list(Dataset.from_tensors(data).map_video(**kw).as_numpy_iterator())[0]
    ds = Dataset.from_tensor_slices({"video": [path], "label": [3]}).map_video(
        with_timestamps=True, **kw)
    spec = ds.element_spec
    assert spec["video"][0].shape == (4, 32, 32, 3) and spec["video"][1].shape == (4,)
    c = list(ds.as_numpy_iterator())[0]
    c["video"] = c["video"][0]
    assert np.array_equal(a, b) and np.array_equal(a, c["video"]) and c["label"] == 3


def test_float_chw_layout(videos):
    path = videos["h264.mp4"]
    ds = Dataset.from_tensor_slices([path]).map_video(
        4, "eval", 32, layout="CHW", dtype="float32", clip_sampler="center")
    clip, = list(ds.as_numpy_iterator())
    assert clip.shape == (4, 3, 32, 32) and clip.dtype == np.float32
    assert -3 < clip.min() < clip.max() < 3


def _bad_files(tmp_path, videos):
    good = open(videos["h264.mp4"], "rb").read()
    bad = {
        "empty.mp4": b"",
        "text.mp4": b"not a video at all\n" * 100,
        "truncated.mp4": good[: len(good) // 3],
        "corrupt.mp4": bytearray(good),
        "playlist.m3u8": b"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n"
                         b"#EXT-X-ENDLIST\n",
        "concat.ffconcat": b"ffconcat version 1.0\nfile /etc/passwd\n",
        "jpeg.mp4": open(_photo(), "rb").read(),
    }
    c = bad["corrupt.mp4"]
    rng = np.random.default_rng(1)
    for at in rng.integers(len(c) // 4, len(c), 400):
        c[at] ^= 0xFF
    bad["corrupt.mp4"] = bytes(c)
    paths = {}
    for name, data in bad.items():
        p = tmp_path / name
        p.write_bytes(data)
        paths[name] = str(p)
    return paths


def test_bad_videos_are_named_errors(videos, tmp_path):
    paths = _bad_files(tmp_path, videos)
    for name, path in paths.items():
        ds = Dataset.from_tensor_slices([path]).map_video(4, "resize", 32, stride=8,
                                                           clip_sampler="uniform")
        t0 = time.monotonic()
        with pytest.raises(sluice.Error) as e:
            list(ds)
        assert name in str(e.value), (name, str(e.value))
        assert time.monotonic() - t0 < 10, name  # fails fast, never hangs
    # fast-start MP4 cut short: the frames end before the header says
    fast = tmp_path / "fast.mp4"
    _ffmpeg(["-i", videos["h264.mp4"], "-c", "copy", "-movflags", "+faststart", str(fast)])
    data = fast.read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: len(data) // 2])
    ds = Dataset.from_tensor_slices([str(tmp_path / "cut.mp4")]).map_video(
        4, "resize", 32, clip_sampler="uniform", num_clips=2)
    with pytest.raises(sluice.CorruptDataError, match=r"cut.mp4.*truncated|cut.mp4.*at [0-9.]+ s"):
        list(ds)
    # huge frames against max_pixels
    ds = Dataset.from_tensor_slices([videos["h264.mp4"]]).map_video(4, "resize", 32,
                                                                     max_pixels=1000)
    with pytest.raises(sluice.OutOfRangeError, match="max_pixels"):
        list(ds)
    # a video track with no frame in it (MP4 drops the empty track)
    zero = tmp_path / "zero.mp4"
    _ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=1", "-frames:v", "0",
             "-c:v", "mpeg4", str(zero)])
    with pytest.raises(sluice.CorruptDataError, match="zero.mp4.*no video stream"):
        list(Dataset.from_tensor_slices([str(zero)]).map_video(4, "resize", 32))
    # audio only: no video stream
    audio = tmp_path / "tone.mka"
    _ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "flac", str(audio)])
    with pytest.raises(sluice.Error, match="tone.mka.*no video stream"):
        list(Dataset.from_tensor_slices([str(audio)]).map_video(4, "resize", 32))


def test_bad_videos_skipped_under_the_policy(videos, tmp_path):
    paths = _bad_files(tmp_path, videos)
    mixed = [videos["h264.mp4"]] + list(paths.values()) + [videos["mpeg4.mkv"]]
    ds = Dataset.from_tensor_slices(mixed).map_video(4, "resize", 32)
    ds = ds.with_options(error_policy="skip", error_log_limit=0)
    assert len(list(ds)) == 2


def test_resume_inside_an_epoch(videos):
    paths = sorted(videos.values())
    ds = Dataset.from_tensor_slices(paths).map_video(
        4, "train", 48, num_clips=2, with_timestamps=True).with_options(seed=11)
    want = [(np.asarray(a), np.asarray(b)) for a, b in ds.iterator(epoch=1)]
    it = ds.iterator(epoch=1)
    next(it), next(it)
    state = it.state()
    it.close()
    rest = [(np.asarray(a), np.asarray(b)) for a, b in ds.iterator(state=state)]
    assert len(rest) == len(want) - 2
    for (a, ta), (b, tb_) in zip(rest, want[2:]):
        assert np.array_equal(a, b) and np.array_equal(ta, tb_)


def test_clips_over_http_with_faults(videos, tmp_path):
    from remote_server import Server
    import random
    root = tmp_path / "store"
    (root / "bucket").mkdir(parents=True)
    # a longer video, so a clip reads a part of it
    long = _make(str(root / "bucket" / "long.mp4"),
                 ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-b:v",
                  "600k", "-movflags", "+faststart"], seconds=20, size="320x240", gop=25)
    size = os.path.getsize(long)
    kw = dict(frames=4, preset="resize", size=48, clip_sampler="uniform", with_timestamps=True)
    want = list(Dataset.from_tensor_slices([long]).map_video(**kw).as_numpy_iterator())
    random.seed(3)
    with Server(str(root)) as srv:
        srv.reset_prob = 0.2
        url = "%s/bucket/long.mp4" % srv.url
        got = list(Dataset.from_tensor_slices([url]).map_video(**kw).as_numpy_iterator())
        sent = srv.shard_bytes()
    assert np.array_equal(got[0][0], want[0][0]) and np.array_equal(got[0][1], want[0][1])
    # the first second of 20: the header and a GOP or two, not the file
    assert sent < size / 3, (sent, size)
