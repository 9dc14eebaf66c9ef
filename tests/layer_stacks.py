"""Random stacks of layer Jacobians near the identity, and the input dtypes, that the tests of the
spectral statistics (linalg/, dynamics/) share."""

import numpy as np

DTYPES = [np.float32, np.float64]


def random_layers(L, d, seed=0, scale=0.3):
    return np.eye(d) + scale * np.random.default_rng(seed).standard_normal((L, d, d)) / np.sqrt(d)
