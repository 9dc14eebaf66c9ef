"""Report figures of paper 004's Jacobian dynamics, built from the Axes-level ``plot_*`` of
:mod:`crosslayer.dynamics.plots` and :mod:`crosslayer.plotting`. Each ``*_figure`` takes the inputs
:func:`load_figure_inputs` read once and returns a matplotlib Figure; nothing here saves or picks a
backend. :data:`FIGURES` is the ``plot_dynamics`` rule's ``{name: function}``, in output order, a name
being the rule's output key. The topology figures: :mod:`crosslayer.dynamics.topology_figures`.
"""

from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from crosslayer.dynamics.densities import eigenvalue_density
from crosslayer.dynamics.funnel import recovery_table
from crosslayer.dynamics.plots import (
    plot_dose_response,
    plot_eigenvalue_cloud,
    plot_layer_density,
    plot_quantile_profile,
    plot_radius_vs_rank_drop,
    plot_regime_bands,
)
from crosslayer.dynamics.regimes import REGIMES
from crosslayer.npz import open_npz
from crosslayer.plotting import format_step, pick_steps, plot_depth_profile

__all__ = [
    "DynamicsFigureInputs", "load_figure_inputs", "operators_figure", "sample_spectra_figure", "eigenvalues_figure",
    "cumulative_rank_figure", "regimes_figure", "eigenvalue_density_figure", "FIGURES", "schur_models_figure",
    "DynamicsModelsInputs", "load_models_inputs", "ALL_MODELS_FIGURES",
]


@dataclass(frozen=True)
class DynamicsFigureInputs:
    """What one model's dynamics figures show.

    Attributes
    ----------
    model : str
    steps : list of int
        The checkpoints, ascending.
    profiles : dict of int to pandas.DataFrame
        Step -> results/dynamics/{model}/step{step}.spectra.tsv, indexed by layer.
    eigenvalues : dict of int to (L, d) complex ndarray
        Eigenvalues of each layer's mean Jacobian at the checkpoints shown (:func:`pick_steps`), in step order.
    schur : dict of int to pandas.DataFrame
        Step -> its Schur-surgery dose-response table.
    """

    model: str
    steps: list
    profiles: dict
    eigenvalues: dict
    schur: dict

    @property
    def first(self):
        """The first checkpoint's profile: its baseline and depth regimes serve every step."""
        return self.profiles[self.steps[0]]

    @property
    def null_note(self):
        """How the title names the random-init null."""
        return "step 0 = random-init null, dashed" if 0 in self.profiles else "no step-0 checkpoint configured"


def load_figure_inputs(*, model, steps, tables, eigenvalues, schur):
    """Read one model's dynamics results for its figures.

    Parameters
    ----------
    model : str
    steps : list of int
    tables, eigenvalues, schur : list of path
        Per checkpoint in step order: spectra.tsv, eigenvalues.npz (read only at the steps shown) and
        schur.tsv.

    Returns
    -------
    DynamicsFigureInputs
    """
    steps = list(steps)
    spectra = {}
    for step in pick_steps(steps):
        with open_npz(eigenvalues[steps.index(step)]) as npz:
            spectra[step] = npz["eigenvalues"]
    return DynamicsFigureInputs(
        model=model, steps=steps,
        profiles={step: pd.read_csv(path, sep="\t", index_col="layer") for step, path in zip(steps, tables)},
        eigenvalues=spectra, schur={step: pd.read_csv(path, sep="\t") for step, path in zip(steps, schur)},
    )


def _has_quantiles(profiles, name):
    """Whether every profile holds the median and quartiles of `name` (condition numbers are absent
    when dynamics.condition_number is false)."""
    return all(f"{q}_{name}" in p.columns for p in profiles.values() for q in ("q25", "median", "q75"))


# Operator geometry panels: column, title, whether the random-subspace baseline is drawn.
_OPERATOR_PANELS = [
    ("self_alignment", "self-alignment of J", True),
    ("henrici", "Henrici departure of J", False),
    ("forward_alignment", "forward alignment of J (l → l+1)", True),
    ("frac_complex", "eigenvalues in complex pairs", False),
    ("self_alignment_res", "self-alignment of J − I", True),
    ("henrici_res", "Henrici departure of J − I", False),
    ("forward_alignment_res", "forward alignment of J − I", True),
    ("residual_norm_ratio", "‖J − I‖_F / ‖I‖_F", False),
]


def operators_figure(inputs):
    """Operator geometry of the mean Jacobian across depth, for J and J − I, one line per checkpoint."""
    first = inputs.first
    fig, axes = plt.subplots(2, 4, figsize=(14, 6.5), layout="constrained")
    for ax, (column, title, baseline) in zip(axes.flat, _OPERATOR_PANELS):
        plot_depth_profile(ax, inputs.profiles, column)
        if baseline:
            mean, sd = first["baseline_mean"].iloc[0], first["baseline_sd"].iloc[0]
            ax.axhspan(mean - 2 * sd, mean + 2 * sd, color="0.85", zorder=0, label="random ±2 sd")
            ax.axhline(mean, color="0.5", lw=1, ls=":")
        ax.set_title(title, fontsize="medium")
    axes[0, 0].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: mean single-token block Jacobian across depth ({inputs.null_note})")
    return fig


def sample_spectra_figure(inputs):
    """Per-sample singular-value statistics (median and interquartile band over samples) for J
    (top) and J − I (bottom); condition numbers noted as not computed where absent."""
    profiles = inputs.profiles
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5), layout="constrained")
    for row, (suffix, op) in enumerate((("", "J"), ("_res", "J − I"))):
        name = "condition_number" + suffix
        if _has_quantiles(profiles, name):
            plot_quantile_profile(axes[row, 0], profiles, name)
            axes[row, 0].set_yscale("log")
        else:
            axes[row, 0].text(0.5, 0.5, "not computed\n(dynamics.condition_number: false)", ha="center",
                              va="center", transform=axes[row, 0].transAxes, color="0.4", fontsize="small")
            axes[row, 0].set(xticks=[], yticks=[])
        axes[row, 0].set_title(f"condition number of {op}", fontsize="medium")
        plot_quantile_profile(axes[row, 1], profiles, "participation_ratio" + suffix)
        axes[row, 1].set_title(f"participation ratio of {op}", fontsize="medium")
        plot_depth_profile(axes[row, 2], profiles, "frac_expanding" + suffix)
        axes[row, 2].set_title(f"expanding fraction |λ| > 1 of mean {op}", fontsize="medium")
    axes[0, 1].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: per-sample Jacobian spectra, median and interquartile range over texts "
                 f"({inputs.null_note})")
    return fig


def _layer_colorbar(fig, axes, n_layers, *, shrink):
    colorbar = fig.colorbar(plt.cm.ScalarMappable(plt.Normalize(-0.5, n_layers - 0.5), "viridis"), ax=axes,
                            label="layer", shrink=shrink)
    colorbar.ax.yaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    return colorbar


def eigenvalues_figure(inputs):
    """Eigenvalues of the mean Jacobian in the complex plane, one row per shown checkpoint and one
    column per depth regime, coloured by layer."""
    regimes = inputs.first["regime"].to_numpy()
    present = [r for r in REGIMES if r in regimes]
    n_layers = len(inputs.first)
    shown = list(inputs.eigenvalues)
    fig, axes = plt.subplots(len(shown), len(present), figsize=(3.6 * len(present), 3.4 * len(shown)),
                             layout="constrained", squeeze=False)
    for row, step in enumerate(shown):
        for ax, regime in zip(axes[row], present):
            layers = np.flatnonzero(regimes == regime)
            plot_eigenvalue_cloud(ax, inputs.eigenvalues[step][layers], layers, n_layers=n_layers)
            span = f"layer {layers[0]}" if len(layers) == 1 else f"layers {layers[0]}–{layers[-1]}"
            ax.set_title(f"step {format_step(step)} · {regime} ({span})", fontsize="medium")
    _layer_colorbar(fig, axes, n_layers, shrink=0.6)
    fig.suptitle(f"{inputs.model}: eigenvalues of the mean Jacobian per depth regime (dotted: unit circle)")
    return fig


# The dose response's constructions, for the legend.
_DOSE_HANDLES = (
    dict(color="k", lw=1.8, marker="o", label="dose: $Q (D + \\alpha N) Q^H$"),
    dict(color="k", ls="--", marker="^", label="control A: Gaussian $N$, same $\\|N\\|_F$"),
    dict(color="k", ls=":", marker="s", label="control B: Haar-random basis"),
)


def cumulative_rank_figure(inputs):
    """Dimensional funnelling: the cumulative effective rank (Fig. 4a), where it drops against the
    spectral radius (Fig. 4b), and per Schur mode the dose response of the rank and of the
    amplification ``log ||J_{0->L}||_F`` at the first and last step (Fig. 5)."""
    profiles, steps, schur = inputs.profiles, inputs.steps, inputs.schur
    modes = list(dict.fromkeys(schur[steps[0]]["mode"]))
    fig, axes = plt.subplots(2, 1 + len(modes), figsize=(4.6 * (1 + len(modes)), 8.2), layout="constrained",
                             squeeze=False)
    plot_depth_profile(axes[0, 0], profiles, "cumulative_effective_rank")
    axes[0, 0].set(xlabel="start layer $l$", ylabel=r"effective rank of $J_{l \to L}$")
    ranks = pd.concat([p["cumulative_effective_rank"] for p in profiles.values()])
    if ranks.max() > 10 * ranks.min():  # paper scale: from d down to a handful
        axes[0, 0].set_yscale("log")
    axes[0, 0].set_title("cumulative Jacobian", fontsize="medium")
    axes[0, 0].legend(frameon=False, fontsize="x-small")
    plot_radius_vs_rank_drop(axes[1, 0], profiles)
    axes[1, 0].set_title("rank drop at each layer vs its spectral radius", fontsize="medium")
    axes[1, 0].legend(frameon=False, fontsize="x-small")
    ends = [steps[0], steps[-1]] if len(steps) > 1 else steps
    for col, mode in enumerate(modes, start=1):
        for row, (column, what) in enumerate((("effective_rank", "rank"), ("log_frobenius", "amplification"))):
            ax = axes[row, col]
            for color, step in zip(("0.5", "C3"), ends):
                plot_dose_response(ax, schur[step][schur[step]["mode"] == mode], color=color,
                                   label=f"step {format_step(step)}", column=column)
            ax.set_title(f"Schur surgery of {mode.replace('-', '−')}, from layer 0: {what}", fontsize="medium")
    handles = [Line2D([], [], **style) for style in _DOSE_HANDLES]
    axes[0, 1].legend(handles=[*axes[0, 1].get_legend_handles_labels()[0], *handles], frameon=False,
                      fontsize="x-small")
    fig.suptitle(f"{inputs.model}: dimensional funnelling through depth ({inputs.null_note})")
    return fig


def regimes_figure(inputs):
    """Figs 2 and S2: the depth regimes (shaded) over the two measures that define them, the
    condition number (the participation ratio where none was computed) and the self-alignment."""
    profiles, first = inputs.profiles, inputs.first
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    if _has_quantiles(profiles, "condition_number"):
        plot_quantile_profile(axes[0], profiles, "condition_number")
        axes[0].set_yscale("log")
        axes[0].set_title("condition number of J (median, IQR over texts)", fontsize="medium")
    else:  # dynamics.condition_number: false
        plot_quantile_profile(axes[0], profiles, "participation_ratio")
        axes[0].set_title("participation ratio of J (no condition numbers computed)", fontsize="medium")
    plot_depth_profile(axes[1], profiles, "self_alignment")
    axes[1].axhline(first["baseline_mean"].iloc[0], color="0.5", lw=1, ls=":", label="random subspaces")
    axes[1].set_title("self-alignment of mean J", fontsize="medium")
    for ax in axes:
        plot_regime_bands(ax, first["regime"].to_numpy())
    axes[1].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: depth regimes (shaded) and the measures that define them ({inputs.null_note})")
    return fig


def eigenvalue_density_figure(inputs):
    """Fig. S1: per-layer densities of |λ| and Re λ at each shown checkpoint, on bins shared by the
    checkpoints over the central 99% of all values."""
    spectra = inputs.eigenvalues
    shown = list(spectra)
    fig, axes = plt.subplots(len(shown), 2, figsize=(10, 3.4 * len(shown)), layout="constrained", squeeze=False)
    for col, (part, label) in enumerate((("modulus", "|λ|"), ("real", "Re λ"))):
        values = np.concatenate([np.abs(lam) if part == "modulus" else lam.real for lam in spectra.values()],
                                axis=None)
        shared = tuple(np.percentile(values, [0.5, 99.5]))  # a few outlying modes would squeeze the bulk into one bin
        for row, step in enumerate(shown):
            density, edges = eigenvalue_density(spectra[step], part=part, value_range=shared)
            mesh = plot_layer_density(axes[row, col], density, edges, reference=1.0)
            mesh.set_norm(mpl.colors.PowerNorm(0.5))
            axes[row, col].set(xlabel=label, title=f"step {format_step(step)}: density of {label} per layer")
            fig.colorbar(mesh, ax=axes[row, col], label="density (square-root scale)")
    fig.suptitle(f"{inputs.model}: eigenvalue densities of the mean Jacobian per layer, central 99% of all values "
                 "(dotted: 1)")
    return fig


#: The ``plot_dynamics`` rule's figures, in output order.
FIGURES = {
    "operators": operators_figure,
    "sample_spectra": sample_spectra_figure,
    "eigenvalues": eigenvalues_figure,
    "cumulative_rank": cumulative_rank_figure,
    "regimes": regimes_figure,
    "eigenvalue_density": eigenvalue_density_figure,
}


@dataclass(frozen=True)
class DynamicsModelsInputs:
    """What the figure over all models shows: ``recovery``
    (:func:`~crosslayer.dynamics.funnel.recovery_table`) and ``schur``, ``{(model, step): schur table}``."""

    recovery: pd.DataFrame
    schur: dict


def load_models_inputs(schur):
    """Read rule ``plot_dynamics_models``'s inputs: ``{(model, step): path of its schur.tsv}``."""
    tables = {key: pd.read_csv(path, sep="\t") for key, path in schur.items()}
    return DynamicsModelsInputs(recovery=recovery_table(tables), schur=tables)


def schur_models_figure(inputs):
    """Fig. 5a across models: per Schur mode, the dose response of the cumulative effective rank from
    layer 0, every model at every checkpoint (earlier checkpoints fainter), each model's last
    checkpoint labelled with its recovery ratio (rank without the non-normal part over the trained
    rank, :func:`crosslayer.dynamics.funnel.recovery_table`).

    Parameters
    ----------
    inputs : DynamicsModelsInputs
    """
    recovery, schur = inputs.recovery, inputs.schur
    modes = list(dict.fromkeys(recovery["mode"])) or ["J"]
    fig, axes = plt.subplots(1, len(modes), figsize=(5.6 * len(modes), 4.6), layout="constrained", squeeze=False)
    models = list(dict.fromkeys(model for model, _ in schur))
    for ax, mode in zip(axes[0], modes):
        for i, model in enumerate(models):
            steps = sorted(step for m, step in schur if m == model)
            for j, step in enumerate(steps):
                table = schur[(model, step)]
                dose = table[(table["construction"] == "dose") & (table["start_layer"] == 0) & (table["mode"] == mode)]
                dose = dose.groupby("alpha")["effective_rank"].mean()
                last = j == len(steps) - 1
                row = recovery[(recovery.model == model) & (recovery.step == step) & (recovery["mode"] == mode)]
                label = None
                if last:
                    ratio = row.recovery.iloc[0] if len(row) else np.nan
                    label = f"{model}, step {format_step(step)}" + (f": {ratio:.2f}x" if np.isfinite(ratio) else "")
                ax.plot(dose.index, dose.values, color=f"C{i}", marker="o" if last else None, ms=4,
                        lw=1.8 if last else 0.8, alpha=1.0 if last else 0.25 + 0.5 * j / max(len(steps) - 1, 1),
                        label=label)
        ax.set(xlabel="dose α of the non-normal Schur part (1: trained)",
               ylabel=r"effective rank of $J_{0 \to L}$", title=f"Schur surgery of {mode.replace('-', '−')}")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(frameon=False, fontsize="x-small", title="recovery: rank at α = 0 / at α = 1",
                      title_fontsize="x-small")
    fig.suptitle("Dose response of the cumulative rank, every model (earlier checkpoints fainter)")
    return fig


#: Rule plot_dynamics_models's figures, in order, and the function drawing each.
ALL_MODELS_FIGURES = {
    "schur_models": schur_models_figure,
}
