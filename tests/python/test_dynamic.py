"""Data that changes while training runs, from Python: from_generator with
tf.data's names, the push Queue and from_queue, a rescanned image folder."""

import os
import queue
import threading

import numpy as np
import pytest

import sluice


def test_from_generator_signature():
    def gen(n):
        for i in range(n):
            yield np.arange(i % 4), i

    sig = (sluice.TensorSpec(shape=(None,), dtype="int64"), sluice.TensorSpec((), "int32"))
    ds = sluice.Dataset.from_generator(gen, args=(6,), output_signature=sig)
    assert ds.cardinality() == sluice.UNKNOWN
    got = [(a.tolist(), int(b), b.dtype) for a, b in ds]
    assert got == [([], 0, np.int32), ([0], 1, np.int32), ([0, 1], 2, np.int32),
                   ([0, 1, 2], 3, np.int32), ([], 4, np.int32), ([0], 5, np.int32)]
    # every pass calls the generator again: repeat, map, batch, prefetch over it
    out = list(ds.repeat(2).map(lambda a, b: b * 2).batch(4).prefetch(sluice.AUTOTUNE))
    assert [v.tolist() for v in out] == [[0, 2, 4, 6], [8, 10, 0, 2], [4, 6, 8, 10]]
    # the old names, and an iterable in place of a callable
    ds = sluice.Dataset.from_generator([1.5, 2.5], output_types="float32", output_shapes=())
    assert [float(v) for v in ds] == [1.5, 2.5] and [float(v) for v in ds] == [1.5, 2.5]
    assert sluice.TensorSpec((None, 3)).is_compatible_with(np.zeros((5, 3)))
    assert not sluice.TensorSpec((None, 3)).is_compatible_with(np.zeros((5, 2)))
    strings = sluice.Dataset.from_generator(lambda: iter(["a", "bc"]),
                                            output_signature=sluice.TensorSpec((), "string"))
    assert list(strings) == ["a", "bc"]


def test_from_generator_errors():
    def bad():
        yield np.zeros(3)
        yield np.zeros(4)

    ds = sluice.Dataset.from_generator(bad, output_signature=sluice.TensorSpec((3,), "float64"))
    it = iter(ds)
    assert next(it).shape == (3,)
    with pytest.raises(sluice.CallbackError) as e:
        next(it)
    assert isinstance(e.value.__cause__, TypeError)
    assert "shape (4,) where an element of shape (3,)" in str(e.value)

    def failing():
        yield 1
        raise ConnectionError("sensor went away")

    ds = sluice.Dataset.from_generator(failing)
    with pytest.raises(sluice.CallbackError, match="ConnectionError: sensor went away"):
        list(ds)
    # under the skip policy the stream goes on (here: it has ended)
    assert [int(v) for v in ds.with_options(error_policy="skip")] == [1]
    with pytest.raises(TypeError, match="a signature is a sluice.TensorSpec"):
        sluice.Dataset.from_generator(bad, output_signature={"x": "int64"})
    with pytest.raises(sluice.UnsupportedError, match="from_generator"):
        it = ds.iterator()
        next(it)
        it.state()


def test_generator_closed_when_pass_ends():
    closed = []

    def gen():
        try:
            for i in range(1000):
                yield i
        finally:
            closed.append(True)

    it = sluice.Dataset.from_generator(gen).iterator()
    assert int(next(it)) == 0
    it.close()  # the pass ends early: the generator is closed
    assert closed == [True]


def test_queue_stream():
    q = sluice.Queue(capacity_bytes=4096,
                     element_spec=(sluice.TensorSpec((100,), "float32"), sluice.TensorSpec((), "int64")))
    seen_full = []

    def producer():
        for i in range(200):
            q.put((np.full(100, i), i))
            seen_full.append(q.qsize())
        q.close()

    t = threading.Thread(target=producer)
    t.start()
    total, rows = 0, 0
    for x, y in sluice.Dataset.from_queue(q).batch(8).prefetch(2):
        assert x.shape[1:] == (100,) and x.dtype == np.float32
        assert (x[:, 0] == y).all()
        total += int(y.sum())
        rows += len(y)
    t.join()
    assert rows == 200 and total == sum(range(200))
    assert max(seen_full) <= 10  # 4 KiB holds 9 elements of 408 bytes
    with pytest.raises(sluice.StateError):
        q.put((np.zeros(100), 1))
    small = sluice.Queue(64)
    small.put(np.zeros(8))  # 64 bytes: full
    with pytest.raises(queue.Full):
        small.put_nowait(np.zeros(8))
    with pytest.raises(queue.Full):
        small.put(np.zeros(8), timeout=0.01)
    with pytest.raises(TypeError):
        sluice.Dataset.from_queue(object())


def test_image_folder_rescan(tmp_path):
    root = tmp_path / "stream"
    for cls, names in (("a", "12"), ("b", "12")):
        (root / cls).mkdir(parents=True)
        for n in names:
            (root / cls / (n + ".jpg")).write_bytes(b"%s/%s" % (cls.encode(), n.encode()))
    ds = sluice.Dataset.image_folder(str(root), rescan=True, with_paths=True)

    def epoch():
        return {os.path.relpath(p, str(root)): (bytes(b), int(l)) for b, l, p in ds}

    assert len(epoch()) == 4
    (root / "a" / "0.jpg").write_bytes(b"a/0")
    (root / "0new").mkdir()
    (root / "0new" / "x.jpg").write_bytes(b"0new/x")
    os.unlink(root / "b" / "1.jpg")
    got = epoch()  # under the default "fail" policy: the deleted file is skipped
    assert sorted(got) == ["0new/x.jpg", "a/0.jpg", "a/1.jpg", "a/2.jpg", "b/2.jpg"]
    assert got["0new/x.jpg"][1] == 2 and got["a/0.jpg"][1] == 0 and got["b/2.jpg"][1] == 1
    # tf.data-style: shuffle the whole (growing) folder each epoch
    (root / "b" / "3.jpg").write_bytes(b"b/3")
    shuffled = [os.path.relpath(p, str(root)) for _, _, p in ds.shuffle(sluice.ALL, seed=1)]
    assert "b/3.jpg" in shuffled and len(shuffled) == 6
    with pytest.raises(sluice.UnsupportedError, match="rescan|SL_FOLDER_RESCAN"):
        ds.distribute(rank=0, world_size=2)


def test_edge_profile_one_thread(image_dir):
    ds = (sluice.Dataset.image_folder(image_dir).shuffle(sluice.ALL, seed=2)
          .map_image(preset="train", size=24).batch(8).prefetch(sluice.AUTOTUNE))
    edge = [x.tobytes() for x, _ in ds.with_options(profile="edge").iterator(epoch=1)]
    plain = [x.tobytes() for x, _ in ds.with_options(threads=2).iterator(epoch=1)]
    assert edge == plain
    before = len(os.listdir("/proc/self/task"))
    it = ds.with_options(profile="edge").iterator(epoch=0, interruptible=False)
    next(it)
    # no thread started (<=: an io_uring worker of an earlier test may exit meanwhile)
    assert len(os.listdir("/proc/self/task")) <= before
    assert it.stat(4) == 64 << 20  # SL_STAT_RAM_BUDGET
    it.close()
    with pytest.raises(ValueError):
        sluice.Options(profile="tiny").to_c()


def test_cache_auto_placement(tmp_path):
    calls = []

    def slow(x):
        calls.append(1)
        return np.full(256, int(x), np.int64)

    ds = sluice.Dataset.range(40).map(slow).cache(sluice.AUTO, spill_dir=str(tmp_path))
    expect = [np.full(256, i, np.int64).tolist() for i in range(40)]
    for epoch in range(2):
        it = ds.iterator()
        assert [v.tolist() for v in it] == expect
        st = it.stats()
        assert st["cache_placement"] == "memory" and st["cache_bytes"] == 40 * 256 * 8
    assert len(calls) == 40  # the second pass came from memory
    with pytest.raises(ValueError, match="spill_dir"):
        sluice.Dataset.range(3).cache("x", spill_dir="/tmp")
