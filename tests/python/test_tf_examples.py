"""tf.data's docstring examples (tensorflow/python/data/ops/dataset_ops.py)
for the ops sluice has, run through sluice with tf.data's expected output
written in. `tf.data.Dataset` becomes `sluice.Dataset`; tensors given as
Python lists stay lists.

Known differences, by design: Python ints become int64 arrays (numpy's
default; tf.data picks int32), so arrays are compared by value; tf.data's
`cardinality()` returns a tensor (`.numpy()`), sluice's an int. Examples
that need ops sluice lacks (zip, interleave, from_generator,
range(output_type=)) or dict elements are left out.
"""

import numpy as np

import sluice
from sluice import Dataset

tf_data = sluice  # so the examples read as written: tf_data.Dataset


def same(got, want):
    """tf.data's expected output against sluice's, structure and values."""
    if isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            same(g, w)
    elif isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.shape == want.shape, (got, want)
        assert got.tolist() == want.tolist(), (got, want)
    else:
        assert not isinstance(got, np.ndarray) or got.ndim == 0, (got, want)
        assert got == want and type(got) is not tuple, (got, want)


def array(values, dtype=None):
    return np.array(values, dtype=dtype)


def test_range():
    Dataset = tf_data.Dataset
    same(list(Dataset.range(5).as_numpy_iterator()), [0, 1, 2, 3, 4])
    same(list(Dataset.range(2, 5).as_numpy_iterator()), [2, 3, 4])
    same(list(Dataset.range(1, 5, 2).as_numpy_iterator()), [1, 3])
    same(list(Dataset.range(1, 5, -2).as_numpy_iterator()), [])
    same(list(Dataset.range(5, 1).as_numpy_iterator()), [])
    same(list(Dataset.range(5, 1, -2).as_numpy_iterator()), [5, 3])


def test_from_tensor_slices():
    # Slicing a 1D tensor produces scalar tensor elements.
    dataset = tf_data.Dataset.from_tensor_slices([1, 2, 3])
    same(list(dataset.as_numpy_iterator()), [1, 2, 3])
    # Slicing a 2D tensor produces 1D tensor elements.
    dataset = tf_data.Dataset.from_tensor_slices([[1, 2], [3, 4]])
    same(list(dataset.as_numpy_iterator()), [array([1, 2]), array([3, 4])])
    # Slicing a tuple of 1D tensors produces tuple elements containing
    # scalar tensors.
    dataset = tf_data.Dataset.from_tensor_slices(([1, 2], [3, 4], [5, 6]))
    same(list(dataset.as_numpy_iterator()), [(1, 3, 5), (2, 4, 6)])
    # A batched feature and label set.
    batched_features = np.array([[[1, 3], [2, 3]],
                                 [[2, 1], [1, 2]],
                                 [[3, 3], [3, 2]]]).reshape(3, 2, 2)
    batched_labels = np.array([['A', 'A'],
                               ['B', 'B'],
                               ['A', 'B']]).reshape(3, 2, 1)
    dataset = Dataset.from_tensor_slices((batched_features, batched_labels))
    same(list(dataset.as_numpy_iterator()), [
        (array([[1, 3], [2, 3]]), array([[b'A'], [b'A']], dtype=object)),
        (array([[2, 1], [1, 2]]), array([[b'B'], [b'B']], dtype=object)),
        (array([[3, 3], [3, 2]]), array([[b'A'], [b'B']], dtype=object)),
    ])


def test_map():
    dataset = Dataset.range(1, 6)  # ==> [ 1, 2, 3, 4, 5 ]
    dataset = dataset.map(lambda x: x + 1)
    same(list(dataset.as_numpy_iterator()), [2, 3, 4, 5, 6])
    # each element a tuple: map_func takes two arguments
    elements = [(1, "foo"), (2, "bar"), (3, "baz")]
    dataset = Dataset.from_tensor_slices(tuple(np.array(c) for c in zip(*elements)))
    result = dataset.map(lambda x_int, y_str: x_int)
    same(list(result.as_numpy_iterator()), [1, 2, 3])
    dataset = Dataset.range(1, 6)
    dataset = dataset.map(lambda x: x + 1, num_parallel_calls=tf_data.AUTOTUNE,
                          deterministic=False)
    same(sorted(dataset.as_numpy_iterator()), [2, 3, 4, 5, 6])


def test_filter():
    dataset = tf_data.Dataset.from_tensor_slices([1, 2, 3])
    dataset = dataset.filter(lambda x: x < 3)
    same(list(dataset.as_numpy_iterator()), [1, 2])

    def filter_fn(x):
        return x == 1
    dataset = dataset.filter(filter_fn)
    same(list(dataset.as_numpy_iterator()), [1])


def test_batch():
    dataset = tf_data.Dataset.range(8)
    dataset = dataset.batch(3)
    same(list(dataset.as_numpy_iterator()), [array([0, 1, 2]), array([3, 4, 5]), array([6, 7])])
    dataset = tf_data.Dataset.range(8)
    dataset = dataset.batch(3, drop_remainder=True)
    same(list(dataset.as_numpy_iterator()), [array([0, 1, 2]), array([3, 4, 5])])


def test_unbatch():
    # tf.data's example unbatches ragged rows from a generator; the same
    # with rows of one length
    dataset = tf_data.Dataset.from_tensor_slices([[1, 2, 3], [4, 5, 6]]).unbatch()
    same(list(dataset.as_numpy_iterator()), [1, 2, 3, 4, 5, 6])


def test_shuffle():
    # tf.data's outputs here are random ("doctest: +SKIP"); what they show
    # is which orders repeat
    dataset = tf_data.Dataset.range(3)
    dataset = dataset.shuffle(3, reshuffle_each_iteration=True, seed=5)
    dataset = dataset.repeat(2)
    out = list(dataset.as_numpy_iterator())  # e.g. [1, 0, 2, 1, 2, 0]
    assert sorted(out[:3]) == sorted(out[3:]) == [0, 1, 2]

    dataset = tf_data.Dataset.range(3)
    dataset = dataset.shuffle(3, reshuffle_each_iteration=False, seed=5)
    dataset = dataset.repeat(2)
    out = list(dataset.as_numpy_iterator())  # e.g. [1, 0, 2, 1, 0, 2]
    assert out[:3] == out[3:] and sorted(out[:3]) == [0, 1, 2]

    # iterating again is a new epoch: a new order unless asked otherwise
    dataset = tf_data.Dataset.range(30)
    dataset = dataset.shuffle(30, reshuffle_each_iteration=True, seed=5)
    assert list(dataset.as_numpy_iterator()) != list(dataset.as_numpy_iterator())
    dataset = tf_data.Dataset.range(30)
    dataset = dataset.shuffle(30, reshuffle_each_iteration=False, seed=5)
    assert list(dataset.as_numpy_iterator()) == list(dataset.as_numpy_iterator())


def test_repeat_take_skip():
    dataset = tf_data.Dataset.from_tensor_slices([1, 2, 3])
    dataset = dataset.repeat(3)
    same(list(dataset.as_numpy_iterator()), [1, 2, 3, 1, 2, 3, 1, 2, 3])
    dataset = tf_data.Dataset.range(10)
    dataset = dataset.take(3)
    same(list(dataset.as_numpy_iterator()), [0, 1, 2])
    dataset = tf_data.Dataset.range(10)
    dataset = dataset.skip(7)
    same(list(dataset.as_numpy_iterator()), [7, 8, 9])


def test_shard():
    A = tf_data.Dataset.range(10)
    B = A.shard(num_shards=3, index=0)
    same(list(B.as_numpy_iterator()), [0, 3, 6, 9])
    C = A.shard(num_shards=3, index=1)
    same(list(C.as_numpy_iterator()), [1, 4, 7])
    D = A.shard(num_shards=3, index=2)
    same(list(D.as_numpy_iterator()), [2, 5, 8])


def test_prefetch():
    dataset = tf_data.Dataset.range(3)
    dataset = dataset.prefetch(2)
    same(list(dataset.as_numpy_iterator()), [0, 1, 2])


def test_cache():
    calls = []
    dataset = tf_data.Dataset.range(5)
    dataset = dataset.map(lambda x: calls.append(int(x)) or x**2)
    dataset = dataset.cache()
    # The first time reading through the data will generate the data using
    # `range` and `map`.
    same(list(dataset.as_numpy_iterator()), [0, 1, 4, 9, 16])
    # Subsequent iterations read from the cache.
    same(list(dataset.as_numpy_iterator()), [0, 1, 4, 9, 16])
    assert len(calls) == 5


def test_as_numpy_iterator():
    dataset = tf_data.Dataset.from_tensor_slices([1, 2, 3])
    assert [int(element) for element in dataset] == [1, 2, 3]
    out = [element for element in dataset.as_numpy_iterator()]
    assert [str(e) for e in out] == ["1", "2", "3"]  # print(element)
    assert all(isinstance(e, np.int64) for e in out)
    same(list(dataset.as_numpy_iterator()), [1, 2, 3])


def test_cardinality():
    dataset = tf_data.Dataset.range(42)
    assert dataset.cardinality() == 42
    dataset = dataset.repeat()
    assert dataset.cardinality() == sluice.INFINITE
    dataset = dataset.filter(lambda x: True)
    assert dataset.cardinality() == sluice.UNKNOWN


def test_with_options():
    ds = tf_data.Dataset.range(50)
    ds = ds.map(lambda x: x, num_parallel_calls=3)
    options = sluice.Options()
    # This will make the parallel map's order non-deterministic.
    options.deterministic = False
    ds = ds.with_options(options)
    assert sorted(int(x) for x in ds) == list(range(50))
