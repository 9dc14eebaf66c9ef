"""How often a verdict errs: every verdict test of the claims engine simulated on planted nulls at
the unit counts the embedded default and the suites meet, through the engine's own interval and
rule functions (``crosslayer.claims.kinds``, ``crosslayer.claims.rule``).

A cell is one test at one count of units: the rate of a false "holds" and of a false
"contradicted" over ``draws`` planted nulls (nominal: (1 - confidence) / 2 each, 2.5 % at 95 %;
an absence: a false "holds" with the truth at its margin's edge), and the rate of "holds" with a
planted effect of one unit standard deviation in the paper's direction (power). A cell is over
when a false rate exceeds the nominal level by more than three Monte Carlo standard errors.
"""

import math
import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from crosslayer.claims.kinds.correlation import (_permutation_gate, change_permutation_p, correlation,
                                                 fisher_interval, permutation_p)
from crosslayer.claims.kinds.difference import welch_interval
from crosslayer.claims.kinds.equivalence import decide_equivalence
from crosslayer.claims.kinds.proportion import proportion_interval
from crosslayer.claims.kinds.ratio import fieller_interval
from crosslayer.claims.kinds.units import Sample, chain_interval, jackknife_interval, t_interval, unseen_rate
from crosslayer.claims.readers.base import BOUNDARIES, PAIRS
from crosslayer.claims.rule import decide, decide_by_p

__all__ = ["TESTS", "simulate", "bench_calibration", "claim_tests"]

RISES = SimpleNamespace(value=0, direction=">", unit_name="units")  # a claim as the permutation gate reads it


@dataclass(frozen=True)
class Test:
    """One verdict test: ``run(rng, n, draws, effect, confidence)`` -> verdicts (str array); ``counts``
    the unit counts (layers, for units that share them) the runs meet; ``what`` the units."""

    name: str
    what: str
    counts: tuple
    run: object
    absence: bool = False


def _decided(low, high, direction=">", value=0.0):
    return np.array([decide(lo, hi, direction, value) for lo, hi in zip(np.ravel(low), np.ravel(high))])


def _t_mean(rng, n, draws, effect, confidence, *, tails=None):
    values = effect + (rng.normal(size=(draws, n)) if tails is None else
                       rng.standard_t(tails, size=(draws, n)) / math.sqrt(tails / (tails - 2)))
    return _decided(*t_interval(values, confidence))


def _layer_values(rng, share, layers, draws, shared):
    """Unit values over ``layers`` layers: each unit the sum of its layers' effects (variance
    ``shared``) and its own noise (the rest), unit variance in all."""
    labels = share.labels(layers)
    joins = [share.layers(label) for label in labels]
    node = rng.normal(size=(draws, layers)) * math.sqrt(shared / 2)
    values = np.stack([node[:, a] + node[:, b] for a, b in joins], axis=1)
    return values + rng.normal(size=values.shape) * math.sqrt(1 - shared), Sample(np.zeros(len(labels)), tuple(
        tuple(("m", layer) for layer in j) for j in joins))


def _shared_mean(share, shared):
    def run(rng, layers, draws, effect, confidence):
        values, sample = _layer_values(rng, share, layers, draws, shared)
        values = values + effect
        if share.chain:
            return _decided(*chain_interval(values, confidence))
        return _decided(*jackknife_interval(lambda keep: values[:, keep].mean(axis=1), sample.masks(), confidence))
    return run


def _welch(rng, sizes, draws, effect, confidence):
    a = effect + rng.normal(size=(draws, sizes[0]))
    b = 2 * rng.normal(size=(draws, sizes[1]))  # unequal spreads, the larger in the smaller group at 4+2
    return _decided(*welch_interval(a, b, confidence))


def _fieller(rng, n, draws, effect, confidence):
    before = 1 + 0.3 * rng.normal(size=(draws, n))
    after = before * (1 - 0.3 * effect) + 0.3 * rng.normal(size=(draws, n))  # a fall: the paper's side
    return _decided(*fieller_interval(before, after, confidence), "<", 1.0)


def _proportion(rng, n, draws, effect, confidence):
    p = min(0.3 + 0.3 * effect, 1.0)  # against a fraction of 0.3: above it is the paper's side
    counts = rng.binomial(n, p, size=draws)
    return np.array([decide(*proportion_interval(k, n, confidence), ">", 0.3) for k in counts])


def _indicator_change(rng, n, draws, effect, confidence):
    before = rng.random((draws, n)) < 0.3
    after = rng.random((draws, n)) < min(0.3 + 0.3 * effect, 1.0)
    diff = after.astype(float) - before
    low, high = t_interval(diff, confidence)
    flat = np.ptp(diff, axis=1) == 0  # every unit alike: as far as a rate never seen could reach
    reach = unseen_rate(n, confidence)
    low, high = np.where(flat, np.maximum(-1, diff[:, 0] - reach), low), np.where(flat, diff[:, 0] + reach, high)
    return _decided(low, high)


def _gated(verdicts, low, high, p_of, confidence, n):
    """The permutation gate of a trend, where the interval decides (as the engine reads it)."""
    out = verdicts.copy()
    for i in np.flatnonzero(verdicts != "inconclusive"):
        if _permutation_gate(RISES, low[i], high[i], confidence, n, lambda side: p_of(i, side)):
            out[i] = "inconclusive"
    return out


def _trend(rng, n, draws, effect, confidence):
    x = np.arange(n, dtype=float)
    y = effect * (x - x.mean()) / x.std() + rng.normal(size=(draws, n))
    low, high = fisher_interval(correlation(np.broadcast_to(x, y.shape), y), n, "spearman", confidence)
    return _gated(_decided(low, high), low, high, lambda i, side: permutation_p(x, y[i], side=side, rng=rng),
                  confidence, n)


def _trend_shared(share, shared):
    def run(rng, layers, draws, effect, confidence):
        values, sample = _layer_values(rng, share, layers, draws, shared)
        x = np.array([abs(b - a) if share is PAIRS else a for a, b in (share.layers(u) for u in share.labels(layers))],
                     dtype=float)
        y = values + effect * (x - x.mean()) / x.std()
        if share.chain:
            low, high = fisher_interval(correlation(np.broadcast_to(x, y.shape), y), math.ceil(len(x) / 2), "spearman",
                                        confidence)
        else:
            low, high = jackknife_interval(lambda keep: correlation(np.broadcast_to(x[keep], y[:, keep].shape),
                                                                    y[:, keep]), sample.masks(), confidence)
            low, high = np.clip(low, -1, 1), np.clip(high, -1, 1)
        return _gated(_decided(low, high), low, high, lambda i, side: permutation_p(x, y[i], side=side, rng=rng),
                      confidence, len(x))
    return run


def _series(rng, n, draws, effect, confidence):
    x = np.arange(n, dtype=float)
    y = effect * (x - x.mean()) / x.std() + rng.normal(size=(draws, n))
    return np.array([decide_by_p(tuple(permutation_p(x, row, side=s, n_perm=1000, rng=rng) for s in (1, -1)),
                                 confidence) for row in y])


def _trend_change(rng, n, draws, effect, confidence):
    x = np.arange(n, dtype=float)
    before = rng.normal(size=(draws, n))
    after = effect * (x - x.mean()) / x.std() + rng.normal(size=(draws, n))
    keep = ~np.eye(n, dtype=bool)
    low, high = jackknife_interval(lambda k: correlation(np.broadcast_to(x[k], (draws, k.sum())), after[:, k])
                                   - correlation(np.broadcast_to(x[k], (draws, k.sum())), before[:, k]), keep,
                                   confidence)
    verdicts = _gated(_decided(low, high), low, high, lambda i, side: change_permutation_p(
        (x, before[i]), (x, after[i]), side=side, rng=rng), confidence, n)
    alpha = (1 - confidence) / 2  # a trend already there before: contradicted, as the engine decides
    for i in range(draws):
        if permutation_p(x, before[i], side=1, n_perm=500, rng=rng) <= alpha / 2:
            verdicts[i] = "contradicted"
    return verdicts


def _equivalent_mean(rng, n, draws, effect, confidence):
    margin = 0.5  # the truth at the margin's edge (effect 0), or inside it by `effect` margins
    values = margin * (1 - effect) + rng.normal(size=(draws, n))
    low, high = t_interval(values, confidence)
    return np.array([decide_equivalence(lo, hi, 0.0, margin) for lo, hi in zip(low, high)])


def _equivalent_trend(rng, n, draws, effect, confidence):
    margin = 0.25
    rho = 2 * math.sin(math.pi * margin * (1 - effect) / 6)  # Pearson's for that Spearman's, normal pairs
    x = rng.normal(size=(draws, n))
    y = rho * x + math.sqrt(1 - rho**2) * rng.normal(size=(draws, n))
    low, high = fisher_interval(correlation(x, y), n, "spearman", confidence)
    return np.array([decide_equivalence(lo, hi, 0.0, margin) for lo, hi in zip(low, high)])


#: Every verdict test, with the unit counts the default and the suites meet (layers where units share them).
TESTS = (
    Test("mean, Student's t", "units", (3, 4, 5, 6, 8, 16, 32, 42), _t_mean),
    Test("mean, Student's t, heavy tails (t3)", "units", (3, 5, 8, 16), lambda *a: _t_mean(*a, tails=3)),
    Test("mean over boundaries, chain t, independent", "layers", (4, 5, 6, 8, 16, 24, 32),
         _shared_mean(BOUNDARIES, 0.0)),
    Test("mean over boundaries, chain t, shared layers", "layers", (4, 5, 6, 8, 16, 24, 32),
         _shared_mean(BOUNDARIES, 1.0)),
    Test("mean over layer pairs, layer jackknife, independent", "layers", (4, 6, 8, 16, 24),
         _shared_mean(PAIRS, 0.0)),
    Test("mean over layer pairs, layer jackknife, shared layers", "layers", (4, 6, 8, 16, 24),
         _shared_mean(PAIRS, 1.0)),
    Test("two groups, unequal-variance t (Hsu)", "models per group", ((2, 2), (4, 2), (3, 3), (8, 9)), _welch),
    Test("ratio of means, Fieller", "units", (3, 4, 6, 16, 42), _fieller),
    Test("fraction, Clopper-Pearson", "units", (4, 6, 16, 32), _proportion),
    Test("change of 0/1 units, t", "units", (4, 6, 16, 32), _indicator_change),
    Test("trend, Fisher's z + permutation", "units", (4, 5, 6, 8, 16, 24, 32), _trend),
    Test("trend over boundaries, Fisher's z over every other one + permutation", "layers", (5, 6, 8, 16, 24),
         _trend_shared(BOUNDARIES, 1.0)),
    Test("trend over layer pairs, layer jackknife + permutation", "layers", (6, 8, 16, 24),
         _trend_shared(PAIRS, 1.0)),
    Test("trend over one run's checkpoints, permutation", "checkpoints", (4, 5, 8, 11, 20), _series),
    Test("change of a trend, jackknife + swap permutation", "units", (4, 6, 8, 16, 24), _trend_change),
    Test("absence of a mean, TOST", "units", (3, 6, 16, 42), _equivalent_mean, absence=True),
    Test("absence of a trend, TOST (Fisher's z)", "units", (6, 16, 32, 200), _equivalent_trend, absence=True),
)


def simulate(test, n, *, draws=1000, seed=0, effect=0.0, confidence=0.95):
    """The rates of each verdict of ``test`` at ``n`` units over ``draws`` planted data sets."""
    verdicts = test.run(np.random.default_rng(seed), n, draws, effect, confidence)
    return {v: float(np.mean(verdicts == v)) for v in ("holds", "contradicted", "inconclusive")}


def bound(nominal, draws):
    """The largest false rate a calibrated test shows over ``draws``: nominal + 3 Monte Carlo se
    (over some 300 rates, 2 se would flag seven calibrated ones by chance; 3 se, one in three runs)."""
    return nominal + 3 * math.sqrt(nominal * (1 - nominal) / draws)


def claim_tests():
    """Each testable claim of the catalogues and the test its verdict takes (the engine's dispatch)."""
    from crosslayer.claims.catalogue import catalogue_papers, load_catalogue
    from crosslayer.claims.kinds.correlation import is_series
    from crosslayer.claims.kinds.units import layer_share

    rows = []
    for paper in catalogue_papers():
        for claim in load_catalogue(paper).claims:
            if not claim.testable:
                continue
            share = layer_share(claim)
            where = "" if share is None else " over boundaries, chain t" if share.chain else " over layer pairs, layer jackknife"
            if claim.kind == "trend":
                name = ("absence of a trend, TOST (Fisher's z)" if claim.direction == "==" else
                        "change of a trend, jackknife + swap permutation" if claim.before else
                        "trend over one run's checkpoints, permutation" if is_series(claim) else
                        ("trend over boundaries, Fisher's z over every other one + permutation" if share.chain else
                         "trend over layer pairs, layer jackknife + permutation") if share else "trend, Fisher's z + permutation")
            elif claim.kind == "contrast":
                name = "two groups, unequal-variance t (Hsu)" if share is None else "mean over layer pairs, layer jackknife, shared layers"
            elif claim.statistic == "ratio_of_means":
                name = "ratio of means, Fieller"
            elif claim.direction == "==":
                name = "absence of a mean, TOST"
            elif claim.indicator and claim.kind == "threshold" and share is None:
                name = "fraction, Clopper-Pearson"
            elif claim.indicator and share is None:
                name = "change of 0/1 units, t"
            elif share is not None:
                name = f"mean{where}, shared layers"
            else:
                name = "mean, Student's t"
            rows.append((claim.id, claim.unit_name, name))
    return rows


def bench_calibration(*, draws=1000, confidence=0.95, seed=0, tests=None):
    """Print the calibration table (one row per test and unit count) and each claim's test."""
    nominal = (1 - confidence) / 2
    limit = bound(nominal, draws)
    print(f"# calibration: {draws} planted nulls per cell, confidence {confidence}; a false rate is over above "
          f"{limit:.2%} (nominal {nominal:.1%} + 3 Monte Carlo se)\n")
    print("| test | units | n | false holds | false contradicted | power at 1 sd | |")
    print("|---|---|---|---|---|---|---|")
    worst, start = {}, time.perf_counter()
    for index, test in enumerate(TESTS):
        if tests and test.name not in tests:
            continue
        for n in test.counts:
            null = simulate(test, n, draws=draws, seed=seed + index, confidence=confidence)
            power = simulate(test, n, draws=draws, seed=seed + 100 + index, effect=1.0, confidence=confidence)
            false = (null["holds"], math.nan) if test.absence else (null["holds"], null["contradicted"])
            over = max(f for f in false if not math.isnan(f)) > limit
            worst[test.name] = max(worst.get(test.name, 0.0), *(f for f in false if not math.isnan(f)))
            shown = [f"{f:.1%}" if not math.isnan(f) else "—" for f in false]
            print(f"| {test.name} | {test.what} | {n if isinstance(n, int) else '+'.join(map(str, n))} | "
                  f"{shown[0]} | {shown[1]} | {power['holds']:.0%} | {'OVER' if over else 'ok'} |")
    print(f"\n({time.perf_counter() - start:.0f} s)\n")
    print("| claim | units | test | worst false rate of its test |")
    print("|---|---|---|---|")
    for claim, unit, name in claim_tests():
        print(f"| `{claim}` | {unit} | {name} | {worst.get(name, math.nan):.1%} |")
    return worst
