"""Checkpoints from Python: Iterator.state() / Dataset.iterator(state=...),
and DataLoader.state_dict() / load_state_dict() through torch.save and
torch.load in another process, resume byte for byte."""

import hashlib
import json
import textwrap

import pytest

import sluice
from conftest import run_python
from sluice import Dataset

try:
    import torch
    import sluice.torch as st
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed "
                                 "(apt install python3-torch); DataLoader resume not tested")


def numbers():
    return (Dataset.range(200).shuffle(sluice.ALL, seed=3).map(lambda x: x * 3)
            .batch(7).prefetch(2).with_options(threads=2, seed=4))


def images(root):
    return (Dataset.image_folder(root, with_paths=True).shuffle(sluice.ALL, seed=0)
            .map_image(preset="train", size=24).batch(5).prefetch(2)
            .with_options(threads=2, seed=9))


def digest(values):
    """A hash per element (every tensor's bytes, strings as text)."""
    out = []
    for v in values:
        h = hashlib.sha1()
        for x in (v if isinstance(v, tuple) else (v,)):
            if torch is not None and isinstance(x, torch.Tensor):
                x = x.contiguous().numpy()
            h.update(x.tobytes() if hasattr(x, "tobytes") else repr(x).encode())
        out.append(h.hexdigest())
    return out


@pytest.mark.parametrize("k", [0, 1, 13, 28, 29])
def test_iterator_state_resumes(k):
    full = digest(numbers().iterator(epoch=2))
    it = numbers().iterator(epoch=2)
    head = [next(it) for _ in range(k)]
    state = it.state()
    assert isinstance(state, bytes) and 64 < len(state) < 1024
    it.close()
    rest = numbers().iterator(state=state)
    assert rest.epoch == 2
    assert digest(head) + digest(rest) == full


def test_state_of_another_pipeline_is_refused():
    it = numbers().iterator()
    next(it)
    state = it.state()
    other = Dataset.range(201).shuffle(sluice.ALL, seed=3).map(lambda x: x * 3).batch(7)
    with pytest.raises(sluice.StateMismatchError) as e:
        other.with_options(threads=2, seed=4).iterator(state=state)
    assert "another pipeline" in str(e.value) and isinstance(e.value, ValueError)
    with pytest.raises(sluice.CorruptDataError, match="truncated"):
        numbers().iterator(state=state[:-1])
    with pytest.raises(sluice.StateMismatchError, match="seed"):
        numbers().with_options(seed=5).iterator(state=state)
    with pytest.raises(TypeError):
        numbers().iterator(state="not bytes")


def test_unordered_has_no_state():
    ds = Dataset.range(50).map(lambda x: x, deterministic=False).with_options(threads=2)
    it = ds.iterator()
    next(it)
    with pytest.raises(sluice.UnsupportedError, match="unordered"):
        it.state()


CHILD = textwrap.dedent("""
    import hashlib, json, sys, torch
    import sluice, sluice.torch as st
    from sluice import Dataset
    root, path = sys.argv[1], sys.argv[2]
    ds = (Dataset.image_folder(root, with_paths=True).shuffle(sluice.ALL, seed=0)
          .map_image(preset="train", size=24).batch(5).prefetch(2)
          .with_options(threads=2, seed=9))
    loader = st.DataLoader(ds)
    loader.load_state_dict(torch.load(path)["loader"])
    out = []
    for epoch in range(2):
        for images, labels, paths in loader:
            h = hashlib.sha1()
            h.update(images.contiguous().numpy().tobytes())
            h.update(labels.numpy().tobytes())
            h.update(repr(paths).encode())
            out.append((loader.epoch, h.hexdigest()))
    print(json.dumps(out))
""")


@needs_torch
@pytest.mark.parametrize("k", [0, 2, 8])
def test_dataloader_resumes_in_another_process(image_dir, tmp_path, k):
    def batches(loader, n_epochs, stop_after=None):
        out = []
        for _ in range(n_epochs):
            for images, labels, paths in loader:
                h = hashlib.sha1()
                h.update(images.contiguous().numpy().tobytes())
                h.update(labels.numpy().tobytes())
                h.update(repr(paths).encode())
                out.append((loader.epoch, h.hexdigest()))
                if stop_after is not None and len(out) == stop_after:
                    return out
        return out

    full = batches(st.DataLoader(images(image_dir)), 2)  # 36 images: 8 batches per epoch
    loader = st.DataLoader(images(image_dir))
    head = batches(loader, 2, stop_after=k) if k else []
    path = str(tmp_path / "ckpt.pt")
    torch.save({"model": {"w": torch.zeros(2)}, "loader": loader.state_dict()}, path)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    r = run_python("import runpy, sys; sys.argv = ['child', %r, %r]; runpy.run_path(%r)"
                   % (image_dir, path, str(script)))
    assert r.returncode == 0, r.stderr
    rest = [tuple(x) for x in json.loads(r.stdout.strip().splitlines()[-1])]
    # the child's two passes: the rest of the saved epoch, then the next one
    assert head + rest == full


@needs_torch
def test_dataloader_state_between_epochs(image_dir):
    loader = st.DataLoader(images(image_dir))
    assert loader.state_dict() == {"version": 1, "epoch": 0, "state": None}
    for _ in loader:
        pass
    sd = loader.state_dict()
    assert sd["epoch"] == 1 and sd["state"] is None
    other = st.DataLoader(images(image_dir))
    other.load_state_dict(sd)
    first = next(iter(other))
    assert other.epoch == 1
    with pytest.raises(ValueError):
        other.load_state_dict({"nothing": 1})
    del first
