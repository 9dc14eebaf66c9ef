"""Means of units: a mean against a value (``threshold``), a mean paired difference (``change``),
and the difference of two groups' means (``contrast``).

Independent units take Student's t (for two groups, the unequal-variance t with Hsu's degrees of
freedom); units that share layers take the t along a chain of boundaries or the delete-one-layer
jackknife over pairs of layers (:mod:`crosslayer.claims.kinds.units`); a fraction of 0/1 units
takes Clopper-Pearson (:mod:`crosslayer.claims.kinds.proportion`).
"""

import math

import numpy as np
from scipy import stats

from crosslayer.claims.kinds.proportion import proportion_interval
from crosslayer.claims.kinds.units import (Estimate, Sample, chain_interval, gather, jackknife_interval,
                                           t_interval, unseen_rate)
from crosslayer.claims.records import Lookup
from crosslayer.claims.rows import Missing, enough, number, unit_values

__all__ = ["mean_interval", "welch_interval", "mean_estimate", "contrast_estimate"]


def mean_interval(sample, confidence, *, fraction=False, bounded=False):
    """Interval of the mean of a :class:`~crosslayer.claims.kinds.units.Sample` and how it was taken.

    ``fraction``: every unit 0 or 1 (Clopper-Pearson where the units are independent); ``bounded``:
    the values are fractions or their differences, so that units all of one value leave the interval
    as far as a rate never seen in them could reach (:func:`unseen_rate`), not [v, v]; a sample of
    any other kind with no spread has the t interval's [v, v].

    Returns
    -------
    low, high : float
    method : str
    """
    values = sample.values
    independent = sample.clusters is None
    count = sample.n if independent else len({k for c in sample.clusters for k in c}) // 2
    if fraction and independent:
        return (*proportion_interval(int(values.sum()), sample.n, confidence), "Clopper-Pearson")
    if np.ptp(values) == 0 and bounded:
        reach = unseen_rate(max(count, 1), confidence)
        floor = 0.0 if fraction else -1.0
        return (max(floor, values[0] - reach), min(1.0, values[0] + reach),
                f"a rate never seen in {count} independent units")
    if independent:
        low, high = t_interval(values, confidence)
        return float(low), float(high), "Student's t"
    if sample.chain:
        low, high = chain_interval(values, confidence)
        return float(low), float(high), f"t along a chain of {sample.n} boundaries"
    masks = sample.masks()
    low, high = jackknife_interval(lambda keep: values[..., keep].mean(axis=-1), masks, confidence)
    return float(low), float(high), f"jackknife over {len(masks)} layers"


def welch_interval(a, b, confidence):
    """The unequal-variance t interval of ``mean(a) - mean(b)`` over the last axis (two independent
    groups), with Hsu's conservative degrees of freedom ``min(n_a, n_b) - 1``: Welch's estimated
    ones decided 4.9 % of nulls per side at groups of 4 and 2 (``python -m bench calibration``).

    Examples
    --------
    >>> [round(x, 3) for x in welch_interval(np.array([1.0, 2, 3]), np.array([0.0, 1]), 0.95)]
    [-7.838, 10.838]
    """
    na, nb = a.shape[-1], b.shape[-1]
    va, vb = a.var(axis=-1, ddof=1) / na, b.var(axis=-1, ddof=1) / nb
    half = stats.t.ppf(0.5 + confidence / 2, min(na, nb) - 1) * np.sqrt(va + vb)
    diff = a.mean(axis=-1) - b.mean(axis=-1)
    return diff - half, diff + half


def mean_estimate(claim, data, models, confidence):
    """``change`` (mean paired difference ``after - before``) and ``threshold`` (mean against a value,
    or against each model's own value: the mean excess)."""
    limits = {m: number(claim.value, data, m, claim) for m in models}
    source = f" ({claim.value.table} {claim.value.column})" if isinstance(claim.value, Lookup) else ""
    if len(set(limits.values())) == 1:  # one value to compare the mean with
        sample = gather(claim, models, lambda m: unit_values(claim, data, m))["value"]
        reference = limits[models[0]]
        detail = f" against {reference:.3g}{source}" if claim.kind == "threshold" else ""
    else:  # models with their own value (e.g. baselines at different widths): the mean excess
        sample = gather(claim, models, lambda m: unit_values(claim, data, m) - limits[m])["value"]
        reference, detail = 0.0, f" minus each model's value{source}"
    enough(claim, sample.n, "", sample.values)
    indicator = claim.indicator is not None and not claim.within  # units 0/1, unless averaged within units
    low, high, method = mean_interval(sample, confidence, fraction=indicator and claim.kind == "threshold",
                                      bounded=claim.indicator is not None)
    if np.all(sample.values == reference) and claim.direction != "==" and not math.isnan(low):
        detail += f" (no unit differs from {reference:.3g})"
    return Estimate(float(sample.values.mean()), low, high, sample.n, reference, detail, method=method)


def contrast_estimate(claim, data, models, confidence):
    """Difference of the two groups' means. Whole models as units: the unequal-variance t over the models (the
    variation between models counted); finer units pooled over each group's models: the models are
    fixed, and the interval covers the sampling of their units (the same t, or the jackknife over the
    models' layers where units share them)."""
    info = data["models"].set_index("model")
    samples = []
    for value, name in zip((claim.groups.a, claim.groups.b), claim.groups.names):
        members = [m for m in models if info.at[m, claim.groups.by] == value]
        if len(members) < claim.min_models:
            raise Missing(f"{len(members)} {name} model(s) ({claim.groups.by} = {value}: {members or 'none'}); "
                          f"the contrast needs at least {claim.min_models}")
        sample = gather(claim, members, lambda m: unit_values(claim, data, m))["value"]
        enough(claim, sample.n, f" for {name}", sample.values)
        if sample.n < 2:
            raise Missing(f"one {claim.unit_name[:-1] if claim.unit_name.endswith('s') else claim.unit_name} of "
                          f"{name}: a group of one has no spread to take an interval over")
        samples.append(sample)
    a, b = samples
    first, second = claim.groups.names
    detail = f" ({a.n} {first}, {b.n} {second}; {first} minus {second})"
    if a.clusters is None:
        low, high = welch_interval(a.values, b.values, confidence)
        method = "unequal-variance t" + (" over models" if claim.unit == "model" else ", the models fixed")
    else:
        values = np.concatenate([a.values, b.values])
        in_a = np.arange(values.size) < a.n
        masks = Sample(values, a.clusters + b.clusters).masks()
        low, high = jackknife_interval(lambda keep: values[keep & in_a].mean() - values[keep & ~in_a].mean(),
                                       masks, confidence)
        method = f"jackknife over the {len(masks)} layers of the models, the models fixed"
    return Estimate(float(a.values.mean() - b.values.mean()), float(low), float(high), a.n + b.n, claim.value,
                    detail, method=method)
