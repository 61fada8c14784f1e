"""The conventions a tf.data or PyTorch user already writes: tf.data's
keyword names and meanings, (images, labels) pairs, single values bare, and
exceptions that are the builtins such code catches."""

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import sluice
from sluice import Dataset

try:
    import torch
except ImportError:
    torch = None


def ints(ds):
    return [int(x) for x in ds]


# ---- tf.data's keywords ----

def test_tf_data_keywords():
    assert sluice.AUTOTUNE == -1
    r = Dataset.range(20)
    assert ints(r.map(lambda x: x * 2, num_parallel_calls=2, deterministic=True)) == \
        [2 * i for i in range(20)]
    assert sorted(ints(r.map(lambda x: x, num_parallel_calls=sluice.AUTOTUNE,
                             deterministic=False))) == list(range(20))
    assert ints(r.filter(lambda x: x % 2 == 0, name="even")) == list(range(0, 20, 2))
    assert sorted(ints(r.shuffle(buffer_size=5, seed=1, reshuffle_each_iteration=True))) == \
        list(range(20))
    assert ints(r.prefetch(buffer_size=2)) == list(range(20))
    assert ints(r.take(count=3).repeat(count=2)) == [0, 1, 2] * 2
    assert ints(r.skip(count=17)) == [17, 18, 19]
    assert ints(r.shard(num_shards=5, index=3)) == [3, 8, 13, 18]
    batches = [b.tolist() for b in r.batch(batch_size=8, drop_remainder=True,
                                           num_parallel_calls=sluice.AUTOTUNE,
                                           deterministic=True)]
    assert batches == [list(range(8)), list(range(8, 16))]
    assert [b.tolist() for b in r.batch(8, num_parallel_calls=2)][-1] == [16, 17, 18, 19]
    calls = []
    cached = r.take(4).map(lambda x: calls.append(1) or x).cache(filename="")
    assert ints(cached.repeat(3)) == [0, 1, 2, 3] * 3 and len(calls) == 4  # "" is memory
    for bad in (0, -2):
        with pytest.raises(ValueError, match="num_parallel_calls"):
            r.map(lambda x: x, num_parallel_calls=bad)
    with pytest.raises(TypeError):
        r.map(lambda x: x, parallelism=2)  # the old name is gone: one spelling
    with pytest.raises(TypeError):
        r.take("3")


def test_map_image_num_parallel_calls(image_dir):
    a = Dataset.image_folder(image_dir).map_image("eval", 16, num_parallel_calls=1).batch(36)
    b = Dataset.image_folder(image_dir).map_image("eval", 16, num_parallel_calls=3).batch(36)
    (x1, y1), = list(a)
    (x2, y2), = list(b)
    assert x1.tobytes() == x2.tobytes() and y1.tolist() == y2.tolist()


def test_cache_file_by_keyword(tmp_path):
    path = str(tmp_path / "c.bin")
    ds = Dataset.range(5).cache(filename=path)
    assert ints(ds) == list(range(5)) and os.path.exists(path)


# ---- element structure ----

def test_single_values_are_bare_and_tuples_are_tuples():
    x = next(iter(Dataset.range(3)))
    assert isinstance(x, np.ndarray) and x.shape == ()
    assert isinstance(next(iter(Dataset.range(3).batch(2))), np.ndarray)
    pair = next(iter(Dataset.range(3).map(lambda v: (v, v + 1))))
    assert isinstance(pair, tuple) and len(pair) == 2
    # map is called with the element's values, tf.data's way
    assert ints(Dataset.range(3).map(lambda v: (v, v * 10)).map(lambda a, b: a + b)) == \
        [0, 11, 22]


def test_pairs_from_labelled_sources(image_dir, image_files):
    for images, labels in Dataset.image_folder(image_dir).map_image("eval", 16).batch(32):
        assert images.shape[1:] == (16, 16, 3) and labels.dtype == np.int64
        assert len(images) == len(labels)
    (images, labels, paths), = list(Dataset.image_folder(image_dir, with_paths=True)
                                    .map_image("eval", 16).batch(100))
    assert paths == [p for p, _ in image_files]
    assert labels.tolist() == [l for _, l in image_files]


@pytest.mark.skipif(torch is None, reason="torch is not installed (apt install python3-torch)")
def test_pairs_into_torch(image_dir):
    for images, labels in Dataset.image_folder(image_dir).map_image("eval", 16).batch(32):
        ti, tl = torch.from_dlpack(images), torch.from_dlpack(labels)
        assert ti.data_ptr() == images.ctypes.data and tl.data_ptr() == labels.ctypes.data
        assert tl.tolist() == labels.tolist()


def test_path_named_in_errors_without_paths(image_dir, tmp_path):
    import shutil
    root = tmp_path / "broken"
    shutil.copytree(image_dir, root)
    bad = root / sorted(os.listdir(root))[0] / "00_bad.jpg"
    bad.write_bytes(b"GIF89a not a jpeg at all" * 10)
    with pytest.raises(sluice.CorruptDataError, match=str(bad)):
        list(Dataset.image_folder(str(root)).map_image("eval", 16).batch(8))

    def boom(data, label):
        raise KeyError("no")
    # a Python function's failure names the file of its element too
    with pytest.raises(sluice.CallbackError, match=r"map\(boom\): %s/\w+/\w+\.jpg: KeyError"
                       % root):
        list(Dataset.image_folder(str(root)).map(boom))


# ---- exceptions ----

BUILTINS = {
    "OutOfMemoryError": MemoryError, "InvalidArgumentError": ValueError,
    "InputOutputError": OSError, "NotFoundError": FileNotFoundError,
    "CorruptDataError": ValueError, "ShapeError": ValueError, "DTypeError": TypeError,
    "CanceledError": RuntimeError, "BusyError": OSError, "OutOfRangeError": ValueError,
    "UnsupportedError": ValueError, "CallbackError": RuntimeError,
    "TooManyErrorsError": RuntimeError, "StateError": RuntimeError,
    "InternalError": RuntimeError, "PermissionDeniedError": PermissionError,
    "StateMismatchError": ValueError,
}


def test_exception_classes():
    from sluice import _errors
    for name, builtin in BUILTINS.items():
        cls = getattr(sluice, name)
        assert issubclass(cls, sluice.Error) and issubclass(cls, builtin), name
        # real classes, written out in the module (what IDEs and type
        # checkers read), not made with type() at import
        assert "\nclass %s(Error, " % name in inspect.getsource(_errors), name
        e = cls(cls.code, "text")
        assert str(e) == "text" and e.code == cls.code and cls.__module__ == "sluice"
    assert sorted(BUILTINS) == sorted(n for n in _errors.__all__ if n != "Error")
    import pickle
    e = pickle.loads(pickle.dumps(sluice.NotFoundError(-4, "gone")))
    assert type(e) is sluice.NotFoundError and e.code == -4 and str(e) == "gone"


def test_builtins_catch_real_failures(tmp_path):
    with pytest.raises(FileNotFoundError):
        Dataset.image_folder(str(tmp_path / "nothing"))
    with pytest.raises(FileNotFoundError):
        list(Dataset.from_files([str(tmp_path / "missing.jpg")]))
    with pytest.raises(ValueError):
        Dataset.range(10).batch(0)
    with pytest.raises(ValueError):
        Dataset.range(10).filter(lambda x: True).shuffle(sluice.ALL)
    with pytest.raises(ValueError):  # shapes of a batch disagree
        list(Dataset.range(3).map(lambda x: np.zeros(int(x) + 1)).batch(3))
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    with pytest.raises(ValueError):  # an empty file is corrupt data
        list(Dataset.from_files([str(empty)]))


UNREADABLE = r"""
import os, sys
os.setgid(65534)
os.setuid(65534)
import sluice
try:
    list(sluice.Dataset.from_files([sys.argv[1]]))
except PermissionError as e:
    print(type(e).__name__, e)
"""


def test_permission_error(tmp_path):
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(b"\xff\xd8\xff")
    secret.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(PermissionError, match=str(secret)):
            list(Dataset.from_files([str(secret)]))
        return
    # root reads anything: ask as "nobody" in a child
    r = subprocess.run([sys.executable, "-c", UNREADABLE, str(secret)], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ))
    if "Operation not permitted" in r.stderr or "PermissionError: [Errno 1]" in r.stderr:
        pytest.skip("root, and cannot become nobody here")
    if r.returncode != 0 and "cannot load the C library" in r.stderr:
        pytest.skip("nobody cannot read the library under test: %s" % r.stderr.strip())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("PermissionDeniedError read: %s: Permission denied" % secret), \
        r.stdout
