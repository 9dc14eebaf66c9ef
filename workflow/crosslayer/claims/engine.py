"""The verdict engine: one claim of the catalogue and the workflow's tables in, one verdict out.

``data`` is what a table reader hands over: pandas DataFrames keyed by table name (the names the
catalogue declares, e.g. ``"alignment/adjacent"``), each with a ``model`` column, and for claims that
filter or group models a ``models`` table (one row per model: ``model`` and attributes such as
``gated_mlp``). The caller chooses what one verdict covers by what it passes: one model's rows for a
``scope: model`` claim, several models' rows for a ``scope: group`` claim (units are then pooled
over the models, each identified by ``(model, unit)``).

The engine only dispatches: each kind (:mod:`crosslayer.claims.kinds`) gives the statistic and its
interval over the claim's units at ``confidence`` (Student's t, its unequal-variance form, Fieller's, Clopper-Pearson,
Fisher's z, the jackknife over layers where units share them, an exact permutation test where one
run's checkpoints are the units), and :mod:`crosslayer.claims.rule` reads it against the paper's
direction and size. Every verdict's false "holds" and false "contradicted" rates are measured on
planted nulls at the unit counts the runs meet (``python -m bench calibration``, docs/claims.md).
:class:`~crosslayer.claims.catalogue.Claim` and :func:`~crosslayer.claims.catalogue.load_catalogue`
are re-exported here, so that a stage needs one import.
"""

import math
from dataclasses import dataclass

import numpy as np

from crosslayer.claims.catalogue import Claim, load_catalogue
from crosslayer.claims.kinds import estimate as kind_estimate
from crosslayer.claims.kinds.correlation import correlation, permutation_p
from crosslayer.claims.kinds.equivalence import decide_equivalence
from crosslayer.claims.readers import READERS
from crosslayer.claims.rows import Decided, Missing, all_models, models_in_scope, number, paper_size, require_table, resolve
from crosslayer.claims.rule import combine, decide, decide_by_p, strength

__all__ = ["VERDICTS", "DIRECTION_VERDICTS", "MAGNITUDES", "Verdict", "evaluate", "beside_ours", "decide",
           "decide_equivalence", "strength", "correlation", "permutation_p", "Claim", "load_catalogue"]

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
        The interval at the confidence asked for, its kind's (NaN when not testable, undefined, or
        where a permutation test alone decides: one run's checkpoints).
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
        Nominal coverage of the interval, in (0, 1): a verdict errs on either side at most
        (1 - confidence) / 2 of the time (an absence: two one-sided tests at that level each).
    n_boot : int, default=2000
        Random orders of a permutation test over more units than it enumerates exactly.
    seed : int, default=0
        Seed of those orders; the same inputs and seed give the same verdict.
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
        direction's (:func:`crosslayer.claims.rule.combine`), except where the quote's words state
        the size: ``weaker`` where the direction holds short of it, ``contradicted`` where no effect
        shows and the size is ruled out; and ``contradicted`` where every unit is already where the
        paper's change starts from (present before it "emerges", or a trend present before it is
        "installed").

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
    try:
        models = models_in_scope(claim, data)
        subject = subject or "+".join(models)
        found = kind_estimate(claim, data, models, confidence, n_boot, rng)
        size = paper_size(claim, data, models[0]) if claim.magnitude else nan
        margin = number(claim.margin.value, data, models[0], claim) if claim.margin else nan
    except Missing as missing:
        return Verdict(**blank, subject=subject or all_models(data), verdict="not testable",
                       direction="not testable", reason=str(missing))
    except Decided as decided:
        return Verdict(**blank | {"n": decided.n}, subject=subject, verdict=decided.verdict,
                       direction=decided.verdict, magnitude="undetermined" if claim.magnitude else "no number given",
                       reason=str(decided))
    low, high, reference, detail = found.low, found.high, found.reference, found.detail
    if found.p is not None:
        direction = decide_by_p(found.p, confidence)
    elif claim.direction == "==":
        direction = decide_equivalence(low, high, reference, margin)
    else:
        direction = decide(low, high, claim.direction, reference)
    if found.gate and direction != "inconclusive":  # the interval decides, a test of few units does not
        direction, detail = "inconclusive", f"{detail}; {found.gate}"
    numbers = f"{claim.statistic} {found.statistic:.3g}" if math.isnan(low) else (
        f"{claim.statistic} {found.statistic:.3g}, {confidence:.0%} interval [{low:.3g}, {high:.3g}] "
        f"({found.method})")
    paper = (f"within {margin:.3g} of {reference:.3g} ({claim.margin.cite})" if claim.direction == "=="
             else f"{claim.direction} {reference:.3g}")
    reason = f"{numbers} over {found.n} {claim.unit_name}{detail}; the paper: {paper}"
    magnitude = ("no number given" if math.isnan(size) else
                 strength(low, high, claim.direction, size, claim.magnitude.spread))
    verdict, reason = _verdict(claim, direction, magnitude, size, (low, high, found.n), reason)
    power = _stage_power(claim, data, models)
    reason += f"; {power}" if power else ""
    return Verdict(claim=claim.id, paper=claim.paper, subject=subject, statistic=float(found.statistic),
                   low=float(low), high=float(high), n=int(found.n), unit=claim.unit_name, verdict=verdict, reason=reason,
                   direction=direction, magnitude=magnitude, paper_value=float(size))


def _verdict(claim, direction, magnitude, size, interval, reason):
    """The verdict from its two parts, and the reason with the paper's size and what a null could show."""
    low, high, n = interval
    if magnitude != "no number given":
        spread = f" +- {claim.magnitude.spread:.3g}" if claim.magnitude.spread else ""
        reason += f"; its size {size:.3g}{spread} ({claim.magnitude.cite}): ours {magnitude}"
    verdict = combine(direction, magnitude, bool(claim.magnitude and claim.magnitude.words))
    if verdict != direction and verdict == "contradicted":
        return verdict, reason + f" (no effect shown, and the size the words {claim.magnitude.words!r} state ruled out)"
    if direction == "inconclusive" and not math.isnan(low) and claim.direction != "==":
        reason += f"; an effect under {(high - low) / 2:.3g} would rarely show over {n} {claim.unit_name}"
    return verdict, reason


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
