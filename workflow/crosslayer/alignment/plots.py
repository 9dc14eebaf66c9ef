"""Figures of paper 000 (cross-layer alignment). Each ``plot_*`` draws into a given Axes, does no I/O and returns
the main artist; the workflow scripts build the figures and save them.
"""

import matplotlib as mpl
import numpy as np

from crosslayer.plotting import depth_colors, format_step, set_step_axis

__all__ = [
    "plot_random_baseline", "plot_adjacent_mean", "plot_boundary_heatmap", "plot_boundary_trajectories",
    "plot_overlap_matrix",
]

SPACE_LABELS = {"left": "output space $U$", "right": "input space $V$", "cross": "$U_l$ vs $V_{l+1}$"}


def plot_random_baseline(ax, mean, sd, *, band_sd=2.0):
    """The random-subspace baseline: a dashed line at `mean` over a grey ``mean +- band_sd * sd``
    band. Returns the line."""
    ax.axhspan(mean - band_sd * sd, mean + band_sd * sd, color="0.85", lw=0, zorder=0)
    return ax.axhline(mean, color="0.5", ls="--", lw=1, label=f"random baseline (±{band_sd:g} sd)", zorder=1)


def plot_adjacent_mean(ax, steps, mean, *, label=None, color=None):
    """Mean adjacent-layer overlap against training step (draw the baseline with
    :func:`plot_random_baseline`).

    Parameters
    ----------
    steps : (S,) array_like of int
    mean : (S,) array_like
        Mean over boundaries of the adjacent-layer overlap at each step, in [0, 1].

    Returns
    -------
    line : matplotlib.lines.Line2D
    """
    steps, mean = np.asarray(steps), np.asarray(mean, dtype=float)
    if steps.shape != mean.shape:
        raise ValueError(f"`steps` and `mean` must have the same shape, got {steps.shape} and {mean.shape}")
    (line,) = ax.plot(steps, mean, marker="o", ms=4, label=label, color=color)
    set_step_axis(ax, steps)
    ax.set_ylabel("mean adjacent-layer overlap")
    return line


def plot_boundary_heatmap(ax, steps, overlap, *, vmin=0.0, vmax=None, cmap="viridis"):
    """Overlap across each layer boundary (rows) at each checkpoint (columns).

    Parameters
    ----------
    steps : (S,) array_like of int
        Column labels; columns are evenly spaced whatever the step values.
    overlap : (B, S) array_like
        ``overlap[b, i]``: overlap between layers b and b+1 at ``steps[i]``.

    Returns
    -------
    mesh : matplotlib.collections.QuadMesh
    """
    overlap = np.asarray(overlap, dtype=float)
    if overlap.ndim != 2 or overlap.shape[1] != len(steps):
        raise ValueError(f"`overlap` must be (boundaries, {len(steps)} steps), got shape {overlap.shape}")
    B = overlap.shape[0]
    mesh = ax.pcolormesh(overlap, vmin=vmin, vmax=vmax if vmax is not None else np.nanmax(overlap), cmap=cmap)
    ax.set_xticks(np.arange(len(steps)) + 0.5, [format_step(s) for s in steps], rotation=45, ha="right")
    ax.set_yticks(np.arange(B) + 0.5, [f"{b}–{b + 1}" for b in range(B)])
    ax.set(xlabel="training step", ylabel="layer boundary")
    return mesh


def plot_boundary_trajectories(ax, steps, overlap, *, cmap="coolwarm"):
    """One line per layer boundary against training step, coloured by depth.

    Parameters
    ----------
    steps : (S,) array_like of int
    overlap : (B, S) array_like

    Returns
    -------
    mappable : matplotlib.cm.ScalarMappable
        For a colorbar of boundary depth.
    """
    overlap = np.asarray(overlap, dtype=float)
    if overlap.ndim != 2 or overlap.shape[1] != len(steps):
        raise ValueError(f"`overlap` must be (boundaries, {len(steps)} steps), got shape {overlap.shape}")
    B = overlap.shape[0]
    for b, color in enumerate(depth_colors(B, cmap)):
        ax.plot(steps, overlap[b], color=color, marker="o", ms=3, lw=1.5)
    set_step_axis(ax, steps)
    ax.set_ylabel("adjacent-layer overlap")
    norm = mpl.colors.Normalize(vmin=-0.5, vmax=B - 0.5)
    return mpl.cm.ScalarMappable(norm=norm, cmap=cmap)


def plot_overlap_matrix(ax, overlap, *, vmin=0.0, vmax=1.0, cmap="viridis"):
    """Pairwise layer-by-layer overlap matrix, layer 0 at the top left.

    Parameters
    ----------
    overlap : (L, L) array_like

    Returns
    -------
    image : matplotlib.image.AxesImage
    """
    overlap = np.asarray(overlap, dtype=float)
    if overlap.ndim != 2 or overlap.shape[0] != overlap.shape[1]:
        raise ValueError(f"`overlap` must be square (L, L), got shape {overlap.shape}")
    masked = overlap.copy()
    np.fill_diagonal(masked, np.nan)  # the diagonal is 1 by definition and would dominate the scale
    image = ax.imshow(masked, vmin=vmin, vmax=vmax, cmap=cmap, interpolation="nearest")
    ax.set(xlabel="layer", ylabel="layer")
    return image
