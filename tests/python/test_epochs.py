"""Every pass over the same dataset is a new epoch: a new order and new
crops, reproducible from the seed; ds.iterator(epoch=n) and
DataLoader.set_epoch(n) replay a chosen one."""

import pytest

import sluice
from sluice import Dataset

try:
    import torch
    import sluice.torch as st
except ImportError:  # the loader tests skip with the reason
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed "
                                 "(apt install python3-torch); DataLoader epochs not tested")


def pipeline(image_dir, reshuffle=True):
    return (Dataset.image_folder(image_dir, with_paths=True)
            .shuffle(sluice.ALL, seed=0, reshuffle_each_iteration=reshuffle)
            .map_image(preset="train", size=24)
            .batch(6)
            .with_options(threads=2, seed=11))


def run(iterable):
    """(paths in order, {path: crop bytes}) of one pass."""
    order, crops = [], {}
    for images, labels, paths in iterable:
        if torch is not None and isinstance(images, torch.Tensor):
            images = images.numpy()
        for img, p in zip(images, paths):
            order.append(p)
            crops[p] = img.tobytes()
    return order, crops


def changed(a, b):
    """How many files got another crop in pass b than in pass a."""
    return sum(a[1][p] != b[1][p] for p in a[1])


def test_each_pass_is_a_new_epoch(image_dir, image_files):
    ds = pipeline(image_dir)
    passes = []
    for epoch in range(3):
        it = ds.iterator()
        assert it.epoch == epoch
        passes.append(run(it))
    n = len(image_files)
    for a in range(3):
        assert sorted(passes[a][0]) == sorted(p for p, _ in image_files)
        for b in range(a + 1, 3):
            assert passes[a][0] != passes[b][0]
            assert changed(passes[a], passes[b]) >= 0.9 * n
    # `for x in ds` counts the same way, and a new dataset with the same seed
    # replays the same three epochs byte for byte
    again = pipeline(image_dir)
    assert [run(again) for _ in range(3)] == passes
    # a chosen epoch, and naming it does not move the count
    fresh = pipeline(image_dir)
    assert run(fresh.iterator(epoch=2)) == passes[2]
    assert run(fresh) == passes[0]


def test_no_reshuffle_keeps_the_order_not_the_crops(image_dir, image_files):
    ds = pipeline(image_dir, reshuffle=False)
    a, b = run(ds), run(ds)
    assert a[0] == b[0]
    assert changed(a, b) >= 0.9 * len(image_files)


def test_repeat_inside_counts_within_the_epoch():
    ds = Dataset.range(30).shuffle(sluice.ALL, seed=4).repeat(2)
    e0, e1 = [int(x) for x in ds], [int(x) for x in ds]
    quarters = [e0[:30], e0[30:], e1[:30], e1[30:]]
    assert all(sorted(q) == list(range(30)) for q in quarters)
    assert len({tuple(q) for q in quarters}) == 4


def test_epoch_option_bounds():
    with pytest.raises(sluice.InvalidArgumentError):
        Dataset.range(3).iterator(epoch=-2)
    assert Dataset.range(3).iterator(epoch=7).epoch == 7


@needs_torch
def test_dataloader_epochs(image_dir):
    ref = pipeline(image_dir)
    want = [run(ref) for _ in range(3)]
    loader = st.DataLoader(pipeline(image_dir), layout=None)
    got = []
    for epoch in range(3):
        got.append(run(loader))
        assert loader.epoch == epoch
    assert got == want
    # set_epoch picks the next pass's epoch, and counting goes on from it
    loader.set_epoch(1)
    assert run(loader) == want[1] and loader.epoch == 1
    assert run(loader) == want[2] and loader.epoch == 2
    # DistributedSampler's habit: set_epoch before every epoch
    other = st.DataLoader(pipeline(image_dir), layout=None)
    for epoch in (2, 0):
        other.set_epoch(epoch)
        assert run(other) == want[epoch]
    with pytest.raises(ValueError):
        other.set_epoch(-1)
    with pytest.raises(ValueError, match="epoch"):  # the loader chooses epochs
        st.DataLoader(pipeline(image_dir).with_options(epoch=3))
    loader.close()
    other.close()
