"""Yielded arrays view the C element's memory: no copy, freed when the last
view dies, never before, and nothing left behind over many epochs."""

import ctypes
import weakref

import numpy as np
import pytest

import sluice
from conftest import run_python, settle
from sluice import Dataset
from sluice._lib import lib


def batches(image_dir, epochs=1, size=32, batch=8):
    return (Dataset.image_folder(image_dir).shuffle(sluice.ALL, seed=0).repeat(epochs)
            .map_image(preset="train", size=size).batch(batch, drop_remainder=True)
            .prefetch(2).with_options(threads=2))


def drain(it):
    """Exhausts an iterator without keeping its last element alive."""
    for _ in it:
        pass


def test_arrays_view_element_memory(image_dir):
    it = batches(image_dir).iterator()
    ref = it.next_element()  # the raw element, to compare addresses
    images, labels = sluice._tensor.element_values(ref)
    t0, t1 = lib.sl_element_tensor(ref.ptr, 0), lib.sl_element_tensor(ref.ptr, 1)
    assert images.ctypes.data == lib.sl_tensor_data(t0)
    assert labels.ctypes.data == lib.sl_tensor_data(t1)
    assert images.nbytes == lib.sl_tensor_nbytes(t0)
    assert not images.flags.writeable and not images.flags.owndata
    with pytest.raises(ValueError):
        images[0, 0, 0, 0] = 1
    it.close()


def test_memory_outlives_iterator_and_batch_and_is_not_reused(image_dir):
    base = settle()
    it = batches(image_dir, epochs=2).iterator()
    kept = next(it)
    snapshot = [np.array(v) if isinstance(v, np.ndarray) else v for v in kept]
    # churn: later batches are allocated and freed while `kept` lives
    drain(it)
    it.close()
    del it
    settle()
    for v, s in zip(kept, snapshot):
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, s)
        else:
            assert v == s
    del v, s
    # a view of a view keeps it alive too
    crop = kept[0][2:4, 5:9]
    probe = np.array(crop)
    del kept
    settle()
    np.testing.assert_array_equal(crop, probe)
    assert sluice.memory_in_use() > base
    del crop
    assert settle() == base


def test_element_released_with_last_array(image_dir):
    it = batches(image_dir).iterator()
    images, labels = next(it)
    owner = images.base._sluice_element
    assert labels.base._sluice_element is owner
    w = weakref.ref(owner)
    del owner
    del images
    assert w() is not None  # labels still hold the element
    del labels
    assert w() is None
    it.close()


def test_no_leak_over_many_epochs(image_dir):
    ds = batches(image_dir, epochs=1, size=24, batch=6)
    for _ in range(2):  # warm the pools
        drain(iter(ds))
    base = settle()
    for _ in range(20):
        for x, y in ds:
            assert x.shape == (6, 24, 24, 3)
    del x, y
    assert settle() == base
    # and with the iterator kept, arrays kept for a while then dropped
    kept = []
    for epoch in range(5):
        for x, y in ds:
            kept.append(x)
        kept = kept[-3:]
    del kept, x, y
    assert settle() == base


def test_python_map_inputs_stay_valid_after_the_call():
    held = []
    ds = Dataset.from_tensor_slices(np.arange(40, dtype=np.int32).reshape(10, 4)).map(
        lambda v: held.append(v) or v.sum())
    assert [int(s) for s in ds] == [sum(range(4 * i, 4 * i + 4)) for i in range(10)]
    settle()
    assert [v.tolist() for v in held] == [list(range(4 * i, 4 * i + 4)) for i in range(10)]


def test_scalar_and_empty_tensors():
    (x, e), = list(Dataset.range(1).map(lambda x: (x, np.zeros((0, 3), np.float32))))
    assert x.shape == () and x.dtype == np.int64
    assert e.shape == (0, 3) and e.dtype == np.float32


def test_without_numpy_memoryviews():
    code = r"""
import sys
sys.modules["numpy"] = None  # import numpy fails
import gc, sluice
from sluice import Dataset
assert sluice.Array is None
out = list(Dataset.range(3).map(lambda x: (x, "p", 2.5)).batch(3))
(v, s, f), = out
assert isinstance(v, memoryview) and v.readonly and v.format == "q" and v.shape == (3,)
assert v.tolist() == [0, 1, 2] and s == ["p", "p", "p"] and f.tolist() == [2.5] * 3
base = sluice.memory_in_use()
img = memoryview(bytes(range(12))).cast("B", [2, 6])
a, = list(Dataset.range(1).map(lambda x: memoryview(bytes(range(24))).cast("h")))
assert a.format == "h" and a.tolist() == list(memoryview(bytes(range(24))).cast("h"))
del out, v, s, f, a
gc.collect(); sluice.release_memory()
print("ok")
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_buffer_exported_address_matches():
    # The ctypes buffer under an array is the element's memory, not a copy.
    x, = list(Dataset.from_tensor_slices(np.arange(8, dtype=np.float64).reshape(1, 8)))
    buf = x.base
    assert ctypes.addressof(buf) == x.ctypes.data
