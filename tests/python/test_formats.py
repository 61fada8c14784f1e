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
    p = tmp_path / "rgb16.png"
    p.write_bytes(_png(v, 16))
    (got,) = _decode([str(p)])
    assert (got == hi.astype(np.uint8)).all()
    assert (np.asarray(Image.open(str(p)).convert("RGB")) == got).all()


def _chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))


def _png(samples, depth=8, ctype=2, interlace=False, plte=None, trns=None):
    """A PNG written here, sample for sample (PIL writes neither Adam7 nor
    packed palettes): samples (h, w) or (h, w, c) ints at depth bits,
    colour type ctype."""
    a = np.asarray(samples)
    h, w = a.shape[:2]
    passes = ([(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
               (1, 0, 2, 2), (0, 1, 1, 2)] if interlace else [(0, 0, 1, 1)])
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if not sub.size:
            continue
        rows = sub.reshape(sub.shape[0], -1).astype(np.int64)
        if depth == 16:
            packed = rows.astype(">u2").view(np.uint8)
        elif depth == 8:
            packed = rows.astype(np.uint8)
        else:  # several samples a byte, the first in the high bits
            per = 8 // depth
            r = np.pad(rows, ((0, 0), (0, -rows.shape[1] % per))).reshape(rows.shape[0], -1, per)
            packed = (r << (8 - depth * (np.arange(per) + 1))).sum(-1).astype(np.uint8)
        raw += b"".join(b"\0" + row.tobytes() for row in packed)
    return (b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace)))
            + (_chunk(b"PLTE", bytes(plte)) if plte is not None else b"")
            + (_chunk(b"tRNS", bytes(trns)) if trns is not None else b"")
            + _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))


def _adam7_png(img):
    """img (h, w, 3 uint8) as an interlaced (Adam7) PNG."""
    return _png(img, interlace=True)


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
    png = (b"\x89PNG\r\n\x1a\n"
           + _chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
           + _chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + _chunk(b"IEND", b""))
    p = tmp_path / "bomb.png"
    p.write_bytes(png)
    with pytest.raises(sluice.OutOfRangeError) as e:
        _decode([str(p)])
    assert "bomb.png" in str(e.value) and "max_pixels" in str(e.value)


# ---- decode="raw": label maps and depth, the file's own values ----

def _raw(paths, preset="resize", size=None, channels=1, dtype="uint8", **kw):
    if size is None:  # the image's own size
        w, h = Image.open(paths[0]).size
        kw.setdefault("height", h)
        kw.setdefault("width", w)
        size = max(w, h)
    return _decode(paths, preset, size, decode="raw", channels=channels, dtype=dtype, **kw)


def _mask(tmp_path, w=70, h=50, classes=21, seed=0):
    """A VOC-style palette mask: class indices, 255 on the borders."""
    rng = np.random.default_rng(seed)
    m = np.kron(rng.integers(0, classes, (h // 5 + 1, w // 5 + 1)), np.ones((5, 5), int))[:h, :w]
    m[:2] = 255
    img = Image.fromarray(m.astype(np.uint8), "P")
    img.putpalette([(i * 37 + c * 91) % 256 for i in range(256) for c in range(3)])
    return _save(img, str(tmp_path / "mask.png")), m.astype(np.uint8)


def test_raw_palette_mask_gives_its_indices(tmp_path):
    path, m = _mask(tmp_path)
    assert (np.asarray(Image.open(path)) == m).all()  # what PIL gives, indices
    (got,) = _raw([path])
    assert got.shape == (50, 70, 1) and got.dtype == np.uint8
    assert (got[..., 0] == m).all()
    # train crops: nearest neighbour, so only the file's values, and the
    # same crop for a seed
    ds = (Dataset.from_files([path] * 8).map_image("train", 32, decode="raw", channels=1)
          .with_options(seed=3))
    a = np.stack(list(ds.as_numpy_iterator()))
    b = np.stack([np.asarray(x) for x in ds.iterator(epoch=0)])
    assert (a == b).all() and set(np.unique(a)) <= set(np.unique(m))


def test_raw_eval_equals_torchvision_nearest(tmp_path):
    T = pytest.importorskip("torchvision.transforms")
    path, m = _mask(tmp_path, 97, 61, seed=1)
    for size, shorter in ((32, 37), (48, 55), (40, 61)):
        (got,) = _raw([path], "eval", size, resize_shorter=shorter)
        tf = T.Compose([T.Resize(shorter, T.InterpolationMode.NEAREST),
                        T.CenterCrop(size)])
        want = np.asarray(tf(Image.open(path)))
        assert (got[..., 0] == want).all(), size


def test_raw_16_bit_depth_exact_and_refused_into_uint8(tmp_path):
    rng = np.random.default_rng(2)
    depth = rng.integers(0, 65536, (40, 30)).astype(np.uint16)
    p = tmp_path / "depth.png"
    p.write_bytes(_png(depth, 16, 0))
    assert (np.asarray(Image.open(str(p))) == depth).all()
    (got,) = _raw([str(p)], dtype="uint16")
    assert got.dtype == np.uint16 and (got[..., 0] == depth).all()
    (chw,) = _raw([str(p)], dtype="uint16", layout="CHW")
    assert chw.shape == (1, 40, 30) and (chw[0] == depth).all()
    with pytest.raises(sluice.OutOfRangeError) as e:
        _raw([str(p)])
    assert "depth.png" in str(e.value) and "uint16" in str(e.value)
    # decode="rgb" reads 16 bits as their high byte (tf's and libpng's
    # strip); PIL's convert("RGB") of mode I clips to 255 instead
    (rgb,) = _decode([str(p)], "resize", 40, height=40, width=30)
    assert (rgb == (depth >> 8).astype(np.uint8)[..., None]).all()


def test_raw_packed_palettes_gray_bits_and_adam7(tmp_path):
    rng = np.random.default_rng(4)
    plte = [v for i in range(16) for v in (i * 16, 255 - i * 16, 7)]
    for depth in (1, 2, 4):
        idx = rng.integers(0, 1 << depth, (13, 21))
        for interlace in (False, True):
            p = tmp_path / ("p%d_%d.png" % (depth, interlace))
            p.write_bytes(_png(idx, depth, 3, interlace, plte[:3 << depth]))
            assert (np.asarray(Image.open(str(p))) == idx).all()
            (got,) = _raw([str(p)])
            assert (got[..., 0] == idx).all(), (depth, interlace)
            # 3 channels: the palette looked up, as PIL's convert("RGB")
            (rgb,) = _raw([str(p)], channels=3)
            assert (rgb == np.asarray(Image.open(str(p)).convert("RGB"))).all()
        # gray below 8 bits: scaled to 8 as libpng, tf and torchvision do
        g = tmp_path / ("g%d.png" % depth)
        g.write_bytes(_png(idx, depth, 0))
        (got,) = _raw([str(g)])
        assert (got[..., 0] == idx * (255 // ((1 << depth) - 1))).all(), depth


def test_raw_channels_filled_and_dropped(tmp_path):
    rgba = np.dstack([_pixels(24, 16, 5), _pixels(24, 16, 6)[..., :1]])
    p = _save(Image.fromarray(rgba, "RGBA"), str(tmp_path / "rgba.png"))
    assert (_raw([p], channels=4)[0] == rgba).all()
    assert (_raw([p], channels=3)[0] == rgba[..., :3]).all()
    gray = rgba[..., 0]
    g = _save(Image.fromarray(gray, "L"), str(tmp_path / "gray.png"))
    assert (_raw([g], channels=3)[0] == gray[..., None]).all()
    four = _raw([g], channels=4, dtype="uint16")[0]
    assert (four[..., :3] == gray[..., None]).all() and (four[..., 3] == 255).all()
    la = _save(Image.fromarray(rgba[..., [0, 3]], "LA"), str(tmp_path / "la.png"))
    assert (_raw([la], channels=2)[0] == rgba[..., [0, 3]]).all()
    assert (_raw([la], channels=1)[0][..., 0] == gray).all()
    # WebP lossless: RGB, RGBA when it has alpha
    w = _save(Image.fromarray(rgba, "RGBA"), str(tmp_path / "rgba.webp"), lossless=True,
              exact=True)
    assert (_raw([w], channels=4)[0] == rgba).all()
    # a JPEG: gray 1 channel, colour 3, the decode PIL gives
    j = _save(Image.fromarray(gray, "L"), str(tmp_path / "gray.jpg"), quality=90)
    assert (_raw([j])[0][..., 0] == np.asarray(Image.open(j))).all()
    # colour into gray is a colour conversion: an element error by name
    with pytest.raises(sluice.UnsupportedError) as e:
        _raw([p], channels=1)
    assert "rgba.png" in str(e.value) and "colour" in str(e.value)
    ds = (Dataset.from_files([p, g]).map_image("resize", 8, decode="raw", channels=1)
          .with_options(error_policy="skip", error_log_limit=0))
    assert len(list(ds)) == 1


def test_raw_batches_and_refuses_what_it_cannot_keep(tmp_path):
    path, m = _mask(tmp_path)
    ds = (Dataset.from_files([path] * 5)
          .map_image("eval", 32, decode="raw", channels=1, dtype="uint16", layout="CHW")
          .batch(2))
    assert "uint16" in repr(ds.element_spec) and "1, 32, 32" in repr(ds.element_spec)
    shapes = [b.shape for b in ds.as_numpy_iterator()]
    assert shapes == [(2, 1, 32, 32), (2, 1, 32, 32), (1, 1, 32, 32)]
    src = Dataset.from_files([path])
    with pytest.raises(sluice.InvalidArgumentError, match="channels"):
        src.map_image("eval", 32, decode="raw")
    with pytest.raises(sluice.InvalidArgumentError, match="augmentations"):
        src.map_image("eval", 32, decode="raw", channels=1, color_jitter=(0.4, 0.4, 0.4, 0))
    with pytest.raises(sluice.InvalidArgumentError, match="uint16"):
        src.map_image("eval", 32, dtype="uint16")
    with pytest.raises(ValueError, match="decode"):
        src.map_image("eval", 32, decode="rgba")


# ---- alpha over a background ----

def test_background_composites_alpha(tmp_path):
    rgba = np.dstack([_pixels(32, 24, 7), _pixels(32, 24, 8)[..., :1]])
    a = rgba[..., 3:].astype(int)
    cases = [_save(Image.fromarray(rgba, "RGBA"), str(tmp_path / "a.png")),
             _save(Image.fromarray(rgba, "RGBA"), str(tmp_path / "a.webp"), lossless=True,
                   exact=True)]
    for path in cases:
        for bg in ((255, 255, 255), (0, 128, 30)):
            (got,) = _decode([path], "resize", 32, height=24, width=32, background=bg)
            want = (rgba[..., :3] * a + np.array(bg) * (255 - a)) / 255
            assert np.abs(got - want).max() <= 0.5 + 1e-9, (path, bg)
            # PIL's own compositing, within a level
            pil = Image.new("RGBA", (32, 24), bg + (255,))
            pil.alpha_composite(Image.open(path).convert("RGBA"))
            assert np.abs(got.astype(int) - np.asarray(pil.convert("RGB"))).max() <= 1
    # a palette's tRNS is alpha too; an opaque file is unchanged
    idx = np.arange(64).reshape(8, 8) % 4
    t = tmp_path / "trns.png"
    t.write_bytes(_png(idx, 8, 3, plte=[10, 20, 30, 200, 100, 50, 0, 0, 0, 9, 9, 9],
                       trns=[0, 128]))
    (got,) = _decode([str(t)], "resize", 8, background=255)
    assert got[0, 0].tolist() == [255] * 3 and got[0, 1].tolist() == [227, 177, 152]
    assert got[0, 2].tolist() == [0, 0, 0]
    opaque = _save(Image.fromarray(rgba[..., :3]), str(tmp_path / "rgb.png"))
    assert (_decode([opaque], "resize", 32, height=24, width=32, background=0)[0]
            == rgba[..., :3]).all()


def test_raw_uint16_through_torch(tmp_path):
    torch = pytest.importorskip("torch")
    import sluice.torch as st
    depth = (np.arange(12 * 10).reshape(12, 10) * 500).astype(np.uint16)
    p = tmp_path / "d.png"
    p.write_bytes(_png(depth, 16, 0))
    ds = (Dataset.from_files([str(p)] * 2)
          .map_image("resize", 10, height=12, width=10, decode="raw", channels=1,
                     dtype="uint16").batch(2))
    (x,) = list(st.DataLoader(ds))
    # NCHW; torch before 2.3 has no uint16: int32, the values kept
    want = torch.uint16 if hasattr(torch, "uint16") else torch.int32
    assert x.shape == (2, 1, 12, 10) and x.dtype == want
    assert (x[1, 0].to(torch.int64).numpy() == depth).all()


# ---- an image and its mask, cropped alike ----

def _scene(tmp_path, mask_scale=1):
    """An image whose red is its x and green its y (256 x 192), and a mask
    (gray + alpha: x, y) of the same scene at 1/mask_scale of its size."""
    y, x = np.mgrid[0:192, 0:256]
    img = np.dstack([x, y, (x + y) // 2]).astype(np.uint8)
    p = _save(Image.fromarray(img), str(tmp_path / "scene.png"))
    my, mx = np.mgrid[0:192 // mask_scale, 0:256 // mask_scale] * mask_scale + mask_scale // 2
    m = _save(Image.fromarray(np.dstack([mx, my]).astype(np.uint8), "LA"),
              str(tmp_path / ("mask%d.png" % mask_scale)))
    return p, m


def test_mask_is_cropped_and_flipped_with_its_image(tmp_path):
    for scale in (1, 2):
        p, m = _scene(tmp_path, scale)
        ds = (Dataset.zip((Dataset.from_files([p] * 24), Dataset.from_files([m] * 24)))
              .map_image("train", 32, image_key=0, mask_key=1, mask_channels=2)
              .with_options(seed=5))
        got = list(ds.as_numpy_iterator())
        flipped = 0
        for img, mask in got:
            assert img.shape == (32, 32, 3) and mask.shape == (32, 32, 2)
            # the mask holds the source coordinates under each output pixel:
            # the image's (filtered) red and green are the same coordinates
            d = np.abs(img[..., :2].astype(int) - mask)
            assert d.mean() <= 1.0 + scale and d.max() <= 3 * scale + 2, (scale, d.max())
            flipped += int(mask[0, 0, 0] > mask[0, -1, 0])
        assert 4 <= flipped <= 20  # both flipped together, about half the time
    # batched: a plain batch stacks both; the structure says so
    b = ds.batch(8)
    assert "32, 32, 2" in repr(b.element_spec)
    images, masks = next(iter(b.as_numpy_iterator()))
    assert images.shape == (8, 32, 32, 3) and masks.shape == (8, 32, 32, 2)


def test_mask_errors_name_it_and_the_policy_skips(tmp_path):
    p, m = _scene(tmp_path)
    bad = tmp_path / "bad_mask.png"
    bad.write_bytes(open(m, "rb").read()[:100])
    pairs = Dataset.zip((Dataset.from_files([p, p]), Dataset.from_files([str(bad), m])))
    ds = pairs.map_image("eval", 32, image_key=0, mask_key=1, mask_channels=2)
    with pytest.raises(sluice.CorruptDataError) as e:
        list(ds)
    assert "mask" in str(e.value)
    skip = ds.with_options(error_policy="skip", error_log_limit=0)
    assert len(list(skip)) == 1
    with pytest.raises(sluice.InvalidArgumentError, match="mask"):
        pairs.map_image("eval", 32, image_key=0, mask_key=0)
    with pytest.raises(ValueError, match="mask_key"):
        pairs.map_image("eval", 32, image_key=0, mask_key=1, views=[sluice.View()])


def test_mask_through_torch_is_nchw_like_its_image(tmp_path):
    torch = pytest.importorskip("torch")
    import sluice.torch as st
    p, m = _scene(tmp_path)
    ds = (Dataset.zip((Dataset.from_files([p] * 4), Dataset.from_files([m] * 4)))
          .map_image("eval", 32, image_key=0, mask_key=1, mask_channels=2).batch(4))
    images, masks = next(iter(st.DataLoader(ds, dtype=torch.float32)))
    assert images.shape == masks.shape[:1] + (3, 32, 32) and images.dtype == torch.float32
    assert masks.shape == (4, 2, 32, 32) and masks.dtype == torch.uint8
    want = np.array(next(iter(ds.as_numpy_iterator()))[1][..., 0])
    assert (masks[:, 0].numpy() == want).all()


# ---- map_image over decoded pixels ----

def _png_of(arr):
    buf = io.BytesIO()
    mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[arr.shape[2]]
    Image.fromarray(arr[..., 0] if arr.shape[2] == 1 else arr, mode).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("case", ["resize", "train", "views", "blend", "raw"])
def test_map_image_over_pixels_equals_the_png_of_them(channels, case):
    rng = np.random.default_rng(channels)
    arrs = [np.concatenate([_pixels(w, h, seed=i)[..., :min(channels, 3)],
                            rng.integers(0, 256, (h, w, max(channels - 3, 0)), dtype=np.uint8)]
                           + ([rng.integers(0, 256, (h, w, 1), dtype=np.uint8)]
                              if channels == 2 else []), axis=-1)[..., :channels]
            for i, (w, h) in enumerate([(61, 47), (40, 90), (128, 128), (33, 20)])]
    kw = {"views": [sluice.View(size=24), sluice.View(size=16, scale=(0.2, 0.5))]} \
        if case == "views" \
        else {"background": (10, 200, 30)} if case == "blend" \
        else {"decode": "raw", "channels": channels} if case == "raw" else {}
    preset = "resize" if case in ("resize", "raw") else "train"
    out = []
    for src in (arrs, [_png_of(a) for a in arrs]):
        got = []
        for a in src:  # one at a time: the arrays differ in shape
            ds = Dataset.from_tensors(a).repeat(3).map_image(preset, 24, **kw)
            got += [repr(x) for x in ds.with_options(threads=1, seed=5)]
        out.append(got)
    assert out[0] == out[1]


def test_map_image_over_pixels_batched_and_cached():
    arr = np.stack([_pixels(50, 40, seed=i) for i in range(8)])
    pngs = [_png_of(a) for a in arr]
    a = Dataset.from_tensor_slices(arr).map_image("train", 32).batch(4)
    b = Dataset.from_tensor_slices(pngs).map_image("train", 32).batch(4)
    opts = {"threads": 2, "seed": 9}
    assert [repr(x) for x in a.with_options(**opts)] == [repr(x) for x in b.with_options(**opts)]
    # a decoded cache: resized once, then new crops every epoch
    cached = (Dataset.from_tensor_slices(pngs).map_image("resize", 48).cache()
              .map_image("train", 32).repeat(2))
    epochs = [x for x in cached.with_options(**opts).as_numpy_iterator()]
    assert len(epochs) == 16 and epochs[0].shape == (32, 32, 3)
    assert not all(np.array_equal(epochs[i], epochs[i + 8]) for i in range(8))


def test_map_image_over_bad_pixels():
    with pytest.raises(sluice.ShapeError, match=r"\[H, W, C\]"):
        list(Dataset.from_tensors(np.zeros((4, 4, 5), np.uint8)).map_image("resize", 8))
    with pytest.raises(sluice.OutOfRangeError, match="max_pixels"):
        list(Dataset.from_tensors(np.zeros((64, 64, 3), np.uint8))
             .map_image("resize", 8, max_pixels=1000))
    with pytest.raises(sluice.DTypeError):
        list(Dataset.from_tensors(np.zeros((4, 4, 3), np.float32)).map_image("resize", 8))
