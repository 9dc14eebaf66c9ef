"""Report figures of paper 004's residual-stream topology, built from the Axes-level ``plot_*`` of
:mod:`crosslayer.dynamics.plots` and :mod:`crosslayer.plotting`. Each ``*_figure`` takes the inputs a
``load_*`` function read once and returns a matplotlib Figure; nothing here saves or picks a backend.

:data:`FIGURES` holds the per-model figures of the ``plot_topology`` rule and
:data:`ALL_MODELS_FIGURES` the figure over every model and checkpoint of
``plot_alignment_vs_boundary``, each as ``{name: function}`` in output order, a name being the rule's
output key.
"""

from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from crosslayer.dynamics.plots import plot_unit_coupling
from crosslayer.dynamics.statistics import jacobian_column_norms, participation_tails
from crosslayer.npz import open_npz
from crosslayer.plotting import depth_colors, format_step, plot_depth_profile, step_grid
from crosslayer.stats.permutation import spearman_permutation

__all__ = [
    "TopologyFigureInputs", "load_figure_inputs", "communities_figure", "boundary_coupling_figure",
    "mesoscale_figure", "rate_coupling_figure", "unit_coupling_figure", "FIGURES", "AllModelsFigureInputs",
    "load_all_models_inputs", "alignment_vs_boundary_figure", "ALL_MODELS_FIGURES",
]


@dataclass(frozen=True)
class TopologyFigureInputs:
    """What one model's topology figures show, for one community-detection method.

    Attributes
    ----------
    model, method : str
    steps : list of int
        The checkpoints, ascending.
    communities, layers : dict of int to pandas.DataFrame
        Step -> the method's rows of step{step}.communities.tsv (indexed by snapshot) and of
        step{step}.coupling.tsv (indexed by layer).
    summaries : dict of int to pandas.Series
        Step -> the method's row of step{step}.summary.tsv.
    unit_layer : int
        The layer of the per-unit figure: the largest ``|cohens_d|`` at the last step, among the
        significant layers where there are any.
    participation, column_norms : dict of int to (d,) ndarray
        Step -> each unit's participation coefficient at `unit_layer`'s input snapshot and the norm
        of its column of the layer's mean Jacobian.
    fdr_q : float
        The FDR level of the boundary test (for the legend).
    tail : float
        Fraction of units in each participation tail.
    """

    model: str
    method: str
    steps: list
    communities: dict
    layers: dict
    summaries: dict
    unit_layer: int
    participation: dict
    column_norms: dict
    fdr_q: float
    tail: float


def _method_rows(path, method):
    return pd.read_csv(path, sep="\t").query("method == @method")


def load_figure_inputs(*, model, steps, method, fdr_q, tail, communities, layers, summaries, partitions, jacobians):
    """Read one model's topology results for its figures.

    Parameters
    ----------
    model : str
    steps : list of int
    method : str
        The community-detection method shown.
    fdr_q, tail : float
    communities, layers, summaries, partitions, jacobians : list of path
        Per checkpoint in step order: communities.tsv, coupling.tsv, summary.tsv, partitions.npz and
        the dynamics stage's jacobians.npz (only the unit layer's mean Jacobian is read).

    Returns
    -------
    TopologyFigureInputs
    """
    steps = list(steps)
    layer_tables = {step: _method_rows(path, method).set_index("layer") for step, path in zip(steps, layers)}
    last = layer_tables[steps[-1]]
    significant = last["significant"].astype(bool)
    candidates = last[significant] if significant.any() else last
    unit_layer = int(candidates["cohens_d"].abs().idxmax())
    participation, column_norms = {}, {}
    for step, partitions_path, jacobians_path in zip(steps, partitions, jacobians):
        with open_npz(partitions_path) as npz:
            m = list(npz["methods"]).index(method)
            participation[step] = npz["participation"][m, 2 * unit_layer]  # block l's input snapshot
        with open_npz(jacobians_path) as npz:
            column_norms[step] = jacobian_column_norms(npz["mean"][unit_layer].astype(np.float64))
    return TopologyFigureInputs(
        model=model, method=method, steps=steps,
        communities={step: _method_rows(path, method).set_index("snapshot") for step, path in zip(steps, communities)},
        layers=layer_tables,
        summaries={step: _method_rows(path, method).iloc[0] for step, path in zip(steps, summaries)},
        unit_layer=unit_layer, participation=participation, column_norms=column_norms, fdr_q=fdr_q, tail=tail,
    )


def _null_note(inputs):
    return "step 0 = random-init null, dashed" if 0 in inputs.communities else "no step-0 checkpoint configured"


_COMMUNITY_PANELS = [("n_communities", "non-degenerate communities (≥ 2 units)"),
                     ("largest", "largest community (units)"),
                     ("seed_nmi", "stability across seeds (NMI)"),
                     ("next_nmi", "NMI with the next snapshot")]


def communities_figure(inputs):
    """Communities of the activation-correlation graph of every snapshot, one line per checkpoint."""
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), layout="constrained")
    for ax, (column, title) in zip(axes.flat, _COMMUNITY_PANELS):
        plot_depth_profile(ax, inputs.communities, column)
        ax.set_xlabel("snapshot (2l: block l input, 2l + 1: before its MLP)")
        ax.set_title(title, fontsize="medium")
    axes[0, 0].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: communities of the activation-correlation graphs ({inputs.method}; "
                 f"{_null_note(inputs)})")
    return fig


def _integer_layer_axis(ax):
    ax.set_xlabel("layer")
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))


def boundary_coupling_figure(inputs):
    """The boundary-node test per layer (the paper's "boundary-node coupling"): Cohen's d of the
    Jacobian column norms, top against bottom participation, one panel per checkpoint,
    BH-significant layers filled. The title keeps the paper's word."""
    fig, axes = step_grid(len(inputs.steps))
    for ax, step in zip(axes, inputs.steps):
        table = inputs.layers[step]
        significant = table["significant"].astype(bool)
        ax.axhline(0, color="0.6", lw=0.8)
        ax.plot(table.index, table["cohens_d"], color="C0", lw=1)
        ax.scatter(table.index[significant], table["cohens_d"][significant], color="C3", zorder=3,
                   label=f"BH q < {inputs.fdr_q}")
        ax.scatter(table.index[~significant], table["cohens_d"][~significant], facecolor="white", edgecolor="C0",
                   zorder=3, label="not significant")
        ax.set_ylabel("Cohen's d (top vs bottom participation)")
        ax.set_title(f"step {format_step(step)}: {int(significant.sum())}/{len(table)} layers", fontsize="medium")
        _integer_layer_axis(ax)
    axes[0].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: boundary-node coupling ({inputs.method})")
    return fig


def mesoscale_figure(inputs):
    """Variance of each layer's mean Jacobian captured by the communities against random
    partitions (±2 sd band), one panel per checkpoint, layers with p < 0.05 filled."""
    fig, axes = step_grid(len(inputs.steps))
    for ax, step in zip(axes, inputs.steps):
        table = inputs.layers[step]
        beats = table["p_mesoscale"] < 0.05
        ax.fill_between(table.index, table["null_mean"] - 2 * table["null_sd"],
                        table["null_mean"] + 2 * table["null_sd"], color="0.85", label="random partitions ±2 sd")
        ax.plot(table.index, table["variance_captured"], color="C2", lw=1)
        ax.scatter(table.index[beats], table["variance_captured"][beats], color="C2", zorder=3, label="p < 0.05")
        ax.scatter(table.index[~beats], table["variance_captured"][~beats], facecolor="white", edgecolor="C2",
                   zorder=3, label="p ≥ 0.05")
        ax.set_ylabel("variance of J captured by communities")
        ax.set_title(f"step {format_step(step)}: {int(beats.sum())}/{len(table)} layers above null", fontsize="medium")
        _integer_layer_axis(ax)
    axes[0].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: mesoscale operator vs random partitions ({inputs.method})")
    return fig


def rate_coupling_figure(inputs):
    """The rate-level test (the paper's "rate-level coupling"): each layer's topology disruption
    between blocks against the change of its mesoscale operator (top singular value, variance
    captured), one marker per checkpoint, coloured by layer, Spearman's rho per checkpoint in the
    legend."""
    steps = inputs.steps
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    n_layers = len(inputs.layers[steps[0]])
    colors = depth_colors(n_layers, "viridis")
    markers = dict(zip(steps, "xos^vD<>ph"))  # beyond ten checkpoints: dots
    for ax, column, key, title in ((axes[0], "delta_top_singular", "top_singular", "top singular value of BᵀJB"),
                                   (axes[1], "delta_variance", "variance", "variance captured")):
        handles = []
        for step in steps:
            table = inputs.layers[step].dropna(subset=["disruption"])
            marker = markers.get(step, ".")
            # "x" has no face: it is drawn in its colour (an edge colour for it makes matplotlib warn)
            ax.scatter(table["disruption"], table[column], c=colors[table.index], marker=marker, s=28,
                       linewidths=1 if marker == "x" else 0.5, **({} if marker == "x" else {"edgecolors": "k"}))
            fit = inputs.summaries[step]
            handles.append(Line2D([], [], color="0.3", marker=marker, ls="", label=(
                f"step {format_step(step)}: ρ = {fit[f'rho_rate_{key}']:.2f}, p = {fit[f'p_rate_{key}']:.2g}")))
        ax.legend(handles=handles, frameon=False, fontsize="x-small")
        ax.set(xlabel="topology disruption 1 − NMI (block l → l + 1)", ylabel=f"|Δ {title}|")
    colorbar = fig.colorbar(plt.cm.ScalarMappable(plt.Normalize(-0.5, n_layers - 0.5), "viridis"), ax=axes,
                            label="layer l", shrink=0.8)
    colorbar.ax.yaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    fig.suptitle(f"{inputs.model}: rate-level topology–dynamics coupling ({inputs.method})")
    return fig


def unit_coupling_figure(inputs):
    """Fig. 7a: every unit's Jacobian column norm against its participation at the unit layer, one
    panel per checkpoint, the two participation tails coloured."""
    layer = inputs.unit_layer
    fig, axes = step_grid(len(inputs.steps))
    for ax, step in zip(axes, inputs.steps):
        participation = inputs.participation[step]
        bottom, top = participation_tails(participation, tail=inputs.tail)
        plot_unit_coupling(ax, participation, inputs.column_norms[step], bottom, top)
        row = inputs.layers[step].loc[layer]
        ax.set_title(f"step {format_step(step)}, layer {layer}: d = {row['cohens_d']:.2f}, q = {row['q_boundary']:.2g}",
                     fontsize="medium")
    axes[0].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: Jacobian column norm of every unit against its participation ({inputs.method})")
    return fig


#: The ``plot_topology`` rule's figures, in output order.
FIGURES = {
    "communities": communities_figure,
    "boundary_coupling": boundary_coupling_figure,
    "mesoscale": mesoscale_figure,
    "rate_coupling": rate_coupling_figure,
    "unit_coupling": unit_coupling_figure,
}


@dataclass(frozen=True)
class AllModelsFigureInputs:
    """What the figure over all models and checkpoints shows.

    Attributes
    ----------
    method : str
    points : pandas.DataFrame
        One row per layer, model and checkpoint (the method's rows of every coupling.tsv, with
        ``model`` and ``step``), holding ``self_alignment`` and ``cohens_d``.
    summary : pandas.DataFrame
        The method's rows of the topology summary (per model and step: ``rho_alignment_d``,
        ``p_alignment_d``).
    fit : dict
        Spearman's rho over all points with its permutation p-value (``rho``, ``p_value``, ``n_pairs``).
    """

    method: str
    points: pd.DataFrame
    summary: pd.DataFrame
    fit: dict


def load_all_models_inputs(*, models, steps, method, permutations, seed, layers, summary):
    """Read every model's and checkpoint's coupling.tsv (`layers`, in the order of `models` and
    `steps`) and the topology summary, and fit Spearman's rho over all their layers.

    Returns
    -------
    AllModelsFigureInputs
    """
    points = pd.concat(_method_rows(path, method).assign(model=model, step=step)
                       for model, step, path in zip(models, steps, layers, strict=True))
    fit = spearman_permutation(points["self_alignment"], points["cohens_d"], n_permutations=permutations, seed=seed)
    return AllModelsFigureInputs(method=method, points=points, summary=_method_rows(summary, method), fit=fit)


def alignment_vs_boundary_figure(inputs):
    """Paper 004, Figure 8: self-alignment of each layer's mean Jacobian against its boundary-node
    Cohen's d over all models and checkpoints (step 0 hollow) with a least-squares line, beside the
    per-checkpoint correlations."""
    points, fit = inputs.points, inputs.fit
    fig, (ax, side) = plt.subplots(1, 2, figsize=(12, 5), layout="constrained", width_ratios=[3, 2])
    for color, (model, rows) in zip(plt.cm.tab10.colors, points.groupby("model", sort=False)):
        untrained = rows["step"] == 0
        ax.scatter(rows.loc[~untrained, "self_alignment"], rows.loc[~untrained, "cohens_d"], color=color, s=22,
                   label=f"{model} (trained)")
        ax.scatter(rows.loc[untrained, "self_alignment"], rows.loc[untrained, "cohens_d"], facecolor="none",
                   edgecolor=color, s=22, label=f"{model} step 0")
    slope, intercept = np.polyfit(points["self_alignment"], points["cohens_d"], 1)
    x = np.linspace(points["self_alignment"].min(), points["self_alignment"].max(), 2)
    ax.plot(x, slope * x + intercept, color="0.3", ls="--", lw=1, label="least-squares line")
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set(xlabel="self-alignment of the layer's mean J", ylabel="boundary-node Cohen's d")
    ax.set_title(f"all layers, models and checkpoints: Spearman ρ = {fit['rho']:.2f} "
                 f"(permutation p = {fit['p_value']:.2g}, n = {fit['n_pairs']})", fontsize="medium")
    ax.legend(frameon=False, fontsize="x-small", ncols=2)
    side.axis("off")
    cells = [[m, format_step(s), f"{r:.2f}", f"{p:.2g}"] for m, s, r, p in
             inputs.summary[["model", "step", "rho_alignment_d", "p_alignment_d"]].itertuples(index=False)]
    table = side.table(cellText=cells, colLabels=["model", "step", "ρ across layers", "p"], loc="upper center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    fig.suptitle(f"Self-alignment vs boundary coupling ({inputs.method}; paper 004, Figure 8)")
    return fig


#: The ``plot_alignment_vs_boundary`` rule's figure over all models and checkpoints.
ALL_MODELS_FIGURES = {"alignment_vs_boundary": alignment_vs_boundary_figure}
