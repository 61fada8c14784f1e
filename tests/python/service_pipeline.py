"""The pipeline of test_service.py, imported by the trainer (the test) and
by each `python3 -m sluice.worker service_pipeline:build`: a Python map
function, so the workers run Python callbacks too."""

import numpy as np

import sluice


def _square(x):
    return x, np.int64(x) * np.int64(x) + 7


def build():
    return (sluice.Dataset.range(480)
            .shuffle(sluice.ALL)
            .map(_square, num_parallel_calls=2)
            .batch(8))


def build_other():
    return (sluice.Dataset.range(480)
            .shuffle(sluice.ALL)
            .map(lambda x: (x, x), num_parallel_calls=2)
            .batch(8))
