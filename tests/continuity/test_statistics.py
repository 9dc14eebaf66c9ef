"""Paper 003's statistics (crosslayer.continuity.statistics): the expected |cos| of random vectors,
sign alignment, PCA and its random baseline."""

import math

import numpy as np
import pytest
from scipy.special import gamma

from crosslayer.continuity.statistics import expected_abs_cosine, principal_pca, random_evr_baseline, sign_aligned


def test_expected_abs_cosine_closed_forms():
    assert expected_abs_cosine(2) == pytest.approx(2 / math.pi, rel=1e-14)
    assert expected_abs_cosine(3) == pytest.approx(0.5, rel=1e-14)
    assert expected_abs_cosine(10) == pytest.approx(gamma(5) / (math.sqrt(math.pi) * gamma(5.5)), rel=1e-13)
    for n in (128, 4096, 14336):  # the paper's sqrt(2 / (pi n)) is the large-n limit
        assert expected_abs_cosine(n) / math.sqrt(2 / (math.pi * n)) - 1 == pytest.approx(1 / (4 * n), rel=0.01)
    with pytest.raises(ValueError, match="n"):
        expected_abs_cosine(1)


def test_expected_abs_cosine_monte_carlo():
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((40000, 20)) for _ in range(2))
    cos = np.abs(np.sum(a * b, 1)) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert abs(cos.mean() - expected_abs_cosine(20)) < 4 * cos.std() / math.sqrt(len(cos))


def test_sign_alignment_and_pca():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((9, 30))
    signs = rng.choice([-1.0, 1.0], size=(9, 1))
    aligned = sign_aligned(X * signs)
    assert np.all(np.sum(aligned[1:] * aligned[:-1], 1) >= 0)
    np.testing.assert_allclose(np.abs(aligned), np.abs(X / np.linalg.norm(X, axis=1, keepdims=True)))
    # against numpy's SVD of the centred data
    coords, evr = principal_pca(X * signs, n_components=3)
    Y = aligned - aligned.mean(0)
    _, s, Vt = np.linalg.svd(Y, full_matrices=False)
    np.testing.assert_allclose(evr, s[:3] ** 2 / np.sum(s**2), rtol=1e-10)
    np.testing.assert_allclose(np.abs(coords), np.abs(Y @ Vt[:3].T), rtol=1e-8, atol=1e-10)


def test_pca_of_low_dimensional_vectors():
    rng = np.random.default_rng(7)
    a, b, c = np.linalg.qr(rng.standard_normal((40, 3)))[0].T
    two = np.array([a, a + b, a, a + b, a])  # two directions: the centred points lie on a line
    assert principal_pca(two, n_components=1)[1][0] == pytest.approx(1.0)
    circle = np.array([np.cos(t) * a + np.sin(t) * b for t in np.linspace(0, 1.5, 8)])
    assert principal_pca(circle, n_components=2)[1].sum() == pytest.approx(1.0)
    sphere = rng.standard_normal((10, 3)) @ np.array([a, b, c])
    assert principal_pca(sphere, n_components=3)[1].sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_components"):
        principal_pca(two, n_components=5)


def test_random_evr_baseline():
    # far more dimensions than vectors: each of the L - 1 centred directions holds ~1/(L-1) of the variance
    mean, sd = random_evr_baseline(10, 2000, n_components=3, draws=200, seed=0)
    assert 3 / 9 < mean < 3 / 9 + 0.03 and 0 < sd < 0.02
    assert random_evr_baseline(10, 2000, draws=20, seed=1) == random_evr_baseline(10, 2000, draws=20, seed=1)
