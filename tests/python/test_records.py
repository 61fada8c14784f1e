"""Sharded records from Python: list_files, tfrecord / TFRecordDataset,
interleave, parse_example and webdataset; the shards that sluice-bench
--make-shards writes, checked with Python's own tarfile and gzip and a
CRC-32C written here."""

import gzip
import io
import json
import os
import struct
import subprocess
import tarfile
import zlib

import numpy as np
import pytest

import sluice

# ---- CRC-32C and TFRecord framing, written here from the format ----

_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(crc32c(n))) + data + struct.pack("<I", masked(crc32c(data)))


def unframe(stream):
    """The records of a TFRecord byte string, every CRC checked."""
    out, off = [], 0
    while off < len(stream):
        n_bytes = stream[off:off + 8]
        (n,) = struct.unpack("<Q", n_bytes)
        (lcrc,) = struct.unpack("<I", stream[off + 8:off + 12])
        assert lcrc == masked(crc32c(n_bytes)), "length CRC at %d" % off
        data = stream[off + 12:off + 12 + n]
        (dcrc,) = struct.unpack("<I", stream[off + 12 + n:off + 16 + n])
        assert dcrc == masked(crc32c(data)), "data CRC at %d" % off
        out.append(data)
        off += 16 + n
    assert off == len(stream)
    return out


# ---- tf.train.Example, written and read here from the proto definitions ----

def _varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, wire, payload):
    key = _varint(num << 3 | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def example(features):
    """A serialized Example from {key: bytes | [bytes] | [int] | [float]
    | ("int", [...]) ...}: lists of ints are packed int64_list, of floats
    packed float_list, of bytes bytes_list."""
    entries = b""
    for key, value in features.items():
        if isinstance(value, bytes):
            value = [value]
        if value and isinstance(value[0], bytes):
            feat = _field(1, 2, b"".join(_field(1, 2, v) for v in value))
        elif value and isinstance(value[0], float):
            feat = _field(2, 2, _field(1, 2, struct.pack("<%df" % len(value), *value)))
        else:
            feat = _field(3, 2, _field(1, 2, b"".join(_varint(v) for v in value)))
        entry = _field(1, 2, key.encode()) + _field(2, 2, feat)
        entries += _field(1, 2, entry)
    return _field(1, 2, entries)


def _read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def _fields(b):
    i = 0
    while i < len(b):
        key, i = _read_varint(b, i)
        assert key & 7 == 2
        n, i = _read_varint(b, i)
        yield key >> 3, b[i:i + n]
        i += n


def read_example(b):
    """{key: (kind, payload)} of a serialized Example (kind 1 bytes_list,
    3 int64_list); enough to check what --make-shards wrote."""
    out = {}
    for num, features in _fields(b):
        assert num == 1
        for num2, entry in _fields(features):
            kv = dict(_fields(entry))
            (kind, lst), = _fields(kv[2])
            if kind == 1:
                out[kv[1].decode()] = [v for _, v in _fields(lst)]
            else:
                (_, packed), = _fields(lst)
                vals, i = [], 0
                while i < len(packed):
                    v, i = _read_varint(packed, i)
                    vals.append(v)
                out[kv[1].decode()] = vals
    return out


# ---- fixtures ----

@pytest.fixture(scope="module")
def bench():
    path = os.environ.get("SLUICE_BENCH")
    if not path:
        pytest.skip("SLUICE_BENCH (the sluice-bench binary) is not set")
    return path


@pytest.fixture(scope="module")
def shards(bench, image_dir, tmp_path_factory):
    """{format: directory} of shards of image_dir, 5 images per shard."""
    out = {}
    for name, args in (("tfrecord", ["--format", "tfrecord"]),
                       ("tfrecord.gz", ["--format", "tfrecord", "--compression", "gzip"]),
                       ("tar", ["--format", "tar"]),
                       ("tar.gz", ["--format", "tar", "--compression", "gzip"])):
        d = str(tmp_path_factory.mktemp(name.replace(".", "_")))
        subprocess.run([bench, image_dir, "--make-shards", d, "--shard-size", "5"] + args,
                       check=True, stdout=subprocess.DEVNULL)
        out[name] = d
    return out


def _files(d):
    """The shards in d (not the indexes --make-shards writes beside them)."""
    return sorted(os.path.join(d, f) for f in os.listdir(d) if not f.endswith(".idx"))


def _index_of(path):
    """The "offset size" lines of the index beside path."""
    with open(path + ".idx") as f:
        return [tuple(map(int, line.split())) for line in f]


def _contents(image_files):
    """(bytes, label, base name) of every image, sorted: --make-shards
    shuffles the images across shards (as build_imagenet_data.py does)."""
    with_labels = []
    for path, label in image_files:
        with open(path, "rb") as f:
            with_labels.append((f.read(), label, os.path.basename(path)))
    return sorted(with_labels)


def _records_of(files):
    """The records of TFRecord files in order, read and checked here."""
    out = []
    for f in files:
        with (gzip.open if f.endswith(".gz") else open)(f, "rb") as fh:
            out += unframe(fh.read())
    return out


# ---- the writer's output, read by Python's own modules ----

def test_make_shards_tfrecord_is_valid(shards, image_files):
    want = _contents(image_files)
    files = _files(shards["tfrecord"])
    assert len(files) == -(-len(want) // 5)
    assert all(f.endswith("-of-%05d.tfrecord" % len(files)) for f in files)
    got = []
    for rec in _records_of(files):
        ex = read_example(rec)
        assert ex["image/format"] == [b"JPEG"]
        got.append((ex["image/encoded"][0], ex["image/class/label"][0],
                    ex["image/filename"][0].decode()))
    assert sorted(got) == want
    # each uncompressed shard has its DALI-style index beside it: a record
    # at each offset, of that size with its framing, back to back
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        at = 0
        for off, size in _index_of(f):
            assert off == at and struct.unpack("<Q", data[off:off + 8])[0] + 16 == size
            at += size
        assert at == len(data)
    assert not any(f.endswith(".idx") for f in os.listdir(shards["tfrecord.gz"]))


def test_make_shards_gzip_is_valid(shards):
    plain, gz = _files(shards["tfrecord"]), _files(shards["tfrecord.gz"])
    assert len(plain) == len(gz)
    for p, g in zip(plain, gz):
        with open(p, "rb") as fp, gzip.open(g, "rb") as fg:
            assert fg.read() == fp.read()


@pytest.mark.parametrize("fmt", ["tar", "tar.gz"])
def test_make_shards_tar_is_valid(shards, image_files, fmt):
    want = _contents(image_files)
    got = []
    for f in _files(shards[fmt]):
        with tarfile.open(f, "r:*") as t:
            members = t.getmembers()
            assert all(m.isfile() for m in members)
            for jpg, cls in zip(members[::2], members[1::2]):
                assert jpg.name.endswith(".jpg") and cls.name == jpg.name[:-4] + ".cls"
                got.append((t.extractfile(jpg).read(), int(t.extractfile(cls).read())))
            if fmt == "tar":  # a sample from its first header to its last member's end
                assert _index_of(f) == [(m.offset, c.offset_data + -(-c.size // 512) * 512
                                         - m.offset)
                                        for m, c in zip(members[::2], members[1::2])]
    assert sorted(got) == [(d, label) for d, label, _ in want]


@pytest.mark.parametrize("fmt", ["tfrecord", "tfrecord.gz", "tar", "tar.gz"])
def test_bench_read_preset_over_shards(bench, shards, image_files, tmp_path, fmt):
    """--preset read hands out each image's encoded bytes: a uint8 vector
    from tar, a string from parse_example; both are counted."""
    out = tmp_path / "r.json"
    gz = ["--compression", "gzip"] if fmt.endswith(".gz") else []
    subprocess.run([bench, shards[fmt], "--format", fmt.split(".")[0], "--preset", "read",
                    "--epochs", "2", "--threads", "2", "--json", str(out)] + gz,
                   check=True, stdout=subprocess.DEVNULL)
    d = json.loads(out.read_text().strip().splitlines()[-1])
    n = len(image_files)
    assert d["images"] == 2 * n
    assert d["bytes_delivered"] == 2 * sum(len(b) for b, _, _ in _contents(image_files))


# ---- reading them back ----

def test_list_files(shards):
    d = shards["tfrecord"]
    files = _files(d)
    ordered = sluice.Dataset.list_files(os.path.join(d, "*.tfrecord"), shuffle=False)
    assert list(ordered) == files
    assert len(ordered) == len(files)
    both = sluice.Dataset.list_files([os.path.join(d, "*-00001-*.tfrecord"),
                                      os.path.join(d, "*-0000*.tfrecord")], shuffle=False)
    assert list(both) == files[:10]  # sorted, duplicates dropped
    shuffled = sluice.Dataset.list_files(os.path.join(d, "*.tfrecord"), seed=3)  # tf's default
    e0, e1 = list(shuffled), list(shuffled)
    assert sorted(e0) == files and sorted(e1) == files and e0 != e1
    assert list(shuffled.iterator(epoch=0)) == e0
    with pytest.raises(sluice.NotFoundError, match="nothing-here"):
        sluice.Dataset.list_files(os.path.join(d, "nothing-here-*"))
    with pytest.raises(FileNotFoundError):
        sluice.Dataset.list_files(os.path.join(d, "nothing-here-*"))


@pytest.mark.parametrize("fmt,compression", [("tfrecord", None), ("tfrecord.gz", "GZIP")])
def test_tfrecord_and_parse_example(shards, image_files, fmt, compression):
    want = _contents(image_files)
    files = _files(shards[fmt])
    ds = sluice.TFRecordDataset(files, compression_type=compression)
    recs = list(ds)
    assert all(type(r) is bytes for r in recs)
    assert recs == _records_of(files)  # in file order
    parsed = ds.parse_example({
        "image/encoded": sluice.FixedLenFeature([], "string"),
        "image/class/label": sluice.FixedLenFeature([], "int64"),
        "image/filename": sluice.FixedLenFeature([], "string", default_value=b""),
    })
    def triples(dicts):  # parse_example gives dicts, as tf.data does
        return [(d["image/encoded"], int(d["image/class/label"]), d["image/filename"])
                for d in dicts]
    got = triples(parsed)
    assert sorted(got) == [(d, label, name.encode()) for d, label, name in want]
    # several at a time, fixed or autotuned: the same, in the same order
    for par in (3, sluice.AUTOTUNE):
        again = ds.parse_example({
            "image/encoded": sluice.FixedLenFeature([], "string"),
            "image/class/label": sluice.FixedLenFeature([], "int64"),
            "image/filename": sluice.FixedLenFeature([], "string", default_value=b""),
        }, num_parallel_calls=par)
        assert triples(again) == got
    with pytest.raises(ValueError, match="num_parallel_calls"):
        ds.parse_example({"image/encoded": sluice.FixedLenFeature([], "string")},
                         num_parallel_calls=0)
    # records feed map_image directly
    # records feed map_image directly (the image is "image/encoded"'s leaf)
    images = parsed.map_image("eval", size=32).batch(len(want))
    b = next(iter(images))
    assert b["image/encoded"].shape == (len(want), 32, 32, 3)
    assert list(b["image/class/label"]) == [lab for _, lab, _ in got]


def test_assert_cardinality(shards, image_files):
    """Shards cannot know their size; stated, len() works and a batch that
    drops its remainder stops decoding at the last full batch."""
    files = _files(shards["tfrecord"])
    n = len(image_files)
    ds = sluice.TFRecordDataset(files)
    assert ds.cardinality() == sluice.UNKNOWN
    with pytest.raises(TypeError, match="unknown"):
        len(ds)
    stated = ds.assert_cardinality(n)
    assert len(stated) == n and stated.cardinality() == n
    assert list(stated) == list(ds)
    images = stated.parse_example({"image/encoded": sluice.FixedLenFeature([], "string")})
    batches = images.map_image("eval", size=16).batch(n // 2 + 1, drop_remainder=True)
    assert len(batches) == 1 and batches.name == "map_image_batch"
    assert [b["image/encoded"].shape for b in batches] == [(n // 2 + 1, 16, 16, 3)]
    with pytest.raises(sluice.CorruptDataError,
                       match="expected to hold %d elements but ended after %d" % (n + 1, n)):
        list(ds.assert_cardinality(n + 1))
    with pytest.raises(ValueError, match="gave at least %d" % n):
        list(ds.assert_cardinality(n - 1))
    with pytest.raises(sluice.InvalidArgumentError, match="has 3 elements, not 4"):
        sluice.Dataset.range(3).assert_cardinality(4)
    with pytest.raises(TypeError, match="expected_cardinality must be an int"):
        ds.assert_cardinality("many")


def test_tfrecord_zlib_and_paths(tmp_path):
    recs = [b"", b"a", bytes(range(256)) * 40]
    path = tmp_path / "z.tfrecord"
    path.write_bytes(zlib.compress(b"".join(frame(r) for r in recs)))
    ds = sluice.Dataset.tfrecord(str(path), compression_type="ZLIB", with_paths=True)
    assert list(ds) == [(r, os.fsencode(path)) for r in recs]
    with pytest.raises(ValueError, match="compression_type"):
        sluice.Dataset.tfrecord(str(path), compression_type="LZ4")


def tf_interleave(inputs, cycle, block):
    """tf.data's interleave order (interleave_dataset_op.cc's GetNext),
    over lists: an exhausted input frees its slot and the cycle moves on;
    the slot takes the next input when the cycle comes back to it."""
    inputs, slots, out = list(inputs), [None] * cycle, []
    i = taken = 0
    while inputs or any(s is not None for s in slots):
        if slots[i] is not None:
            if slots[i]:
                out.append(slots[i].pop(0))
                taken += 1
                if taken == block:
                    i, taken = (i + 1) % cycle, 0
                continue
            slots[i] = None
            i, taken = (i + 1) % cycle, 0
        elif inputs:
            slots[i] = list(inputs.pop(0))
        else:
            i, taken = (i + 1) % cycle, 0
    return out


def test_tf_interleave_helper():
    assert tf_interleave([[x] * 6 for x in range(1, 6)], 2, 4) == [
        1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]


def test_tfrecord_parallel_reads(shards):
    files = _files(shards["tfrecord"])
    per_file = [list(sluice.TFRecordDataset(f)) for f in files]
    par = sluice.TFRecordDataset(files, num_parallel_reads=3)
    assert list(par) == tf_interleave(per_file, 3, 1)
    assert list(par) == list(par)  # the same on every epoch and thread count
    unordered = sluice.TFRecordDataset(files, num_parallel_reads=sluice.AUTOTUNE,
                                       deterministic=False)
    assert sorted(unordered) == sorted(r for recs in per_file for r in recs)
    # a Python map_func gives the same order as the C reader
    listed = sluice.Dataset.list_files(os.path.join(shards["tfrecord"], "*.tfrecord"),
                                       shuffle=False)
    via_python = listed.interleave(lambda p: sluice.TFRecordDataset(p), cycle_length=3,
                                   num_parallel_calls=2)
    assert list(via_python) == tf_interleave(per_file, 3, 1)


def test_interleave_uneven():
    lens = [3, 0, 5, 1, 2, 7, 4]
    ds = sluice.Dataset.from_tensor_slices(np.array(lens)).interleave(
        lambda n: sluice.Dataset.range(int(n)).map(lambda v, n=int(n): v + 100 * n),
        cycle_length=3, block_length=2, num_parallel_calls=3)
    want = tf_interleave([[v + 100 * n for v in range(n)] for n in lens], 3, 2)
    assert [int(v) for v in ds] == want


def test_interleave_tf_docstring():
    # tf.data.Dataset.interleave's docstring examples
    ds = sluice.Dataset.range(1, 6).interleave(
        lambda x: sluice.Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4)
    assert [int(v) for v in ds] == [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4,
                                     3, 3, 4, 4, 5, 5, 5, 5, 5, 5]
    ds = sluice.Dataset.range(1, 6).interleave(
        lambda x: sluice.Dataset.from_tensors(x).repeat(6), cycle_length=3, block_length=2,
        num_parallel_calls=3)
    want = [1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 4, 4, 5, 5, 4,
            4, 5, 5]
    assert [int(v) for v in ds] == want
    assert sorted(int(v) for v in ds.with_options(deterministic=False)) == sorted(want)


def test_interleave_errors():
    def boom(x):
        raise KeyError("no shard %d" % int(x))
    with pytest.raises(sluice.CallbackError, match="KeyError: 'no shard 0'") as e:
        list(sluice.Dataset.range(3).interleave(boom, cycle_length=2))
    assert isinstance(e.value.__cause__, KeyError) and "no shard 0" in str(e.value.__cause__)
    with pytest.raises(sluice.CallbackError, match="must return a sluice.Dataset"):
        list(sluice.Dataset.range(3).interleave(lambda x: [x]))
    # under skip, an input whose function fails is dropped
    ds = sluice.Dataset.range(4).interleave(
        lambda x: boom(x) if int(x) == 2 else sluice.Dataset.from_tensors(x))
    assert [int(v) for v in ds.with_options(error_policy="skip")] == [0, 1, 3]
    with pytest.raises(ValueError):
        sluice.Dataset.range(3).interleave(lambda x: x, num_parallel_calls=0)


def test_webdataset(shards, image_files):
    want = _contents(image_files)
    d = shards["tar"]
    n = len(_files(d))
    url = os.path.join(d, "train-{00000..%05d}-of-%05d.tar" % (n - 1, n))
    ds = sluice.Dataset.webdataset(url, keys=("jpg", "cls"))
    got = [(j, int(c)) for j, c in ds]
    assert sorted(got) == [(data, label) for data, label, _ in want]
    keyed = sluice.Dataset.webdataset(_files(shards["tar.gz"]), keys="cls jpg;png",
                                      with_keys=True)
    first = next(iter(keyed))
    assert (first[1], int(first[0])) == got[0] and first[2] == b"00000000"
    files = sluice.Dataset.list_files(os.path.join(d, "*.tar"), shuffle=False)
    mixed = files.interleave(lambda p: sluice.Dataset.webdataset(p), cycle_length=4,
                             num_parallel_calls=2)
    assert sorted((j, int(c)) for j, c in mixed) == sorted(got)
    batch = mixed.map_image("train", size=24).batch(8)
    x, y = next(iter(batch))
    assert x.shape == (8, 24, 24, 3) and y.dtype == np.int64


def test_brace_expand():
    from sluice.records import brace_expand
    assert brace_expand("s-{000..002}.tar") == ["s-000.tar", "s-001.tar", "s-002.tar"]
    assert brace_expand("{a,b}/{1..2}") == ["a/1", "a/2", "b/1", "b/2"]
    assert brace_expand("plain.tar") == ["plain.tar"]


def _tar_bytes(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_webdataset_bad_input(tmp_path):
    path = tmp_path / "s.tar"
    path.write_bytes(_tar_bytes([("a.jpg", b"A"), ("a.cls", b"1"), ("b.jpg", b"B"),
                                 ("c.jpg", b"C"), ("c.cls", b"3")]))
    ds = sluice.Dataset.webdataset(str(path))
    with pytest.raises(sluice.CorruptDataError, match=r"s\.tar.*cls") as e:
        list(ds)
    assert isinstance(e.value, ValueError)
    assert [(j, int(c)) for j, c in ds.with_options(error_policy="skip")] == [(b"A", 1),
                                                                              (b"C", 3)]
    raw = bytearray(path.read_bytes())
    raw[148:156] = b"0000000\0"  # a header checksum that does not match
    path.write_bytes(bytes(raw))
    with pytest.raises(sluice.CorruptDataError, match=r"s\.tar.*at byte 0"):
        list(ds)


def test_tfrecord_bad_input(tmp_path):
    recs = [b"one", b"two", b"three"]
    good = b"".join(frame(r) for r in recs)
    path = tmp_path / "bad.tfrecord"
    second = len(frame(recs[0]))
    broken = bytearray(good)
    broken[second + 12] ^= 0xFF  # the second record's data: its CRC fails
    path.write_bytes(bytes(broken))
    ds = sluice.TFRecordDataset(str(path))
    with pytest.raises(sluice.CorruptDataError,
                       match=r"bad\.tfrecord.*at byte %d" % second):
        list(ds)
    assert list(ds.with_options(error_policy="skip")) == [b"one", b"three"]
    assert list(sluice.TFRecordDataset(str(path), check_crc=False)) == \
        [b"one", bytes([ord("t") ^ 0xFF]) + b"wo", b"three"]
    path.write_bytes(good[:-5])  # the last record cut short
    with pytest.raises(sluice.CorruptDataError, match="bad.tfrecord"):
        list(ds)
    assert list(ds.with_options(error_policy="skip")) == [b"one", b"two"]
    path.write_bytes(struct.pack("<Q", 1 << 40) + good[8:])  # a huge length, bad CRC
    with pytest.raises(sluice.CorruptDataError, match="at byte 0"):
        list(ds)
    gz = tmp_path / "cut.tfrecord.gz"
    gz.write_bytes(gzip.compress(good)[:-12])
    with pytest.raises(sluice.CorruptDataError, match="cut.tfrecord.gz"):
        list(sluice.TFRecordDataset(str(gz), "GZIP"))


def test_max_record_bytes(tmp_path):
    path = tmp_path / "big.tfrecord"
    path.write_bytes(frame(b"x" * 100) + frame(b"y" * 10))
    ds = sluice.TFRecordDataset(str(path))
    with pytest.raises(sluice.CorruptDataError, match="big.tfrecord"):
        list(ds.with_options(max_record_bytes=50))
    assert list(ds.with_options(max_record_bytes=50, error_policy="skip")) == [b"y" * 10]


def test_parse_example_specs(tmp_path):
    exs = [example({"b": b"raw", "i": [1, -2, 3], "f": [0.5, 1.5], "v": [7]}),
           example({"b": b"two", "i": [4, 5, 6], "f": [2.0, 3.0]})]
    path = tmp_path / "ex.tfrecord"
    path.write_bytes(b"".join(frame(e) for e in exs))
    ds = sluice.TFRecordDataset(str(path)).parse_example({
        "i": sluice.FixedLenFeature([3], "int64"),
        "b": sluice.FixedLenFeature([], bytes),
        "f": sluice.FixedLenFeature([2], np.float32),
        "v": sluice.VarLenFeature("int64"),
        "missing": sluice.FixedLenFeature([2], "float32", default_value=[9.0, 9.0]),
    })
    got = list(ds)  # dicts, as tf.data's parse_example gives
    assert all(isinstance(g, dict) and sorted(g) == ["b", "f", "i", "missing", "v"] for g in got)
    assert [list(g["i"]) for g in got] == [[1, -2, 3], [4, 5, 6]]
    assert [g["b"] for g in got] == [b"raw", b"two"]
    assert [list(g["f"]) for g in got] == [[0.5, 1.5], [2.0, 3.0]]
    assert [list(g["v"]) for g in got] == [[7], []]
    assert [list(g["missing"]) for g in got] == [[9.0, 9.0]] * 2
    spec = ds.element_spec
    assert spec["i"] == sluice.TensorSpec([3], "int64")
    assert spec["b"] == sluice.TensorSpec([], "string")
    assert spec["v"] == sluice.TensorSpec([None], "int64")
    wrong = sluice.TFRecordDataset(str(path)).parse_example(
        {"i": sluice.FixedLenFeature([], "float32")})
    with pytest.raises(sluice.DTypeError, match=r"ex\.tfrecord: feature 'i' is an int64_list"):
        list(wrong)
    garbage = tmp_path / "garbage.tfrecord"
    garbage.write_bytes(frame(b"\x0a\xff") + frame(exs[1]))  # a length varint cut short
    parsed = sluice.TFRecordDataset(str(garbage)).parse_example(
        {"b": sluice.FixedLenFeature([], "string")})
    with pytest.raises(sluice.CorruptDataError, match=r"garbage\.tfrecord"):
        list(parsed)
    assert list(parsed.with_options(error_policy="skip")) == [{"b": b"two"}]
    with pytest.raises(ValueError, match="one value"):
        sluice.Dataset.range(1).parse_example(
            {"i": sluice.FixedLenFeature([2], "int64", default_value=[1, 2])})
    with pytest.raises(TypeError):
        sluice.FixedLenFeature([], "complex64")
    with pytest.raises(TypeError):
        sluice.TFRecordDataset(str(path)).parse_example([("i", "int64")])


def test_parse_example_long_values(tmp_path):
    # values of 4 KiB and more stay in the reader's record (a view whose
    # first offset is the gap to the value, 0 to 7): pads of 0..7 bytes
    # before them move the value through every alignment, and Python reads
    # each string whole, alone and batched (that views are made at all is
    # test_parse_example.c's test_views_of_records)
    vals = [bytes((i * 7 + k * 13) % 251 for k in range(5000 + 37 * i)) for i in range(16)]
    exs = [example({"pad": b"x" * (i % 8), "image/encoded": v, "i": [i]})
           for i, v in enumerate(vals)]
    path = tmp_path / "long.tfrecord"
    path.write_bytes(b"".join(frame(e) for e in exs))
    spec = {"image/encoded": sluice.FixedLenFeature([], "string"),
            "i": sluice.FixedLenFeature([], "int64")}
    ds = sluice.TFRecordDataset(str(path)).parse_example(spec)
    assert [(d["image/encoded"], int(d["i"])) for d in ds] == [(v, i) for i, v in enumerate(vals)]
    batched = list(ds.batch(5))
    assert [e for b in batched for e in b["image/encoded"]] == vals


def test_resume_over_interleaved_shards(shards):
    files = sluice.Dataset.list_files(os.path.join(shards["tfrecord"], "*.tfrecord"), seed=1)
    ds = files.interleave(lambda p: sluice.TFRecordDataset(p), cycle_length=3,
                          block_length=2, num_parallel_calls=2).shuffle(7, seed=2)
    full = list(ds.iterator(epoch=4))
    it = ds.iterator(epoch=4)
    head = [next(it) for _ in range(13)]
    state = it.state()
    it.close()
    rest = list(ds.iterator(state=state))
    assert head + rest == full


def test_tfrecord_indexed_shuffles_records_without_a_buffer(tmp_path):
    records = [b"record %d " % i * (i % 5 + 1) for i in range(50)]
    shards = []
    for k in range(2):
        path = tmp_path / ("part-%d.tfrecord" % k)
        path.write_bytes(b"".join(frame(r) for r in records[k * 25:(k + 1) * 25]))
        shards.append(str(path))
    ds = sluice.Dataset.tfrecord_indexed(shards)
    assert ds.cardinality() == 50
    assert [bytes(r) for r in ds] == records
    # the index it wrote beside each shard is DALI's text
    lines = (tmp_path / "part-0.tfrecord.idx").read_text().splitlines()
    assert lines[0] == "0 %d" % (len(records[0]) + 16) and len(lines) == 25
    shuffled = ds.shuffle(sluice.ALL, seed=4, reshuffle_each_iteration=False)
    order = [bytes(r) for r in shuffled]
    assert sorted(order) == sorted(records) and order != records
    assert [bytes(r) for r in shuffled] == order  # one order, every pass
    it = iter(shuffled)
    head = [bytes(next(it)) for _ in range(17)]
    state = it.state()
    assert head + [bytes(r) for r in shuffled.iterator(state=state)] == order
    # an index that does not fit its shard is refused, naming it
    bad = tmp_path / "bad.idx"
    bad.write_text("0 16\n")
    with pytest.raises(sluice.CorruptDataError, match="bad.idx"):
        sluice.Dataset.tfrecord_indexed(shards, [str(bad), None])


def test_shuffle_windowed_keeps_shards_together(tmp_path):
    ds = sluice.Dataset.range(100).shuffle_windowed(10, 2, seed=1)
    order = [int(x) for x in ds]
    assert sorted(order) == list(range(100)) and order != list(range(100))
    for w in range(0, 100, 20):  # every 20 positions: two whole blocks of 10
        assert len({v // 10 for v in order[w:w + 20]}) == 2


def test_webdataset_indexed_same_samples_any_order(shards, image_files, tmp_path):
    # the shards' folder may be shared: index copies of them here
    src = _files(shards["tar"])
    for f in src:
        (tmp_path / os.path.basename(f)).write_bytes(open(f, "rb").read())
    files = [str(tmp_path / os.path.basename(f)) for f in src]
    seq = sluice.Dataset.webdataset(files, keys=("jpg", "cls"), with_keys=True)
    ds = sluice.Dataset.webdataset_indexed(files, keys=("jpg", "cls"), with_keys=True)
    assert ds.cardinality() == len(image_files)
    got = [(j, int(c), k) for j, c, k in ds]
    assert got == [(j, int(c), k) for j, c, k in seq]
    assert all(os.path.exists(f + ".idx") for f in files)
    mixed = [(j, int(c)) for j, c, _ in ds.shuffle(sluice.ALL, seed=3)]
    assert sorted(mixed) == sorted((j, c) for j, c, _ in got)
    assert mixed != [(j, c) for j, c, _ in got]
    # a state saved part way resumes where it was
    it = iter(ds.shuffle(sluice.ALL, seed=3))
    for _ in range(5):
        next(it)
    state = it.state()
    rest = [int(c) for _, c, _ in it]
    assert [int(c) for _, c, _ in ds.shuffle(sluice.ALL, seed=3).iterator(state=state)] == rest
    # damaged: a sample whose index no longer fits is an error naming the shard
    path = tmp_path / "bad.tar"
    path.write_bytes(_tar_bytes([("a.jpg", b"A"), ("a.cls", b"1"), ("b.jpg", b"B")]))
    with pytest.raises(sluice.CorruptDataError, match=r"bad\.tar.*has no 'cls'"):
        list(sluice.Dataset.webdataset_indexed(str(path)))
    assert [int(c) for _, c in sluice.Dataset.webdataset_indexed(str(path))
            .with_options(error_policy="skip")] == [1]
