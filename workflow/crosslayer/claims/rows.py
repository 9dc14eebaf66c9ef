"""Reading a claim's rows from the tables a run hands over: the models in its scope, its selections
resolved per model (``first``, ``last``, ``untrained``, lookups, the paper's per-model values), one
value per independent unit, and the two exceptions every kind shares: :class:`Missing` (what the data
lack: "not testable") and :class:`Decided` (a verdict the data reach before any interval).
"""

import math

import numpy as np
import pandas as pd

from crosslayer.claims.readers import READERS
from crosslayer.claims.records import OPS, SELECTORS, Lookup, PerModel

__all__ = ["Missing", "Decided", "models_in_scope", "require_table", "values_at", "unit_values", "change", "resolve",
           "paper_size", "repo_of", "untrained_step", "number", "lookup", "enough", "where_at",
           "where_text", "all_models"]


class Missing(Exception):
    """What the data lacks for a claim; becomes a "not testable" verdict with this message."""


class Decided(Exception):
    """A verdict the data reach before any interval: a ceiling or floor the change cannot pass (every
    unit already at its bound before), which the paper's own starting state contradicts."""

    def __init__(self, verdict, reason, n):
        super().__init__(reason)
        self.verdict, self.n = verdict, n


def models_in_scope(claim, data):
    """The models of the claim's table that its ``applies_to`` (and contrast groups) can use."""
    table = require_table(data, claim.table, [claim.column, claim.unit, claim.x, *(c for c, _ in claim.where)])
    models = list(pd.unique(table["model"]))
    if not models:
        raise Missing(f"{claim.table} has no rows")
    if claim.applies_to or claim.groups:
        columns = [c for c, _ in claim.applies_to] + ([claim.groups.by] if claim.groups else [])
        info = require_table(data, "models", columns).set_index("model")
        unknown = [m for m in models if m not in info.index]
        if unknown:
            raise Missing(f"the models table has no row for {unknown}")
        for column, value in claim.applies_to:
            models = [m for m in models if info.at[m, column] == value]
        if not models:
            wanted = ", ".join(f"{c} = {v}" for c, v in claim.applies_to)
            raise Missing(f"no model here has {wanted} (the claim is about those)")
    return models


def require_table(data, name, columns):
    if name not in data:
        why = READERS[name].empty if name in READERS else ""
        raise Missing(f"no table {name}" + (f" ({why})" if why else ""))
    absent = [c for c in dict.fromkeys(columns) if c and c not in data[name].columns]
    if absent:
        raise Missing(f"table {name} has no column(s) {absent}")
    return data[name]


def values_at(claim, data, model, selection):
    """The claim's table for one model at ``where`` and ``selection``, indexed by unit: its column
    made 0/1 by the indicator, if any, and rows finer than the unit averaged (``within``)."""
    rows = data[claim.table]
    rows = rows[rows["model"] == model]
    for column, value in claim.where:
        rows = rows[rows[column] == value]
    if rows.empty:
        raise Missing(f"{claim.table} has no rows for {model}" + where_text(claim))
    if claim.early and {"reference_step", "last_step"} <= set(rows.columns) and \
            (rows["reference_step"] >= rows["last_step"]).all():  # a table read at one step of its own
        raise Missing(f"{model}: its rows are read at step {rows['reference_step'].iloc[0]}, its last checkpoint, "
                      "not early in training; the claim needs an earlier one (a reference_step before the last)")
    for column, selector in selection:
        require_table(data, claim.table, [column])
        value = resolve(selector, rows[column], data, model, claim)
        if claim.early and column == "step" and value == rows[column].max():
            raise Missing(f"{model}: step {value} is its last checkpoint, not early in training; the claim needs "
                           "an earlier one (a reference_step before the last)")
        if not (rows[column] == value).any():
            have = sorted(rows[column].dropna().unique().tolist())
            raise Missing(f"{claim.table} has no {column} {value} for {model}{where_text(claim)} (it has {have})")
        rows = rows[rows[column] == value]
    for column, selector in claim.since:  # a trend over the checkpoints from a step on
        start = resolve(selector, rows[column], data, model, claim)
        rows = rows[rows[column] >= start]
    if claim.indicator is not None:  # 0/1 per row, before rows of one unit are averaged into a fraction
        rows = rows.assign(**{claim.column: _indicated(claim, data, model, rows[claim.column])})
    key = [claim.unit, *claim.within]
    if rows.duplicated(key).any():
        raise ValueError(f"claim {claim.id}: several rows per {' and '.join(key)} in {claim.table} for {model} at "
                         f"{dict(selection)}{where_text(claim)}; the catalogue entry needs a `where`")
    if claim.within:  # rows finer than the independent unit: one value per unit, their mean
        means = [c for c in (claim.column, claim.x) if c]
        return rows.groupby(claim.unit, sort=False).agg(
            {c: "mean" if c in means else "first" for c in rows.columns if c not in key})
    return rows.set_index(claim.unit)


def unit_values(claim, data, model):
    """One model's value per unit: the change ``before`` -> ``after`` if the claim has one, else the
    (indicated) column ``at`` its selection."""
    if claim.before:
        return change(claim, data, model)
    return values_at(claim, data, model, claim.at)[claim.column].astype(float)


def change(claim, data, model, *, pair=False):
    """Per-unit ``after - before`` (after the indicator, if any) for one model; ``pair``: the two
    aligned Series instead."""
    resolved = {}
    for key, selection in (("before", claim.before), ("after", claim.after)):
        rows = values_at(claim, data, model, selection)
        resolved[key] = rows[claim.column].astype(float)
        resolved[f"{key}_at"] = {c: rows[c].iloc[0] for c, _ in selection}
    at = where_at(resolved["before_at"].items())
    if resolved["before_at"] == resolved["after_at"]:
        raise Missing(f"{model}: before and after are the same rows ({at}); the change needs two conditions")
    before, after = resolved["before"].align(resolved["after"], join="inner")
    # a strict rise (fall) of a 0/1 indicator cannot show when every unit is already 1 (0) before:
    # the state the paper starts from (absent, or present) is not there, a verdict on the claim
    bound = {">": 1.0, "<": 0.0}.get(claim.direction)
    if claim.kind == "change" and claim.indicator and bound is not None and before.dropna().eq(bound).all():
        cut = number(claim.indicator.value, data, model, claim)
        state = "present" if bound else "absent"
        raise Decided("contradicted", f"{model}: every one of the {before.notna().sum()} {claim.unit_name} is "
                       f"already {bound:g} at {at} ({claim.column} {claim.indicator.op} {cut:.3g}): "
                       f"{state} before the {'rise' if bound else 'fall'} the paper describes, which "
                       "cannot show from there", int(before.notna().sum()))
    return (before, after) if pair else after - before


def _indicated(claim, data, model, values):
    if claim.indicator is None:
        return values.astype(float)
    limit = number(claim.indicator.value, data, model, claim)
    return OPS[claim.indicator.op](values, limit).astype(float).where(values.notna())


def resolve(selector, column, data, model, claim):
    if isinstance(selector, Lookup):
        return lookup(selector, data, model, claim)
    if isinstance(selector, PerModel):
        value = selector.value_for(repo_of(data, model))
        if value is not None:
            return value
        if selector.otherwise is None:
            raise Missing(f"{model}: the paper fixes this comparison for its own models only")
        return resolve(selector.otherwise, column, data, model, claim)
    if selector == "untrained":
        return untrained_step(data, model)
    if selector == "second":
        values = sorted(column.dropna().unique())
        if len(values) < 2:
            raise Missing(f"{model}: {column.name} has no second value (it has {values})")
        return values[1]
    if isinstance(selector, str) and selector in SELECTORS:
        return column.min() if selector == "first" else column.max()
    return selector


def paper_size(claim, data, model):
    """The paper's size for this model: a number, a lookup, or the paper's value for its own model
    (NaN for another model: the paper gives it no number)."""
    value = claim.magnitude.value
    if isinstance(value, PerModel):
        value = value.value_for(repo_of(data, model))
        return math.nan if value is None else float(value)
    return number(value, data, model, claim)


def _identity(data, model, column):
    """The model's value of `column` in the models table (joined from the config by
    :mod:`crosslayer.claims.subjects`), or None where it has none."""
    info = data.get("models")
    found = info.loc[info["model"] == model, column].dropna() if info is not None and column in info else ()
    return found.iloc[0] if len(found) else None


def repo_of(data, model):
    """The model's hub repo, or None."""
    return _identity(data, model, "repo")


def untrained_step(data, model):
    """The model's step that is its initialization: step 0 of a run the workflow trained, its
    untrained twin (``init``), or the step its config marks (``untrained_step``); a step 0 of a
    user's checkpoints is not assumed to be one."""
    found = _identity(data, model, "untrained_step")
    if found is None:
        raise Missing(f"{model}: no checkpoint is known to be untrained (the workflow neither trained it from "
                       f"step 0 nor built its untrained twin, and models.{model}.untrained_step is not set): "
                       "claims about initialization need one")
    return int(found)


def number(value, data, model, claim):
    return float(lookup(value, data, model, claim)) if isinstance(value, Lookup) else float(value)


def lookup(lookup, data, model, claim):
    table = require_table(data, lookup.table, [lookup.column])
    found = table.loc[table["model"] == model, lookup.column].dropna().unique()
    if found.size == 0:
        raise Missing(f"{lookup.table} has no {lookup.column} for {model}")
    if found.size > 1:
        raise ValueError(
            f"claim {claim.id}: {lookup.table} holds several {lookup.column} for {model}: {found.tolist()}")
    return found[0].item() if hasattr(found[0], "item") else found[0]


def enough(claim, n, group, values=None):
    if n < claim.min_units:
        seen = f" (their mean: {np.mean(values):.3g})" if values is not None and n else ""
        raise Missing(f"{claim.unit_name} with a value{group}: {n}{seen}; the claim needs at least {claim.min_units}")


def where_at(selection):
    return ", ".join(f"{c} {v}" for c, v in selection)


def where_text(claim):
    return "".join(f", {c} = {v}" for c, v in claim.where)


def all_models(data):
    names = sorted({m for name, table in data.items() if name != "models" for m in table["model"].unique()})
    return "+".join(str(m) for m in names)
