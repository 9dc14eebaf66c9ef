"""Permutation tests, Cohen's d, Spearman and Benjamini-Hochberg (crosslayer.stats.permutation)
against closed forms, statsmodels, SciPy and loops, with uniform p-values under the null."""

import math

import numpy as np
import pytest
import scipy.stats
import torch
from statsmodels.stats.multitest import multipletests

from crosslayer.errors import DegenerateInputWarning
from crosslayer.stats import permutation as ptests


def discrete_support_ok(p, P):
    """Every permutation p-value is k / (P + 1) with k in 1..P+1."""
    k = np.asarray(p) * (P + 1)
    return np.allclose(k, np.round(k), atol=1e-9) and k.min() > 0.5 and k.max() < P + 1.5


def randomized(p, P, rng):
    """Under H0 a permutation p-value (count + 1) / (P + 1) is uniform on {1, ..., P + 1} / (P + 1)
    (continuous data: the observed statistic and the P permuted ones are exchangeable, no ties).
    Spreading each value uniformly over its bin ((count, count + 1] / (P + 1)) gives an exactly
    U(0, 1) variable, which a continuous KS test can then check without any discreteness bias."""
    return np.asarray(p) - rng.random(len(p)) / (P + 1)


def ks_uniform_p(p, P, seed=12345):
    assert discrete_support_ok(p, P)
    return scipy.stats.kstest(randomized(p, P, np.random.default_rng(seed)), "uniform").pvalue


def bh_by_hand(p, q):
    """Benjamini-Hochberg step-up, written out independently of statsmodels."""
    p = np.asarray(p, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    ranks = np.arange(1, m + 1)
    below = np.flatnonzero(p[order] <= q * ranks / m)
    k = below[-1] + 1 if below.size else 0  # largest i with p_(i) <= i q / m
    reject = np.zeros(m, dtype=bool)
    reject[order[:k]] = True
    adjusted = np.minimum(1.0, np.minimum.accumulate((p[order] * m / ranks)[::-1])[::-1])
    q_values = np.empty(m)
    q_values[order] = adjusted
    return reject, q_values


# --------------------------------------------------------------------------- Cohen's d


def test_cohens_d_closed_form_on_hand_values():
    # x: mean 5, sum of squared deviations 32; y: mean 3, 8  ->  s_p = sqrt(40 / 10) = 2
    assert ptests.cohens_d([2, 4, 4, 4, 5, 5, 7, 9], [1, 3, 3, 5]) == pytest.approx(1.0, rel=1e-14)
    # x: mean 2.5, s^2 5/3; y: mean 4, s^2 4  ->  s_p^2 = (3 * 5/3 + 2 * 4) / 5 = 2.6
    assert ptests.cohens_d([1, 2, 3, 4], [2, 4, 6]) == pytest.approx(-1.5 / math.sqrt(2.6), rel=1e-14)
    assert ptests.cohens_d(torch.tensor([1.0, 2.0, 3.0, 4.0]), np.array([2, 4, 6])) == pytest.approx(-1.5 / math.sqrt(2.6))


def test_cohens_d_degenerate_inputs():
    with pytest.raises(ValueError, match="at least 2"):
        ptests.cohens_d([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="non-finite"):
        ptests.cohens_d([1.0, np.nan], [1.0, 2.0])
    for x, y in (([0.1, 0.1, 0.1], [0.3, 0.3]), ([2.0, 2.0], [2.0, 2.0])):  # pooled sd 0: NaN, never inf
        with pytest.warns(DegenerateInputWarning, match="constant"):
            assert math.isnan(ptests.cohens_d(x, y))


# --------------------------------------------------------------------------- permutation test


@pytest.mark.parametrize("statistic", ptests.STATISTICS)
def test_extreme_separation_gives_the_smallest_p(statistic):
    # no other split of 20 + 20 distinct values reaches this statistic (2 of C(40, 20) do)
    x, y = 100.0 + np.arange(20.0), np.arange(20.0)
    P = 499
    for alternative in ("two-sided", "greater"):
        res = ptests.permutation_test(x, y, statistic, n_permutations=P, alternative=alternative)
        assert res.p_value == 1 / (P + 1)
    # every permuted statistic is below the observed maximum: all are at least as extreme "less"
    assert ptests.permutation_test(x, y, statistic, n_permutations=P, alternative="less").p_value == 1.0
    assert ptests.permutation_test(y, x, statistic, n_permutations=P, alternative="less").p_value == 1 / (P + 1)


def test_identical_values_give_p_one():
    x = np.full(7, 0.1)
    y = np.full(5, 0.1)  # the float mean of these need not be exactly 0.1
    for alternative in ptests.ALTERNATIVES:
        for fn in (ptests.permutation_test, ptests.permutation_test_loop):
            res = fn(x, y, "mean_diff", n_permutations=99, alternative=alternative)
            assert res.p_value == 1.0 and res.statistic == pytest.approx(0, abs=1e-15)
    with pytest.warns(DegenerateInputWarning):
        res = ptests.permutation_test(x, y, "cohens_d", n_permutations=99)
    assert math.isnan(res.statistic) and math.isnan(res.p_value)


def test_count_plus_one_convention_on_a_known_count():
    # x = [1], y = zeros: a permutation is as extreme as the observed split exactly when x gets
    # the 1, i.e. when unit 0 has the smallest key. Count that from the documented key stream.
    n, P, seed = 6, 999, 3
    x, y = np.array([1.0]), np.zeros(n - 1)
    rng = np.random.default_rng(seed)
    count = sum(int(np.argmin(rng.random(n)) == 0) for _ in range(P))
    assert 100 < count < 250  # about P / n
    res = ptests.permutation_test(x, y, "mean_diff", n_permutations=P, seed=seed)
    assert res.p_value == (count + 1) / (P + 1)
    assert ptests.permutation_test_loop(x, y, "mean_diff", n_permutations=P, seed=seed).p_value == res.p_value


def test_planted_effect_is_detected():
    rng = np.random.default_rng(0)
    x, y = rng.normal(1.5, 1.0, 40), rng.normal(0.0, 1.0, 40)
    P = 999
    for statistic in ptests.STATISTICS:
        assert ptests.permutation_test(x, y, statistic, n_permutations=P).p_value < 0.005
        assert ptests.permutation_test(x, y, statistic, n_permutations=P, alternative="greater").p_value < 0.005
        assert ptests.permutation_test(x, y, statistic, n_permutations=P, alternative="less").p_value > 0.99


def null_p_values(statistic, alternative, *, shift=0.0, n_sets=200, P=199, sizes=(12, 18)):
    rng = np.random.default_rng(2024)
    return np.array([
        ptests.permutation_test(rng.normal(shift, 1.0, sizes[0]), rng.normal(0.0, 1.0, sizes[1]), statistic,
                           n_permutations=P, seed=i, alternative=alternative).p_value
        for i in range(n_sets)
    ])


@pytest.mark.parametrize(("statistic", "alternative"),
                         [("cohens_d", "two-sided"), ("mean_diff", "two-sided"), ("mean_diff", "greater"),
                          ("cohens_d", "less")])
def test_p_values_are_uniform_under_the_null(statistic, alternative):
    P = 199
    p = null_p_values(statistic, alternative, P=P)
    # deterministic (seeded); a correct implementation fails a given seed with probability 1e-3
    assert ks_uniform_p(p, P) > 1e-3
    # the same check has power: a planted shift of one sd makes p-values pile up near 0
    p_shifted = null_p_values(statistic, alternative if alternative != "less" else "greater", shift=1.0, P=P)
    assert ks_uniform_p(p_shifted, P) < 1e-6


def test_same_seed_same_result_other_seed_other_result_any_chunk_size():
    rng = np.random.default_rng(1)
    x, y = rng.normal(0.3, 1.0, 23), rng.normal(0.0, 1.0, 31)
    n, P = 54, 1000
    ref = ptests.permutation_test(x, y, "cohens_d", n_permutations=P, seed=7)
    again = ptests.permutation_test(x, y, "cohens_d", n_permutations=P, seed=7)
    np.testing.assert_array_equal(ref.null, again.null)
    assert ref.p_value == again.p_value
    other = ptests.permutation_test(x, y, "cohens_d", n_permutations=P, seed=8)
    assert not np.array_equal(ref.null, other.null)
    one_row = 8 * (2 * n + x.size)
    for chunk_bytes in (one_row, 3 * one_row + 5, 333 * one_row, 10**9):
        res = ptests.permutation_test(x, y, "cohens_d", n_permutations=P, seed=7, chunk_bytes=chunk_bytes)
        np.testing.assert_array_equal(res.null, ref.null)
        assert res.p_value == ref.p_value and res.statistic == ref.statistic
    with pytest.raises(ValueError, match="chunk_bytes"):
        ptests.permutation_test(x, y, "cohens_d", n_permutations=P, chunk_bytes=one_row - 1)


@pytest.mark.parametrize("statistic", ptests.STATISTICS)
@pytest.mark.parametrize("alternative", ptests.ALTERNATIVES)
def test_vectorized_equals_loop_exactly(statistic, alternative):
    rng = np.random.default_rng(5)
    # integer-valued data: many permuted statistics tie with the observed one exactly
    x, y = rng.integers(0, 5, 9).astype(float), rng.integers(1, 6, 14).astype(float)
    P = 600
    fast = ptests.permutation_test(x, y, statistic, n_permutations=P, seed=11, alternative=alternative, chunk_bytes=4096)
    slow = ptests.permutation_test_loop(x, y, statistic, n_permutations=P, seed=11, alternative=alternative)
    np.testing.assert_allclose(fast.null, slow.null, rtol=1e-10, atol=1e-12)
    assert fast.p_value == slow.p_value
    assert fast.statistic == pytest.approx(slow.statistic, rel=1e-12)
    assert 1 / (P + 1) < fast.p_value < 1  # a case where the count is neither 0 nor P
    ties = np.isclose(np.abs(fast.null), abs(fast.statistic), rtol=1e-9)
    assert ties.any() or alternative != "two-sided"


def test_permutation_test_statistic_values_and_validation():
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 6.0])
    assert ptests.permutation_test(x, y, "mean_diff", n_permutations=9).statistic == pytest.approx(-1.5)
    assert ptests.permutation_test(x, y, "cohens_d", n_permutations=9).statistic == ptests.cohens_d(x, y)
    with pytest.raises(ValueError, match="statistic"):
        ptests.permutation_test(x, y, "t")
    with pytest.raises(ValueError, match="alternative"):
        ptests.permutation_test(x, y, alternative="two_sided")
    with pytest.raises(ValueError, match="n_permutations"):
        ptests.permutation_test(x, y, n_permutations=0)
    with pytest.raises(ValueError, match="seed"):
        ptests.permutation_test(x, y, seed=None)
    with pytest.raises(ValueError, match="`y`"):
        ptests.permutation_test(x, [1.0, np.inf])
    with pytest.raises(ValueError, match="at least 2"):
        ptests.permutation_test(x, [1.0], "cohens_d")


# --------------------------------------------------------------------------- BH


def test_bh_equals_statsmodels_and_the_step_up_by_hand():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(0, 0.01, 8), rng.uniform(0, 1, 24), [0.004, 0.004, 0.5, 0.5, 1.0]])
    rng.shuffle(p)
    for q in (0.05, 0.1, 0.2):
        reject, q_values = ptests.bh_fdr(p, q)
        sm_reject, sm_q, _, _ = multipletests(p, alpha=q, method="fdr_bh")
        hand_reject, hand_q = bh_by_hand(p, q)
        np.testing.assert_array_equal(reject, sm_reject)
        np.testing.assert_array_equal(reject, hand_reject)
        np.testing.assert_allclose(q_values, sm_q, rtol=1e-14)
        np.testing.assert_allclose(q_values, hand_q, rtol=1e-14)
        assert 0 < reject.sum() < p.size


def test_bh_leaves_nan_out_of_the_family():
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 0.05, 12)
    with_nan = p.copy()
    with_nan[[2, 7]] = np.nan
    reject, q_values = ptests.bh_fdr(with_nan.reshape(3, 4), 0.05)
    assert reject.shape == q_values.shape == (3, 4)
    reject, q_values = reject.ravel(), q_values.ravel()
    assert not reject[[2, 7]].any() and np.isnan(q_values[[2, 7]]).all()
    keep = ~np.isnan(with_nan)
    hand_reject, hand_q = bh_by_hand(with_nan[keep], 0.05)  # m = 10, not 12
    np.testing.assert_array_equal(reject[keep], hand_reject)
    np.testing.assert_allclose(q_values[keep], hand_q, rtol=1e-14)
    reject, q_values = ptests.bh_fdr([np.nan, np.nan])
    assert not reject.any() and np.isnan(q_values).all()
    reject, q_values = ptests.bh_fdr([])
    assert reject.shape == q_values.shape == (0,)


def test_bh_validation():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ptests.bh_fdr([0.1, 1.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ptests.bh_fdr([-0.1, 0.2])
    with pytest.raises(ValueError, match="`q`"):
        ptests.bh_fdr([0.1, 0.2], q=0)


# --------------------------------------------------------------------------- Spearman


def test_spearman_rho_equals_scipy_and_loop_equals_batched():
    rng = np.random.default_rng(3)
    x = rng.normal(size=31)
    y = np.round(0.4 * x + rng.normal(size=31), 1)  # ties in y
    P = 2000
    res = ptests.spearman_permutation(x, y, n_permutations=P, seed=4, chunk_bytes=24 * 31 * 7)
    assert res["rho"] == pytest.approx(scipy.stats.spearmanr(x, y).statistic, rel=1e-14)
    assert res["n_pairs"] == 31 and res["n_permutations"] == P
    loop = ptests.spearman_permutation_loop(x, y, n_permutations=P, seed=4)
    assert loop["p_value"] == res["p_value"] and loop["rho"] == res["rho"]
    assert 1 / (P + 1) < res["p_value"] < 0.2
    for chunk_bytes in (24 * 31, 10**8):  # one row, and all at once
        assert ptests.spearman_permutation(x, y, n_permutations=P, seed=4, chunk_bytes=chunk_bytes) == res
    assert ptests.spearman_permutation(x, y, n_permutations=P, seed=5)["p_value"] != res["p_value"]


def test_spearman_monotone_gives_the_smallest_p():
    x = np.arange(31.0)
    P = 999
    assert ptests.spearman_permutation(x, np.exp(x / 10), n_permutations=P)["p_value"] == 1 / (P + 1)
    assert ptests.spearman_permutation(x, -x**3, n_permutations=P)["p_value"] == 1 / (P + 1)


def test_spearman_p_values_are_uniform_under_the_null():
    rng = np.random.default_rng(9)
    P = 199
    p = [ptests.spearman_permutation(rng.normal(size=31), rng.normal(size=31), n_permutations=P, seed=i)["p_value"]
         for i in range(200)]
    assert ks_uniform_p(p, P) > 1e-3
    p_dep = []
    for i in range(200):
        x = rng.normal(size=31)
        p_dep.append(ptests.spearman_permutation(x, x + 2 * rng.normal(size=31), n_permutations=P, seed=i)["p_value"])
    assert ks_uniform_p(p_dep, P) < 1e-6


def test_spearman_drops_nan_pairs_and_degenerate_inputs_give_nan():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=20), rng.normal(size=20)
    x[3], y[11], x[15], y[15] = np.nan, np.nan, np.nan, np.nan
    res = ptests.spearman_permutation(x, y, n_permutations=99)
    keep = ~(np.isnan(x) | np.isnan(y))
    assert res["n_pairs"] == 17
    assert res["rho"] == pytest.approx(scipy.stats.spearmanr(x[keep], y[keep]).statistic, rel=1e-14)
    assert res == ptests.spearman_permutation(x[keep], y[keep], n_permutations=99)
    for a, b in (([1.0, 2.0, np.nan, 4.0], [1.0, 3.0, 2.0, np.nan]), ([1.0, 2.0, 3.0], [5.0, 5.0, 5.0])):
        with pytest.warns(DegenerateInputWarning):
            res = ptests.spearman_permutation(a, b, n_permutations=99)
        assert math.isnan(res["rho"]) and math.isnan(res["p_value"])
    with pytest.raises(ValueError, match="same length"):
        ptests.spearman_permutation([1.0, 2.0, 3.0], [1.0, 2.0])
