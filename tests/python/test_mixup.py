"""mixup_cutmix through the binding, against a numpy model of timm's Mixup
(mode "batch"): each batch's lam is read back from its soft targets, then
the images must be the model's MixUp (within one level for uint8, timm
rounding the float result) or CutMix (a box of the reversed batch); dict
elements and CHW float32 batches; draws per epoch and seed."""

import numpy as np
import pytest

import sluice
from sluice import Dataset

NCLS = 3  # conftest's cat, dog, eel


def soft_model(y, lam, smoothing):
    """timm's mixup_target."""
    off = smoothing / NCLS
    on = 1.0 - smoothing + off
    one = np.full((len(y), NCLS), off)
    one[np.arange(len(y)), y] = on
    return one * lam + one[::-1] * (1 - lam)


def lam_of(soft, y, smoothing):
    """The lam a batch drew, from a row whose pair has another label (None
    when every pair shares its label: the targets do not tell)."""
    for i in range(len(y)):
        if y[i] != y[::-1][i]:
            return (soft[i, y[i]] - smoothing / NCLS) / (1 - smoothing)
    return None


def check(plain, mixed, smoothing, chw=False):
    x, y = plain
    xm, soft = mixed
    x, xm, soft = np.asarray(x), np.asarray(xm), np.asarray(soft)
    lam = lam_of(soft, np.asarray(y), smoothing)
    rev = x[::-1]
    if lam is None:  # then the least-squares lam of the images
        d = (x.astype(np.float64) - rev).ravel()
        e = (xm.astype(np.float64) - rev).ravel()
        lam = 1.0 if not d.any() else float(np.dot(e, d) / np.dot(d, d))
        known = False
    else:
        known = True
    np.testing.assert_allclose(soft, soft_model(np.asarray(y), lam, smoothing), atol=1e-5)
    model = x.astype(np.float64) * lam + rev * (1 - lam)
    if x.dtype == np.uint8:
        model = np.rint(model)
    if np.abs(xm - model).max() <= (1 if x.dtype == np.uint8 else 1e-4):
        return "mixup" if lam < 1 else "none"
    # CutMix: each pixel is its own or its pair's, the pair's inside one box
    from_rev = np.any((xm != x) & (xm == rev), axis=1 if chw else -1)
    assert np.all((xm == x) | (xm == rev))
    rows, cols = np.nonzero(from_rev.any(axis=0))
    if len(rows):
        box = np.zeros_like(from_rev[0])
        box[rows.min():rows.max() + 1, cols.min():cols.max() + 1] = True
        assert not np.any(from_rev & ~box)
        assert not known or box.sum() <= (1 - lam) * box.size + 1e-3
    return "cutmix"


@pytest.mark.parametrize("layout,dtype", [("HWC", "uint8"), ("CHW", "float32")])
def test_against_the_model(image_dir, layout, dtype):
    base = (Dataset.image_folder(image_dir)
            .map_image("eval", 24, layout=layout, dtype=dtype).batch(8))
    kinds = set()
    for seed in range(12):
        mixed = base.mixup_cutmix(NCLS, label_smoothing=0.1, seed=seed)
        for plain, m in zip(base.iterator(epoch=0), mixed.iterator(epoch=0)):
            kinds.add(check(plain, m, 0.1, chw=layout == "CHW"))
    assert {"mixup", "cutmix"} <= kinds


def test_dict_elements_and_epochs(image_dir):
    ds = (Dataset.image_folder(image_dir)
          .map(lambda img, label: {"image": img, "label": label})
          .map_image("eval", 16).batch(6, drop_remainder=True)
          .mixup_cutmix(NCLS, prob=0.8, seed=3))
    assert ds.element_spec["label"] == sluice.TensorSpec((6, NCLS), "float32")
    a = [b["image"].copy() for b in ds.iterator(epoch=0)]
    b = [b["image"].copy() for b in ds.iterator(epoch=0)]
    c = [b["image"].copy() for b in ds.iterator(epoch=1)]
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not all(np.array_equal(u, v) for u, v in zip(a, c))


def test_bad_arguments(image_dir):
    ds = Dataset.image_folder(image_dir).map_image("eval", 16).batch(4)
    with pytest.raises(ValueError):
        ds.mixup_cutmix(NCLS, mixup_alpha=-1)
    with pytest.raises(ValueError):
        ds.mixup_cutmix(NCLS, prob=2)
    with pytest.raises(sluice.OutOfRangeError, match="outside"):
        list(ds.mixup_cutmix(2))  # the eels' label is 2
