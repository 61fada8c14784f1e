"""tf.data's docstring examples (tensorflow/python/data/ops/dataset_ops.py)
for the ops sluice has, run through sluice with tf.data's expected output
written in. `tf.data.Dataset` becomes `sluice.Dataset`; tensors given as
Python lists stay lists.

Known differences, by design: Python ints become int64 arrays (numpy's
default; tf.data picks int32), so arrays are compared by value; tf.data's
`cardinality()` returns a tensor (`.numpy()`), sluice's an int; an
element_spec after a Python map has each value's dtype and rank with the
dimensions None (tf.data traces the function, sluice learns from the first
result). Examples that need what sluice lacks
(range(output_type=)) are left out.
"""

import numpy as np
import pytest

import sluice
from sluice import Dataset

tf_data = sluice  # so the examples read as written: tf_data.Dataset


def same(got, want):
    """tf.data's expected output against sluice's, structure and values."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (got, want)
        for k in want:
            same(got[k], want[k])
    elif isinstance(want, (list, tuple)):
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
    # each element a dict: map_func takes it as one argument
    elements = [{"a": 1, "b": "foo"}, {"a": 2, "b": "bar"}, {"a": 3, "b": "baz"}]
    dataset = tf_data.Dataset.from_generator(
        lambda: elements, {"a": "int32", "b": "string"})
    result = dataset.map(lambda d: str(d["a"]) + d["b"])
    same(list(result.as_numpy_iterator()), [b"1foo", b"2bar", b"3baz"])
    # the value map_func returns decides the structure of the elements
    dataset = tf_data.Dataset.range(3)

    def g(x):
        return 37.0, ["Foo", "Bar", "Baz"]
    result = dataset.map(g)
    assert result.element_spec == (tf_data.TensorSpec(shape=(), dtype="float32"),
                                   tf_data.TensorSpec(shape=(None,), dtype="string"))

    def h(x):
        return 37.0, ["Foo", "Bar"], np.array([1.0, 2.0], dtype=np.float64)
    result = dataset.map(h)
    assert result.element_spec == (tf_data.TensorSpec(shape=(), dtype="float32"),
                                   tf_data.TensorSpec(shape=(None,), dtype="string"),
                                   tf_data.TensorSpec(shape=(None,), dtype="float64"))

    def i(x):
        return (37.0, [42, 16]), "foo"
    result = dataset.map(i)
    assert result.element_spec == ((tf_data.TensorSpec(shape=(), dtype="float32"),
                                    tf_data.TensorSpec(shape=(None,), dtype="int64")),
                                   tf_data.TensorSpec(shape=(), dtype="string"))
    same(list(result.as_numpy_iterator())[0], ((37.0, array([42, 16])), b"foo"))


def test_dict_elements():
    # from_tensor_slices: the dictionary structure is preserved
    dataset = tf_data.Dataset.from_tensor_slices({"a": [1, 2], "b": [3, 4]})
    same(list(dataset.as_numpy_iterator()), [{"a": 1, "b": 3}, {"a": 2, "b": 4}])
    assert dataset.element_spec == {"a": tf_data.TensorSpec(shape=(), dtype="int64"),
                                    "b": tf_data.TensorSpec(shape=(), dtype="int64")}
    # batch batches each value of the structure
    dataset = tf_data.Dataset.from_tensor_slices({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    batched = list(dataset.batch(2).as_numpy_iterator())
    same(batched, [{"a": array([1, 2]), "b": array([b"x", b"y"], dtype=object)},
                   {"a": array([3]), "b": array([b"z"], dtype=object)}])
    assert dataset.batch(2, drop_remainder=True).element_spec == {
        "a": tf_data.TensorSpec(shape=(2,), dtype="int64"),
        "b": tf_data.TensorSpec(shape=(2,), dtype="string")}
    assert dataset.batch(2).element_spec["a"] == tf_data.TensorSpec(shape=(None,),
                                                                     dtype="int64")
    same(list(dataset.batch(2).unbatch().as_numpy_iterator()),
         [{"a": 1, "b": b"x"}, {"a": 2, "b": b"y"}, {"a": 3, "b": b"z"}])
    # nested tuples keep their nesting
    features = np.array([[1, 3], [2, 1], [3, 3]])
    labels = ["A", "B", "A"]
    dataset = tf_data.Dataset.from_tensor_slices(((features[:, 0], features[:, 1]), labels))
    same(list(dataset.as_numpy_iterator()), [((1, 3), b"A"), ((2, 1), b"B"), ((3, 3), b"A")])
    # from_tensors: one element of the structure
    dataset = tf_data.Dataset.from_tensors({"a": [1, 2, 3], "b": ("x", 1.5)})
    same(list(dataset.as_numpy_iterator()), [{"a": array([1, 2, 3]), "b": (b"x", 1.5)}])
    # filter and take see the dict too
    dataset = tf_data.Dataset.from_tensor_slices({"a": [1, 2, 3, 4], "b": [5, 6, 7, 8]})
    same(list(dataset.filter(lambda d: d["a"] % 2 == 0).take(1).as_numpy_iterator()),
         [{"a": 2, "b": 6}])


def test_zip():
    a = tf_data.Dataset.range(1, 4)  # ==> [ 1, 2, 3 ]
    b = tf_data.Dataset.range(4, 7)  # ==> [ 4, 5, 6 ]
    ds = tf_data.Dataset.zip(a, b)
    same(list(ds.as_numpy_iterator()), [(1, 4), (2, 5), (3, 6)])
    ds = tf_data.Dataset.zip(b, a)
    same(list(ds.as_numpy_iterator()), [(4, 1), (5, 2), (6, 3)])
    # The `datasets` argument may contain an arbitrary number of datasets.
    c = tf_data.Dataset.range(7, 13).batch(2)  # ==> [ [7, 8], [9, 10], [11, 12] ]
    ds = tf_data.Dataset.zip(a, b, c)
    same(list(ds.as_numpy_iterator()), [(1, 4, array([7, 8])), (2, 5, array([9, 10])),
                                        (3, 6, array([11, 12]))])
    # The number of elements in the resulting dataset is the same as the
    # size of the smallest dataset in `datasets`.
    d = tf_data.Dataset.range(13, 15)  # ==> [ 13, 14 ]
    ds = tf_data.Dataset.zip(a, d)
    same(list(ds.as_numpy_iterator()), [(1, 13), (2, 14)])
    # a dict or nested tuple of datasets (zip's `datasets` argument)
    ds = tf_data.Dataset.zip({"a": a, "bd": (b, d)})
    same(list(ds.as_numpy_iterator()), [{"a": 1, "bd": (4, 13)}, {"a": 2, "bd": (5, 14)}])
    assert ds.cardinality() == 2


def test_concatenate():
    a = tf_data.Dataset.range(1, 4)  # ==> [ 1, 2, 3 ]
    b = tf_data.Dataset.range(4, 8)  # ==> [ 4, 5, 6, 7 ]
    ds = a.concatenate(b)
    same(list(ds.as_numpy_iterator()), [1, 2, 3, 4, 5, 6, 7])
    # The input dataset and dataset to be concatenated should have
    # compatible element specs.
    c = tf_data.Dataset.zip((a, b))
    with pytest.raises(TypeError):
        a.concatenate(c)
    d = tf_data.Dataset.from_tensor_slices(["a", "b", "c"])
    with pytest.raises(TypeError):
        a.concatenate(d)


def test_choose_and_sample_from_datasets():
    datasets = [tf_data.Dataset.from_tensors("foo").repeat(),
                tf_data.Dataset.from_tensors("bar").repeat(),
                tf_data.Dataset.from_tensors("baz").repeat()]
    # Define a dataset containing `[0, 1, 2, 0, 1, 2, 0, 1, 2]`.
    choice_dataset = tf_data.Dataset.range(3).repeat(3)
    result = tf_data.Dataset.choose_from_datasets(datasets, choice_dataset)
    same(list(result.as_numpy_iterator()),
         [b"foo", b"bar", b"baz", b"foo", b"bar", b"baz", b"foo", b"bar", b"baz"])
    # sample_from_datasets: the proportions of the weights, in a seeded order
    dataset1 = tf_data.Dataset.range(0, 3)
    dataset2 = tf_data.Dataset.range(100, 103)
    sample_dataset = tf_data.Dataset.sample_from_datasets(
        [dataset1, dataset2], weights=[0.5, 0.5], seed=7)
    got = [int(x) for x in sample_dataset.as_numpy_iterator()]
    assert sorted(got) == [0, 1, 2, 100, 101, 102]
    assert [x for x in got if x < 100] == [0, 1, 2] and [x for x in got if x >= 100] == [100, 101, 102]
    again = [int(x) for x in sample_dataset.as_numpy_iterator()]  # the next epoch draws anew
    assert sorted(again) == sorted(got)
    ones = tf_data.Dataset.from_tensors(1).repeat()
    zeros = tf_data.Dataset.from_tensors(0).repeat()
    mix = tf_data.Dataset.sample_from_datasets([ones, zeros], weights=[0.8, 0.2], seed=1)
    share = np.mean([int(x) for x in mix.take(10000).as_numpy_iterator()])
    assert abs(share - 0.8) < 0.02


def test_enumerate_counter_random():
    dataset = tf_data.Dataset.from_tensor_slices([1, 2, 3])
    dataset = dataset.enumerate(start=5)
    same(list(dataset.as_numpy_iterator()), [(5, 1), (6, 2), (7, 3)])
    # The (nested) structure of the input dataset determines the structure
    # of elements in the resulting dataset.
    dataset = tf_data.Dataset.from_tensor_slices([(7, 8), (9, 10)])
    dataset = dataset.enumerate()
    same(list(dataset.as_numpy_iterator()), [(0, array([7, 8])), (1, array([9, 10]))])
    same(list(tf_data.Dataset.counter().take(5).as_numpy_iterator()), [0, 1, 2, 3, 4])
    same(list(tf_data.Dataset.counter(start=2).take(5).as_numpy_iterator()), [2, 3, 4, 5, 6])
    same(list(tf_data.Dataset.counter(start=2, step=5).take(5).as_numpy_iterator()),
         [2, 7, 12, 17, 22])
    same(list(tf_data.Dataset.counter(start=2, step=-1).take(5).as_numpy_iterator()),
         [2, 1, 0, -1, -2])
    ds1 = tf_data.Dataset.random(seed=4).take(10)
    ds2 = tf_data.Dataset.random(seed=4).take(10)
    assert list(ds1.as_numpy_iterator()) == list(ds2.as_numpy_iterator())


def test_take_while_unique_scan():
    dataset = tf_data.Dataset.range(10)
    dataset = dataset.take_while(lambda x: x < 5)
    same(list(dataset.as_numpy_iterator()), [0, 1, 2, 3, 4])
    dataset = tf_data.Dataset.from_tensor_slices([1, 37, 2, 37, 2, 1])
    dataset = dataset.unique()
    same(sorted(list(dataset.as_numpy_iterator())), [1, 2, 37])
    dataset = tf_data.Dataset.from_tensor_slices(["hello", "world", "hello"])
    dataset = dataset.unique()
    same(sorted(list(dataset.as_numpy_iterator())), [b"hello", b"world"])
    dataset = tf_data.Dataset.range(10)
    initial_state = np.int64(0)
    scan_func = lambda state, i: (state + i, state + i)  # noqa: E731 (as written)
    dataset = dataset.scan(initial_state=initial_state, scan_func=scan_func)
    same(list(dataset.as_numpy_iterator()), [0, 1, 3, 6, 10, 15, 21, 28, 36, 45])


def test_rebatch_flat_map_apply_reduce():
    ds = tf_data.Dataset.range(6)
    ds = ds.batch(2)
    ds = ds.rebatch(3)
    same(list(ds.as_numpy_iterator()), [array([0, 1, 2]), array([3, 4, 5])])
    ds = tf_data.Dataset.range(7)
    ds = ds.batch(4)
    ds = ds.rebatch(batch_size=3)
    same(list(ds.as_numpy_iterator()), [array([0, 1, 2]), array([3, 4, 5]), array([6])])
    dataset = tf_data.Dataset.from_tensor_slices([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    dataset = dataset.flat_map(tf_data.Dataset.from_tensor_slices)
    same(list(dataset.as_numpy_iterator()), [1, 2, 3, 4, 5, 6, 7, 8, 9])
    dataset = tf_data.Dataset.range(100)

    def dataset_fn(ds):
        return ds.filter(lambda x: x < 5)
    dataset = dataset.apply(dataset_fn)
    same(list(dataset.as_numpy_iterator()), [0, 1, 2, 3, 4])
    assert tf_data.Dataset.range(5).reduce(np.int64(0), lambda x, _: x + 1) == 5
    assert tf_data.Dataset.range(5).reduce(np.int64(0), lambda x, y: x + y) == 10
    assert tf_data.Dataset.from_tensor_slices([1]).get_single_element() == 1
    with pytest.raises(sluice.InvalidArgumentError):
        tf_data.Dataset.range(2).get_single_element()
    with pytest.raises(ValueError):
        tf_data.Dataset.range(0).get_single_element()


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


def test_padded_batch():
    A = (tf_data.Dataset
         .range(1, 5)
         .map(lambda x: np.full(x, x)))
    # Pad to the smallest per-batch size that fits all elements.
    B = A.padded_batch(2)
    same(list(B.as_numpy_iterator()), [array([[1, 0], [2, 2]]),
                                       array([[3, 3, 3, 0], [4, 4, 4, 4]])])
    # Pad to a fixed size.
    C = A.padded_batch(2, padded_shapes=5)
    same(list(C.as_numpy_iterator()), [array([[1, 0, 0, 0, 0], [2, 2, 0, 0, 0]]),
                                       array([[3, 3, 3, 0, 0], [4, 4, 4, 4, 0]])])
    # Pad with a custom value.
    D = A.padded_batch(2, padded_shapes=5, padding_values=-1)
    same(list(D.as_numpy_iterator()), [array([[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]]),
                                       array([[3, 3, 3, -1, -1], [4, 4, 4, 4, -1]])])
    # Components of nested elements can be padded independently.
    elements = [([1, 2, 3], [10]),
                ([4, 5], [11, 12])]
    dataset = tf_data.Dataset.from_generator(
        lambda: iter(elements), (np.int64, np.int64))
    # Pad the first component of the tuple to length 4, and the second
    # component to the smallest size that fits.
    dataset = dataset.padded_batch(2,
                                   padded_shapes=([4], [None]),
                                   padding_values=(-1, 100))
    same(list(dataset.as_numpy_iterator()), [(array([[1, 2, 3, -1], [4, 5, -1, -1]]),
                                              array([[10, 100], [11, 12]]))])
    # Pad with a single value and multiple components.
    E = tf_data.Dataset.zip((A, A)).padded_batch(2, padding_values=-1)
    same(list(E.as_numpy_iterator()), [(array([[1, -1], [2, 2]]), array([[1, -1], [2, 2]])),
                                       (array([[3, 3, 3, -1], [4, 4, 4, 4]]),
                                        array([[3, 3, 3, -1], [4, 4, 4, 4]]))])


def test_window():
    dataset = tf_data.Dataset.range(7).window(3)
    got = [list(window.as_numpy_iterator()) for window in dataset]
    assert got == [[0, 1, 2], [3, 4, 5], [6]]
    dataset = tf_data.Dataset.range(7).window(3, drop_remainder=True)
    got = [list(window.as_numpy_iterator()) for window in dataset]
    assert got == [[0, 1, 2], [3, 4, 5]]
    dataset = tf_data.Dataset.range(7).window(3, 2, drop_remainder=True)
    got = [list(window.as_numpy_iterator()) for window in dataset]
    assert got == [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
    dataset = tf_data.Dataset.range(7).window(3, 1, 2, drop_remainder=True)
    got = [list(window.as_numpy_iterator()) for window in dataset]
    assert got == [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
    dataset = tf_data.Dataset.from_tensor_slices(([1, 2, 3, 4, 5],
                                                  [6, 7, 8, 9, 10]))
    dataset = dataset.window(2)
    got = [tuple(list(w.as_numpy_iterator()) for w in windows) for windows in dataset]
    assert got == [([1, 2], [6, 7]), ([3, 4], [8, 9]), ([5], [10])]
    dataset = tf_data.Dataset.from_tensor_slices({'a': [1, 2, 3]})
    dataset = dataset.window(2)
    got = [{k: list(v.as_numpy_iterator()) for k, v in w.items()} for w in dataset]
    assert got == [{'a': [1, 2]}, {'a': [3]}]
    # flat_map sees each window as a dataset, as tf.data's does
    dataset = tf_data.Dataset.range(7).window(3, 2, 2)
    dataset = dataset.flat_map(lambda window: window.batch(3))
    same(list(dataset.as_numpy_iterator()),
         [array([0, 2, 4]), array([2, 4, 6]), array([4, 6]), array([6])])
    # ops that pass elements on keep them datasets
    dataset = tf_data.Dataset.range(7).window(3).prefetch(2).take(2)
    assert [list(w.as_numpy_iterator()) for w in dataset] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError):
        list(tf_data.Dataset.range(7).window(3).as_numpy_iterator())


def test_group_by_window():
    dataset = tf_data.Dataset.range(10)
    window_size = 5
    key_func = lambda x: x%2  # noqa: E731,E228 (as written)
    reduce_func = lambda key, dataset: dataset.batch(window_size)  # noqa: E731
    dataset = dataset.group_by_window(
              key_func=key_func,
              reduce_func=reduce_func,
              window_size=window_size)
    same(list(dataset.as_numpy_iterator()), [array([0, 2, 4, 6, 8]), array([1, 3, 5, 7, 9])])


def test_bucket_by_sequence_length():
    elements = [
      [0], [1, 2, 3, 4], [5, 6, 7],
      [7, 8, 9, 10, 11], [13, 14, 15, 16, 19, 20], [21, 22]]
    dataset = tf_data.Dataset.from_generator(
        lambda: elements, np.int64, output_shapes=[None])
    dataset = dataset.bucket_by_sequence_length(
            element_length_func=lambda elem: np.shape(elem)[0],
            bucket_boundaries=[3, 5],
            bucket_batch_sizes=[2, 2, 2])
    same(list(dataset.as_numpy_iterator()),
         [array([[1, 2, 3, 4], [5, 6, 7, 0]]),
          array([[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]]),
          array([[0, 0], [21, 22]])])
    dataset = tf_data.Dataset.from_generator(
        lambda: elements, np.int32, output_shapes=[None])
    dataset = dataset.bucket_by_sequence_length(
            element_length_func=lambda elem: np.shape(elem)[0],
            bucket_boundaries=[4, 7],
            bucket_batch_sizes=[2, 2, 2],
            pad_to_bucket_boundary=True,
            padding_values=-1)
    same(list(dataset.as_numpy_iterator()),
         [array([[0, -1, -1], [5, 6, 7]]),
          array([[1, 2, 3, 4, -1, -1], [7, 8, 9, 10, 11, -1]]),
          array([[21, 22, -1]]),
          array([[13, 14, 15, 16, 19, 20]])])


def test_ignore_errors():
    dataset = tf_data.Dataset.from_tensor_slices([1., 2., 0., 4.])
    # 1/0 raises an error in the map: ignore_errors drops that element
    dataset = dataset.map(lambda x: np.float32(1) / x if x else 1 // int(x))
    with pytest.raises(sluice.Error):
        list(dataset.as_numpy_iterator())
    dataset = dataset.ignore_errors()
    same(list(dataset.as_numpy_iterator()), [1.0, 0.5, 0.25])


def test_rejection_resample():
    initial_dist = [0.6, 0.4]
    n = 1000
    elems = np.random.RandomState(0).choice(len(initial_dist), size=n, p=initial_dist)
    dataset = tf_data.Dataset.from_tensor_slices(elems)
    zero, one = np.bincount(list(dataset.as_numpy_iterator())) / n
    assert abs(zero - 0.6) < 0.05 and abs(one - 0.4) < 0.05
    target_dist = [0.5, 0.5]
    dataset = dataset.rejection_resample(
       class_func=lambda x: x,
       target_dist=target_dist,
       initial_dist=initial_dist)
    dataset = dataset.map(lambda class_func_result, data: data)
    got = list(dataset.as_numpy_iterator())
    zero, one = np.bincount(got) / len(got)
    assert abs(zero - 0.5) < 0.05 and abs(one - 0.5) < 0.05


def test_save_load(tmp_path):
    import os
    path = os.path.join(str(tmp_path), "saved_data")
    # Save a dataset
    dataset = tf_data.Dataset.range(2)
    dataset.save(path)
    new_dataset = tf_data.Dataset.load(path)
    same([e for e in new_dataset], [0, 1])
    # a custom shard_func, as in save's docstring
    dataset = tf_data.Dataset.range(10)

    def custom_shard_func(element):
        return np.int64(0)
    dataset.save(path=path, shard_func=custom_shard_func)
    same(list(tf_data.Dataset.load(path).as_numpy_iterator()), list(range(10)))
    # the element_spec and cardinality come back with the elements
    dataset = tf_data.Dataset.from_tensor_slices({"a": [1, 2], "b": [[3, 4], [5, 6]]})
    dataset.save(path)
    new_dataset = tf_data.Dataset.load(path, element_spec=dataset.element_spec)
    assert new_dataset.element_spec == dataset.element_spec
    assert new_dataset.cardinality() == 2
    same(list(new_dataset.as_numpy_iterator()),
         [{"a": 1, "b": array([3, 4])}, {"a": 2, "b": array([5, 6])}])


def test_snapshot(tmp_path):
    dataset = tf_data.Dataset.range(5)
    dataset = dataset.snapshot(str(tmp_path / "snapshot"))
    same(list(dataset.as_numpy_iterator()), [0, 1, 2, 3, 4])
    same(list(dataset.as_numpy_iterator()), [0, 1, 2, 3, 4])
