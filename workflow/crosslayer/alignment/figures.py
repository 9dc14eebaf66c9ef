"""Report figures of paper 000 (cross-layer alignment), built from the Axes-level ``plot_*`` of
:mod:`crosslayer.alignment.plots`. Each ``*_figure`` takes the inputs a ``load_*`` function read once
and returns a matplotlib Figure; nothing here saves or picks a backend.

:data:`FIGURES` holds the per-model figures of the ``plot_alignment`` rule and
:data:`ALL_MODELS_FIGURES` the figure over every model of ``plot_alignment_overview``, each as
``{name: function}`` in output order, a name being the rule's output key.
"""

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.alignment.plots import (
    SPACE_LABELS,
    plot_adjacent_mean,
    plot_boundary_heatmap,
    plot_boundary_trajectories,
    plot_overlap_matrix,
    plot_random_baseline,
)
from crosslayer.alignment.tables import load_alignment
from crosslayer.plotting import format_step

__all__ = [
    "AlignmentFigureInputs", "load_figure_inputs", "adjacent_mean_figure", "boundary_heatmap_figure",
    "boundary_trajectories_figure", "pairwise_figure", "FIGURES", "AllModelsFigureInputs",
    "load_all_models_inputs", "adjacent_mean_all_models_figure", "ALL_MODELS_FIGURES",
]


@dataclass(frozen=True)
class AlignmentFigureInputs:
    """What the per-model alignment figures show.

    Attributes
    ----------
    model : str
    k : int
        Top-k singular vectors per layer.
    steps : list of int
        The checkpoints, ascending.
    adjacent : pandas.DataFrame
        results/alignment/{model}/adjacent.tsv: ``step``, ``boundary``, ``left``, ``right``, ...
    baseline : pandas.Series
        The random-subspace baseline: ``mean``, ``sd``, ``d_model``.
    overlap_left : (S, L, L) ndarray
        All-pairs overlap of the layers' output spaces at each step.
    """

    model: str
    k: int
    steps: list
    adjacent: pd.DataFrame
    baseline: pd.Series
    overlap_left: np.ndarray

    @property
    def by_boundary(self):
        """(B, S) DataFrame: output-space overlap across each boundary (rows) at each step (columns)."""
        return self.adjacent.pivot(index="boundary", columns="step", values="left")


def load_figure_inputs(*, model, k, steps, adjacent, baseline, npz):
    """Read one model's alignment results for its figures.

    Parameters
    ----------
    model : str
    k : int
    steps : list of int
    adjacent, baseline : path
        The model's adjacent.tsv and baseline.tsv (``summarize_alignment``).
    npz : list of path
        Per-checkpoint results (``mlp_alignment``), in step order.

    Returns
    -------
    AlignmentFigureInputs
    """
    return AlignmentFigureInputs(
        model=model, k=k, steps=list(steps), adjacent=pd.read_csv(adjacent, sep="\t"),
        baseline=pd.read_csv(baseline, sep="\t").iloc[0], overlap_left=load_alignment(npz, steps)["overlap_left"],
    )


def adjacent_mean_figure(inputs):
    """Fig. 1/5: mean adjacent-layer overlap against step in both singular spaces, over the random
    baseline."""
    baseline = inputs.baseline
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    means = inputs.adjacent.groupby("step")[["left", "right"]].mean()
    plot_random_baseline(ax, baseline["mean"], baseline["sd"])
    for space in ("left", "right"):
        plot_adjacent_mean(ax, means.index, means[space], label=SPACE_LABELS[space])
    ax.set_title(f"{inputs.model}: adjacent layers, top-{inputs.k} (d = {int(baseline['d_model'])})")
    ax.legend(frameon=False, fontsize="small")
    return fig


def boundary_heatmap_figure(inputs):
    """Fig. 2: output-space overlap across each layer boundary (rows) at each checkpoint (columns)."""
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    mesh = plot_boundary_heatmap(ax, inputs.steps, inputs.by_boundary.to_numpy())
    fig.colorbar(mesh, ax=ax, label=f"top-{inputs.k} overlap (baseline {inputs.baseline['mean']:.2f})")
    ax.set_title(f"{inputs.model}: adjacent-layer overlap by depth")
    return fig


def boundary_trajectories_figure(inputs):
    """Fig. 3: one line per layer boundary against step, blue (early) to red (late), and the
    baseline dashed."""
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    mappable = plot_boundary_trajectories(ax, inputs.steps, inputs.by_boundary.to_numpy())
    ax.axhline(inputs.baseline["mean"], color="0.5", ls="--", lw=1)
    fig.colorbar(mappable, ax=ax, label="layer boundary (early → late)")
    ax.set_title(f"{inputs.model}: per-boundary overlap")
    return fig


def pairwise_figure(inputs):
    """Fig. 4/7: the all-pairs overlap matrix of the output spaces at every checkpoint, on one
    colour scale (at least up to the baseline)."""
    steps, overlaps = inputs.steps, inputs.overlap_left
    cols = min(4, len(steps))
    rows = math.ceil(len(steps) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.5 * rows), layout="constrained", squeeze=False)
    off_diagonal = ~np.eye(overlaps.shape[1], dtype=bool)
    vmax = max(float(overlaps[:, off_diagonal].max()), inputs.baseline["mean"])
    for ax, step, overlap in zip(axes.flat, steps, overlaps):
        image = plot_overlap_matrix(ax, overlap, vmin=0.0, vmax=vmax)
        ax.set_title(f"step {format_step(step)}")
    for ax in axes.flat[len(steps):]:
        ax.set_visible(False)
    fig.colorbar(image, ax=axes, label=f"top-{inputs.k} overlap", shrink=0.8)
    fig.suptitle(f"{inputs.model}: pairwise overlap of MLP output subspaces")
    return fig


#: The ``plot_alignment`` rule's figures, in output order.
FIGURES = {
    "adjacent_mean": adjacent_mean_figure,
    "boundary_heatmap": boundary_heatmap_figure,
    "boundary_trajectories": boundary_trajectories_figure,
    "pairwise": pairwise_figure,
}


@dataclass(frozen=True)
class AllModelsFigureInputs:
    """What the alignment figure over all models shows.

    Attributes
    ----------
    k : int
    means : dict of str to pandas.Series
        Model -> mean over boundaries of the output-space adjacent overlap, indexed by step.
    baselines : dict of str to pandas.Series
        Model -> its random-subspace baseline (``mean``, ``sd``, ``d_model``).
    """

    k: int
    means: dict
    baselines: dict


def load_all_models_inputs(*, models, k, adjacent, baseline):
    """Read every model's adjacent.tsv and baseline.tsv (paths in the order of `models`).

    Returns
    -------
    AllModelsFigureInputs
    """
    means, baselines = {}, {}
    for model, adjacent_path, baseline_path in zip(models, adjacent, baseline, strict=True):
        means[model] = pd.read_csv(adjacent_path, sep="\t").groupby("step")["left"].mean()
        baselines[model] = pd.read_csv(baseline_path, sep="\t").iloc[0]
    return AllModelsFigureInputs(k=k, means=means, baselines=baselines)


def adjacent_mean_all_models_figure(inputs):
    """Fig. 1 over all models: one panel per model (the baselines differ with d), shared y axis."""
    models = list(inputs.means)
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models), 3.2), sharey=True, layout="constrained",
                             squeeze=False)
    for ax, model in zip(axes[0], models):
        baseline, means = inputs.baselines[model], inputs.means[model]
        plot_random_baseline(ax, baseline["mean"], baseline["sd"])
        plot_adjacent_mean(ax, means.index, means, label="mean over boundaries")
        ax.set_title(f"{model} (d = {int(baseline['d_model'])})")
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    axes[0][0].legend(frameon=False, fontsize="small")
    fig.suptitle(f"Mean adjacent-layer top-{inputs.k} MLP subspace overlap across training")
    return fig


#: The ``plot_alignment_overview`` rule's figure over all models.
ALL_MODELS_FIGURES = {"adjacent_mean": adjacent_mean_all_models_figure}
