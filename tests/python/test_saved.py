"""Dataset.save / Dataset.load / Dataset.snapshot through the binding:
structures and strings round trip, shard functions and compression,
resuming a loaded pass, what fails and how (the exception types a tf.data
user catches), and snapshots that spare the pipeline's work."""

import os

import numpy as np
import pytest

import sluice
from sluice import Dataset


def records(n=20):
    return Dataset.from_tensor_slices({
        "id": np.arange(n),
        "pair": (np.arange(n) * 2.0, np.arange(n * 3).reshape(n, 3).astype(np.uint8)),
        "name": [b"r%d" % i for i in range(n)],
    })


def values(ds):
    return [repr(v) for v in ds.as_numpy_iterator()]


@pytest.mark.parametrize("compression", [None, "ZLIB", "GZIP"])
def test_round_trip(tmp_path, compression):
    ds = records()
    path = str(tmp_path / "saved")
    ds.save(path, compression=compression, shard_func=lambda d: 7 - d["id"] % 4)
    back = Dataset.load(path, compression=compression)
    assert back.element_spec == ds.element_spec
    assert len(back) == 20
    assert values(back) == values(ds)
    # padded and batched elements too
    batched = Dataset.range(1, 9).map(lambda x: np.arange(x)).padded_batch(3)
    batched.save(path)
    assert values(Dataset.load(path)) == values(batched)


def test_resume(tmp_path):
    path = str(tmp_path / "saved")
    Dataset.range(100).shuffle(30, seed=4).save(path, shard_func=lambda x: x % 5)
    ds = Dataset.load(path)
    whole = list(ds.as_numpy_iterator())
    it = ds.iterator()
    head = [int(next(it)) for _ in range(37)]
    state = it.state()
    it.close()
    tail = [int(v) for v in ds.iterator(state=state)]
    assert head + tail == [int(v) for v in whole]


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_load_shuffles_by_position(tmp_path, compression):
    path = str(tmp_path / "saved")
    Dataset.range(500).save(path, compression=compression, shard_func=lambda x: x % 3)
    ds = Dataset.load(path).shuffle(sluice.ALL, seed=6, reshuffle_each_iteration=False)
    order = [int(v) for v in ds]
    assert sorted(order) == list(range(500)) and order != list(range(500))
    assert [int(v) for v in ds] == order  # the same seed, the same order
    # a state saved part way resumes by position
    it = ds.iterator()
    head = [int(next(it)) for _ in range(123)]
    state = it.state()
    it.close()
    assert head + [int(v) for v in ds.iterator(state=state)] == order
    # and the ranks of distribute, each its share
    shares = [[int(v) for v in ds.distribute(rank=r, world_size=3)] for r in range(3)]
    assert [len(s) for s in shares] == [167] * 3  # one element repeated: equal steps
    assert set(sum(shares, [])) == set(order)


def test_errors(tmp_path):
    path = str(tmp_path / "saved")
    with pytest.raises(FileNotFoundError):
        Dataset.load(path)
    with pytest.raises(ValueError):
        Dataset.range(3).save(path, compression="SNAPPY")
    with pytest.raises(NotImplementedError):
        Dataset.range(3).save(path, checkpoint_args={})
    with pytest.raises(NotImplementedError):
        Dataset.load(path, reader_func=lambda d: d)

    def bad(x):
        raise KeyError("no shard for %d" % x)
    with pytest.raises(sluice.CallbackError) as e:
        Dataset.range(3).save(path, shard_func=bad)
    assert isinstance(e.value.__cause__, KeyError)
    assert not os.path.exists(path)
    Dataset.range(3).save(path)
    with pytest.raises(ValueError):
        Dataset.load(path, element_spec={"x": sluice.TensorSpec((), "int64")})
    manifest = os.path.join(path, "manifest")
    with open(manifest, "r+b") as f:
        f.seek(40)
        f.write(b"#")
    with pytest.raises(sluice.CorruptDataError, match="manifest"):
        Dataset.load(path)


def test_snapshot_spares_the_pipeline(tmp_path):
    calls = []

    def slow(x):
        calls.append(int(x))
        return x * 10
    ds = Dataset.range(12).map(slow).snapshot(str(tmp_path / "snap"), compression="GZIP")
    assert [int(v) for v in ds] == [x * 10 for x in range(12)]
    assert len(calls) == 12
    assert [int(v) for v in ds] == [x * 10 for x in range(12)]
    assert len(calls) == 12  # read back: the map did not run
    # a pass cut short leaves no snapshot behind
    other = Dataset.range(50).snapshot(str(tmp_path / "snap2"))
    assert [int(v) for v in other.take(5)] == list(range(5))
    assert [f for f in os.listdir(str(tmp_path / "snap2")) if not f.endswith(".lock")] == []
