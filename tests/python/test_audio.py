"""map_audio: clips resampled and mixed with libswresample, placed by the
sampler, and mel features against torchaudio's MelSpectrogram (and
AmplitudeToDB) on the same waveform: the resamplers differ, so the
features are compared on sluice's own samples. Audio made here with
Debian's ffmpeg."""

import shutil
import subprocess
import wave

import numpy as np
import pytest

import sluice
from sluice import Dataset

if shutil.which("ffmpeg") is None:
    pytest.skip("no ffmpeg to make the test audio", allow_module_level=True)
if not sluice.build_options().get("ffmpeg"):
    pytest.skip("a build without FFmpeg (SLUICE_WITH_FFMPEG=OFF)", allow_module_level=True)


def _ffmpeg(args):
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y"] + args, check=True,
                   timeout=120)


@pytest.fixture(scope="module")
def audio(tmp_path_factory):
    d = tmp_path_factory.mktemp("audio")
    out = {}
    # three seconds: 300 Hz, then 600 Hz, then 900 Hz, stereo 44.1 kHz
    steps = "sine=frequency=300:duration=1,sine=frequency=600:duration=1," \
            "sine=frequency=900:duration=1"
    tone = str(d / "steps.wav")
    _ffmpeg(["-f", "lavfi", "-i", "aevalsrc='sin(2*PI*t*(300+300*floor(t)))|"
             "0.5*sin(2*PI*t*(300+300*floor(t)))':s=44100:d=3", "-c:a", "pcm_s16le", tone])
    del steps
    out["steps.wav"] = tone
    for name, codec in (("steps.flac", ["-c:a", "flac"]), ("steps.mp3", ["-c:a", "libmp3lame"]),
                        ("steps.ogg", ["-c:a", "libvorbis"]), ("steps.m4a", ["-c:a", "aac"])):
        p = str(d / name)
        try:
            _ffmpeg(["-i", tone] + codec + [p])
            out[name] = p
        except subprocess.CalledProcessError:
            pass
    mono16 = str(d / "mono16.wav")
    _ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=2:c=pink:r=16000:a=0.3", "-ac", "1",
             "-c:a", "pcm_s16le", mono16])
    out["mono16.wav"] = mono16
    video = str(d / "with_audio.mkv")
    _ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=3", "-i", tone,
             "-c:v", "mpeg4", "-c:a", "aac", "-shortest", video])
    out["with_audio.mkv"] = video
    silent = str(d / "silent.mkv")
    _ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=1", "-c:v", "mpeg4",
             silent])
    out["silent.mkv"] = silent
    return out


def _peak_hz(x, rate):
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return np.argmax(spec) * rate / len(x)


def test_exact_samples_without_resampling(audio):
    # a 16 kHz mono s16 file read at 16 kHz mono: the samples / 32768
    path = audio["mono16.wav"]
    with wave.open(path) as w:
        want = np.frombuffer(w.readframes(w.getnframes()), np.int16) / 32768.0
    got, = list(Dataset.from_tensor_slices([path]).map_audio(16000, 0).as_numpy_iterator())
    assert got.shape == (1, len(want)) and got.dtype == np.float32
    assert np.array_equal(got[0], want.astype(np.float32))


@pytest.mark.parametrize("name", ["steps.wav", "steps.flac", "steps.mp3", "steps.ogg",
                                  "steps.m4a", "with_audio.mkv"])
def test_center_clip_is_the_middle_second(audio, name):
    if name not in audio:
        pytest.skip("ffmpeg here has no encoder for " + name)
    ds = Dataset.from_tensor_slices([audio[name]]).map_audio(
        16000, 0.5, clip_sampler="center", channels=2)
    clip, = list(ds.as_numpy_iterator())
    assert clip.shape == (2, 8000)
    assert abs(_peak_hz(clip[0], 16000) - 600) < 10
    # the right channel is the left at half amplitude
    ratio = np.sqrt((clip[1] ** 2).mean() / (clip[0] ** 2).mean())
    assert 0.45 < ratio < 0.55, ratio
    # uniform: the start
    first, = list(Dataset.from_tensor_slices([audio[name]]).map_audio(
        16000, 0.5, clip_sampler="uniform").as_numpy_iterator())
    assert first.shape == (1, 8000) and abs(_peak_hz(first[0], 16000) - 300) < 10


def test_random_clips_deterministic_and_new_each_epoch(audio):
    paths = [audio["steps.wav"], audio["steps.flac"]] * 3

    def run(threads, epoch):
        ds = Dataset.from_tensor_slices(paths).map_audio(8000, 0.25)
        return list(ds.with_options(seed=3, threads=threads).iterator(epoch=epoch))

    a, b = run(1, 0), run(2, 0)
    assert all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))
    c = run(2, 1)
    assert not all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, c))


def test_short_file_padded_with_zeros(audio):
    clip, = list(Dataset.from_tensor_slices([audio["mono16.wav"]]).map_audio(
        16000, 3.0).as_numpy_iterator())
    assert clip.shape == (1, 48000)
    assert np.abs(clip[0, :31000]).max() > 0.01
    assert not clip[0, 32100:].any()


@pytest.mark.parametrize("kw", [dict(n_mels=64),
                                dict(n_mels=40, n_fft=512, win_length=400, hop_length=160,
                                     f_min=50.0, f_max=7000.0),
                                dict(n_mels=32, power=1.0, log_mel=False),
                                dict(n_mels=16, n_fft=401, hop_length=100)])  # odd n_fft
def test_mel_matches_torchaudio(audio, kw):
    torch = pytest.importorskip("torch")
    ta = pytest.importorskip("torchaudio", reason="python3-torchaudio is not installed")
    path = audio["steps.flac"]
    ds = Dataset.from_tensor_slices([path] * 2).with_options(seed=5)
    wave_, = list(ds.take(1).map_audio(16000, 1.0).as_numpy_iterator())
    mel, = list(ds.take(1).map_audio(16000, 1.0, **kw).as_numpy_iterator())
    args = {k: v for k, v in kw.items() if k != "log_mel"}
    t = ta.transforms.MelSpectrogram(sample_rate=16000, **args)(torch.from_numpy(wave_))
    if kw.get("log_mel", True):
        t = ta.transforms.AmplitudeToDB(stype="power", top_db=None)(t)
    want = t.numpy()
    assert mel.shape == want.shape, (mel.shape, want.shape)
    if kw.get("log_mel", True):
        floor = want.max() - 80  # bins within 80 dB of the peak
        keep = want > floor
        assert np.abs(mel - want)[keep].max() < 0.05, np.abs(mel - want)[keep].max()
    else:
        assert np.allclose(mel, want, rtol=1e-3, atol=1e-3 * want.max())


def test_bad_audio_named_errors(audio, tmp_path):
    bad = tmp_path / "noise.wav"
    bad.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk" * 10)
    empty = tmp_path / "empty.flac"
    empty.write_bytes(b"")
    for path, match in ((str(bad), "noise.wav"), (str(empty), "empty.flac"),
                        (audio["silent.mkv"], "silent.mkv.*no audio stream")):
        with pytest.raises(sluice.Error, match=match):
            list(Dataset.from_tensor_slices([path]).map_audio(16000, 0.5))
    ds = Dataset.from_tensor_slices([str(bad), audio["steps.wav"], str(empty)]).map_audio(
        16000, 0.5).with_options(error_policy="skip", error_log_limit=0)
    assert len(list(ds)) == 1


def test_spec_checks():
    ds = Dataset.from_tensor_slices(["x.wav"])
    for kw in (dict(sample_rate=10), dict(channels=0), dict(seconds=-1),
               dict(n_mels=8, n_fft=1), dict(n_mels=8, f_max=9000.0),
               dict(n_mels=8, seconds=0.01)):
        with pytest.raises(sluice.InvalidArgumentError):
            ds.map_audio(**kw)
    spec = Dataset.from_tensor_slices({"audio": ["x.wav"], "y": [1]}).map_audio(
        16000, 2.0, n_mels=64, hop_length=160).element_spec
    assert spec["audio"].shape == (1, 64, 201)
