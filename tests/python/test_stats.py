"""An iterator's statistics (dict) and report (text) through Python."""

import json

import pytest

import sluice
from sluice import Dataset


def pipeline(image_dir):
    return (Dataset.image_folder(image_dir).shuffle(sluice.ALL, seed=0)
            .map_image(preset="train", size=32).batch(6, drop_remainder=True)
            .prefetch(sluice.AUTOTUNE).with_options(threads=2))


def test_stats_dict(image_dir):
    it = pipeline(image_dir).iterator()
    n = sum(1 for _ in it)
    s = it.stats()
    assert isinstance(s, dict)
    json.dumps(s)  # plain JSON types all the way down
    text = json.dumps(s)
    assert "prefetch" in text and "map_image" in text
    assert it.stat(0) == n  # SL_STAT_ELEMENTS
    it.close()
    with pytest.raises(sluice.StateError):
        it.stats()


def test_report_text(image_dir):
    it = pipeline(image_dir).iterator()
    for _ in it:
        pass
    r = it.report()
    assert isinstance(r, str) and "prefetch" in r and "map_image" in r
    assert len(r.splitlines()) > 3
    it.close()


def test_stats_while_running(image_dir):
    it = pipeline(image_dir).repeat(3).iterator()
    next(it)
    assert isinstance(it.stats(), dict)
    it.close()


def test_trace(image_dir, tmp_path):
    ds = pipeline(image_dir).with_options(trace_events=10000)
    it = ds.iterator()
    for _ in it:
        pass
    path = tmp_path / "trace.json"
    it.trace(str(path))
    doc = json.loads(path.read_text())
    assert doc  # Chrome trace-event JSON (an object or an array of events)
    it.close()
    it2 = pipeline(image_dir).iterator()
    with pytest.raises(sluice.StateError):
        it2.trace(str(tmp_path / "off.json"))  # tracing is off by default
    it2.close()
