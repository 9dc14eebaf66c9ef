"""Where the cumulative bottleneck forms (paper 004, Fig. 4b): the per-layer drop of the cumulative
Jacobian's effective rank and its Spearman correlation, across layers, with the spectral radius of
each layer's mean Jacobian. NumPy and SciPy only, so table jobs need no torch."""

import itertools
import math

import numpy as np
import pandas as pd
import scipy.stats

__all__ = ["EXACT_MAX_N", "bottleneck_table", "rank_drop", "radius_vs_rank_drop", "recovery_table"]

#: Up to this many layers the p-value enumerates every pairing (9! = 362,880, a fraction of a second).
EXACT_MAX_N = 9


def rank_drop(cumulative_rank):
    """Drop of the cumulative effective rank caused by composing each layer.

    Parameters
    ----------
    cumulative_rank : (L,) array_like
        Effective rank of ``J_{l->L}`` from each start layer l (``cumulative_effective_rank`` of
        :mod:`crosslayer.dynamics.spectra`'s table), L >= 2.

    Returns
    -------
    drop : (L - 1,) ndarray
        ``drop[l] = erank(J_{l+1->L}) - erank(J_{l->L})`` for l = 0 .. L-2: how much prepending
        layer l to the downstream product lowers its effective rank (negative where it raises it).
        The last layer starts the product and has no drop.
    """
    r = np.asarray(cumulative_rank, dtype=float)
    if r.ndim != 1 or r.size < 2:
        raise ValueError(f"`cumulative_rank` must be 1-D with at least 2 layers, got shape {r.shape}")
    return r[1:] - r[:-1]


def radius_vs_rank_drop(spectral_radius, cumulative_rank):
    """Spearman correlation, across layers, of the spectral radius with the cumulative-rank drop.

    Parameters
    ----------
    spectral_radius : (L,) array_like
        ``max |lambda|`` of each layer's mean Jacobian J (not J - I).
    cumulative_rank : (L,) array_like
        Effective rank of ``J_{l->L}`` per start layer.

    Returns
    -------
    result : dict
        ``"rho"``: Spearman's rho in [-1, 1] between ``spectral_radius[l]`` and
        ``rank_drop(cumulative_rank)[l]`` over layers l = 0 .. L-2 (NaN when either is constant);
        ``"p_value"``: two-sided; exact for n <= :data:`EXACT_MAX_N` (every pairing of the layers,
        as ``scipy.stats.permutation_test`` with ``permutation_type="pairings"``), else from
        Student's t with n - 2 degrees of freedom (as ``scipy.stats.spearmanr``, whose
        approximation is poor for few layers: a perfect order of 4 layers is p = 1/12, not 0);
        ``"n"``: the number of layers correlated (L - 1).

    Notes
    -----
    rho is Pearson's correlation of the average ranks; ``t = rho sqrt((n - 2) / (1 - rho^2))``.
    Positive rho: layers with larger spectral radii cut the downstream rank more, the paper's
    reading of the early-layer collapse.
    """
    radius = np.asarray(spectral_radius, dtype=float)
    drop = rank_drop(cumulative_rank)
    if radius.shape != (drop.size + 1,):
        raise ValueError(f"`spectral_radius` must have shape ({drop.size + 1},) like `cumulative_rank`, "
                         f"got {radius.shape}")
    if not (np.isfinite(radius).all() and np.isfinite(drop).all()):
        raise ValueError("`spectral_radius` and `cumulative_rank` must be finite")
    x, y = scipy.stats.rankdata(radius[:-1]), scipy.stats.rankdata(drop)
    n = drop.size
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"rho": math.nan, "p_value": math.nan, "n": n}
    rho = float(np.clip(np.corrcoef(x, y)[0, 1], -1.0, 1.0))
    if n <= EXACT_MAX_N:
        return {"rho": rho, "p_value": _exact_p(x, y, rho), "n": n}
    if abs(rho) == 1.0:
        return {"rho": rho, "p_value": 0.0, "n": n}
    t = rho * math.sqrt((n - 2) / (1 - rho**2))
    return {"rho": rho, "p_value": float(2 * scipy.stats.t.sf(abs(t), n - 2)), "n": n}


def _exact_p(x, y, rho):
    """Two-sided p of `rho` under every pairing of the ranks `x` and `y` (n! of them): twice the
    smaller tail, at most 1, ties within rounding counted in both tails."""
    pairings = y[np.array(list(itertools.permutations(range(y.size))))]
    xc, yc = x - x.mean(), pairings - y.mean()
    null = yc @ xc / (np.linalg.norm(xc) * np.linalg.norm(y - y.mean()))
    tol = 1e-12
    return float(min(1.0, 2 * min(np.mean(null >= rho - tol), np.mean(null <= rho + tol))))


def recovery_table(tables):
    """How far removing the trained non-normal part recovers the cumulative rank (paper 004, Fig. 5a
    and its quoted ratios): per model, checkpoint and mode, the effective rank of ``J_{0->L}`` at the
    trained operator (dose 1), with the non-normal part removed (dose 0) and at the largest dose,
    and ``recovery`` = rank at dose 0 over rank at dose 1.

    Parameters
    ----------
    tables : dict
        ``{(model, step): table}``, each a :func:`crosslayer.dynamics.surgery.dose_response_table` (the schur.tsv files).

    Returns
    -------
    pandas.DataFrame
        model, step, mode, rank_trained, rank_removed, alpha_max, rank_at_alpha_max, recovery; NaN where
        the dose grid lacks 0 or 1.
    """
    rows = []
    for (model, step), table in tables.items():
        dose = table[(table["construction"] == "dose") & (table["start_layer"] == 0)]
        for mode, part in dose.groupby("mode", sort=False):
            rank = part.groupby("alpha")["effective_rank"].mean()
            trained, removed = rank.get(1.0, np.nan), rank.get(0.0, np.nan)
            rows.append({"model": model, "step": int(step), "mode": mode, "rank_trained": trained,
                         "rank_removed": removed, "alpha_max": rank.index.max(),
                         "rank_at_alpha_max": rank.iloc[-1], "recovery": removed / trained})
    return pd.DataFrame(rows, columns=["model", "step", "mode", "rank_trained", "rank_removed", "alpha_max",
                                       "rank_at_alpha_max", "recovery"])


def bottleneck_table(folds):
    """The cumulative bottleneck per sample fold over a model's checkpoints (paper 004, Fig. 4a, 4d
    and 5a at the paper's quantity, with independent units): the ``bottleneck_folds`` tables with
    ``step`` and ``composition``, which names the two start layers the paper compares: ``full``
    (J_{0->L}, every layer composed) and ``single`` (the last layer alone), else ``partial``.

    Parameters
    ----------
    folds : dict
        ``{step: table}``, each a :func:`crosslayer.dynamics.surgery.fold_bottleneck` table.

    Returns
    -------
    pandas.DataFrame
        step, fold, alpha, start_layer, composition, effective_rank, log_frobenius.
    """
    columns = ["step", "fold", "alpha", "start_layer", "composition", "effective_rank", "log_frobenius"]
    frames = []
    for step, table in folds.items():
        if table.empty:
            continue
        last = table["start_layer"].max()
        composition = np.select([table["start_layer"] == 0, table["start_layer"] == last], ["full", "single"],
                                "partial")
        frames.append(table.assign(step=int(step), composition=composition))
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
