"""Structured elements: dicts and nested tuples through every kind of op,
map_image taking its image by key, sluice.torch's dicts of tensors, and the
structure a Python source or map learns from its first value."""

import numpy as np
import pytest

import sluice
from sluice import Dataset, TensorSpec


def test_map_receives_and_returns_structures():
    ds = Dataset.from_tensor_slices({"x": np.arange(6), "y": np.arange(6) * 10})
    # a dict comes as one argument; the result's structure is the new one
    nested = ds.map(lambda d: ({"sum": d["x"] + d["y"]}, (d["x"], "s%d" % d["x"])))
    got = list(nested)
    assert got[2] == ({"sum": 22}, (2, "s2"))
    assert isinstance(got[0][0], dict) and isinstance(got[0][1], tuple)
    # a tuple comes unpacked into arguments, even nested ones
    back = nested.map(lambda a, b: {"n": b[0], "total": a["sum"]})
    assert [(int(d["n"]), int(d["total"])) for d in back] == [(i, 11 * i) for i in range(6)]
    # batch batches every leaf; shuffle, take, prefetch keep the structure
    b = next(iter(back.shuffle(6, seed=1).take(4).batch(4).prefetch(2)))
    assert sorted(b) == ["n", "total"] and b["n"].shape == (4,)
    assert [t // 11 for t in b["total"].tolist()] == b["n"].tolist()


def test_results_must_keep_their_structure():
    ds = Dataset.range(4).map(lambda x: {"a": x} if x < 2 else (x, x))
    with pytest.raises(sluice.CallbackError, match="same structure") as e:
        list(ds)
    assert isinstance(e.value.__cause__, TypeError)
    # under skip, the odd ones out are dropped
    assert [d["a"] for d in ds.with_options(error_policy="skip")] == [0, 1]


def test_element_spec_learns_a_map_by_taking_one_element():
    calls = []

    def f(x):
        calls.append(1)
        return {"v": x, "w": np.zeros((2, 3), np.float32)}

    ds = Dataset.range(5).map(f).batch(2)
    spec = ds.element_spec  # the map has not run: one element goes through
    assert spec == {"v": TensorSpec((None,), "int64"),
                    "w": TensorSpec((None, None, None), "float32")}
    assert len(calls) >= 1
    n = len(calls)
    assert ds.element_spec == spec and len(calls) == n  # known from now on
    assert Dataset.range(0).map(f).element_spec is None  # nothing to learn from


def test_generator_and_queue_learn_or_are_told():
    def gen():
        for i in range(3):
            yield {"id": i, "name": "n%d" % i}

    ds = Dataset.from_generator(gen)
    assert [(int(d["id"]), d["name"]) for d in ds] == [(0, "n0"), (1, "n1"), (2, "n2")]
    assert ds.element_spec == {"id": TensorSpec((), "int64"), "name": TensorSpec((), "string")}

    def odd():
        yield {"a": 1}
        yield (1, 2)

    with pytest.raises(sluice.CallbackError, match="changed structure"):
        list(Dataset.from_generator(odd))
    # a signature states it before any value: nested, converted, checked
    sig = {"img": TensorSpec((2, 2), "uint8"), "meta": (TensorSpec((), "int64"),
                                                        TensorSpec((), "string"))}
    told = Dataset.from_generator(lambda: iter([{"img": [[1, 2], [3, 4]], "meta": (7, "x")}]),
                                  output_signature=sig)
    assert told.element_spec == sig
    (el,) = list(told)
    assert el["img"].dtype == np.uint8 and el["meta"] == (7, "x")
    with pytest.raises(sluice.CallbackError, match="keys"):
        list(Dataset.from_generator(lambda: iter([{"img": 1}]), output_signature=sig))
    # a queue of dicts
    q = sluice.Queue(1 << 20)
    reader = Dataset.from_queue(q)
    q.put({"b": np.arange(3), "a": "first"})
    q.put({"a": "second", "b": np.arange(3) + 1})
    with pytest.raises(TypeError, match="changed structure"):
        q.put(("not", "a dict"))
    q.close()
    got = list(reader)
    assert [d["a"] for d in got] == ["first", "second"]
    assert got[1]["b"].tolist() == [1, 2, 3]


def test_map_image_takes_the_image_by_key(image_dir, image_files):
    paths = [p for p, _ in image_files[:6]]
    labels = np.array([lab for _, lab in image_files[:6]])
    raw = Dataset.from_files(paths, labels)
    as_dict = raw.map(lambda img, lab: {"label": lab, "image": img})
    # "image" by default, and the rest stays in place
    b = next(iter(as_dict.map_image("eval", 16).batch(6)))
    assert sorted(b) == ["image", "label"]
    assert b["image"].shape == (6, 16, 16, 3) and b["label"].tolist() == labels.tolist()
    ref = next(iter(raw.map_image("eval", 16).batch(6)))[0]
    assert np.array_equal(b["image"], ref)
    # a key of its own, or a path into nested elements
    named = raw.map(lambda img, lab: {"a_label": lab, "pixels": (img, "meta")})
    out = next(iter(named.map_image("eval", 16, image_key=("pixels", 0)).batch(6)))
    assert out["pixels"][0].shape == (6, 16, 16, 3) and out["pixels"][1] == ["meta"] * 6
    assert np.array_equal(out["pixels"][0], ref)
    with pytest.raises(KeyError, match="no image at 'photo'"):
        as_dict.map_image("eval", 16, image_key="photo")


def test_torch_yields_dicts_of_tensors(image_dir, image_files):
    torch = pytest.importorskip("torch")
    import sluice.torch as st
    paths = [p for p, _ in image_files[:8]]
    labels = np.array([lab for _, lab in image_files[:8]])
    ds = (Dataset.from_files(paths, labels)
          .map(lambda img, lab: {"image": img, "label": lab})
          .map_image("eval", 16).batch(4))
    batches = list(st.DataLoader(ds))
    assert len(batches) == 2
    b = batches[0]
    assert isinstance(b, dict) and sorted(b) == ["image", "label"]
    assert isinstance(b["image"], torch.Tensor) and tuple(b["image"].shape) == (4, 3, 16, 16)
    assert b["label"].dtype == torch.int64 and b["label"].tolist() == labels[:4].tolist()


def test_interleave_of_structured_datasets():
    def per(i):
        return Dataset.from_tensor_slices({"i": np.full(3, i), "j": np.arange(3)})

    ds = Dataset.range(2).interleave(per, cycle_length=2, block_length=1)
    got = [(int(d["i"]), int(d["j"])) for d in ds]
    assert got == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    # inner datasets that learn their structure from their first element
    ds = Dataset.range(3).interleave(
        lambda i: Dataset.range(2).map(lambda j: {"i": i, "j": j}), cycle_length=2)
    got = sorted((int(d["i"]), int(d["j"])) for d in ds)
    assert got == [(i, j) for i in range(3) for j in range(2)]
    with pytest.raises(sluice.ShapeError, match="structure"):
        list(Dataset.range(3).interleave(
            lambda i: Dataset.range(2).map(lambda j: {"i": i} if i else (i, j)),
            cycle_length=1))


def test_resume_keeps_the_structure():
    ds = Dataset.from_tensor_slices({"k": np.arange(10), "t": (np.arange(10), np.arange(10))})
    ds = ds.shuffle(10, seed=3).batch(3)
    it = ds.iterator()
    first = next(it)
    state = it.state()
    rest = list(it)
    again = list(ds.iterator(state=state))
    assert [b["k"].tolist() for b in again] == [b["k"].tolist() for b in rest]
    assert isinstance(again[0]["t"], tuple) and sorted(first) == ["k", "t"]


def test_scan_with_structured_state_resumes():
    def step(state, x):
        count, total = state["count"], state["total"]
        new = {"count": count + 1, "total": total + x}
        return new, {"mean": (total + x) / (count + 1), "x": x}

    ds = Dataset.range(20).shuffle(5, seed=2).scan({"count": 0, "total": 0}, step)
    ref = [(float(d["mean"]), int(d["x"])) for d in ds.iterator(epoch=0)]
    assert len(ref) == 20 and abs(ref[-1][0] - 9.5) < 1e-5
    it = ds.iterator(epoch=0)
    head = [next(it) for _ in range(7)]
    state = it.state()
    it.close()
    rest = [(float(d["mean"]), int(d["x"])) for d in ds.iterator(state=state)]
    assert [(float(d["mean"]), int(d["x"])) for d in head] + rest == ref
    with pytest.raises(sluice.CallbackError, match="new state"):
        list(Dataset.range(3).scan((0, 0), lambda s, x: (s[0], x)))


def test_group_by_window_sizes_errors_and_resume():
    ds = Dataset.range(20).shuffle(20, seed=4).group_by_window(
        lambda x: x % 3, lambda key, w: w.batch(10).map(lambda b: {"key": key, "b": b}),
        window_size_func=lambda key: 2 + key)
    ref = [(int(d["key"]), d["b"].tolist()) for d in ds.iterator(epoch=0)]
    assert sorted(x for _, b in ref for x in b) == list(range(20))
    assert all(len(b) <= 2 + k and all(x % 3 == k for x in b) for k, b in ref)
    it = ds.iterator(epoch=0)
    head = [(int(d["key"]), d["b"].tolist()) for d in (next(it), next(it), next(it))]
    state = it.state()
    it.close()
    rest = [(int(d["key"]), d["b"].tolist()) for d in ds.iterator(state=state)]
    assert head + rest == ref
    with pytest.raises(sluice.CallbackError, match="reduce_func must return"):
        list(Dataset.range(4).group_by_window(lambda x: 0, lambda k, w: [1], window_size=2))
    with pytest.raises(sluice.CallbackError, match="group_by_window.*ZeroDivisionError"):
        list(Dataset.range(4).group_by_window(lambda x: 1 // 0, lambda k, w: w, window_size=2))
    with pytest.raises(ValueError):
        Dataset.range(4).group_by_window(lambda x: 0, lambda k, w: w)


def test_padded_batch_of_dicts_and_strings():
    def gen():
        for i in range(1, 5):
            yield {"ids": np.arange(i), "text": "x" * i, "tags": np.array(["a"] * i)}

    ds = Dataset.from_generator(gen).padded_batch(
        3, padded_shapes={"ids": [None], "text": [], "tags": [4]},
        padding_values={"ids": -1, "text": None, "tags": "pad"})
    first, second = list(ds.as_numpy_iterator())
    assert first["ids"].tolist() == [[0, -1, -1], [0, 1, -1], [0, 1, 2]]
    assert first["text"].tolist() == [b"x", b"xx", b"xxx"]
    assert first["tags"].tolist() == [[b"a", b"pad", b"pad", b"pad"],
                                      [b"a", b"a", b"pad", b"pad"],
                                      [b"a", b"a", b"a", b"pad"]]
    assert second["ids"].tolist() == [[0, 1, 2, 3]]
    with pytest.raises(sluice.Error, match="padded"):
        list(Dataset.from_generator(gen).padded_batch(2, padded_shapes={"ids": [2], "text": [],
                                                                          "tags": [None]}))
    with pytest.raises(TypeError, match="structure"):
        Dataset.from_generator(gen).padded_batch(2, padded_shapes=([2], [], [None]))


def test_bucket_by_sequence_length_is_the_c_op():
    def gen():
        for i in (1, 5, 2, 6, 3, 7, 4, 2, 8):
            yield {"ids": np.arange(i), "text": "x" * i}

    def bucketed(**kw):
        return Dataset.from_generator(gen).bucket_by_sequence_length(
            lambda d: len(d["ids"]), [3, 6], [2, 2, 2], **kw)

    ds = bucketed(padding_values={"ids": -1, "text": None})
    # the C op, whose fingerprint covers its settings (a group_by_window over
    # Python functions could not tell these apart)
    assert ds.name == "group_by_window(bucket_by_sequence_length)"
    assert ds.fingerprint != bucketed().fingerprint
    assert ds.fingerprint != bucketed(padding_values={"ids": -2, "text": None}).fingerprint
    got = [(b["ids"].tolist(), list(b["text"])) for b in ds]
    assert got == [([[0, -1], [0, 1]], ["x", "xx"]),
                   ([[0, 1, 2, 3, 4], [0, 1, 2, -1, -1]], ["xxxxx", "xxx"]),
                   ([[0, 1, 2, 3, 4, 5, -1], list(range(7))], ["x" * 6, "x" * 7]),
                   ([[0, 1]], ["xx"]),  # the groups left, in bucket order
                   ([[0, 1, 2, 3]], ["xxxx"]),
                   ([list(range(8))], ["x" * 8])]
    # open dimensions padded to the boundary less one; a length past the
    # last boundary is then an element error
    boundary = Dataset.from_generator(gen).take(4).bucket_by_sequence_length(
        lambda d: len(d["ids"]), [3, 7], [2, 2, 2], pad_to_bucket_boundary=True)
    assert [b["ids"].shape for b in boundary] == [(2, 2), (2, 6)]
    with pytest.raises(sluice.Error, match="bucket_by_sequence_length.*boundary"):
        list(bucketed(pad_to_bucket_boundary=True))
    # no_padding batches as batch does; drop_remainder drops the short batches
    same = Dataset.range(1, 7).map(lambda x: np.arange(x % 2 + 1)).bucket_by_sequence_length(
        len, [2], [2, 3], no_padding=True, drop_remainder=True)
    assert [b.tolist() for b in same] == [[[0], [0]], [[0, 1]] * 3]
    # a Python length function's error, and a saved position
    with pytest.raises(sluice.CallbackError, match="ZeroDivisionError"):
        list(Dataset.range(3).bucket_by_sequence_length(lambda x: 1 // 0, [2], [1, 1]))
    it = ds.iterator(epoch=0)
    head = [next(it)["ids"].tolist() for _ in range(2)]
    state = it.state()
    it.close()
    assert head + [b["ids"].tolist() for b in ds.iterator(state=state)] == [g[0] for g in got]
    with pytest.raises(ValueError, match="rise from 1"):
        Dataset.range(3).bucket_by_sequence_length(len, [3, 3], [1, 1, 1])


def test_rejection_resample_of_dicts():
    labels = np.arange(3000) % 4
    ds = Dataset.from_tensor_slices({"label": labels, "x": np.arange(3000)})
    ds = ds.rejection_resample(lambda d: d["label"], [0.1, 0.2, 0.3, 0.4], seed=3)
    got = list(ds.iterator(epoch=0))
    assert all(int(c) == int(d["label"]) == int(d["x"]) % 4 for c, d in got)
    share = np.bincount([int(c) for c, _ in got], minlength=4) / len(got)
    assert np.allclose(share, [0.1, 0.2, 0.3, 0.4], atol=0.05), share
    it = ds.iterator(epoch=0)
    head = [next(it) for _ in range(100)]
    state = it.state()
    it.close()
    rest = list(ds.iterator(state=state))
    assert [int(d["x"]) for _, d in head + rest] == [int(d["x"]) for _, d in got]
    again = [int(d["x"]) for _, d in ds.iterator(epoch=1)]
    assert again != [int(d["x"]) for _, d in got]  # a new draw each epoch
    with pytest.raises(sluice.InvalidArgumentError, match="class 4 is not in"):
        list(Dataset.range(8).rejection_resample(lambda x: x, [0.5, 0.5, 0, 0]))
    with pytest.raises(ValueError):
        Dataset.range(8).rejection_resample(lambda x: x, [0.5, 0.5], initial_dist=[1])


def test_pack_token_sequences():
    docs = [[5, 6, 7], [8], [9, 10, 11, 12], [13, 14], [15, 16, 17, 18, 19, 20, 21]]
    ds = Dataset.from_generator(lambda: (np.array(d, dtype=np.int32) for d in docs))
    rows = list(ds.pack(6, num_packing_bins=2).as_numpy_iterator())
    values = [r[0].tolist() for r in rows]
    # a row comes out when full, the open ones at the end
    assert values == [[5, 6, 7, 8, 13, 14], [15, 16, 17, 18, 19, 20], [9, 10, 11, 12, 0, 0]]
    assert rows[0][1].tolist() == [1, 1, 1, 2, 3, 3] and rows[0][2].tolist() == [0, 1, 2, 0, 0, 1]
    assert rows[2][1].tolist() == [1, 1, 1, 1, 0, 0]
    assert rows[0][0].dtype == np.int32 and rows[0][1].dtype == np.int32
    # dicts: each part keyed as the input; batches of rows
    ds = Dataset.from_generator(
        lambda: ({"inputs": np.arange(n), "targets": np.arange(n) + 100} for n in (2, 3, 1, 4)))
    vals, segs, pos = next(iter(ds.pack(5).batch(2)))
    assert sorted(vals) == ["inputs", "targets"] and vals["inputs"].shape == (2, 5)
    assert vals["targets"].tolist() == [[100, 101, 100, 101, 102], [100, 100, 101, 102, 103]]
    assert segs["inputs"].tolist() == [[1, 1, 2, 2, 2], [1, 2, 2, 2, 2]]
    spec = ds.pack(5).element_spec
    assert spec[0]["inputs"].shape == (5,) and spec[1]["inputs"].dtype == "int32"
    with pytest.raises(sluice.ShapeError, match="rank 0"):
        list(Dataset.range(3).pack(4))
