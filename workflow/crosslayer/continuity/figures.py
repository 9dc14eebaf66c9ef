"""Report figures of paper 003 (geometric continuity), built from the Axes-level ``plot_*`` of
:mod:`crosslayer.continuity.plots`. Each ``*_figure`` takes the inputs a ``load_*`` function read once
and returns a matplotlib Figure; nothing here saves or picks a backend.

Four tables ``{name: function}``, in output order, a name being the rule's output key:
:data:`FIGURES` (one model's checkpoints, rule ``plot_continuity``), :data:`TOY_FIGURES` (the toy MLP
runs, ``plot_toy``), :data:`TOY_DATASETS_FIGURES` (toy runs across image sets, ``plot_toy_datasets``)
and :data:`ABLATION_FIGURES` (the transformer ablation runs, ``plot_ablations``).
"""

from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.continuity.plots import (
    CONTINUITY_SPACES,
    plot_adjacent_cosines,
    plot_continuity_bars,
    plot_continuity_over_training,
    plot_dataset_scatter,
    plot_run_bars,
    plot_run_metrics,
    plot_run_scatter,
    plot_runs_over_epochs,
    plot_trajectory_3d,
    projection_colors,
)
from crosslayer.continuity.tables import TABLE2_ORDER
from crosslayer.npz import load_npz
from crosslayer.plotting import format_step

__all__ = [
    "ContinuityFigureInputs", "load_figure_inputs", "bars_figure", "over_training_figure", "layers_figure",
    "pca_figure", "FIGURES", "ToyFigureInputs", "load_toy_inputs", "toy_over_epochs_figure", "toy_final_figure",
    "toy_drift_figure", "toy_ema_alignment_figure", "TOY_FIGURES", "ToyDatasetsFigureInputs",
    "load_toy_datasets_inputs", "toy_datasets_figure", "TOY_DATASETS_FIGURES", "AblationFigureInputs", "load_ablation_inputs",
    "ablation_bars_figure", "ablation_over_training_figure", "ABLATION_FIGURES",
]


# --------------------------------------------------------------------------- one model's checkpoints


@dataclass(frozen=True)
class ContinuityFigureInputs:
    """What one model's continuity figures show.

    Attributes
    ----------
    model : str
    steps : list of int
        The checkpoints, ascending.
    table : pandas.DataFrame
        results/continuity/{model}/steps.tsv: one row per checkpoint and projection.
    arrays : dict of str to ndarray
        The last checkpoint's per-layer results (``<projection>.cos_<space>``, ``<projection>.pca_<space>``).
    """

    model: str
    steps: list
    table: pd.DataFrame
    arrays: dict

    @property
    def last(self):
        """The last checkpoint's rows, indexed by projection."""
        return self.table[self.table["step"] == self.steps[-1]].set_index("projection")

    @property
    def present(self):
        """The projections the model has, in Table 2's order."""
        last = self.last
        return [name for name in TABLE2_ORDER if last.loc[name, "present"]]

    @property
    def colors(self):
        """Projection -> colour for the present projections (fixed over every model)."""
        present = self.present
        return {name: color for name, color in projection_colors(TABLE2_ORDER).items() if name in present}


def load_figure_inputs(*, model, steps, table, npz):
    """Read one model's continuity results for its figures.

    Parameters
    ----------
    model : str
    steps : list of int
    table : path
        The model's steps.tsv (``summarize_continuity``).
    npz : list of path
        Per-checkpoint results in step order; the last one's arrays are read.

    Returns
    -------
    ContinuityFigureInputs
    """
    return ContinuityFigureInputs(model=model, steps=list(steps), table=pd.read_csv(table, sep="\t"),
                                  arrays=load_npz(npz[-1]))


def _two_panels():
    return plt.subplots(1, 2, figsize=(11, 3.9), layout="constrained", sharey=True)


def _projection_name(projection):
    return "OV" if projection == "ov" else projection.capitalize()


def bars_figure(inputs):
    """Paper Table 2 as bars: continuity per projection at the first (the random-init null when step
    0 is configured) and the last step, with the random baseline; one panel per space."""
    shown = sorted({inputs.steps[0], inputs.steps[-1]})
    labels = [f"step {format_step(step)}" + (" (init)" if step == 0 else "") for step in shown]
    fig, axes = _two_panels()
    for ax, space in zip(axes, CONTINUITY_SPACES):
        plot_continuity_bars(ax, [inputs.table[inputs.table["step"] == step] for step in shown], space=space,
                             labels=labels, order=TABLE2_ORDER)
    axes[0].legend(fontsize="small", loc="upper right")
    fig.suptitle(f"{inputs.model}: continuity of adjacent layers' principal singular vectors")
    return fig


def over_training_figure(inputs):
    """Continuity of each projection against the training step, one panel per space."""
    fig, axes = _two_panels()
    colors = inputs.colors
    for ax, space in zip(axes, CONTINUITY_SPACES):
        plot_continuity_over_training(ax, inputs.table, space=space, colors=colors)
    axes[1].legend(fontsize="small", ncol=2, loc="upper left")
    fig.suptitle(f"{inputs.model}: continuity over training")
    return fig


def layers_figure(inputs):
    """``|cos|`` of each adjacent layer pair at the last step, one line per projection."""
    fig, axes = _two_panels()
    colors = inputs.colors
    for ax, space in zip(axes, CONTINUITY_SPACES):
        plot_adjacent_cosines(ax, {name: inputs.arrays[f"{name}.cos_{space}"] for name in inputs.present},
                              colors=colors)
        ax.set_title(CONTINUITY_SPACES[space])
    axes[1].legend(fontsize="small", ncol=2)
    fig.suptitle(f"{inputs.model}: layer-wise continuity at step {format_step(inputs.steps[-1])}")
    return fig


def pca_figure(inputs):
    """Paper Figs 4 and 5: each projection's principal vectors across depth on their top three
    principal components at the last step (a missing third component drawn at 0), coloured by
    layer; one row per space."""
    present, last = inputs.present, inputs.last
    fig = plt.figure(figsize=(2.5 * len(present), 5.8), layout="constrained")
    for row, space in enumerate(CONTINUITY_SPACES):
        for col, name in enumerate(present):
            ax = fig.add_subplot(2, len(present), row * len(present) + col + 1, projection="3d")
            coords = inputs.arrays[f"{name}.pca_{space}"]
            points = plot_trajectory_3d(ax, np.pad(coords, ((0, 0), (0, max(0, 3 - coords.shape[1])))))
            ax.set_title(f"{_projection_name(name)} ${space}_1$: EVR {last.loc[name, f'evr_{space}']:.0%}\n"
                         f"(random {last.loc[name, f'evr_baseline_{space}']:.0%})", fontsize="small")
    fig.colorbar(points, ax=fig.axes, label="layer", shrink=0.5)
    fig.suptitle(f"{inputs.model}: principal vectors across depth on their top principal components, "
                 f"step {format_step(inputs.steps[-1])}")
    return fig


#: The ``plot_continuity`` rule's figures, in output order.
FIGURES = {"bars": bars_figure, "over_training": over_training_figure, "layers": layers_figure, "pca": pca_figure}


# --------------------------------------------------------------------------- the toy MLP runs


@dataclass(frozen=True)
class ToyFigureInputs:
    """What the toy-MLP figures show.

    Attributes
    ----------
    runs : list of str
        Every run, in config order.
    drift_runs : list of str
        Runs for the formation-and-drift figure (those not in `runs` are skipped; none left: the first two).
    ema_run : str
        The run whose gradient averages are compared (not in `runs`: the first run).
    epochs, final : pandas.DataFrame
        results/toy/epochs.tsv and final.tsv (mean and sd over seeds per run and epoch / at the last epoch).
    """

    runs: list
    drift_runs: list
    ema_run: str
    epochs: pd.DataFrame
    final: pd.DataFrame

    @property
    def colors(self):
        """Run -> colour (tab20, in run order)."""
        cmap = mpl.colormaps["tab20"]
        return {run: cmap(i % 20) for i, run in enumerate(self.runs)}


def load_toy_inputs(*, runs, drift_runs, ema_run, epochs, final):
    """Read the toy runs' summaries (``summarize_toy``) for their figures.

    Returns
    -------
    ToyFigureInputs
    """
    return ToyFigureInputs(runs=list(runs), drift_runs=list(drift_runs), ema_run=ema_run,
                           epochs=pd.read_csv(epochs, sep="\t"), final=pd.read_csv(final, sep="\t"))


# The over-epochs figure's panels: column -> title.
_TOY_EPOCH_PANELS = {"W.v1": "weights, input space $v_1$", "W.u1": "weights, output space $u_1$",
                    "G.v1": "gradient (first mini-batch of the epoch), $v_1$", "Gcum.v1": "cumulative gradient, $v_1$"}


def toy_over_epochs_figure(inputs):
    """Paper Figs 2 and 12: continuity of weights and gradients over epochs, one line per run."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), layout="constrained", sharex=True)
    colors = inputs.colors
    for ax, (metric, title) in zip(axes.flat, _TOY_EPOCH_PANELS.items()):
        plot_runs_over_epochs(ax, inputs.epochs, metric, colors=colors)
        ax.set_title(title, fontsize="medium")
        ax.set_ylabel("continuity")
    fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="outside right center", fontsize="small")
    fig.suptitle("toy residual MLP on MNIST: continuity of adjacent layers over training (mean ± sd over seeds)")
    return fig


def toy_final_figure(inputs):
    """Paper Table 1 as bars (the last epoch per run) beside weight continuity against the
    gradient's effective rank (Fig. 13)."""
    runs = inputs.runs
    bars_width = max(7.0, 0.75 * len(runs) + 2)
    fig, (ax, right) = plt.subplots(1, 2, figsize=(bars_width + 4.5, 4.2), layout="constrained",
                                    width_ratios=[bars_width, 4.5])
    plot_run_bars(ax, inputs.final, ["G0.v1", "W.v1", "W.u1", "W.wa_v", "Gcum.v1", "accuracy"], runs=runs)
    ax.legend(fontsize="small", ncol=3, loc="upper right")
    ax.set_title("toy residual MLP, last epoch per run (mean ± sd over seeds)")
    plot_run_scatter(right, inputs.final, "G.erank", "W.v1", colors=inputs.colors)
    right.set(xlabel="effective rank of the gradient (last epoch)", ylabel="weight continuity $v_1$", ylim=(0, 1))
    right.set_title("continuity vs gradient rank (Fig. 13, this dataset)", fontsize="medium")
    return fig


def toy_drift_figure(inputs):
    """Paper Fig. 2: continuity forming and drifting, one panel per drift run, the test accuracy on
    a second axis."""
    drift = [run for run in inputs.drift_runs if run in inputs.runs] or inputs.runs[:2]
    fig, axes = plt.subplots(1, len(drift), figsize=(5.2 * len(drift), 3.8), layout="constrained", squeeze=False)
    for ax, run in zip(axes[0], drift):
        lines, accuracy = plot_run_metrics(ax, inputs.epochs, run, {"W.v1": "weights $v_1$", "W.u1": "weights $u_1$",
                                                                    "G.v1": "gradient $v_1$"}, accuracy=True)
        ax.set(title=run, ylabel="continuity")
        ax.legend(handles=[*lines, accuracy], fontsize="small", loc="lower left")
    fig.suptitle("continuity forming and drifting\n(weights and each epoch's first gradient, mean ± sd over seeds)",
                 fontsize="medium")
    return fig


def toy_ema_alignment_figure(inputs):
    """Paper Fig. 12: gradient continuity precedes weight continuity (left); which gradient average
    (raw, cumulative, each EMA) the weights' ``v_1`` follows (right)."""
    run = inputs.ema_run if inputs.ema_run in inputs.runs else inputs.runs[0]
    epochs = inputs.epochs
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    plot_run_metrics(left, epochs, run, {"G.v1": "gradient $v_1$", "W.v1": "weights $v_1$"})
    left.set(title=f"{run}: continuity", ylabel="continuity")
    left.legend(fontsize="small")
    stacks = {"G.align_v": "raw gradient", "Gcum.align_v": "cumulative gradient",
              **{column: f"EMA β = {column[3:-8]}" for column in epochs.columns
                 if column.startswith("ema") and column.endswith(".align_v")}}
    plot_run_metrics(right, epochs, run, stacks)
    right.set(title=f"{run}: alignment of $v_1$(W) with each gradient's $v_1$", ylabel="mean$_l$ |cos|")
    right.legend(fontsize="small")
    return fig


#: The ``plot_toy`` rule's figures over the toy runs, in output order.
TOY_FIGURES = {
    "over_epochs": toy_over_epochs_figure,
    "final": toy_final_figure,
    "drift": toy_drift_figure,
    "ema_alignment": toy_ema_alignment_figure,
}


# --------------------------------------------------------------------------- toy runs across image sets


@dataclass(frozen=True)
class ToyDatasetsFigureInputs:
    """What the toy runs across image sets show (the paper's Fig. 13).

    Attributes
    ----------
    runs, datasets : list of str
        The runs (architectures) and image sets, in config order (MNIST first).
    table : pandas.DataFrame
        results/toy/datasets.tsv (:func:`crosslayer.continuity.toy_tables.datasets_table`).
    """

    runs: list
    datasets: list
    table: pd.DataFrame


def load_toy_datasets_inputs(*, runs, datasets, table):
    """Read the toy runs' table across image sets (``summarize_toy_datasets``)."""
    return ToyDatasetsFigureInputs(runs=list(runs), datasets=list(datasets), table=pd.read_csv(table, sep="\t"))


def toy_datasets_figure(inputs):
    """Paper Fig. 13: weight continuity against the effective rank of the gradient at the last
    epoch, one point per image set and run (colour: run, marker: image set)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    run_handles, dataset_handles = plot_dataset_scatter(ax, inputs.table, "G.erank", "W.v1", runs=inputs.runs,
                                                        datasets=inputs.datasets)
    ax.set(xlabel="effective rank of the gradient (last epoch)", ylabel="weight continuity $v_1$", ylim=(0, 1))
    fig.legend(handles=[*run_handles, *dataset_handles], loc="outside right center", fontsize="small")
    ax.set_title("toy MLP across image sets: continuity vs gradient rank (mean ± sd over seeds)", fontsize="medium")
    return fig


#: The ``plot_toy_datasets`` rule's figures, in output order.
TOY_DATASETS_FIGURES = {"datasets": toy_datasets_figure}


# --------------------------------------------------------------------------- the transformer ablation runs


@dataclass(frozen=True)
class AblationFigureInputs:
    """What the transformer-ablation figures show.

    Attributes
    ----------
    summary : pandas.DataFrame
        results/continuity/ablations.tsv indexed by run: ``steps`` (the last step), ``diverged_step``
        (NaN for a run that finished), ``perplexity``.
    steps : dict of str to pandas.DataFrame
        Run -> its continuity table over its saved checkpoints, in config order.
    """

    summary: pd.DataFrame
    steps: dict

    @property
    def last(self):
        """Run -> its continuity table at its last step."""
        return {run: table[table["step"] == self.summary.loc[run, "steps"]] for run, table in self.steps.items()}

    @property
    def finished(self):
        """The runs that did not diverge."""
        return [run for run in self.steps if pd.isna(self.summary.loc[run, "diverged_step"])]


def load_ablation_inputs(*, runs, summary, tables):
    """Read the ablations' summary and each run's continuity table (paths in the order of `runs`).

    Returns
    -------
    AblationFigureInputs
    """
    return AblationFigureInputs(summary=pd.read_csv(summary, sep="\t").set_index("run"),
                                steps=dict(zip(runs, (pd.read_csv(path, sep="\t") for path in tables), strict=True)))


def ablation_bars_figure(inputs):
    """Continuity per projection at each finished run's last step, with the random baseline; the
    diverged runs named in the title."""
    summary, last, finished = inputs.summary, inputs.last, inputs.finished
    diverged = [f"{run} at step {int(summary.loc[run, 'diverged_step'])}" for run in last if run not in finished]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained", sharey=True)
    if finished:
        for ax, space in zip(axes, CONTINUITY_SPACES):
            plot_continuity_bars(ax, [last[run] for run in finished], space=space, order=TABLE2_ORDER, fade=False,
                                 labels=[f"{run} (ppl {summary.loc[run, 'perplexity']:.3g})" for run in finished])
        axes[1].legend(fontsize="small", loc="upper right")
    else:
        for ax in axes:
            ax.text(0.5, 0.5, "every run diverged", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
    title = "transformer ablations: continuity of adjacent layers' principal singular vectors"
    fig.suptitle(title + (f"\ndiverged (no continuity): {', '.join(diverged)}" if diverged else ""))
    return fig


def ablation_over_training_figure(inputs):
    """Continuity over each run's saved checkpoints: one column per run, input space above, output
    space below; a dotted line at the step a run diverged."""
    runs, summary = list(inputs.steps), inputs.summary
    fig, axes = plt.subplots(2, len(runs), figsize=(3.6 * len(runs) + 1.5, 6.4), layout="constrained", sharey=True,
                             squeeze=False)
    colors = projection_colors(TABLE2_ORDER)
    for column, run in enumerate(runs):
        table = inputs.steps[run]
        for row, space in enumerate(CONTINUITY_SPACES):
            ax = axes[row, column]
            if table["present"].astype(bool).any():
                plot_continuity_over_training(ax, table, space=space, colors=colors)
            else:
                ax.text(0.5, 0.5, "no checkpoint", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(run if row == 0 else "", fontsize="medium")
            ax.set_ylabel(ax.get_ylabel() if column == 0 else "")
            if not pd.isna(summary.loc[run, "diverged_step"]):
                ax.axvline(summary.loc[run, "diverged_step"], color="C3", ls=":", lw=1)
    handles = {line.get_label(): line for ax in axes.flat for line in ax.get_lines()
               if not line.get_label().startswith("_")}
    fig.legend(handles.values(), handles.keys(), loc="outside right center", fontsize="small")
    fig.suptitle("transformer ablations: continuity over training (dotted red: the step a run diverged)")
    return fig


#: The ``plot_ablations`` rule's figures over the ablation runs, in output order.
ABLATION_FIGURES = {"bars": ablation_bars_figure, "over_training": ablation_over_training_figure}
