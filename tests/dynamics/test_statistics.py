"""Paper 004's statistics (crosslayer.dynamics.statistics): community bases, the variance a partition
captures and its random-partition null, the mesoscale test, and the boundary and rate-level coupling
of units."""

import math

import numpy as np
import pytest
import scipy.stats
import torch

from crosslayer.dynamics import statistics as dstats
from crosslayer.errors import DegenerateInputWarning
from crosslayer.stats import permutation as ptests


def naive_variance_captured(J, labels):
    """||P J P||_F^2 / ||J||_F^2 with the explicit d x d projector P = B B^T."""
    labels = np.asarray(labels)
    same = labels[:, None] == labels[None, :]
    P = same / same.sum(axis=1, keepdims=True)
    return np.linalg.norm(P @ J @ P) ** 2 / np.linalg.norm(J) ** 2


def shuffled_membership(sizes, seed):
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(len(sizes)), sizes))


# --------------------------------------------------------------------------- mesoscale


def test_community_basis_is_orthonormal_indicator_columns():
    membership = np.array([3, 3, 0, 7, 0, 3])
    B = dstats.community_basis(membership)
    assert B.shape == (6, 3)  # labels need not be contiguous; columns in label order 0, 3, 7
    np.testing.assert_allclose(B.T @ B, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(B[:, 1], np.array([1, 1, 0, 0, 0, 1]) / math.sqrt(3))
    np.testing.assert_array_equal(dstats.community_basis(torch.tensor(membership)), B)
    with pytest.raises(ValueError, match=">= 0"):
        dstats.community_basis([0, -1, 1])
    with pytest.raises(ValueError, match="integer"):
        dstats.community_basis([0, 0.5, 1])
    with pytest.raises(ValueError, match="1-D"):
        dstats.community_basis(np.zeros((2, 2), dtype=int))


def test_variance_captured_and_operator_match_the_projector_formula():
    rng = np.random.default_rng(0)
    d = 30
    J = np.eye(d) + rng.normal(size=(d, d)) / np.sqrt(d)
    membership = shuffled_membership([12, 9, 5, 3, 1], seed=1)
    B = dstats.community_basis(membership)
    vc = dstats.variance_captured(J, membership)
    assert vc == pytest.approx(naive_variance_captured(J, membership), rel=1e-12)
    assert vc == pytest.approx(np.linalg.norm(B.T @ J @ B) ** 2 / np.linalg.norm(J) ** 2, rel=1e-12)
    np.testing.assert_allclose(dstats.mesoscale_operator(J, membership), B.T @ J @ B, atol=1e-13)
    top = np.linalg.svd(B.T @ J @ B, compute_uv=False)[0]
    assert dstats.mesoscale_top_singular(J, membership) == pytest.approx(top, rel=1e-12)
    assert dstats.variance_captured(torch.from_numpy(J).float(), membership) == pytest.approx(vc, rel=1e-6)
    assert dstats.variance_captured(np.eye(d), membership) == pytest.approx(5 / d, rel=1e-13)  # C / d
    with pytest.raises(ValueError, match="30 x 30"):
        dstats.variance_captured(J, membership[:-1])
    with pytest.raises(ValueError, match="zero"):
        dstats.variance_captured(np.zeros((d, d)), membership)


def test_block_constant_operators_are_fully_captured():
    rng = np.random.default_rng(2)
    membership = shuffled_membership([7, 5, 4, 4], seed=3)
    values = rng.normal(size=(4, 4))
    block_constant = values[membership][:, membership]
    block_diagonal = np.where(membership[:, None] == membership[None, :], block_constant, 0.0)
    for J in (block_constant, block_diagonal):
        assert dstats.variance_captured(J, membership) == pytest.approx(1.0, rel=1e-13)
    noisy = block_diagonal + 0.3 * rng.normal(size=block_diagonal.shape)
    assert dstats.variance_captured(noisy, membership) < 0.9


def test_random_partition_null_follows_the_documented_draws():
    rng = np.random.default_rng(4)
    d = 24
    J = rng.normal(size=(d, d))
    membership = shuffled_membership([10, 8, 6], seed=5)
    null = dstats.random_partition_null(J, membership, n=40, seed=6)
    draws = np.random.default_rng(6)
    expected = []
    for _ in range(40):
        labels = membership[np.argsort(draws.random(d), kind="stable")]
        assert np.array_equal(np.bincount(labels), np.bincount(membership))  # same sizes
        expected.append(naive_variance_captured(J, labels))
    np.testing.assert_allclose(null, expected, rtol=1e-12)
    draw_bytes = 16 * d + 16 * d * 3
    for chunk_bytes in (draw_bytes, 7 * draw_bytes):
        chunked = dstats.random_partition_null(J, membership, n=40, seed=6, chunk_bytes=chunk_bytes)
        np.testing.assert_allclose(chunked, null, rtol=1e-13)  # same draws; GEMM blocking rounds differently
    assert not np.array_equal(dstats.random_partition_null(J, membership, n=40, seed=7), null)
    with pytest.raises(ValueError, match="chunk_bytes"):
        dstats.random_partition_null(J, membership, chunk_bytes=draw_bytes - 1)


def test_random_partition_null_mean_matches_monte_carlo():
    rng = np.random.default_rng(8)
    d = 20
    J = np.eye(d) + rng.normal(size=(d, d)) * rng.random(d)  # uneven columns: a non-trivial null
    membership = shuffled_membership([8, 6, 4, 2], seed=9)
    n = 1500
    null = dstats.random_partition_null(J, membership, n=n, seed=10)
    mc_rng = np.random.default_rng(11)
    mc = np.array([naive_variance_captured(J, mc_rng.permutation(membership)) for _ in range(n)])
    se = math.sqrt(null.var(ddof=1) / n + mc.var(ddof=1) / n)
    assert abs(null.mean() - mc.mean()) < 4 * se
    assert null.std() > 0.1 * null.mean()  # the check above is not trivially satisfied


def test_mesoscale_test_detects_a_planted_partition():
    rng = np.random.default_rng(12)
    d = 48
    membership = shuffled_membership([12, 12, 12, 12], seed=13)
    same = membership[:, None] == membership[None, :]
    J = 0.5 * np.eye(d) + 0.1 * same + 0.05 * rng.normal(size=(d, d))
    res = dstats.mesoscale_test(J, membership, n_random=100, seed=14)
    null = dstats.random_partition_null(J, membership, n=100, seed=14)
    assert res["observed"] == pytest.approx(dstats.variance_captured(J, membership))
    assert res["null_mean"] == pytest.approx(null.mean()) and res["null_sd"] == pytest.approx(null.std(ddof=1))
    assert res["excess"] == pytest.approx(res["observed"] - null.mean()) and res["excess"] > 0
    assert res["t"] < 0 and res["p_value"] < 0.01  # H1: the null mean is below the observed value
    ref = scipy.stats.ttest_1samp(null, res["observed"], alternative="less")
    assert res["t"] == pytest.approx(ref.statistic) and res["p_value"] == pytest.approx(ref.pvalue)
    assert res["n_random"] == 100 and res["n_communities"] == 4
    # a random partition of the same sizes is not special: not significant
    other = dstats.mesoscale_test(J, shuffled_membership([12, 12, 12, 12], seed=15), n_random=100, seed=14)
    assert other["p_value"] > 0.01 and abs(other["excess"]) < 3 * other["null_sd"]


def test_mesoscale_test_degenerate_partitions_give_nan():
    rng = np.random.default_rng(16)
    d = 12
    J = np.eye(d) + rng.normal(size=(d, d))
    one = np.zeros(d, dtype=int)
    with pytest.warns(DegenerateInputWarning, match="single community"):
        res = dstats.mesoscale_test(J, one, n_random=20)
    ones = np.ones(d)
    # B = 1 / sqrt(d): B^T J B = 1^T J 1 / d
    assert res["observed"] == pytest.approx((ones @ J @ ones) ** 2 / (d**2 * np.linalg.norm(J) ** 2), rel=1e-12)
    assert res["null_mean"] == pytest.approx(res["observed"], rel=1e-12)
    assert math.isnan(res["t"]) and math.isnan(res["p_value"])
    with pytest.warns(DegenerateInputWarning, match="singletons"):
        res = dstats.mesoscale_test(J, np.arange(d), n_random=20)
    assert res["observed"] == pytest.approx(1.0) and math.isnan(res["p_value"])
    with pytest.warns(DegenerateInputWarning, match="constant"):  # J = 2 I: every partition captures C / d
        res = dstats.mesoscale_test(2 * np.eye(d), shuffled_membership([6, 4, 2], seed=0), n_random=20)
    assert res["observed"] == pytest.approx(3 / d) and math.isnan(res["t"])
    with pytest.raises(ValueError, match="n_random"):
        dstats.mesoscale_test(J, one, n_random=1)


# --------------------------------------------------------------------------- boundary coupling


def test_jacobian_column_norms():
    J = np.random.default_rng(0).normal(size=(9, 9))
    np.testing.assert_allclose(dstats.jacobian_column_norms(J), np.linalg.norm(J, axis=0), rtol=1e-14)
    np.testing.assert_allclose(dstats.jacobian_column_norms(torch.from_numpy(J)), np.linalg.norm(J, axis=0), rtol=1e-14)
    with pytest.raises(ValueError, match="square"):
        dstats.jacobian_column_norms(np.ones((3, 4)))


def test_the_boundary_node_test_tails_ties_and_nan():
    part = np.array([0.5, np.nan, 0.0, 0.0, 0.0, 0.9, 0.9, 0.3, 0.9, 0.1, 0.2, 0.4, 0.6, 0.7, 0.8, 0.05, 0.0,
                     0.95, 0.9, np.nan, 0.85])
    norms = np.random.default_rng(1).uniform(1, 2, part.size)
    norms[1] = np.nan  # isolated unit: its norm is never read
    # 19 valid units, tail 0.2 -> 3 per tail. Bottom: four units tie at 0.0 (2, 3, 4, 16), the
    # lower indices win; top: 0.95 (17) and four ties at 0.9 (5, 6, 8, 18), the higher win.
    bottom, top = [2, 3, 4], [8, 17, 18]
    res = dstats.boundary_node_test(norms, part, tail=0.2, n_permutations=499, seed=3)
    assert (res["n_top"], res["n_bottom"], res["n_valid"], res["n_permutations"]) == (3, 3, 19, 499)
    assert res["cohens_d"] == pytest.approx(ptests.cohens_d(norms[top], norms[bottom]), rel=1e-14)
    ref = ptests.permutation_test(norms[top], norms[bottom], "cohens_d", n_permutations=499, seed=3)
    assert res["p_value"] == ref.p_value


def test_the_boundary_node_test_tail_sizes_and_errors():
    rng = np.random.default_rng(2)
    assert dstats.boundary_node_test(rng.random(30), rng.random(30), n_permutations=9)["n_top"] == 3  # 0.1 * 30
    assert dstats.boundary_node_test(rng.random(1024), rng.random(1024), n_permutations=9)["n_top"] == 102
    # 0.29 * 100 is 28.999999999999996 in floating point; the tail is floor(29) all the same
    assert dstats.boundary_node_test(rng.random(100), rng.random(100), tail=0.29, n_permutations=9)["n_top"] == 29
    with pytest.raises(ValueError, match=r"tail=0.1 of the 15 units .* gives 1; use a larger `tail`"):
        dstats.boundary_node_test(rng.random(19), np.r_[rng.random(15), [np.nan] * 4])
    with pytest.raises(ValueError, match="tail"):
        dstats.boundary_node_test(rng.random(30), rng.random(30), tail=0.6)
    with pytest.raises(ValueError, match="same length"):
        dstats.boundary_node_test(rng.random(30), rng.random(31))
    norms = rng.random(30)
    norms[4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        dstats.boundary_node_test(norms, rng.random(30))


def test_the_boundary_node_test_detects_planted_amplification():
    rng = np.random.default_rng(3)
    d = 400
    part = rng.random(d)
    norms = 1.0 + 0.5 * part + 0.1 * rng.normal(size=d)  # boundary units amplified more
    res = dstats.boundary_node_test(norms, part, n_permutations=999)
    assert res["cohens_d"] > 2 and res["p_value"] == 1 / 1000
    flipped = dstats.boundary_node_test(-norms + 3, part, n_permutations=999)
    assert flipped["cohens_d"] == pytest.approx(-res["cohens_d"]) and flipped["p_value"] == 1 / 1000
    null = dstats.boundary_node_test(1.0 + 0.1 * rng.normal(size=d), part, n_permutations=999)
    assert null["p_value"] > 0.05


# --------------------------------------------------------------------------- rate-level coupling


def test_the_rate_level_test_uses_disruption_and_absolute_swings():
    rng = np.random.default_rng(4)
    L = 32
    nmi = rng.uniform(0.2, 0.9, L - 1)
    top = rng.uniform(1, 3, L)
    var = rng.uniform(0, 0.3, L)
    res = dstats.rate_level_test(nmi, top, var, n_permutations=999, seed=5)
    np.testing.assert_allclose(res["disruption"], 1 - nmi)
    np.testing.assert_allclose(res["delta_top_singular"], np.abs(np.diff(top)))
    np.testing.assert_allclose(res["delta_variance"], np.abs(np.diff(var)))
    assert res["top_singular"] == ptests.spearman_permutation(1 - nmi, np.abs(np.diff(top)), n_permutations=999, seed=5)
    assert res["variance"] == ptests.spearman_permutation(1 - nmi, np.abs(np.diff(var)), n_permutations=999, seed=5)
    assert res["top_singular"]["n_pairs"] == L - 1
    # swings that grow with disruption, in alternating directions: perfectly coupled
    swings = np.cumsum(np.r_[0.0, (1 - nmi) * (-1.0) ** np.arange(L - 1)])
    coupled = dstats.rate_level_test(nmi, 2 + swings, 0.1 + swings / 10, n_permutations=999)
    assert coupled["top_singular"]["rho"] == pytest.approx(1.0) and coupled["top_singular"]["p_value"] == 1 / 1000
    assert coupled["variance"]["p_value"] == 1 / 1000


def test_the_rate_level_test_validation():
    with pytest.raises(ValueError, match="L - 1 = 4"):
        dstats.rate_level_test(np.full(3, 0.5), np.ones(5), np.ones(5))
    with pytest.raises(ValueError, match="one value per layer"):
        dstats.rate_level_test(np.full(4, 0.5), np.ones(5), np.ones(4))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        dstats.rate_level_test(np.array([0.5, 1.5, 0.2, 0.1]), np.ones(5), np.ones(5))
