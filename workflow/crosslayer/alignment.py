"""Cross-layer alignment of MLP weight products (paper 000, "Common Origins, Divergent Destinations").

Per layer l the MLP product ``M_l = W_down @ W_up`` (d x d; SwiGLU gate ignored, biases and norm
gains ignored) has top-k left (output-space, U) and right (input-space, V) singular subspaces.
Their overlaps between all layer pairs are the alignment; this module computes them per
checkpoint and summarises them across checkpoints.
"""

import math

import numpy as np
import pandas as pd
import torch
from scipy import stats

from crosslayer.subspace import pairwise_overlap, top_singular_subspaces

__all__ = [
    "mlp_product",
    "checkpoint_alignment",
    "adjacent_overlap",
    "overlap_at_distance",
    "table1_metrics",
    "first_peak_step",
    "cascade_statistics",
]


def mlp_product(up, down, *, dtype=torch.float32):
    """``W_down @ W_up``: the MLP's linear read-write map in the residual stream.

    Parameters
    ----------
    up : (d_ff, d) torch.Tensor
    down : (d, d_ff) torch.Tensor

    Returns
    -------
    M : (d, d) torch.Tensor of `dtype`, on `up`'s device.
    """
    if up.ndim != 2 or down.ndim != 2 or down.shape[1] != up.shape[0] or down.shape[0] != up.shape[1]:
        raise ValueError(f"need up (d_ff, d) and down (d, d_ff), got {tuple(up.shape)} and {tuple(down.shape)}")
    return down.to(dtype) @ up.to(dtype)


def checkpoint_alignment(read_mlp, n_layers, *, k=10, method="arpack", gap_tol=1e-3, device="cpu", progress=None):
    """Top-k MLP-product subspaces of every layer and their pairwise overlaps.

    Parameters
    ----------
    read_mlp : callable
        ``read_mlp(layer) -> (up, down)`` float tensors; called once per layer, so only one
        layer's matrices are held at a time.
    n_layers : int
    k : int, default=10
        Subspace dimension.
    method : {"arpack", "full"}
        See :func:`crosslayer.subspace.top_singular_subspaces`.
    gap_tol : float, default=1e-3
        When the relative gap ``(s_k - s_{k+1}) / s_k`` is below this, the float32 product does
        not pin the top-k subspace down well; the product is recomputed in float64 and used.
    device : str, default="cpu"
        Where the product is formed.
    progress : callable, optional
        Wraps the layer iterator (e.g. ``tqdm``).

    Returns
    -------
    result : dict of ndarray
        ``left``, ``right`` (L, d, k) float32 bases; ``singular_values`` (L, k+1);
        ``relative_gap`` (L,); ``float64_recomputed`` (L,) bool; ``overlap_left``,
        ``overlap_right`` (L, L) symmetric with ones on the diagonal; ``overlap_cross`` (L, L),
        ``[i, j]`` = overlap of layer i's left (write) with layer j's right (read) subspace.
    """
    layers = range(n_layers)
    left, right, svals, gaps, recomputed = [], [], [], [], []
    for layer in progress(layers) if progress else layers:
        up, down = (t.to(device) for t in read_mlp(layer))
        U, s, V = top_singular_subspaces(mlp_product(up, down), k, method=method, seed=layer)
        gap = (s[k - 1] - s[k]) / s[k - 1] if s[k - 1] > 0 else 0.0
        if gap < gap_tol:
            U, s, V = top_singular_subspaces(mlp_product(up, down, dtype=torch.float64), k, method=method, seed=layer)
        left.append(U)
        right.append(V)
        svals.append(s)
        gaps.append(gap)
        recomputed.append(gap < gap_tol)
        del up, down
    left, right = np.stack(left), np.stack(right)
    return {
        "left": left.astype(np.float32),
        "right": right.astype(np.float32),
        "singular_values": np.stack(svals),
        "relative_gap": np.asarray(gaps),
        "float64_recomputed": np.asarray(recomputed),
        "overlap_left": pairwise_overlap(left),
        "overlap_right": pairwise_overlap(right),
        "overlap_cross": pairwise_overlap(left, right),
    }


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
