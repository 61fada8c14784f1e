"""DLPack: sluice arrays go into torch (and numpy) without a copy, the
element is released when the consumer's tensor dies, and the release (C
code, no Python callback) is safe with an exception pending, on any thread
and at interpreter shutdown."""

import gc

import numpy as np
import pytest

import sluice
from conftest import run_python, settle
from sluice import Dataset

try:
    import torch
except ImportError:  # the tests that need it skip with the reason
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed "
                                 "(apt install python3-torch); DLPack into torch not tested")


def image_batches(image_dir, with_paths=True, **map_kw):
    return (Dataset.image_folder(image_dir, with_paths=with_paths)
            .map_image(preset="eval", size=16, **map_kw)
            .batch(4, drop_remainder=True).prefetch(2).with_options(threads=2))


def test_dlpack_device_and_numpy_consumer():
    x, = list(Dataset.from_tensor_slices(np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)))
    assert x.__dlpack_device__() == (1, 0)
    y = np.from_dlpack(x)  # numpy consumes our capsule
    assert y.ctypes.data == x.ctypes.data and y.shape == x.shape and y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)
    # views with strides go through as strides
    v = x[:, ::2, 1:]
    w = np.from_dlpack(v)
    assert w.ctypes.data == v.ctypes.data
    np.testing.assert_array_equal(w, v)


def test_unconsumed_capsule_releases():
    def one():
        return list(Dataset.range(1).map(lambda v: np.ones(5000, np.int16)))[0]
    for _ in range(2):  # the pools' steady state
        one()
    base = settle()
    x = one()
    cap = x.__dlpack__()
    del x
    settle()
    assert sluice.memory_in_use() > base  # the capsule's tensor holds the element
    del cap
    gc.collect()
    assert settle() == base


def test_arrays_not_of_sluice_memory():
    x, = list(Dataset.range(1).map(lambda v: np.arange(6, dtype=np.int32)))
    y = x + 1  # numpy's memory (still a sluice.Array)
    assert np.from_dlpack(y).tolist() == list(range(1, 7))
    y.flags.writeable = False
    with pytest.raises(BufferError):
        y.__dlpack__()


def test_dlpack_rejects_streams_and_negative_strides():
    x, = list(Dataset.range(1).map(lambda v: np.arange(6, dtype=np.int32)))
    with pytest.raises(BufferError):
        x.__dlpack__(stream=5)
    with pytest.raises(BufferError):
        x[::-1].__dlpack__()


@needs_torch
def test_torch_from_dlpack_zero_copy_and_lifetime(image_dir):
    base = settle()
    it = image_batches(image_dir).iterator()
    images, labels, paths = next(it)
    it.close()
    del it
    t = torch.from_dlpack(images)
    lt = torch.utils.dlpack.from_dlpack(labels.__dlpack__())
    assert t.data_ptr() == images.ctypes.data and lt.data_ptr() == labels.ctypes.data
    assert t.dtype == torch.uint8 and tuple(t.shape) == images.shape
    assert lt.dtype == torch.int64 and lt.tolist() == labels.tolist()
    np.testing.assert_array_equal(t.numpy(), images)
    keep = np.array(images)
    del images, labels, paths
    settle()
    # the torch tensors alone keep the element alive
    assert sluice.memory_in_use() > base
    np.testing.assert_array_equal(t.numpy(), keep)
    del lt
    settle()
    assert sluice.memory_in_use() > base
    np.testing.assert_array_equal(t.numpy(), keep)
    del t
    assert settle() == base


@needs_torch
def test_torch_dtypes_roundtrip():
    arrays = [np.arange(6, dtype=d).reshape(2, 3) for d in
              (np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64)]
    el = next(iter(Dataset.from_tensor_slices(tuple(a[None] for a in arrays))))
    for a, v in zip(arrays, el):
        t = torch.from_dlpack(v)
        assert t.data_ptr() == v.ctypes.data
        assert t.numpy().dtype == a.dtype
        np.testing.assert_array_equal(t.numpy(), a)


@needs_torch
def test_sluice_torch_loader(image_dir, image_files):
    import sluice.torch as st
    ds = image_batches(image_dir)
    base = settle()
    loader = st.DataLoader(ds)
    got = list(loader)
    assert len(got) == len(image_files) // 4
    x, y, p = got[0]
    assert isinstance(x, torch.Tensor) and x.dtype == torch.uint8
    assert tuple(x.shape) == (4, 3, 16, 16)  # NCHW view of the NHWC batch
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert y.dtype == torch.int64 and y.tolist() == [l for _, l in image_files[:4]]
    assert p == [f for f, _ in image_files[:4]]
    # the same bytes as the numpy path
    ref = next(iter(ds))[0]
    np.testing.assert_array_equal(x.permute(0, 2, 3, 1).numpy(), ref)
    del ref
    # statistics of the pass just finished
    assert isinstance(loader.stats(), dict)
    assert "prefetch" in loader.report()
    # float32 with normalisation, in torch; the same as map_image's in C
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    fx = next(iter(st.DataLoader(ds, dtype=torch.float32, mean=mean, std=std)))[0]
    cx = next(iter(st.DataLoader(image_batches(image_dir, dtype="float32"))))[0]
    assert fx.dtype == cx.dtype == torch.float32 and fx.shape == cx.shape
    assert torch.allclose(fx, cx, atol=1e-4)
    chw = next(iter(st.DataLoader(image_batches(image_dir, layout="CHW"))))[0]
    assert tuple(chw.shape) == (4, 3, 16, 16) and torch.equal(chw, x)
    nhwc = next(iter(st.DataLoader(ds, layout=None)))[0]
    assert tuple(nhwc.shape) == (4, 16, 16, 3)
    loader.close()
    del got, x, y, p, fx, cx, chw, nhwc
    assert settle() == base


@needs_torch
def test_torch_trains_on_a_batch(image_dir):
    import sluice.torch as st
    loader = st.DataLoader(image_batches(image_dir, with_paths=False), dtype=torch.float32)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(4, 3))
    x, y = next(iter(loader))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    assert torch.isfinite(loss)
    loader.close()


# ---- the deleter in hard places (each in a fresh interpreter) ----

LOOP = r"""
import sys, sluice, sluice.torch, torch
from sluice import Dataset
ds = (Dataset.image_folder(sys.argv[1], with_paths=True).map_image(preset="eval", size=16)
      .batch(4).prefetch(2).with_options(threads=2))
"""


def run_clean(code, image_dir):
    r = run_python(code.replace("sys.argv[1]", repr(image_dir)))
    assert r.returncode == 0, r.stderr
    assert "Exception ignored" not in r.stderr and "SystemError" not in r.stderr, r.stderr
    assert "ArgumentError" not in r.stderr, r.stderr
    return r


@needs_torch
def test_release_with_an_exception_pending(image_dir):
    # unpacking three values into two raises while the batch's tensors are
    # alive; they die as the exception unwinds the loop
    r = run_clean(LOOP + r"""
for attempt in range(3):
    try:
        for x, y in sluice.torch.DataLoader(ds):
            pass
    except ValueError as e:
        print("ValueError", e)
""", image_dir)
    assert r.stdout.count("ValueError too many values to unpack") == 3, r.stdout


@needs_torch
def test_release_on_another_thread(image_dir):
    r = run_clean(LOOP + r"""
import gc, threading
def settle():
    gc.collect(); sluice.release_memory(); return sluice.memory_in_use()
loader = sluice.torch.DataLoader(ds)
base = settle()
held = [x for x, y, p in loader]
loader.close()
assert sluice.memory_in_use() > base
t = threading.Thread(target=held.clear)
t.start(); t.join()
print("leaked", settle() - base)
""", image_dir)
    assert r.stdout.split() == ["leaked", "0"], r.stdout


@needs_torch
def test_release_at_shutdown(image_dir):
    # tensors alive in module globals and in a reference cycle when the
    # interpreter exits, one of them made from an unconsumed capsule
    r = run_clean(LOOP + r"""
keep = list(sluice.torch.DataLoader(ds))
cycle = [keep[0][0]]
cycle.append(cycle)
cap = next(iter(ds))[0].__dlpack__()
print("done")
""", image_dir)
    assert r.stdout.strip() == "done" and r.stderr == ""
