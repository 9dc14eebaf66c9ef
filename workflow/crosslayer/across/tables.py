"""The across-papers tables of one model: the boundary table, the measures' correlations along depth
at every checkpoint, the step at which each measure leaves its step-0 band, and across models the
depth mean of every measure as a ratio to its baseline.

A ratio above 1 means more aligned than random for every measure: value / baseline, or baseline /
value for paper 002's coupling (minus a distance, see :class:`crosslayer.across.catalog.Measure`).
"""

import numpy as np
import pandas as pd

from crosslayer.stats.depth_null import profile_correlations
from crosslayer.stats.permutation import spearman_permutation

__all__ = ["boundary_table", "measure_profiles", "correlations", "emergence", "emergence_order", "across_models"]


def _ratio(value, baseline, distance):
    with np.errstate(divide="ignore", invalid="ignore"):
        return baseline / value if distance else value / baseline


def boundary_table(values, measures, regimes=None):
    """One row per checkpoint and boundary, three columns per measure.

    Parameters
    ----------
    values : pandas.DataFrame
        Long: ``step``, ``boundary``, ``measure``, ``value``, ``baseline`` (the readers of
        :mod:`crosslayer.across.measures`, concatenated).
    measures : sequence of Measure
        Column order; a measure without values is an empty (NaN) column.
    regimes : pandas.DataFrame, optional
        ``step``, ``boundary``, ``regime`` (:func:`crosslayer.across.measures.depth_regimes`).

    Returns
    -------
    pandas.DataFrame
        ``step``, ``boundary``, ``regime``, then per measure ``{m}``, ``{m}.baseline``, ``{m}.ratio``.
    """
    keys = values[["step", "boundary"]].drop_duplicates().sort_values(["step", "boundary"])
    table = keys.reset_index(drop=True)
    if regimes is not None and len(regimes):
        table = table.merge(regimes, on=["step", "boundary"], how="left")
    else:
        table["regime"] = np.nan
    for m in measures:
        part = values[values["measure"] == m.name].set_index(["step", "boundary"])
        index = pd.MultiIndex.from_frame(table[["step", "boundary"]])
        value = part["value"].reindex(index).to_numpy(np.float64)
        baseline = part["baseline"].reindex(index).to_numpy(np.float64)
        table[m.name], table[f"{m.name}.baseline"] = value, baseline
        table[f"{m.name}.ratio"] = _ratio(value, baseline, m.distance)
    return table


def measure_profiles(table, step):
    """``(boundary x measure)`` values at one step: the measure columns of :func:`boundary_table`."""
    names = [c for c in table.columns if c not in ("step", "boundary", "regime") and "." not in c]
    return table[table["step"] == step].sort_values("boundary").set_index("boundary")[names]


def correlations(table, *, q=0.05):
    """Spearman's rho of every pair of measures along depth at every step, with the circular-shift
    null and Benjamini-Hochberg over the pairs of one step
    (:func:`crosslayer.stats.depth_null.profile_correlations`). Measures without values are left out.

    Returns
    -------
    pandas.DataFrame
        ``step``, ``measure_a``, ``measure_b``, ``n``, ``rho``, ``p_value``, ``q_value``, ``significant``.
    """
    frames = []
    for step in sorted(table["step"].unique()):
        profiles = measure_profiles(table, step).dropna(axis=1, how="all")
        frames.append(profile_correlations(profiles, q=q).assign(step=step))
    columns = ["step", "measure_a", "measure_b", "n", "rho", "p_value", "q_value", "significant"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def emergence(table, measures, *, reference_step=0, band_sd=3.0):
    """When each measure, at each boundary, first leaves its random band.

    The band of a measure is the mean of its values over the boundaries of the reference (step-0 or
    untrained) checkpoint, plus and minus `band_sd` of their standard deviation (ddof 1).

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`boundary_table`.
    measures : sequence of Measure
    reference_step : int or None, default=0
        Must be a step of `table`; None (no untrained checkpoint) gives an empty table.
    band_sd : float, default=3.0

    Returns
    -------
    pandas.DataFrame
        One row per measure with values and boundary: ``measure``, ``paper``, ``boundary``,
        ``band_low``, ``band_high``, ``step`` (first later step outside the band; NaN if none),
        ``direction`` (``above`` / ``below``, empty if none), ``stays_out`` (every later step
        outside on the same side).
    """
    columns = ["measure", "paper", "boundary", "band_low", "band_high", "step", "direction", "stays_out"]
    if reference_step is None:
        return pd.DataFrame(columns=columns)
    steps = sorted(table["step"].unique())
    if reference_step not in steps:
        raise ValueError(f"`reference_step` {reference_step} is not a step of the table {steps}")
    later = [s for s in steps if s > reference_step]
    rows = []
    for m in measures:
        wide = table.pivot(index="boundary", columns="step", values=m.name)
        reference = wide[reference_step].dropna()
        if reference.empty:
            continue
        sd = reference.std(ddof=1) if len(reference) > 1 else 0.0
        low, high = reference.mean() - band_sd * sd, reference.mean() + band_sd * sd
        for boundary, series in wide.iterrows():
            side = np.sign((series[later] > high).astype(int) - (series[later] < low).astype(int)).to_numpy()
            out = np.flatnonzero(side != 0)
            first = out[0] if out.size else None
            rows.append({"measure": m.name, "paper": m.paper, "boundary": boundary, "band_low": low,
                         "band_high": high, "step": later[first] if first is not None else np.nan,
                         "direction": "" if first is None else ("above" if side[first] > 0 else "below"),
                         "stays_out": first is not None and bool((side[first:] == side[first]).all())})
    return pd.DataFrame(rows, columns=columns)


def emergence_order(table, *, n_permutations=10000, seed=0):
    """Which geometry forms first, and in which direction along depth, from :func:`emergence`.

    Returns
    -------
    pandas.DataFrame
        One row per measure: ``paper``, ``n_boundaries``, ``n_emerged``, ``first_step``,
        ``median_step``, ``depth_rho`` (Spearman's rho of emergence step against boundary over the
        boundaries that emerged; negative = deep boundaries first, paper 000's backward cascade),
        ``p_value`` (permutation test, :func:`crosslayer.stats.permutation.spearman_permutation`),
        ``order`` (``backward`` / ``forward`` / ``mixed`` for rho < 0 / > 0 / = 0, ``together`` when
        all emerged at one step, empty with fewer than 3 boundaries emerged).
    """
    rows = []
    for measure, group in table.groupby("measure", sort=False):
        emerged = group.dropna(subset=["step"])
        row = {"measure": measure, "paper": group["paper"].iloc[0], "n_boundaries": len(group),
               "n_emerged": len(emerged), "first_step": emerged["step"].min(),
               "median_step": emerged["step"].median(), "depth_rho": np.nan, "p_value": np.nan, "order": ""}
        if len(emerged) >= 3:
            if emerged["step"].nunique() == 1:
                row["order"] = "together"
            else:
                fit = spearman_permutation(emerged["boundary"].to_numpy(np.float64),
                                           emerged["step"].to_numpy(np.float64),
                                           n_permutations=n_permutations, seed=seed)
                row.update(depth_rho=fit["rho"], p_value=fit["p_value"],
                           order="backward" if fit["rho"] < 0 else "forward" if fit["rho"] > 0 else "mixed")
        rows.append(row)
    columns = ["measure", "paper", "n_boundaries", "n_emerged", "first_step", "median_step", "depth_rho", "p_value",
               "order"]
    return pd.DataFrame(rows, columns=columns)


def across_models(tables, measures, heldout=None):
    """Each model's last checkpoint: its held-out loss and every measure's depth mean as a ratio to
    its baseline's.

    Parameters
    ----------
    tables : dict
        ``{model: boundary_table}``.
    measures : sequence of Measure
        Every measure of any model, in column order (a model without one has NaN).
    heldout : dict, optional
        ``{model: held-out table}`` (step, loss, bits_per_byte); without it (no evaluation stage) NaN.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``step``, ``n_boundaries``, ``heldout_loss``, ``bits_per_byte`` (at that step),
        then one column per measure: mean over boundaries of the value over mean of the baseline
        (baseline over value for a distance).
    """
    rows = []
    for model, table in tables.items():
        last = table[table["step"] == table["step"].max()]
        row = {"model": model, "step": int(last["step"].iloc[0]), "n_boundaries": len(last)}
        at = heldout[model][heldout[model].step == row["step"]] if heldout else pd.DataFrame()
        row["heldout_loss"], row["bits_per_byte"] = (at.loss.iloc[0], at.bits_per_byte.iloc[0]) if len(at) else (
            np.nan, np.nan)
        for m in measures:
            if m.name in last:
                row[m.name] = _ratio(last[m.name].mean(), last[f"{m.name}.baseline"].mean(), m.distance)
            else:
                row[m.name] = np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=["model", "step", "n_boundaries", "heldout_loss", "bits_per_byte",
                                       *[m.name for m in measures]])
