"""Random stacks of layer Jacobians near the identity, and the input dtypes, that the tests of the
spectral statistics (linalg/, dynamics/) share."""

import numpy as np

DTYPES = [np.float32, np.float64]


def random_layers(L, d, seed=0, scale=0.3):
    return np.eye(d) + scale * np.random.default_rng(seed).standard_normal((L, d, d)) / np.sqrt(d)


def conditioned(B, d, kappa, seed=0):
    """(B, d, d) float64 U diag(s) V^T with singular values log-spaced from kappa down to 1."""
    from scipy.stats import ortho_group

    rng = np.random.default_rng(seed)
    s = np.geomspace(kappa, 1.0, d)
    return np.stack([ortho_group.rvs(d, random_state=rng) * s @ ortho_group.rvs(d, random_state=rng)
                     for _ in range(B)])
