"""A short training run of examples/pytorch_train.py."""

import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

EXAMPLE = os.path.join(SOURCE_DIR, "examples", "pytorch_train.py")


def test_pytorch_train_example(image_dir):
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (apt install python3-torch)")
    r = subprocess.run([sys.executable, EXAMPLE, image_dir, "--steps", "6", "--batch", "8",
                        "--size", "32", "--threads", "2", "--log-every", "3"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "step    6" in out and "images/s" in out
    assert "trained 6 steps, 48 images" in out
    assert "pipeline report" in out
    losses = [float(l.split()[3]) for l in out.splitlines() if l.startswith("step")]
    assert len(losses) == 2 and all(l == l and l < 100 for l in losses)


def test_pytorch_train_example_bad_folder(tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (apt install python3-torch)")
    os.makedirs(tmp_path / "empty" / "class0")
    r = subprocess.run([sys.executable, EXAMPLE, str(tmp_path / "empty"), "--steps", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and str(tmp_path / "empty") in r.stderr, r.stderr


def test_pytorch_train_example_resumes(image_dir, tmp_path):
    """Stopped after 3 steps and resumed, the run trains on the batches the
    uninterrupted one trained on at steps 4 to 7 (an epoch ends at 4: 36
    images, batch 8)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (apt install python3-torch)")
    ck = str(tmp_path / "ck.pt")

    def run(*extra):
        r = subprocess.run([sys.executable, EXAMPLE, image_dir, "--batch", "8", "--size", "32",
                            "--threads", "2", "--log-every", "1", "--digest"] + list(extra),
                           capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stdout + r.stderr
        return {int(l.split()[1]): l.split()[-1] for l in r.stdout.splitlines()
                if l.startswith("step")}, r.stdout

    full, _ = run("--steps", "7")
    head, _ = run("--steps", "3", "--checkpoint", ck)
    tail, out = run("--steps", "7", "--resume", ck)
    assert "resumed from" in out and "after step 3" in out
    assert sorted(head) == [1, 2, 3] and sorted(tail) == [4, 5, 6, 7]
    assert {**head, **tail} == full


@pytest.mark.parametrize("recipe", ["torchvision", "timm", "simclr"])
def test_augment_recipes_example(image_dir, tmp_path, recipe):
    script = os.path.join(SOURCE_DIR, "examples", "augment_recipes.py")
    png = str(tmp_path / "first.png")
    r = subprocess.run([sys.executable, script, image_dir, "--recipe", recipe, "--batches", "3",
                        "--batch", "4", "--size", "32", "--save", png],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "images (4, 3, 32, 32) float32" in r.stdout
    assert "3 batches, 12 images" in r.stdout
    assert os.path.getsize(png) > 0
