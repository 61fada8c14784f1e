"""PNG and WebP in map_image, against PIL on the same files: every PNG
colour type, lossless and lossy WebP, the window-only decodes, and bad
input (truncated, a bad CRC, a decompression bomb, mixed folders)."""

import io
import os
import struct
import zlib

import numpy as np
import pytest

import sluice
from sluice import Dataset

Image = pytest.importorskip("PIL.Image")


def _pixels(w, h, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1),
                    (x + y) * 127 // max(w + h - 2, 1)], axis=-1)
    return np.clip(img + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)


def _save(img, path, **kw):
    img.save(path, **kw)
    return path


def _decode(paths, preset="resize", size=64, **kw):
    ds = (Dataset.from_files(paths).map_image(preset, size, **kw)
          .with_options(threads=1))
    return [x for x in ds.as_numpy_iterator()]


def _modes(tmp_path):
    """A 64x64 PNG of each colour type PIL writes, and the RGB PIL reads."""
    rgb = Image.fromarray(_pixels(64, 64))
    out = {}
    for mode in ("RGB", "RGBA", "L", "LA", "P"):
        img = rgb.convert(mode) if mode != "P" else rgb.quantize(64)
        if mode in ("RGBA", "LA"):
            a = Image.fromarray(_pixels(64, 64, 1)[..., 0])
            img.putalpha(a)
        p = _save(img, str(tmp_path / ("m_%s.png" % mode)))
        out[mode] = p
    trns = rgb.quantize(16)
    trns.info["transparency"] = 3
    out["P+tRNS"] = _save(trns, str(tmp_path / "m_ptrns.png"), transparency=3)
    out["L;1"] = _save(rgb.convert("1"), str(tmp_path / "m_1bit.png"))
    return out


def test_png_every_colour_type_equals_pil(tmp_path):
    # at its own size the resize is the identity: the decode itself is
    # compared, pixel for pixel, with PIL's convert("RGB")
    for mode, path in _modes(tmp_path).items():
        (got,) = _decode([path])
        want = np.asarray(Image.open(path).convert("RGB"))
        assert got.shape == want.shape == (64, 64, 3), mode
        assert np.abs(got.astype(int) - want).max() <= 1, mode


def test_png_16_bit_keeps_the_high_byte(tmp_path):
    # 16-bit RGB as PIL reads it (the high byte of each sample)
    hi = _pixels(64, 64, 3).astype(np.uint16)
    lo = _pixels(64, 64, 4).astype(np.uint16)
    v = (hi << 8) | lo
    raw = b"".join(b"\0" + row.astype(">u2").tobytes() for row in v.reshape(64, 64 * 3))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 16, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    p = tmp_path / "rgb16.png"
    p.write_bytes(png)
    (got,) = _decode([str(p)])
    assert (got == hi.astype(np.uint8)).all()
    assert (np.asarray(Image.open(str(p)).convert("RGB")) == got).all()


def _adam7_png(img):
    """img (h, w, 3 uint8) as an interlaced (Adam7) PNG, written here: PIL
    reads these but does not write them."""
    h, w, _ = img.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
              (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = img[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\0" + row.tobytes() for row in sub)

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_png_adam7_equals_pil(tmp_path):
    src = _pixels(61, 45, 11)
    p = tmp_path / "adam7.png"
    p.write_bytes(_adam7_png(src))
    pil = np.asarray(Image.open(str(p)).convert("RGB"))
    assert (pil == src).all()  # the file is right
    (got,) = _decode([str(p)], "resize", 61, height=45, width=61)
    assert (got == src).all()
    # a crop of it: the whole image is decoded (passes spread every row),
    # the window cut from it as from a plain PNG of the same pixels
    plain = _save(Image.fromarray(src), str(tmp_path / "plain.png"))
    a = _decode([str(p)], "eval", 32)[0]
    b = _decode([plain], "eval", 32)[0]
    assert (a == b).all()


def test_png_resized_against_pil(tmp_path):
    src = _pixels(200, 120, 5)
    p = _save(Image.fromarray(src), str(tmp_path / "wide.png"))
    (got,) = _decode([p], "resize", 64)
    want = np.asarray(Image.fromarray(src).resize((64, 64), Image.BILINEAR))
    assert np.abs(got.astype(int) - want).mean() <= 1.0


def test_webp_lossless_equals_pil_and_lossy_matches_libwebp(tmp_path):
    src = Image.fromarray(_pixels(64, 64, 6))
    ll = _save(src, str(tmp_path / "ll.webp"), lossless=True)
    ly = _save(src, str(tmp_path / "ly.webp"), quality=90)
    (a, b) = _decode([ll, ly])
    assert (a == np.asarray(src)).all()
    # lossy: PIL decodes with libwebp too; at its own size, the same bytes
    assert np.abs(b.astype(int) - np.asarray(Image.open(ly).convert("RGB"))).max() <= 1


def test_webp_window_and_scaling_against_pil(tmp_path):
    src = _pixels(400, 300, 7)
    for kw in ({"lossless": True}, {"quality": 90}):
        p = _save(Image.fromarray(src), str(tmp_path / "big.webp"), **kw)
        (got,) = _decode([p], "resize", 64)
        want = np.asarray(Image.open(p).convert("RGB").resize((64, 64), Image.BILINEAR))
        # libwebp scales the window down by a whole factor first (its
        # rescaler averages boxes), sluice's resampler does the rest
        assert np.abs(got.astype(int) - want).mean() <= 2.0, kw
        (c,) = _decode([p], "eval", 64)
        assert c.shape == (64, 64, 3)


def test_a_folder_may_mix_formats(tmp_path):
    src = Image.fromarray(_pixels(48, 48, 8))
    for i, (ext, kw) in enumerate((("jpg", {"quality": 95}), ("png", {}), ("webp", {"lossless": True}))):
        d = tmp_path / "root" / ("c%d" % i)
        d.mkdir(parents=True)
        _save(src, str(d / ("x.%s" % ext)), **kw)
    # (a .png named .jpg decodes as PNG: the bytes say what it is)
    _save(src, str(tmp_path / "root" / "c0" / "really_png.jpg"), format="PNG")
    ds = Dataset.image_folder(str(tmp_path / "root"), with_paths=True).map_image("resize", 48)
    got = list(ds.as_numpy_iterator())
    assert [int(l) for _, l, _ in got] == [0, 0, 1, 2]
    for x, _, path in got:
        want = np.asarray(Image.open(os.fsdecode(path)).convert("RGB"))
        # PNG, WebP lossless: the same pixels; JPEG: PIL's decode, within
        # what the YCbCr planes path differs from it
        assert np.abs(x.astype(int) - want).mean() < 2, path


def _png_bytes(w=32, h=32):
    buf = io.BytesIO()
    Image.fromarray(_pixels(w, h, 9)).save(buf, format="PNG")
    return buf.getvalue()


def test_bad_png_and_webp_name_the_file(tmp_path):
    good = _png_bytes()
    cases = {}
    cases["truncated.png"] = good[:len(good) // 2]
    bad = bytearray(good)
    bad[60] ^= 0xFF  # inside IDAT: its CRC no longer matches
    cases["badcrc.png"] = bytes(bad)
    cases["noiend.png"] = good[:-12]
    cases["empty.webp"] = b"RIFF\x04\x00\x00\x00WEBP"
    buf = io.BytesIO()
    Image.fromarray(_pixels(32, 32)).save(buf, format="WEBP", quality=80)
    cases["truncated.webp"] = buf.getvalue()[:40]
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(sluice.CorruptDataError) as e:
            _decode([str(p)])
        assert name in str(e.value), str(e.value)
    assert "bad CRC" in _err(tmp_path / "badcrc.png") and "byte" in _err(tmp_path / "badcrc.png")
    assert "IEND" in _err(tmp_path / "noiend.png")
    # allow_warnings takes a PNG without its IEND
    assert _decode([str(tmp_path / "noiend.png")], allow_warnings=True)[0].shape == (64, 64, 3)
    # the error policy skips them as it skips a bad JPEG
    ds = (Dataset.from_files([str(tmp_path / n) for n in cases] + [str(p)])
          .map_image("resize", 16).with_options(error_policy="skip", error_log_limit=0))
    assert len(list(ds)) == 0


def _err(path):
    try:
        _decode([str(path)])
    except sluice.Error as e:
        return str(e)
    return ""


def test_png_bomb_refused_before_allocating(tmp_path):
    # 1 KB that declares 100000 x 100000 RGB: max_pixels says no before a
    # pixel is allocated
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    png = (b"\x89PNG\r\n\x1a\n"
           + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
    p = tmp_path / "bomb.png"
    p.write_bytes(png)
    with pytest.raises(sluice.OutOfRangeError) as e:
        _decode([str(p)])
    assert "bomb.png" in str(e.value) and "max_pixels" in str(e.value)
