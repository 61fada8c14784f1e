"""sluice-bench end to end: the sample folder it writes, the JSON of a
preset run with the ceiling, and of a sweep (small sizes: these check the
fields and their consistency, not speed)."""

import json
import os
import subprocess

import pytest

BENCH = os.environ.get("SLUICE_BENCH")
pytestmark = pytest.mark.skipif(not BENCH, reason="SLUICE_BENCH (the sluice-bench binary) unset")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("bench") / "sample")
    subprocess.run([BENCH, "--make-sample", root, "--count", "48"], check=True,
                   stdout=subprocess.DEVNULL)
    return root


def run_json(tmp_path, *args):
    out = tmp_path / "out.json"
    subprocess.run([BENCH, *args, "--json", str(out)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def test_sample_is_an_image_folder(sample):
    classes = sorted(c for c in os.listdir(sample) if os.path.isdir(os.path.join(sample, c)))
    assert len(classes) >= 2
    files = [f for c in classes for f in os.listdir(os.path.join(sample, c))]
    assert len(files) == 48
    assert all(f.endswith(".jpg") for f in files)
    # and the list make_dataset.py would write, one "class/file label" line each
    with open(os.path.join(sample, "files.txt")) as f:
        lines = f.read().split("\n")
    assert len([ln for ln in lines if ln]) == 48


@pytest.mark.parametrize("preset", ["train", "eval"])
def test_preset_with_ceiling(sample, tmp_path, preset):
    d = run_json(tmp_path, sample, "--preset", preset, "--batch", "16", "--epochs", "2",
                 "--threads", "2", "--ceiling")
    # train drops the last partial batch of the (repeated) input, eval keeps it
    assert d["images"] == (96 // 16 * 16 if preset == "train" else 96)
    assert d["preset"] == preset and d["threads"] == 2
    assert d["errors_skipped"] == 0
    assert d["io_backend"] in ("io_uring", "pread")
    assert d["images_per_s"] > 0 and d["seconds"] > 0
    assert d["ceiling_images_per_s"] > 0
    assert d["ratio_to_ceiling"] == pytest.approx(
        d["images_per_s"] / d["ceiling_images_per_s"], rel=1e-2)
    assert 0 < d["peak_rss_bytes"]
    assert 0 < d["peak_buffered_bytes"]
    # the consumer does nothing: it waits nearly all the time, and the wait
    # for the first batch is part of it
    assert 0 < d["first_batch_seconds"] <= d["seconds"]
    assert 0 <= d["stall_fraction_after_first_batch"] <= d["measured_stall_fraction"] <= 1


@pytest.mark.parametrize("preset", ["train", "eval"])
def test_decode_limit(sample, tmp_path, preset):
    # the windows' decode beside the full decode: both measured, every file
    # decoded (speeds are the benchmark's to compare, not a test's)
    d = run_json(tmp_path, sample, "--preset", preset, "--batch", "16", "--threads", "2",
                 "--decode-limit", "--ceiling")
    assert d["limit_failed"] == 0 and d["ceiling_failed"] == 0
    assert d["limit_images_per_s"] > 0 and d["ceiling_images_per_s"] > 0
    assert d["limit_images_per_s"] == pytest.approx(
        max(d["limit_before_images_per_s"], d["limit_after_images_per_s"]))
    assert d["ratio_to_limit"] == pytest.approx(d["images_per_s"] / d["limit_images_per_s"],
                                                rel=1e-2)


def test_fast_upsample_is_recorded(sample, tmp_path):
    d = run_json(tmp_path, sample, "--preset", "eval", "--batch", "16", "--fast-upsample")
    assert d["fast_upsample"] is True
    assert d["images"] == 48


def test_exact_pixels_is_recorded(sample, tmp_path):
    d = run_json(tmp_path, sample, "--preset", "eval", "--batch", "16", "--exact-pixels")
    assert d["exact_pixels"] is True and d["fast_upsample"] is False
    assert d["images"] == 48
    d = run_json(tmp_path, sample, "--preset", "eval", "--batch", "16")
    assert d["exact_pixels"] is False


def check_sweep(d, knobs, grid, rounds):
    rows = d["sweep"]
    assert d["sweep_knobs"] == knobs
    assert all(rows[-1][k] == "auto" for k in knobs)
    static = rows[:-1]
    assert len(static) == grid
    assert all(isinstance(r[k], int) for r in static for k in knobs)
    # the two fastest of the grid, run again beside autotune in every round
    confirmed = [r for r in static if r["confirmed"]]
    assert len(confirmed) == 2 and rows[-1]["confirmed"]
    assert all(len(r["images_per_s_rounds"]) == rounds for r in confirmed + rows[-1:])
    best = max(confirmed, key=lambda r: r["images_per_s"])
    assert d["best_static_images_per_s"] == pytest.approx(best["images_per_s"])
    assert d["best_static_config"] == {k: best[k] for k in knobs}
    assert d["autotune_vs_best_static"] == pytest.approx(
        rows[-1]["images_per_s"] / best["images_per_s"], rel=1e-2)
    for r in rows:
        assert r["images"] >= 32
        assert 0 <= r["stall_fraction_after_first_batch"] <= 1
        assert r["peak_buffered_bytes"] > 0


def test_sweep_fields(sample, tmp_path):
    d = run_json(tmp_path, sample, "--preset", "train", "--batch", "8", "--threads", "2",
                 "--sweep", "--sweep-images", "32", "--consumer-ms", "1")
    # map_image's parallelism 1-8 (to 4 x threads) x prefetch depth 1-8
    check_sweep(d, ["parallelism", "prefetch"], 6 * 4, 1)


def test_sweep_of_two_parallel_stages(sample, tmp_path):
    # --map-us puts a C map of that cost before map_image: both stages'
    # parallelism (1 to threads + 1) and the depth (1, 2, 4) are swept
    d = run_json(tmp_path, sample, "--preset", "train", "--batch", "8", "--threads", "2",
                 "--map-us", "50", "--sweep", "--sweep-images", "32", "--sweep-rounds", "2")
    assert d["map_us"] == 50
    check_sweep(d, ["map_parallelism", "parallelism", "prefetch"], 3 * 3 * 3, 2)
