"""Each interval and test the verdict kinds use, against an independent computation: scipy's
t intervals, correlations, exact permutation tests and Pearson's Fisher interval, hand formulas
(Bonett and Wright's Spearman interval, Fieller's roots, Hsu's degrees of freedom, the jackknife of a
mean), and the beta quantiles of Clopper and Pearson."""

import math

import numpy as np
import pytest
from scipy import stats

from crosslayer.claims.kinds.correlation import change_permutation_p, correlation, fisher_interval, permutation_p
from crosslayer.claims.kinds.difference import welch_interval
from crosslayer.claims.kinds.proportion import proportion_interval
from crosslayer.claims.kinds.ratio import fieller_interval
from crosslayer.claims.kinds.units import Sample, jackknife_interval, t_interval
from crosslayer.claims.readers.base import BOUNDARIES, PAIRS

RNG = np.random.default_rng(74187315492831452)


def test_t_interval_is_scipys_row_by_row():
    values = RNG.normal(size=(5, 7))
    low, high = t_interval(values, 0.95)
    for row, lo, hi in zip(values, low, high):
        ci = stats.ttest_1samp(row, 0.0).confidence_interval(0.95)
        assert (lo, hi) == pytest.approx((ci.low, ci.high), rel=1e-12)


def test_the_unequal_variance_interval_takes_hsus_degrees_of_freedom():
    a, b = RNG.normal(size=4), 2 * RNG.normal(size=2)
    se = math.sqrt(a.var(ddof=1) / 4 + b.var(ddof=1) / 2)
    expected = a.mean() - b.mean() + np.array([-1, 1]) * stats.t.ppf(0.975, 1) * se
    assert welch_interval(a, b, 0.95) == pytest.approx(tuple(expected), rel=1e-12)
    big_a, big_b = RNG.normal(size=400), RNG.normal(size=500)  # many units: Welch's and scipy's
    ci = stats.ttest_ind(big_a, big_b, equal_var=False).confidence_interval(0.95)
    assert welch_interval(big_a, big_b, 0.95) == pytest.approx((ci.low, ci.high), rel=2e-2)


def test_fiellers_bounds_are_the_ratios_whose_paired_t_test_is_at_its_quantile():
    before = 1 + 0.2 * RNG.normal(size=12)
    after = 0.7 * before + 0.1 * RNG.normal(size=12)
    low, high = (float(v) for v in fieller_interval(before, after, 0.95))
    assert low < after.mean() / before.mean() < high
    for r in (low, high):
        assert abs(stats.ttest_1samp(after - r * before, 0.0).statistic) == pytest.approx(stats.t.ppf(0.975, 11))
    # a constant before: the t interval of after, divided by it
    ci = stats.ttest_1samp(after, 0.0).confidence_interval(0.95)
    assert fieller_interval(np.full(12, 2.0), after, 0.95) == pytest.approx((ci.low / 2, ci.high / 2))
    # a mean before within its own noise of 0: no bounded interval
    assert np.isnan(fieller_interval(RNG.normal(size=5), RNG.normal(size=5) + 1, 0.95)).all()


def test_fishers_interval_is_scipys_for_pearson_and_bonett_wrights_for_spearman():
    x = RNG.normal(size=30)
    y = 0.5 * x + RNG.normal(size=30)
    r = stats.pearsonr(x, y)
    assert fisher_interval(r.statistic, 30, "pearson", 0.95) == pytest.approx(tuple(r.confidence_interval(0.95)))
    rho = stats.spearmanr(x, y).statistic
    se = math.sqrt((1 + rho**2 / 2) / 27)
    expected = np.tanh(np.arctanh(rho) + np.array([-1, 1]) * stats.norm.ppf(0.975) * se)
    assert fisher_interval(rho, 30, "spearman", 0.95) == pytest.approx(tuple(expected))
    low, high = fisher_interval(1.0, 6, "spearman", 0.95)  # a perfect order of six: not a certainty
    assert 0 < low < high < 1 and np.isnan(fisher_interval(0.5, 3, "spearman", 0.95)).all()


def test_the_jackknife_of_a_mean_over_independent_units_is_the_t_interval():
    values = RNG.normal(size=9)
    keep = ~np.eye(9, dtype=bool)
    jack = jackknife_interval(lambda k: values[k].mean(), keep, 0.95)
    assert jack == pytest.approx(tuple(float(v) for v in t_interval(values, 0.95)), rel=1e-12)


@pytest.mark.parametrize("share, layers", [(BOUNDARIES, 7), (PAIRS, 6)])
def test_the_layer_jackknife_drops_every_unit_of_a_layer(share, layers):
    labels = share.labels(layers)
    joins = [share.layers(u) for u in labels]
    sample = Sample(RNG.normal(size=len(labels)), tuple(tuple(("m", x) for x in j) for j in joins))
    masks = sample.masks()
    assert masks.shape == (layers, len(labels))
    for layer, mask in enumerate(masks):
        assert list(mask) == [layer not in j for j in joins]
    # by hand: the mean without each layer's units, (g - 1) / g times their spread, t with g - 1 df
    leave = np.array([sample.values[m].mean() for m in masks])
    half = stats.t.ppf(0.975, layers - 1) * math.sqrt((layers - 1) / layers * ((leave - leave.mean()) ** 2).sum())
    expected = (sample.values.mean() - half, sample.values.mean() + half)
    assert jackknife_interval(lambda k: sample.values[k].mean(), masks, 0.95) == pytest.approx(expected)


@pytest.mark.parametrize("method, reference", [("spearman", stats.spearmanr), ("pearson", stats.pearsonr)])
def test_correlation_matches_scipy_row_by_row(method, reference):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, size=(6, 12)).astype(float)  # ties on purpose
    y = x + rng.normal(size=(6, 12))
    r = correlation(x, y, method=method)
    assert r.shape == (6,)
    assert r == pytest.approx([reference(a, b).statistic for a, b in zip(x, y)], abs=1e-12)


def test_correlation_of_a_constant_row_is_nan():
    r = correlation([[1, 1, 1], [1, 2, 3]], [[1, 2, 3], [3, 2, 1]])
    assert math.isnan(r[0]) and r[1] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="one shape"):
        correlation([1, 2], [1, 2, 3])


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_the_permutation_p_value_is_scipys_exact_test(method):
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=7), rng.normal(size=7)
    statistic = {"spearman": lambda a: stats.spearmanr(a, x).statistic,
                 "pearson": lambda a: stats.pearsonr(a, x).statistic}[method]
    for side, alternative in ((1, "greater"), (-1, "less")):
        reference = stats.permutation_test((y,), statistic, permutation_type="pairings", alternative=alternative,
                                           n_resamples=np.inf).pvalue
        assert permutation_p(x, y, method=method, side=side) == pytest.approx(reference)


@pytest.mark.parametrize("k, n", [(0, 6), (3, 6), (6, 6), (17, 40)])
def test_a_fractions_interval_is_clopper_pearsons(k, n):
    # the closed form: beta quantiles (Clopper & Pearson 1934)
    low = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    high = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    assert proportion_interval(k, n, 0.95) == pytest.approx((low, high), abs=1e-9)


def test_the_change_permutation_p_value_is_scipys_exact_paired_test():
    rng = np.random.default_rng(5)
    x, before, after = np.arange(7.0), rng.normal(size=7), rng.normal(size=7) + 0.3 * np.arange(7)
    xs, ys = np.concatenate([x, x]), np.concatenate([before, after])

    def change(a, b):  # the units' indices into (xs, ys): b after, a before (swapped per unit by scipy)
        return stats.spearmanr(xs[b], ys[b]).statistic - stats.spearmanr(xs[a], ys[a]).statistic

    for side, alternative in ((1, "greater"), (-1, "less")):
        reference = stats.permutation_test((np.arange(7), np.arange(7) + 7), change, permutation_type="samples",
                                           alternative=alternative, n_resamples=np.inf, vectorized=False).pvalue
        assert change_permutation_p((x, before), (x, after), side=side) == pytest.approx(reference)


def test_r_squared_is_pearsons_r_squared():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=9), rng.normal(size=9)
    assert float(correlation(x, y, method="pearson_r2")) == pytest.approx(stats.pearsonr(x, y).statistic ** 2)
