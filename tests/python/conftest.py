"""Shared fixtures of the Python binding's tests.

CTest runs them through run.py with SLUICE_LIBRARY (the built library),
PYTHONPATH (python/), and the paths of helper programs in the environment;
run by hand, set at least SLUICE_LIBRARY and PYTHONPATH:

    SLUICE_LIBRARY=build/libsluice.so PYTHONPATH=python \\
        /usr/bin/python3 -m pytest -q tests/python
"""

import gc
import os
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# indexes of URL shards go to a folder of this run's, not ~/.cache
os.environ.setdefault("SLUICE_INDEX_CACHE", tempfile.mkdtemp(prefix="sluice-indexes-"))
SOURCE_DIR = os.environ.get("SLUICE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
CLASSES = ("cat", "dog", "eel")
PER_CLASS = 12


def _write_jpegs(root):
    """CLASSES x PER_CLASS small JPEGs of assorted sizes (and a grayscale
    one), with PIL, or with sluice-bench --make-sample when PIL is absent."""
    try:
        from PIL import Image
    except ImportError:
        bench = os.environ.get("SLUICE_BENCH")
        if not bench:
            pytest.skip("neither PIL (python3-pil) nor SLUICE_BENCH to make test images")
        subprocess.run([bench, "--make-sample", root, "--count", "36"], check=True,
                       stdout=subprocess.DEVNULL)
        return
    import numpy as np
    rng = np.random.default_rng(1234)
    for c, name in enumerate(CLASSES):
        os.makedirs(os.path.join(root, name))
        for i in range(PER_CLASS):
            h, w = int(rng.integers(40, 140)), int(rng.integers(40, 140))
            y, x = np.mgrid[0:h, 0:w]
            img = np.stack([(x * 255 // w), (y * 255 // h), np.full_like(x, 60 * c + 5 * i)],
                           axis=-1).astype(np.uint8)
            img = np.clip(img.astype(int) + rng.integers(0, 30, img.shape), 0, 255).astype(np.uint8)
            pil = Image.fromarray(img)
            if c == 2 and i == 0:
                pil = pil.convert("L")
            pil.save(os.path.join(root, name, "%02d.jpg" % i), quality=90)


@pytest.fixture(scope="session")
def image_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("images"))
    _write_jpegs(root)
    return root


@pytest.fixture(scope="session")
def image_files(image_dir):
    """(path, label) of every image, in image_folder's order."""
    out = []
    classes = sorted(d for d in os.listdir(image_dir)
                     if os.path.isdir(os.path.join(image_dir, d)))
    for label, c in enumerate(classes):
        for name in sorted(os.listdir(os.path.join(image_dir, c))):
            out.append((os.path.join(image_dir, c, name), label))
    return out


def settle():
    """Garbage-collects and returns the library's caches, so that
    sluice.memory_in_use() counts only live data. release_memory waits
    at most 100 ms for the pool's workers to hand back their caches, and a
    loaded machine (the sanitizer builds in CI) can make one miss that:
    so it is asked again until two readings agree."""
    import sluice
    last = None
    for _ in range(50):
        for _ in range(3):
            gc.collect()
        sluice.release_memory()
        now = sluice.memory_in_use()
        if now == last:
            break
        last = now
        time.sleep(0.02)
    return now


def run_python(code, env=None, timeout=120, **kw):
    """Runs `code` in a fresh interpreter (this one) with the test
    environment plus `env`; returns the CompletedProcess."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], env=e, timeout=timeout,
                          capture_output=True, text=True, **kw)
