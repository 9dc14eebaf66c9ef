import math

import numpy as np
import pytest
from scipy.linalg import subspace_angles
from scipy.special import gammaln
from scipy.stats import ortho_group

from crosslayer.linalg.subspace import (
    pairwise_overlap,
    random_overlap_baseline,
    subspace_overlap,
    top_singular_subspaces,
)

ATOL = math.sqrt(np.finfo(float).eps)


def random_basis(rng, d, k):
    return np.linalg.qr(rng.standard_normal((d, k)))[0]


# (A, B, overlap) worked out by hand
PRECOMPUTED = [
    (np.eye(4)[:, :2], np.eye(4)[:, 1:3], 0.5),  # angles 0 and 90 degrees
    (np.eye(3)[:, :1], np.eye(3)[:, :1], 1.0),
    (np.eye(3)[:, :1], np.eye(3)[:, 1:2], 0.0),
    (np.eye(2)[:, :1], np.array([[1.0], [1.0]]) / np.sqrt(2), np.sqrt(0.5)),  # 45 degrees
]


@pytest.mark.parametrize("A, B, expected", PRECOMPUTED)
def test_subspace_overlap_precomputed(A, B, expected):
    assert subspace_overlap(A, B) == pytest.approx(expected, abs=ATOL)


@pytest.mark.parametrize("d, k", [(5, 1), (16, 3), (64, 10), (10, 10)])
@pytest.mark.parametrize("seed", range(3))
def test_subspace_overlap_matches_scipy_subspace_angles(d, k, seed):
    rng = np.random.default_rng(seed)
    A, B = random_basis(rng, d, k), random_basis(rng, d, k)
    assert subspace_overlap(A, B) == pytest.approx(np.cos(subspace_angles(A, B)).mean(), abs=1e-10)


def test_subspace_overlap_ignores_basis_choice_and_rotation():
    rng = np.random.default_rng(1)
    A, B = random_basis(rng, 20, 4), random_basis(rng, 20, 4)
    R = ortho_group.rvs(4, random_state=2)  # another basis of the same subspace
    Q = ortho_group.rvs(20, random_state=3)  # rotate the ambient space
    base = subspace_overlap(A, B)
    assert subspace_overlap(A @ R, B) == pytest.approx(base, abs=1e-12)
    assert subspace_overlap(Q @ A, Q @ B) == pytest.approx(base, abs=1e-12)
    assert subspace_overlap(B, A) == pytest.approx(base, abs=1e-12)


def test_pairwise_overlap_equals_loop_and_is_symmetric():
    rng = np.random.default_rng(4)
    stack = np.stack([random_basis(rng, 12, 3) for _ in range(5)])
    other = np.stack([random_basis(rng, 12, 3) for _ in range(2)])
    O = pairwise_overlap(stack)
    assert O.shape == (5, 5)
    assert np.allclose(O, O.T) and np.allclose(np.diag(O), 1.0)
    loop = [[subspace_overlap(a, b) for b in other] for a in stack]
    assert np.allclose(pairwise_overlap(stack, other), loop, atol=1e-12)
    assert np.all((O >= 0) & (O <= 1))


@pytest.mark.parametrize(
    "args, match",
    [
        ((np.ones(3), np.ones(3)), "must be 2-D"),
        ((np.eye(3)[:, :2], np.eye(3)[:, :1]), "same shape"),
        ((np.ones((2, 3)), np.ones((2, 3))), "more columns"),
    ],
)
def test_subspace_overlap_rejects_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        subspace_overlap(*args)


def mlp_like_product(rng, d, ff_mult=4):
    """A random-initialisation MLP product: flat spectrum, the hard case for top-k methods."""
    up = rng.standard_normal((ff_mult * d, d)) / np.sqrt(d)
    down = rng.standard_normal((d, ff_mult * d)) / np.sqrt(ff_mult * d)
    return down @ up


def planted_spectrum(rng, d, k):
    """A matrix with a clear top-k block: U diag(s) V^T, s_1..s_k >> s_{k+1}."""
    U, V = ortho_group.rvs(d, random_state=rng), ortho_group.rvs(d, random_state=rng)
    s = np.concatenate([np.linspace(10, 5, k), np.linspace(1, 0.01, d - k)])
    return (U * s) @ V.T, U[:, :k], V[:, :k]


@pytest.mark.parametrize("d", [64, 200])
def test_arpack_top_k_matches_full_svd(d):
    rng = np.random.default_rng(d)
    for M in (mlp_like_product(rng, d), planted_spectrum(rng, d, 10)[0]):
        Ua, sa, Va = top_singular_subspaces(M, 10, method="arpack")
        Uf, sf, Vf = top_singular_subspaces(M, 10, method="full")
        s_exact = np.linalg.svd(M, compute_uv=False)[:11]
        assert np.allclose(sa, s_exact, rtol=1e-10) and np.allclose(sf, s_exact, rtol=1e-10)
        assert subspace_overlap(Ua, Uf) >= 0.999 and subspace_overlap(Va, Vf) >= 0.999
        assert np.allclose(Ua.T @ Ua, np.eye(10), atol=1e-10)


def test_top_k_recovers_planted_subspace_and_is_deterministic():
    rng = np.random.default_rng(7)
    M, U, V = planted_spectrum(rng, 50, 5)
    Ua, s, Va = top_singular_subspaces(M, 5, seed=3)
    assert subspace_overlap(Ua, U) == pytest.approx(1.0, abs=1e-10)
    assert subspace_overlap(Va, V) == pytest.approx(1.0, abs=1e-10)
    assert s.shape == (6,) and np.all(np.diff(s) <= 0)
    Ub, _, _ = top_singular_subspaces(M, 5, seed=3)
    assert np.array_equal(Ua, Ub)


def test_top_k_at_largest_k_still_returns_the_gap():
    M = np.diag([5.0, 4.0, 3.0, 2.0])
    U, s, V = top_singular_subspaces(M, 3)
    assert np.allclose(s, [5, 4, 3, 2])
    assert subspace_overlap(U, np.eye(4)[:, :3]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "M, k, kwargs, match",
    [
        (np.eye(4), 4, {}, "1 <= k < min"),
        (np.eye(4), 0, {}, "1 <= k < min"),
        (np.ones(4), 1, {}, "must be 2-D"),
        (np.eye(4), 1, {"method": "randomized"}, "method"),
    ],
)
def test_top_k_rejects_bad_input(M, k, kwargs, match):
    with pytest.raises(ValueError, match=match):
        top_singular_subspaces(M, k, **kwargs)


@pytest.mark.parametrize("d", [3, 10, 100])
def test_baseline_k1_matches_closed_form(d):
    # E|<u, v>| for independent uniform unit vectors in R^d.
    exact = math.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / math.sqrt(math.pi)
    mean, sd = random_overlap_baseline(d, 1, draws=20000, seed=0)
    assert mean == pytest.approx(exact, abs=4 * sd / math.sqrt(20000))


@pytest.mark.parametrize("d, k", [(30, 4), (128, 10)])
def test_baseline_matches_independent_haar_monte_carlo(d, k):
    # Independent route: the top-left k x k block of a Haar orthogonal matrix holds the cosines
    # between a random k-frame and a fixed coordinate subspace.
    mean, sd = random_overlap_baseline(d, k, draws=3000, seed=1)
    Qs = ortho_group.rvs(d, size=600, random_state=2)
    blocks = np.linalg.svd(Qs[:, :k, :k], compute_uv=False).mean(axis=-1)
    se = math.hypot(sd / math.sqrt(3000), blocks.std(ddof=1) / math.sqrt(600))
    assert mean == pytest.approx(blocks.mean(), abs=4 * se)


def test_baseline_values_quoted_in_methods_and_seeded():
    assert random_overlap_baseline(512, 10, draws=400)[0] == pytest.approx(0.117, abs=0.003)
    assert random_overlap_baseline(1024, 10, draws=400)[0] == pytest.approx(0.083, abs=0.002)
    assert random_overlap_baseline(64, 5, seed=9) == random_overlap_baseline(64, 5, seed=9)
    assert random_overlap_baseline(64, 5, seed=9) != random_overlap_baseline(64, 5, seed=10)
    with pytest.raises(ValueError, match="1 <= k <= d"):
        random_overlap_baseline(4, 5)
