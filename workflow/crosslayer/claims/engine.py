"""The verdict engine: one claim of the catalogue and the workflow's tables in, one verdict out.

``data`` is what a table reader hands over: pandas DataFrames keyed by table name (the names the
catalogue declares, e.g. ``"alignment/adjacent"``), each with a ``model`` column, and for claims that
filter or group models a ``models`` table (one row per model: ``model`` and attributes such as
``gated_mlp``). The caller chooses what one verdict covers by what it passes: one model's rows for a
``scope: model`` claim, several models' rows for a ``scope: group`` claim (units are then pooled
over the models, each identified by ``(model, unit)``).

Every kind ends the same way: a statistic, a percentile bootstrap interval over the units
(``n_boot`` resamples from ``numpy.random.default_rng(seed)``; ``scipy.stats.bootstrap`` for the
means, the same resampling in numpy for correlations), and the verdict rule of
:mod:`crosslayer.claims`. The interval is Hesterberg's *expanded* percentile interval: its
percentiles are taken at :func:`expanded_level` rather than at ``confidence``, because plain
percentile intervals are too narrow for few units (measured here on pure noise with 95 %: 5 units
decided 17 % of the time, 10 units 10 %; expanded: 8 % and 6 %, correlations 2-6 %); with many
units the two agree. :class:`~crosslayer.claims.catalogue.Claim` and
:func:`~crosslayer.claims.catalogue.load_catalogue` live in :mod:`crosslayer.claims.catalogue` and
are re-exported here, so that a stage needs one import.
"""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crosslayer.claims.catalogue import Claim, Lookup, load_catalogue
from crosslayer.claims.records import OPS
from crosslayer.claims.readers import READERS
from crosslayer.claims.rows import (Decided, Missing, all_models, change, enough, models_in_scope, number,
                                    paper_size, pooled, require_table, resolve, values_at, unit_values, where_at)
from crosslayer.claims.resampling import (change_permutation_p, correlation, correlation_change_interval,
                                          correlation_interval, difference_interval, difference_of_means_interval,
                                          expanded_level, mean_interval, permutation_p, ratio_interval, unseen_rate)

__all__ = ["VERDICTS", "DIRECTION_VERDICTS", "MAGNITUDES", "Verdict", "evaluate", "beside_ours", "decide",
           "decide_equivalence", "strength", "correlation", "permutation_p", "expanded_level", "Claim",
           "load_catalogue"]

#: A claim's verdict on one subject, the direction's and the magnitude's together: ``weaker`` is a
#: claim whose words state a size ("far below", "about 98%") where the data show the effect smaller.
VERDICTS = ("holds", "weaker", "contradicted", "inconclusive", "not testable")
#: The direction part alone.
DIRECTION_VERDICTS = ("holds", "contradicted", "inconclusive", "not testable")
#: The magnitude part: our interval against the paper's size (:func:`strength`).
MAGNITUDES = ("as strong", "stronger", "weaker", "undetermined", "no number given")


@dataclass(frozen=True)
class Verdict:
    """The verdict on one claim for one model or group of models.

    Attributes
    ----------
    claim, paper : str
        The claim's id and paper.
    subject : str
        The model, or the group (``"GELU vs SwiGLU"``, or model names joined by ``+``).
    statistic : float
        The claim's statistic (NaN when not testable or undefined).
    low, high : float
        The (expanded) percentile bootstrap interval (NaN when not testable or undefined).
    n : int
        Units the interval is taken over (both groups together for a contrast).
    unit : str
        What a unit is (``"boundaries"``, ``"layer pairs"``, ...).
    verdict : str
        One of :data:`VERDICTS`: the direction's verdict, ``weaker`` where the quote's words state a
        size the data show the effect short of.
    reason : str
        The numbers, the paper's direction and size, or what is missing for a test.
    direction : str
        The direction's part alone (:data:`DIRECTION_VERDICTS`).
    magnitude : str
        Our interval against the paper's size (:data:`MAGNITUDES`; empty when not testable).
    paper_value : float
        The paper's size in the claim's statistic (NaN where it gives none).
    """

    claim: str
    paper: str
    subject: str
    statistic: float
    low: float
    high: float
    n: int
    unit: str
    verdict: str
    reason: str
    direction: str = ""
    magnitude: str = ""
    paper_value: float = math.nan


def evaluate(claim, data, *, confidence=0.95, n_boot=2000, seed=0, subject=None):
    """Test one claim on the tables of a run.

    Parameters
    ----------
    claim : Claim
        From :func:`load_catalogue`.
    data : dict of str to pandas.DataFrame
        Tables keyed by name, each with a ``model`` column (module docstring).
    confidence : float, default=0.95
        Nominal coverage of the interval, in (0, 1) (expanded for few units: :func:`expanded_level`).
    n_boot : int, default=2000
        Bootstrap resamples.
    seed : int, default=0
        Seed of the resampling; the same inputs and seed give the same verdict.
    subject : str, optional
        Name of the model or group in the verdict; by default the model (or the models joined by
        ``+``; for a contrast, its group names).

    Returns
    -------
    Verdict
        Its direction part: ``holds`` when the interval lies entirely on the paper's side of its value
        (``direction``, ``value``), ``contradicted`` when entirely on the other side, ``inconclusive``
        when it straddles the value or the statistic is undefined, ``not testable`` when the data
        lacks the comparison (the reason names what); for an absence (``==``), holds inside the
        margin and contradicted entirely outside it (:func:`decide_equivalence`). Its magnitude part
        (:func:`strength`) reads the interval against the paper's size. The verdict is the
        direction's, except: ``weaker`` where the direction holds but the data show the effect
        short of a size the quote's words state; ``contradicted`` where no effect shows and the
        paper's size is ruled out (a null result alone stays inconclusive, with the smallest effect
        its units could show in the reason); ``contradicted`` where every unit is already at the
        bound the paper's change starts from (present before it "emerges").

    Raises
    ------
    ValueError
        Bad ``confidence`` or ``n_boot``, a table without a ``model`` column, or a catalogue entry
        that leaves several rows per unit (a ``where`` is missing).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must be in (0, 1), got {confidence}")
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"`n_boot` must be a positive int, got {n_boot}")
    for name, table in data.items():
        if "model" not in table.columns:
            raise ValueError(f"table {name!r} has no `model` column (columns {list(table.columns)})")
    nan = math.nan
    blank = dict(claim=claim.id, paper=claim.paper, unit=claim.unit_name, statistic=nan, low=nan, high=nan, n=0)
    if not claim.testable:
        return Verdict(**blank, subject=subject or all_models(data), verdict="not testable",
                       direction="not testable", reason=f"beyond the workflow's tables: {claim.why}")
    subject = subject or (" vs ".join(claim.groups.names) if claim.groups else None)
    nested = _dependent_units(claim)
    if nested:
        return Verdict(**blank, subject=subject or all_models(data), verdict="not testable",
                       direction="not testable", reason=nested)
    rng = np.random.default_rng(seed)
    # equivalence is two one-sided tests at 1 - confidence each: the interval at 2 confidence - 1
    level = 2 * confidence - 1 if claim.direction == "==" else confidence
    try:
        models = models_in_scope(claim, data)
        subject = subject or "+".join(models)
        kind = {"contrast": _contrast, "trend": _trend}.get(claim.kind, _mean_kind)
        estimate, low, high, n, reference, detail, gate = kind(claim, data, models, level, n_boot, rng)
        size = paper_size(claim, data, models[0]) if claim.magnitude else nan
        margin = number(claim.margin.value, data, models[0], claim) if claim.margin else nan
    except Missing as missing:
        return Verdict(**blank, subject=subject or all_models(data), verdict="not testable",
                       direction="not testable", reason=str(missing))
    except Decided as decided:
        return Verdict(**blank | {"n": decided.n}, subject=subject, verdict=decided.verdict,
                       direction=decided.verdict, magnitude="undetermined" if claim.magnitude else "no number given",
                       reason=str(decided))
    if claim.direction == "==":
        direction = decide_equivalence(low, high, reference, margin)
    else:
        direction = decide(low, high, claim.direction, reference)
    if gate and direction != "inconclusive":  # the interval decides, a test of few units does not
        direction, detail = "inconclusive", f"{detail}; {gate}"
    numbers = f"{claim.statistic} {estimate:.3g}" if math.isnan(low) else (
        f"{claim.statistic} {estimate:.3g}, {level:.0%} interval [{low:.3g}, {high:.3g}]")
    paper = (f"within {margin:.3g} of {reference:.3g} ({claim.margin.cite})" if claim.direction == "=="
             else f"{claim.direction} {reference:.3g}")
    reason = f"{numbers} over {n} {claim.unit_name}{detail}; the paper: {paper}"
    magnitude = ("no number given" if math.isnan(size) else
                 strength(low, high, claim.direction, size, claim.magnitude.spread))
    verdict, reason = _verdict(claim, direction, magnitude, size, (low, high, n), reason)
    power = _stage_power(claim, data, models)
    reason += f"; {power}" if power else ""
    return Verdict(claim=claim.id, paper=claim.paper, subject=subject, statistic=float(estimate), low=float(low),
                   high=float(high), n=int(n), unit=claim.unit_name, verdict=verdict, reason=reason,
                   direction=direction, magnitude=magnitude, paper_value=float(size))


def _verdict(claim, direction, magnitude, size, interval, reason):
    """The verdict from its two parts, and the reason with the paper's size and what a null could show."""
    low, high, n = interval
    if magnitude != "no number given":
        spread = f" +- {claim.magnitude.spread:.3g}" if claim.magnitude.spread else ""
        reason += f"; its size {size:.3g}{spread} ({claim.magnitude.cite}): ours {magnitude}"
    if magnitude == "weaker" and direction == "holds" and claim.magnitude.words:
        return "weaker", reason  # the quote states the size: the sign alone is not the claim
    if magnitude == "weaker" and direction == "inconclusive":  # a null result that rules out the paper's size
        return "contradicted", reason + " (no effect shown, and the paper's size ruled out)"
    if direction == "inconclusive" and not math.isnan(low) and claim.direction != "==":
        reason += f"; an effect under {(high - low) / 2:.3g} would rarely show over {n} {claim.unit_name}"
    return direction, reason


def _dependent_units(claim):
    """Why the claim's units are not independent for its column ("" when they are), from its table's
    reader; a unit the reader does not name as independent is a catalogue defect."""
    reader = READERS.get(claim.table)
    if reader is None:  # a table no reader gives (tests' synthetic ones)
        return ""
    if claim.unit not in (*reader.units, "model"):
        raise ValueError(f"claim {claim.id}: the independent units of {claim.table} are {list(reader.units)} or whole "
                         f"models, not {claim.unit!r}: name one and average finer rows into it (unit.within)")
    why = dict(reader.nested).get(claim.column)
    return f"{claim.column} over {claim.unit_name}: {why}" if why and claim.unit != "model" else ""


def _stage_power(claim, data, models):
    """The stage's own warning about its power for these models' rows, from the table's reader."""
    reader = READERS.get(claim.table)
    if reader is None or reader.power is None:
        return ""
    table = data[claim.table]
    return reader.power(table[table["model"].isin(models)])


def beside_ours(number, data):
    """A published number beside ours: the mean of its column over the model's rows that match its
    ``where`` and ``at`` (:class:`~crosslayer.claims.catalogue.Published`).

    Returns
    -------
    dict
        ``paper, section, model, quantity, published, ours, difference, rows`` and ``missing`` (what
        the run lacks, empty when ours was computed; ours and difference are then NaN).
    """
    row = dict(paper=number.paper, section=number.section, model=number.model, quantity=number.quantity,
               published=number.value, ours=math.nan, difference=math.nan, rows=0, missing="")
    try:
        rows = require_table(data, number.table, [number.column, *(c for c, _ in number.where + number.at)])
        rows = rows[rows["model"] == number.model]
        for column, value in number.where:
            rows = rows[rows[column] == value]
        for column, selector in number.at:
            rows = rows[rows[column] == resolve(selector, rows[column], data, number.model, number)]
        values = rows[number.column].dropna().astype(float)
        if values.empty:
            raise Missing(f"{number.table} has no {number.column} for {number.model} at "
                           f"{dict(number.where + number.at)}")
    except Missing as missing:
        return row | {"missing": str(missing)}
    ours = float(values.mean())
    return row | {"ours": ours, "difference": ours - number.value, "rows": int(values.size)}


def decide(low, high, direction, value):
    """The verdict rule: where the interval ``[low, high]`` lies against the paper's ``direction value``.

    Parameters
    ----------
    low, high : float
        The interval (NaN: undefined).
    direction : {">", ">=", "<", "<="}
        The paper's side of ``value``: a strict direction counts ``value`` itself on the other side.
    value : float

    Returns
    -------
    str
        ``holds`` (entirely on the paper's side), ``contradicted`` (entirely on the other side) or
        ``inconclusive`` (straddling, or NaN).

    Examples
    --------
    >>> decide(0.1, 0.3, ">", 0.0), decide(-0.3, -0.1, ">", 0.0), decide(-0.1, 0.2, ">", 0.0)
    ('holds', 'contradicted', 'inconclusive')
    >>> decide(0.0, 0.0, ">=", 0.0), decide(0.0, 0.0, ">", 0.0)
    ('holds', 'contradicted')
    """
    if math.isnan(low) or math.isnan(high):
        return "inconclusive"
    if direction in (">", ">="):
        paper_side, other_side = OPS[direction](low, value), not OPS[direction](high, value)
    elif direction in ("<", "<="):
        paper_side, other_side = OPS[direction](high, value), not OPS[direction](low, value)
    else:
        raise ValueError(f"`direction` must be one of {list(OPS)}, got {direction!r}")
    return "holds" if paper_side else "contradicted" if other_side else "inconclusive"


def decide_equivalence(low, high, value, margin):
    """An absence ("at chance", "flat", "no relation") as equivalence: ``holds`` when the interval
    lies inside ``value +- margin``, ``contradicted`` when it lies entirely outside it, else
    ``inconclusive`` (two one-sided tests; the caller reads the interval at ``2 confidence - 1``).

    Examples
    --------
    >>> decide_equivalence(-0.02, 0.03, 0.0, 0.05), decide_equivalence(0.06, 0.2, 0.0, 0.05)
    ('holds', 'contradicted')
    >>> decide_equivalence(0.01, 0.2, 0.0, 0.05)
    'inconclusive'
    """
    if math.isnan(low) or math.isnan(high) or math.isnan(margin):
        return "inconclusive"
    if value - margin <= low and high <= value + margin:
        return "holds"
    return "contradicted" if low > value + margin or high < value - margin else "inconclusive"


def strength(low, high, direction, size, spread=0.0):
    """Our interval against the paper's size ``size`` +- ``spread`` (on the paper's side of
    ``direction``): ``as strong`` when the two overlap, ``stronger`` when ours lies entirely beyond
    the paper's, ``weaker`` when entirely short of it (the data show the effect smaller than the
    paper's), ``undetermined`` when our interval is undefined.

    Examples
    --------
    >>> strength(0.006, 0.119, ">", 0.74), strength(0.6, 0.9, ">", 0.74), strength(0.8, 0.9, ">", 0.74)
    ('weaker', 'as strong', 'stronger')
    >>> strength(-0.9, -0.8, "<", -0.5), strength(0.6, 0.65, ">", 0.74, spread=0.1)
    ('stronger', 'as strong')
    """
    if math.isnan(low) or math.isnan(high) or math.isnan(size):
        return "undetermined"
    sign = 1 if direction in (">", ">=") else -1
    near, far = (low, high) if sign > 0 else (-high, -low)
    return ("weaker" if far < sign * size - spread else "stronger" if near > sign * size + spread
            else "as strong")


# -- the kinds -----------------------------------------------------------------------------------


def _mean_kind(claim, data, models, confidence, n_boot, rng):
    """``change`` (mean paired difference, or the ratio of the means after and before) and
    ``threshold`` (mean against a value)."""
    if claim.statistic == "ratio_of_means":
        pairs = pd.concat([pd.concat(change(claim, data, m, pair=True), axis=1) for m in models]).dropna()
        before, after = pairs.to_numpy(float).T
        enough(claim, len(before), "", after - before)
        if before.sum() <= 0:
            raise Missing(f"the mean before is {before.mean():.3g}: a ratio to it is not defined")
        low, high = ratio_interval(before, after, confidence, n_boot, rng)
        detail = f" (mean {after.mean():.3g} after, {before.mean():.3g} before)"
        return float(after.sum() / before.sum()), low, high, len(before), claim.value, detail, None
    limits = {m: number(claim.value, data, m, claim) for m in models}
    source = f" ({claim.value.table} {claim.value.column})" if isinstance(claim.value, Lookup) else ""
    if len(set(limits.values())) == 1:  # one value to compare the mean with
        values = pooled(models, lambda m: unit_values(claim, data, m))
        reference = limits[models[0]]
        detail = f" against {reference:.3g}{source}" if claim.kind == "threshold" else ""
    else:  # models with their own value (e.g. baselines at different widths): the mean excess
        values = pooled(models, lambda m: unit_values(claim, data, m) - limits[m])
        reference, detail = 0.0, f" minus each model's value{source}"
    enough(claim, values.size, "", values)
    interval = difference_interval if claim.kind == "change" else mean_interval
    # an indicator's units are 0/1 (its fraction's exact interval) unless averaged within units
    low, high = interval(values, confidence, n_boot, rng, fraction=claim.indicator is not None and not claim.within)
    if np.all(values == reference) and claim.direction != "==":  # every unit at the value: a null result
        reach = unseen_rate(values.size, confidence)
        detail += f" (no unit differs from {reference:.3g}: a rate up to {reach:.3g} cannot be ruled out)"
    return float(values.mean()), low, high, values.size, reference, detail, None


def _contrast(claim, data, models, confidence, n_boot, rng):
    """Difference of the two groups' means, each group's units resampled on their own."""
    info = data["models"].set_index("model")
    samples = []
    for value, name in zip((claim.groups.a, claim.groups.b), claim.groups.names):
        members = [m for m in models if info.at[m, claim.groups.by] == value]
        if len(members) < claim.min_models:
            raise Missing(f"{len(members)} {name} model(s) ({claim.groups.by} = {value}: {members or 'none'}); "
                           f"the contrast needs at least {claim.min_models}")
        values = pooled(members, lambda m: unit_values(claim, data, m))
        enough(claim, values.size, f" for {name}", values)
        samples.append(values)
    a, b = samples
    low, high = difference_of_means_interval(a, b, confidence, n_boot, rng)
    first, second = claim.groups.names
    detail = f" ({a.size} {first}, {b.size} {second}; {first} minus {second})"
    return float(a.mean() - b.mean()), low, high, a.size + b.size, claim.value, detail, None


def _trend(claim, data, models, confidence, n_boot, rng):
    """Correlation of ``column`` with ``x`` across units (or its change ``before`` -> ``after`` over
    the same units); resamples with a constant column are left out."""
    if claim.before:
        return _trend_change(claim, data, models, confidence, n_boot, rng)
    # reset_index: x may be the unit itself (a trend over checkpoints, units = steps)
    frames = [values_at(claim, data, m, claim.at).reset_index()[[claim.x, claim.column]] for m in models]
    both = pd.concat(frames).dropna()
    enough(claim, len(both), "")
    x, y = both[claim.x].to_numpy(float), both[claim.column].to_numpy(float)
    estimate = float(correlation(x, y, method=claim.statistic))
    if math.isnan(estimate):
        if len(set(x.tolist())) == 1:  # one checkpoint, one depth: nothing to order
            raise Missing(f"{claim.x} takes one value ({x[0]:g}) over the {len(x)} {claim.unit_name}: "
                           "a trend needs it to vary")
        detail = f" ({claim.column} is constant: no correlation to measure)"
        return estimate, math.nan, math.nan, len(both), claim.value, detail, None
    low, high, dropped = correlation_interval(x, y, claim.statistic, confidence, n_boot, rng)
    detail = f" ({dropped} of {n_boot} resamples with a constant column left out)" if dropped else ""
    # resampling few perfectly ordered units gives [1, 1] by chance alone (1 in 24 at 4 units): the
    # order must also be unlikely under no association
    gate = _permutation_gate(claim, low, high, confidence, len(both), lambda side: permutation_p(
        x, y, method=claim.statistic, side=side, n_perm=n_boot, rng=rng))
    return estimate, low, high, len(both), claim.value, detail, gate


def _trend_change(claim, data, models, confidence, n_boot, rng):
    """``correlation(after) - correlation(before)`` of ``column`` with ``x``, over units present at
    both (a gradient training installs, against the one already there at initialization)."""
    frames = []
    for m in models:
        sides = [values_at(claim, data, m, selection)[[claim.x, claim.column]] for selection in (claim.before,
                                                                                                    claim.after)]
        frames.append(pd.concat(sides, axis=1, keys=["before", "after"], join="inner"))
    both = pd.concat(frames).dropna()
    enough(claim, len(both), "")
    xb, yb, xa, ya = (both[side][c].to_numpy(float) for side in ("before", "after") for c in (claim.x, claim.column))
    before, after = (float(correlation(x, y, method=claim.statistic)) for x, y in ((xb, yb), (xa, ya)))
    detail = f" ({claim.statistic} {before:.3g} before, {after:.3g} after)"
    ceiling = {">": 1.0, "<": -1.0}.get(claim.direction)
    if ceiling is not None and before == ceiling:  # the trend is already perfect where the paper starts
        raise Decided("contradicted", f"{claim.statistic} {before:.3g} over the {len(both)} {claim.unit_name} "
                       f"at {where_at(claim.before)} already (after: {after:.3g}): present before training, "
                       "so training cannot have installed it", len(both))
    if math.isnan(before) or math.isnan(after):
        return math.nan, math.nan, math.nan, len(both), claim.value, detail + ": a constant column", None
    low, high, dropped = correlation_change_interval(xb, yb, xa, ya, claim.statistic, confidence, n_boot, rng)
    if dropped:
        detail += f" ({dropped} of {n_boot} resamples with a constant column left out)"
    # as for a trend: few units resampled can exclude no change by chance alone
    gate = _permutation_gate(claim, low, high, confidence, len(both), lambda side: change_permutation_p(
        (xb, yb), (xa, ya), method=claim.statistic, side=side, n_perm=n_boot, rng=rng),
        how=" (before and after swapped per unit)") if swappable(claim) else None
    return after - before, low, high, len(both), claim.value, detail, gate


def _permutation_gate(claim, low, high, confidence, n, p_value, how=""):
    """Why an interval that excludes no association (or no change) still leaves the verdict open:
    the one-sided permutation p-value (``p_value(side)``, at the interval's tail) is above
    (1 - confidence) / 2; None where it is not, or where the interval decides nothing."""
    if claim.value != 0 or claim.direction == "==" or decide(low, high, claim.direction, 0.0) == "inconclusive":
        return None
    p, alpha = p_value(1 if low > 0 else -1), (1 - confidence) / 2
    return f"permutation p = {p:.2g}{how} over {n} {claim.unit_name}, above {alpha:.3g}" if p > alpha else None


def swappable(claim):
    """Whether a trend change's before and after are one variable at two checkpoints (they select
    the same rows but for ``step``), so that swapping a unit's two values is a null of no change;
    two predictors of one score (coupling against size) are not."""
    return [(c, s) for c, s in claim.before if c != "step"] == [(c, s) for c, s in claim.after if c != "step"]
