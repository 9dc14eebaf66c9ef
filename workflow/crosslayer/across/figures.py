"""Report figures of the across-papers stage, composed from the Axes-level ``plot_*`` of
:mod:`crosslayer.across.plots`.

Per model (rule ``plot_across_papers``): :func:`load_figure_inputs` reads the rule's inputs into an
:class:`AcrossFigureInputs`, and :data:`FIGURES` maps each of the rule's outputs, in order, to its
function. Over all models (rule ``plot_across_papers_models``): :func:`load_all_models_inputs`,
:class:`AllModelsFigureInputs` and :data:`ALL_MODELS_FIGURES`. Every function named ``*_figure`` takes
such an object and returns a new matplotlib Figure; it never saves.
"""

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from crosslayer.across.plots import (
    correlation_matrix,
    emergence_colorbar,
    emergence_matrix,
    emergence_steps,
    log2_ratios,
    order_measures,
    plot_correlation_matrix,
    plot_emergence,
    plot_measure_profile,
    plot_ratio_heatmap,
    robust_limit,
    short_name,
    step_colors,
)
from crosslayer.plotting import format_step, pick_steps

__all__ = [
    "AcrossFigureInputs", "load_figure_inputs", "profiles_figure", "correlations_figure", "emergence_figure", "FIGURES",
    "AllModelsFigureInputs", "load_all_models_inputs", "baseline_ratios_figure", "ALL_MODELS_FIGURES",
]


@dataclass(frozen=True, eq=False)
class AcrossFigureInputs:
    """What the figures of one model draw: the tables of :mod:`crosslayer.across.tables` as written.

    Attributes
    ----------
    model : str
    steps : list of int
        The model's checkpoints, sorted.
    boundaries, measures, correlations, emergence : pandas.DataFrame
        ``boundaries.tsv``, ``measures.tsv`` (``paper`` as str), ``correlations.tsv``,
        ``emergence.tsv`` (``paper`` as str).
    """

    model: str
    steps: list
    boundaries: pd.DataFrame
    measures: pd.DataFrame
    correlations: pd.DataFrame
    emergence: pd.DataFrame

    @property
    def drawn(self):
        """The measures with values, grouped by paper (:func:`~crosslayer.across.plots.order_measures`)."""
        return order_measures(self.measures, self.boundaries)


def load_figure_inputs(*, model, steps, boundaries, measures, correlations, emergence):
    """Read rule ``plot_across_papers``'s inputs (`model`, its `steps` and the paths of its four TSVs)
    into an :class:`AcrossFigureInputs`."""
    return AcrossFigureInputs(
        model=model, steps=sorted(int(step) for step in steps), boundaries=pd.read_csv(boundaries, sep="\t"),
        measures=pd.read_csv(measures, sep="\t", dtype={"paper": str}),
        correlations=pd.read_csv(correlations, sep="\t"),
        emergence=pd.read_csv(emergence, sep="\t", dtype={"paper": str}))


def _nothing(text, size=(6, 2.5)):
    """A small figure that says `text` instead of drawing."""
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    ax.set(xticks=[], yticks=[])
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize="large")
    return fig


def profiles_figure(inputs):
    """Every measure against depth at the first, middle and last checkpoint, over its random baseline,
    one panel per measure."""
    drawn = inputs.drawn
    names, papers = list(drawn["measure"]), list(drawn["paper"])
    shown = pick_steps(sorted(set(inputs.boundaries["step"])), 3)
    colors = step_colors(shown)
    if not names:
        fig = _nothing("no measure has values")
        fig.suptitle(f"{inputs.model}: the papers' adjacent-layer measures against depth")
        return fig
    ncols = min(6, len(names))
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.7 * ncols, 2.1 * nrows + 1.0), sharex=True, squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for k, (ax, name, paper) in enumerate(zip(axes.flat, names, papers)):
        plot_measure_profile(ax, inputs.boundaries, name, steps=shown, colors=colors)
        ax.set_title(f"{name} (paper {paper})", fontsize="small")
        ax.tick_params(labelsize="small")
        if k + ncols >= len(names):  # the lowest panel of each column
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("layer boundary l|l+1", fontsize="small")
    handles = [Line2D([], [], color=colors[step], marker="o", ms=3, label=f"step {format_step(step)}")
               for step in shown] + [Line2D([], [], color="0.45", ls="--", label="random baseline")]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False)
    fig.supylabel("value of the measure (dashed: its random baseline)", fontsize="medium")
    fig.suptitle(f"{inputs.model}: the papers' adjacent-layer measures against depth")
    return fig


def correlations_figure(inputs):
    """Spearman's rho of every pair of measures along depth at up to 6 checkpoints, dots on the pairs
    significant after Benjamini-Hochberg; one colour bar."""
    drawn = inputs.drawn
    names, papers = list(drawn["measure"]), list(drawn["paper"])
    corr_steps = pick_steps(sorted(set(inputs.correlations["step"])), 6)
    if not corr_steps or len(names) < 2:
        fig = _nothing("fewer than two measures with values: no correlations")
        fig.suptitle(f"{inputs.model}: correlations of the measures along depth")
        return fig
    ncols = min(3, len(corr_steps))
    nrows = -(-len(corr_steps) // ncols)
    size = max(3.0, 0.17 * len(names) + 1.0)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 2.2, size * nrows + 1.6), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(corr_steps):]:
        ax.set_visible(False)
    for k, (ax, step) in enumerate(zip(axes.flat, corr_steps)):
        rho, significant, n = correlation_matrix(inputs.correlations, names, step)
        mesh = plot_correlation_matrix(ax, rho, significant, labels=[short_name(m) for m in names] if k == 0 else None,
                                       papers=papers)
        ax.set_title(f"step {format_step(step)} (n = {n})")
    fig.colorbar(mesh, ax=axes.flat[:len(corr_steps)], label="Spearman's rho along depth", shrink=0.6)
    fig.suptitle(f"{inputs.model}: correlations of the measures along depth (dots: significant after "
                 "Benjamini-Hochberg)")
    return fig


def emergence_figure(inputs):
    """The step at which each measure leaves its step-0 band at each boundary (+ above, − below, pale:
    back in later), or a note when nothing can emerge."""
    drawn, steps = inputs.drawn, inputs.steps
    present = set(inputs.emergence["measure"])
    rows = [name for name in drawn["measure"] if name in present]
    row_papers = [paper for name, paper in zip(drawn["measure"], drawn["paper"]) if name in rows]
    n_boundaries = int(inputs.boundaries["boundary"].max()) + 1 if len(inputs.boundaries) else 0
    index, sign, stays_out = emergence_matrix(inputs.emergence, rows, n_boundaries, steps)
    heatmap = rows and emergence_steps(steps)  # else a text: no measure, or step 0 is the only checkpoint
    fig, ax = plt.subplots(figsize=(max(5.5, 0.55 * n_boundaries + 4.0), 0.28 * len(rows) + 1.8) if heatmap
                           else (6, 2.5), layout="constrained")
    artist = plot_emergence(ax, index, sign, stays_out, steps=steps, labels=[short_name(m) for m in rows],
                            papers=row_papers)
    bar = emergence_colorbar(fig, artist, steps, ax=ax, label="left the step-0 band at step", shrink=0.8)
    fig.suptitle(f"{inputs.model}: when each measure leaves its random band\n(+ above, \u2212 below; pale: back in "
                 "later)" if bar is not None else f"{inputs.model}: when each measure leaves its random band")
    return fig


#: Rule plot_across_papers's outputs, in order, and the function drawing each.
FIGURES = {
    "profiles": profiles_figure,
    "correlations": correlations_figure,
    "emergence": emergence_figure,
}


# --------------------------------------------------------------------------- over all models


@dataclass(frozen=True, eq=False)
class AllModelsFigureInputs:
    """What the figure over all models draws.

    Attributes
    ----------
    models : pandas.DataFrame
        ``models.tsv`` (:func:`crosslayer.across.tables.across_models`).
    measures : pandas.DataFrame
        Every model's ``measures.tsv`` (``paper`` as str), concatenated.
    """

    models: pd.DataFrame
    measures: pd.DataFrame


def load_all_models_inputs(*, models, measures):
    """Read rule ``plot_across_papers_models``'s inputs: `models`, the path of ``models.tsv``, and
    `measures`, those of every model's ``measures.tsv``."""
    return AllModelsFigureInputs(
        models=pd.read_csv(models, sep="\t"),
        measures=pd.concat([pd.read_csv(path, sep="\t", dtype={"paper": str}) for path in measures]))


def baseline_ratios_figure(inputs):
    """Every model's last checkpoint: the depth-mean ratio of each measure to its random baseline, as
    log2 on a diverging map with a robust symmetric limit; a note when no measure has a ratio."""
    log2, papers = log2_ratios(inputs.models, inputs.measures)
    log2.index = [f"{model} (step {format_step(int(step))})"
                  for model, step in zip(inputs.models["model"], inputs.models["step"])]
    if log2.shape[1]:
        vmax = robust_limit(log2.to_numpy())
        below, above = np.nanmin(log2.to_numpy()) < -vmax, np.nanmax(log2.to_numpy()) > vmax
        extend = {(True, True): "both", (True, False): "min", (False, True): "max"}.get((below, above), "neither")
        fig, ax = plt.subplots(figsize=(0.42 * log2.shape[1] + 3.5, 0.45 * len(log2) + 2.8), layout="constrained")
        mesh = plot_ratio_heatmap(ax, log2, papers, vmax=vmax)
        fig.colorbar(mesh, ax=ax, label="log2(ratio to random baseline)", extend=extend, shrink=0.9)
    else:
        fig, ax = plt.subplots(figsize=(6, 2.5), layout="constrained")
        ax.set(xticks=[], yticks=[])
        ax.text(0.5, 0.5, "no measure has a ratio to its baseline", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle("every model's last checkpoint: depth-mean ratio of each measure to its random baseline")
    return fig


#: Rule plot_across_papers_models's outputs, in order, and the function drawing each.
ALL_MODELS_FIGURES = {
    "baseline_ratios": baseline_ratios_figure,
}
