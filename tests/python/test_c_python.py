"""The same pipeline and seed give byte-identical batches from C and from
Python (c_pipeline.c is sluice-bench's pipeline, writing its batches)."""

import os
import subprocess

import numpy as np
import pytest

import sluice
from sluice import Dataset

C_PIPELINE = os.environ.get("SLUICE_C_PIPELINE")
pytestmark = pytest.mark.skipif(not C_PIPELINE, reason="SLUICE_C_PIPELINE not set "
                                "(CTest sets it to the built c_pipeline)")


def python_pipeline(root, preset, size, batch, seed, threads, epochs):
    """The pipeline of c_pipeline.c / sluice-bench, through the binding."""
    train = preset == "train"
    ds = Dataset.image_folder(root)
    if train:
        ds = ds.shuffle(sluice.ALL, seed=seed)
    if epochs != 1:
        ds = ds.repeat(epochs)
    ds = (ds.map_image(preset=preset, size=size).batch(batch, drop_remainder=train)
          .prefetch(sluice.AUTOTUNE))
    return ds.with_options(threads=threads, seed=seed)


def c_bytes(tmp_path, root, preset, size, batch, seed, threads, epochs):
    out = tmp_path / ("c_%s_%d_%d.bin" % (preset, seed, threads))
    subprocess.run([C_PIPELINE, root, preset, str(size), str(batch), str(seed), str(threads),
                    str(epochs), str(out)], check=True, timeout=120)
    return out.read_bytes()


@pytest.mark.parametrize("preset,seed,threads,epochs", [
    ("train", 0, 2, 1), ("train", 7, 1, 2), ("train", 7, 3, 2), ("eval", 0, 2, 1),
])
def test_byte_identical(tmp_path, image_dir, preset, seed, threads, epochs):
    size, batch = 48, 5
    want = c_bytes(tmp_path, image_dir, preset, size, batch, seed, threads, epochs)
    parts = []
    for images, labels in python_pipeline(image_dir, preset, size, batch, seed, threads,
                                          epochs):
        assert images.shape[1:] == (size, size, 3) and images.dtype == np.uint8
        assert len(labels) == images.shape[0]
        parts += [images.tobytes(), labels.tobytes()]
    got = b"".join(parts)
    assert len(got) == len(want) > 0
    assert got == want
