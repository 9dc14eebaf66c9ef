"""The depth null of the across-papers correlations (crosslayer.stats.depth_null): its
rearrangements, rho as SciPy's Spearman, its rate of false positives on independent smooth
profiles, and Benjamini-Hochberg as statsmodels computes it."""

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests

from crosslayer.stats.depth_null import MIN_BOUNDARIES, depth_rearrangements, depth_spearman, profile_correlations


# -- the circular-shift null ---------------------------------------------------------------------------


def smooth(rng, n, window=7):
    """A stationary profile correlated over about `window` boundaries (moving average of white noise)."""
    return np.convolve(rng.normal(size=n + window - 1), np.ones(window) / window, mode="valid")


@pytest.mark.parametrize("n", [1, 2, 3, 5, 12])
def test_rearrangements_are_every_shift_and_mirror_without_the_identity(n):
    index = depth_rearrangements(n)
    assert all(sorted(row) == list(range(n)) for row in index)
    assert not (index == np.arange(n)).all(axis=1).any()
    if n >= 3:
        assert len(index) == 2 * n - 1 and len({tuple(row) for row in index}) == 2 * n - 1


def test_rho_is_scipys_spearman_and_nan_boundaries_are_left_out():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=20), rng.normal(size=20)
    y[[3, 7]] = np.nan
    x[11] = np.nan
    keep = np.isfinite(x) & np.isfinite(y)
    result = depth_spearman(x, np.round(y, 1))  # ties too
    assert result["n"] == 17
    assert result["rho"] == pytest.approx(scipy.stats.spearmanr(x[keep], np.round(y, 1)[keep]).statistic, abs=1e-12)
    assert 1 / 34 <= result["p_value"] <= 1


def test_too_few_boundaries_or_a_constant_profile_give_no_correlation():
    assert np.isnan(depth_spearman(np.arange(MIN_BOUNDARIES - 1.0), np.arange(MIN_BOUNDARIES - 1.0))["rho"])
    assert np.isnan(depth_spearman(np.ones(10), np.arange(10.0))["p_value"])
    with pytest.raises(ValueError, match="1-D of one length"):
        depth_spearman(np.ones(4), np.ones(5))


def test_independent_smooth_profiles_are_significant_at_the_nominal_rate_and_spearmans_p_is_not():
    rng = np.random.default_rng(7)
    trials, n = 400, 40
    pairs = [(smooth(rng, n), smooth(rng, n)) for _ in range(trials)]
    ours = np.mean([depth_spearman(x, y)["p_value"] < 0.05 for x, y in pairs])
    naive = np.mean([scipy.stats.spearmanr(x, y).pvalue < 0.05 for x, y in pairs])
    assert ours <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / trials)  # 0.083
    assert naive > 0.2  # the null matters: boundaries are not independent


@pytest.mark.parametrize("n", [12, 40])
def test_a_copy_and_a_noisy_copy_are_significant(n):
    rng = np.random.default_rng(n)
    x = smooth(rng, n)
    assert depth_spearman(x, x.copy())["p_value"] == pytest.approx(1 / (2 * n))
    assert depth_spearman(x, x + 0.05 * x.std() * rng.normal(size=n))["p_value"] < 0.05
    assert depth_spearman(x, -x)["rho"] == pytest.approx(-1.0) and depth_spearman(x, -x)["p_value"] < 0.05


def test_pairs_are_corrected_by_statsmodels_benjamini_hochberg():
    rng = np.random.default_rng(3)
    base = smooth(rng, 30)
    profiles = pd.DataFrame({"a": base, "b": base + 0.01 * rng.normal(size=30), "c": smooth(rng, 30),
                             "d": smooth(rng, 30), "empty": np.nan})
    table = profile_correlations(profiles, q=0.1)
    assert list(zip(table["measure_a"], table["measure_b"]))[:4] == [("a", "b"), ("a", "c"), ("a", "d"),
                                                                     ("a", "empty")]
    numbered = table.dropna(subset=["p_value"])
    assert len(numbered) == 6 and table[table["measure_b"] == "empty"]["rho"].isna().all()
    reject, q_values, *_ = multipletests(numbered["p_value"], alpha=0.1, method="fdr_bh")
    np.testing.assert_allclose(numbered["q_value"], q_values)
    assert list(numbered["significant"]) == list(reject) and bool(table.iloc[0]["significant"])
