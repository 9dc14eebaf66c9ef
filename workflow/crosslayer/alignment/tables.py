"""Alignment of one model across its training checkpoints: the tables behind paper 000's
Table 1 and Figures 1-4."""

import math

import numpy as np
import pandas as pd
from scipy import stats

from crosslayer.linalg.subspace import random_overlap_baseline, subspace_overlap
from crosslayer.npz import load_npz

__all__ = [
    "SPACES",
    "adjacent_overlap",
    "overlap_at_distance",
    "table1_metrics",
    "first_peak_step",
    "cascade_statistics",
    "load_alignment",
    "summarize_model",
]

# left = output (write) space U, right = input (read) space V, cross = U of layer i vs V of layer j
SPACES = ("left", "right", "cross")


def adjacent_overlap(overlap):
    """Overlap across each layer boundary: ``overlap[l, l + 1]``, shape (L - 1,)."""
    return overlap_at_distance(overlap, 1)


def overlap_at_distance(overlap, distance):
    """The entries ``overlap[l, l + distance]``, shape (L - distance,) (empty if distance >= L)."""
    overlap = np.asarray(overlap, dtype=float)
    if overlap.ndim != 2 or overlap.shape[0] != overlap.shape[1]:
        raise ValueError(f"`overlap` must be square (L, L), got shape {overlap.shape}")
    if distance < 1:
        raise ValueError(f"`distance` must be >= 1, got {distance}")
    return np.diagonal(overlap, offset=distance).copy()


def table1_metrics(overlap, *, threshold=0.15, distances=(1, 3, 5)):
    """The paper's Table 1 row for one checkpoint.

    Parameters
    ----------
    overlap : (L, L) array_like
        Pairwise overlap matrix (upper triangle is used).
    threshold : float, default=0.15
        A layer pair counts as aligned when its overlap exceeds this.
    distances : sequence of int, default=(1, 3, 5)

    Returns
    -------
    row : dict
        ``pairs_above`` (int), ``n_pairs`` = L(L-1)/2, ``fraction_above`` in [0, 1], and
        ``mean_d{n}`` per distance (NaN where the model has no layer pair that far apart).
    """
    overlap = np.asarray(overlap, dtype=float)
    L = overlap.shape[0]
    pairs = overlap[np.triu_indices(L, k=1)]
    row = {
        "pairs_above": int((pairs > threshold).sum()),
        "n_pairs": int(pairs.size),
        "fraction_above": float((pairs > threshold).mean()) if pairs.size else math.nan,
    }
    for n in distances:
        values = overlap_at_distance(overlap, n)
        row[f"mean_d{n}"] = float(values.mean()) if values.size else math.nan
    return row


def first_peak_step(steps, values, *, min_height=-math.inf):
    """The first training step at which a trajectory reaches a local maximum.

    Parameters
    ----------
    steps : (S,) array_like of int
        Checkpoint steps, increasing.
    values : (S,) array_like of float
        The trajectory, e.g. one boundary's overlap at each step.
    min_height : float, optional
        Peaks at or below this (e.g. the random baseline plus a few sd) are ignored.

    Returns
    -------
    step : int or float
        The first step ``s_i`` with ``values[i] > min_height``, ``values[i] >= values[i-1]`` and
        ``values[i] > values[i+1]`` (the last step counts as a peak when the trajectory is still
        rising there); NaN when no step qualifies.
    """
    steps, values = np.asarray(steps), np.asarray(values, dtype=float)
    if steps.shape != values.shape or steps.ndim != 1:
        raise ValueError(f"`steps` and `values` must be 1-D of equal length, got {steps.shape} and {values.shape}")
    if np.any(np.diff(steps) <= 0):
        raise ValueError(f"`steps` must be strictly increasing, got {steps.tolist()}")
    for i, v in enumerate(values):
        rising = i == 0 or v >= values[i - 1]
        falling = i == len(values) - 1 or v > values[i + 1]
        if v > min_height and rising and falling:
            return int(steps[i])
    return math.nan


def cascade_statistics(steps, adjacent, *, reference_step, min_height=-math.inf):
    """Backward-cascade statistics over training for one model.

    Parameters
    ----------
    steps : (S,) array_like of int
        Checkpoint steps, increasing.
    adjacent : (B, S) array_like
        Overlap across each of the B = L - 1 layer boundaries at each step.
    reference_step : int
        Step at which boundary overlaps are compared with depth (the paper: 2,000 for Pythia).
    min_height : float, optional
        Passed to :func:`first_peak_step`.

    Returns
    -------
    per_boundary : pandas.DataFrame
        One row per boundary: ``boundary`` (b joins layers b and b+1),
        ``distance_from_final`` (0 for the last boundary), ``first_peak_step``,
        ``overlap_at_reference``.
    fit : dict
        ``pearson_r`` and ``pearson_p`` of overlap at the reference step against distance from
        the final boundary (NaN with fewer than 3 boundaries), ``n_boundaries``, ``reference_step``.
    """
    steps, adjacent = np.asarray(steps), np.asarray(adjacent, dtype=float)
    if adjacent.ndim != 2 or adjacent.shape[1] != steps.size:
        raise ValueError(f"`adjacent` must be (boundaries, {steps.size} steps), got shape {adjacent.shape}")
    matches = np.flatnonzero(steps == reference_step)
    if matches.size == 0:
        raise ValueError(f"`reference_step` {reference_step} is not one of the checkpoint steps {steps.tolist()}")
    B = adjacent.shape[0]
    at_reference = adjacent[:, matches[0]]
    distance = (B - 1) - np.arange(B)
    per_boundary = pd.DataFrame(
        {
            "boundary": np.arange(B),
            "distance_from_final": distance,
            "first_peak_step": [first_peak_step(steps, row, min_height=min_height) for row in adjacent],
            "overlap_at_reference": at_reference,
        }
    )
    r = p = math.nan
    if B >= 3 and np.ptp(at_reference) > 0:
        r, p = (float(x) for x in stats.pearsonr(distance, at_reference))
    fit = {"reference_step": int(reference_step), "n_boundaries": int(B), "pearson_r": r, "pearson_p": p}
    return per_boundary, fit


def load_alignment(npz_paths, steps):
    """Stack per-checkpoint results (written by the ``mlp_alignment`` step) in step order.

    Returns
    -------
    data : dict
        ``steps`` (S,), ``overlap_<space>`` (S, L, L) for each space, ``singular_values``
        (S, L, k+1), ``d_model`` and ``k`` (ints, equal across checkpoints).
    """
    if len(npz_paths) != len(steps):
        raise ValueError(f"got {len(npz_paths)} result files for {len(steps)} steps")
    loaded = [load_npz(path) for path in npz_paths]
    found = [int(f["step"]) for f in loaded]
    if found != list(steps):
        raise ValueError(f"result files hold steps {found}, expected {list(steps)}")
    for key in ("d_model", "k"):
        values = {int(f[key]) for f in loaded}
        if len(values) != 1:
            raise ValueError(f"checkpoints disagree on {key}: {sorted(values)}")
    data = {f"overlap_{s}": np.stack([f[f"overlap_{s}"] for f in loaded]) for s in SPACES}
    data["singular_values"] = np.stack([f["singular_values"] for f in loaded])
    data.update(steps=np.asarray(steps), d_model=int(loaded[0]["d_model"]), k=int(loaded[0]["k"]))
    return data


def summarize_model(
    data, *, reference_step, threshold=0.15, distances=(1, 3, 5), baseline_draws=1000, seed=0, peak_min_sd=3.0
):
    """Per-model alignment tables.

    Parameters
    ----------
    data : dict
        From :func:`load_alignment`.
    reference_step : int
        Backward-cascade reference step.
    threshold, distances
        Table 1 settings (see :func:`crosslayer.alignment.tables.table1_metrics`).
    baseline_draws, seed
        Monte-Carlo random baseline for (d_model, k).
    peak_min_sd : float
        A boundary's first peak must exceed baseline mean + ``peak_min_sd`` sd.

    Returns
    -------
    tables : dict of pandas.DataFrame
        ``adjacent`` (step, boundary, left, right, cross), ``table1`` (one row per step and
        space), ``cascade`` (one row per boundary, left space), ``cascade_fit`` (one row),
        ``baseline`` (one row: d_model, k, draws, seed, mean, sd).
    """
    steps, d, k = data["steps"], data["d_model"], data["k"]
    n_layers = data["overlap_left"].shape[1]
    too_far = [n for n in distances if n >= n_layers]
    if too_far:  # an all-NaN Table 1 column would look like missing data, not like a bad setting
        raise ValueError(f"alignment.distances: {too_far} must be below the model's {n_layers} layers")
    mean, sd = random_overlap_baseline(d, k, draws=baseline_draws, seed=seed)
    baseline = pd.DataFrame([{"d_model": d, "k": k, "draws": baseline_draws, "seed": seed, "mean": mean, "sd": sd}])

    adjacent = pd.concat(
        [
            pd.DataFrame(
                {"step": step, "boundary": np.arange(data["overlap_left"].shape[1] - 1)}
                | {s: adjacent_overlap(data[f"overlap_{s}"][i]) for s in SPACES}
            )
            for i, step in enumerate(steps)
        ],
        ignore_index=True,
    )
    table1 = pd.DataFrame(
        [
            {"step": int(step), "space": s, **table1_metrics(data[f"overlap_{s}"][i], threshold=threshold, distances=distances)}
            for s in SPACES
            for i, step in enumerate(steps)
        ]
    ).assign(threshold=threshold, baseline_mean=mean)

    by_boundary = adjacent.pivot(index="boundary", columns="step", values="left").to_numpy()
    cascade, fit = cascade_statistics(steps, by_boundary, reference_step=reference_step, min_height=mean + peak_min_sd * sd)
    return {
        "adjacent": adjacent,
        "table1": table1,
        "cascade": cascade,
        "cascade_fit": pd.DataFrame([fit]),
        "baseline": baseline,
    }


GATED_COLUMNS = ["model", "step", "adjacent_left_static", "adjacent_left_gated", "adjacent_right_static",
                 "adjacent_right_gated", "same_layer_left", "same_layer_right"]


def gated_rows(model, steps, static, gated):
    """One row per step comparing the gate-conditioned products with the static ones.

    Parameters
    ----------
    model : str
    steps : list of int
    static, gated : list of dict
        Per step, the arrays of :func:`crosslayer.alignment.measure.mlp_alignment` (``left``,
        ``right``, ``overlap_left``, ``overlap_right``) of ``W_down W_up`` and of
        ``W_down diag(mean g) W_up``.

    Returns
    -------
    list of dict
        :data:`GATED_COLUMNS`: mean adjacent-layer overlap of each product's left (write) and right
        (read) subspaces, and the mean over layers of the overlap between a layer's static and
        gated subspaces (1: the gate leaves the subspace unchanged).
    """
    rows = []
    for step, s, g in zip(steps, static, gated):
        row = {"model": model, "step": step}
        for side in ("left", "right"):
            row[f"adjacent_{side}_static"] = float(adjacent_overlap(s[f"overlap_{side}"]).mean())
            row[f"adjacent_{side}_gated"] = float(adjacent_overlap(g[f"overlap_{side}"]).mean())
            row[f"same_layer_{side}"] = float(np.mean([subspace_overlap(a, b) for a, b in zip(s[side], g[side])]))
        rows.append(row)
    return rows
