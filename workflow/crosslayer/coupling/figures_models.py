"""Report figures over all models for paper 002 (block coupling), composed from the Axes-level
``plot_*`` of :mod:`crosslayer.coupling.plots`.

:func:`load_all_models_inputs` reads what rule ``plot_coupling_models`` reads into an
:class:`AllModelsFigureInputs`; every function named ``*_figure`` takes that object and returns a new
matplotlib Figure (it never saves). :data:`ALL_MODELS_FIGURES` maps each of the rule's outputs, in
order, to its function. The figures of one model are in :mod:`crosslayer.coupling.figures`.
"""

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.coupling.plots import plot_fit, plot_trained_vs_untrained
from crosslayer.evaluation.tables import coupling_and_loss
from crosslayer.plotting import set_step_axis

__all__ = [
    "AllModelsFigureInputs", "load_all_models_inputs", "over_training_all_figure", "vs_score_figure",
    "vs_loss_figure", "gsm8k_figure", "regularity_models_figure", "sizes_figure", "per_K_figure", "ALL_MODELS_FIGURES",
]



@dataclass(frozen=True, eq=False)
class AllModelsFigureInputs:
    """What the figures over all models draw.

    Attributes
    ----------
    steps : dict of str -> pandas.DataFrame
        Model -> its ``steps`` table (:func:`~crosslayer.coupling.tables.summarize_steps`), in the
        rule's model order.
    models : pandas.DataFrame
        :func:`~crosslayer.coupling.tables.across_models`.
    fits : pandas.DataFrame
        :func:`~crosslayer.coupling.tables.subset_fits`; the figures use subset ``all`` (the named
        subsets, the paper's Table 4, stay in the TSV).
    regularity : pandas.DataFrame
        :func:`~crosslayer.coupling.tables.regularity_across_models`.
    metric : str
    final_norm : bool
    training_fits : pandas.DataFrame
        :func:`~crosslayer.coupling.tables.training_fits` (empty without the evaluation stage).
    heldout : dict of str -> pandas.DataFrame
        Model -> its held-out table (:func:`~crosslayer.evaluation.heldout.heldout_table`); empty
        without the evaluation stage.
    benchmarks : dict of str -> pandas.DataFrame
        Model -> its benchmark scores (:func:`~crosslayer.evaluation.tables.scores_table`); empty
        without the benchmarks stage.
    """

    steps: dict
    models: pd.DataFrame
    fits: pd.DataFrame
    regularity: pd.DataFrame
    metric: str
    final_norm: bool
    training_fits: pd.DataFrame = None
    heldout: dict = None
    benchmarks: dict = None

    @property
    def Ks(self):
        """The Ks of the models table, sorted."""
        return sorted(int(c.removeprefix("coupling_K")) for c in self.models.columns if c.startswith("coupling_K"))

    @property
    def has_score(self):
        """Every model has a benchmark score (``coupling.scores``)."""
        return bool(self.models.score.notna().all())


def load_all_models_inputs(*, steps, models, fits, regularity, metric, final_norm, training_fits=None, heldout=None,
                           benchmarks=None):
    """Read rule ``plot_coupling_models``'s inputs.

    Parameters
    ----------
    steps : mapping of str -> path
        Model -> its ``steps.tsv``.
    models, fits, regularity, training_fits : path
        ``models.tsv``, ``fits.tsv``, ``regularity_models.tsv``, ``fits_over_training.tsv``.
    heldout, benchmarks : mapping of str -> path, optional
        Model -> its ``heldout.tsv`` / ``scores.tsv`` (none without the evaluation / benchmarks stage).
    metric, final_norm
        As :class:`AllModelsFigureInputs`.

    Returns
    -------
    AllModelsFigureInputs
    """
    return AllModelsFigureInputs(
        steps={model: pd.read_csv(path, sep="\t") for model, path in steps.items()},
        models=pd.read_csv(models, sep="\t"), fits=pd.read_csv(fits, sep="\t"),
        regularity=pd.read_csv(regularity, sep="\t"), metric=metric, final_norm=final_norm,
        training_fits=pd.read_csv(training_fits, sep="\t") if training_fits else pd.DataFrame(),
        heldout={model: pd.read_csv(path, sep="\t") for model, path in (heldout or {}).items()},
        benchmarks={model: pd.read_csv(path, sep="\t") for model, path in (benchmarks or {}).items()})


def _fit_row(inputs, y, x, K=None):
    """The fit over all models of `y` on `x` (at `K`, or without one), or None."""
    fits = inputs.fits.query("subset == 'all'")
    rows = fits[(fits.y == y) & (fits.x == x) & (fits.K.isna() if K is None else fits.K == K)]
    return rows.iloc[0] if len(rows) else None


def over_training_all_figure(inputs):
    """Mean coupling at the largest K (Fig. 1b) and the line-shape score (Fig. 27, left) over training,
    one line per model with at least 3 checkpoints; the others (a final checkpoint beside its
    untrained twin, whose step 1 is a label) are named below, not drawn as two-point curves."""
    K, raw = inputs.Ks[-1], "" if inputs.final_norm else "_raw"
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), layout="constrained")
    all_steps = set()
    curves = {m: t for m, t in inputs.steps.items() if t.step.nunique() >= 3}
    if others := [m for m in inputs.steps if m not in curves]:
        fig.text(0.5, -0.02, f"not over training (fewer than 3 checkpoints; untrained vs trained: the regularity "
                 f"figure): {', '.join(others)}", ha="center", va="top", fontsize="small")
    for model, table in curves.items():
        part = table.query("source == 'all' and variant == 'plain' and K == @K")
        all_steps |= set(part.step)
        axes[0].errorbar(part.step, part.coupling_mean, yerr=part.coupling_sd, marker="o", ms=3, capsize=2,
                         label=model)
        axes[1].plot(part.step, part[f"lss{raw}_median"], marker="o", ms=3, label=model)
    for ax in axes:
        if all_steps:
            set_step_axis(ax, sorted(all_steps))
            ax.legend(frameon=False, fontsize="x-small")
    axes[0].set(ylabel=f"mean depth-wise coupling (K = {K}, {inputs.metric})",
                title="coupling (mean ± sd over prompts)")
    axes[1].set(ylabel="line-shape score (median over tokens)", title="trajectory linearity")
    fig.suptitle("Over training, every model")
    return fig


def vs_score_figure(inputs):
    """Benchmark score against coupling with the linear and the exponential OLS fit (Figs 1a, 7, 35); size
    instead of score while ``coupling.scores`` is not set."""
    models, K, has_score = inputs.models, inputs.Ks[-1], inputs.has_score
    fits = inputs.fits.query("subset == 'all'")
    y_name, y_label = ("score", "benchmark score") if has_score else ("log10_params", "log10 parameters")
    y = models.score if has_score else np.log10(models.n_params)
    x = models[f"coupling_K{K}"]
    fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
    ax.scatter(x, y, color="C0", zorder=2)
    for model, xi, yi in zip(models.model, x, y):
        ax.annotate(model, (xi, yi), fontsize="x-small", xytext=(3, 3), textcoords="offset points")
    fit = fits.query("y == @y_name and x == 'coupling' and K == @K") if has_score else \
        fits.query("y == 'coupling' and x == 'log10_params' and K == @K")
    title = "too few models for a fit (need 3)"
    if len(fit) and np.isfinite(fit.r2.iloc[0]):
        row = fit.iloc[0]
        grid = np.linspace(x.min(), x.max(), 50)
        if has_score:
            ax.plot(grid, row.intercept + row.slope * grid, color="C1", label="linear")
            exponential = fits.query("y == 'log_score' and x == 'coupling' and K == @K")  # Fig. 7: log score linear
            if len(exponential) and np.isfinite(exponential.r2.iloc[0]):
                e = exponential.iloc[0]
                ax.plot(grid, np.exp(e.intercept + e.slope * grid), "--", color="C2",
                        label=f"exponential (R² = {e.r2:.2f} on log score)")
            ax.legend(frameon=False, fontsize="x-small")
        else:  # that fit is coupling against size: draw it in these axes (size on y)
            size = np.log10(np.sort(models.n_params))
            ax.plot(row.intercept + row.slope * size, size, color="C1")
        title = f"OLS: R² = {row.r2:.2f}, p = {row.p:.2g}, n = {int(row.n)}"
    ax.set(xlabel=f"mean depth-wise coupling (K = {K}, {inputs.metric})", ylabel=y_label, title=title)
    fig.suptitle("Coupling across models" + ("" if has_score else " (no coupling.scores: size instead of score)"))
    return fig


def vs_loss_figure(inputs):
    """Held-out loss against coupling: over each model's checkpoints (left, the OLS fit of each model
    in the legend) and across models at their last checkpoint in bits per byte (right), coupling at
    the largest K. The performance axis every run has, scores or not."""
    K = inputs.Ks[-1]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    if not inputs.heldout:
        for ax in axes:
            ax.text(0.5, 0.5, "no held-out loss: evaluation.activate is false", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_axis_off()
        return fig
    fits = inputs.training_fits
    for i, (model, table) in enumerate(inputs.steps.items()):
        points = coupling_and_loss(table, inputs.heldout[model]).query("K == @K")
        fit = fits[(fits.model == model) & (fits.K == K)]
        r2 = fit.r2.iloc[0] if len(fit) else np.nan
        label = model + (f" (R² = {r2:.2f}, n = {int(fit.n.iloc[0])})" if np.isfinite(r2) else "")
        axes[0].plot(points.coupling, points.heldout_loss, "-", color=f"C{i}", alpha=0.5, label=label)
        axes[0].scatter(points.coupling, points.heldout_loss, c=np.log1p(points.step), cmap="viridis",
                        edgecolors=f"C{i}", zorder=2)
        for row in points.iloc[[0, -1]].itertuples():
            axes[0].annotate(f"step {row.step}", (row.coupling, row.heldout_loss), fontsize="xx-small",
                             xytext=(3, 3), textcoords="offset points")
    axes[0].set(xlabel=f"mean depth-wise coupling (K = {K}, {inputs.metric})", ylabel="held-out loss (nats/token)",
                title="over training (colour: log step)")
    axes[0].legend(frameon=False, fontsize="x-small")
    models = inputs.models
    plot_fit(axes[1], models[f"coupling_K{K}"], models.bits_per_byte, _fit_row(inputs, "bits_per_byte", "coupling", K),
             labels=models.model)
    axes[1].set(xlabel=f"mean depth-wise coupling (K = {K}, {inputs.metric})",
                ylabel="held-out bits per byte (last checkpoint)")
    fig.suptitle("Held-out loss against coupling")
    return fig


def gsm8k_figure(inputs):
    """GSM8K against the benchmark average across models, each at its last checkpoint (Fig. 31), from
    the benchmarks stage's per-task scores; a note where no model has a GSM8K score."""
    fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
    points = []
    for model, table in (inputs.benchmarks or {}).items():
        last = table[table.step == table.step.max()].set_index("task")
        if "gsm8k" in last.index:
            points.append((model, last.value["average"], last.value["gsm8k"]))
    if not points:
        ax.text(0.5, 0.5, "no GSM8K scores: turn on benchmarks with gsm8k among its tasks", ha="center",
                va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    names, average, gsm8k = zip(*points)
    plot_fit(ax, average, gsm8k, None, labels=names)
    r = np.corrcoef(average, gsm8k)[0, 1] if len(points) >= 3 else np.nan
    ax.set(xlabel="benchmark average (lm-eval)", ylabel="GSM8K (exact match)",
           title=f"Pearson r = {r:.2f}, n = {len(points)}" if np.isfinite(r) else f"n = {len(points)} (r needs 3)")
    fig.suptitle("GSM8K against the benchmark average, last checkpoints")
    return fig


def regularity_models_figure(inputs):
    """Trajectory regularity (LSS and ED median and IQR), untrained vs trained, every model by size
    (Figs 5 and 25)."""
    raw = "" if inputs.final_norm else "_raw"
    width = max(10, 1.3 * inputs.models.model.nunique() + 4)
    fig, axes = plt.subplots(1, 2, figsize=(width, 4.5), layout="constrained")
    for ax, (name, label) in zip(axes, (("lss", "line-shape score"), ("ed", "expodistance"))):
        plot_trained_vs_untrained(ax, inputs.regularity, name + raw)
        ax.set(ylabel=f"{label} (median, IQR over tokens)")
    last = "after" if inputs.final_norm else "before"
    fig.suptitle(f"Regularity of token trajectories, untrained (step 0) vs trained, models by size\n(x^L {last} "
                 "the final norm)")
    return fig


def sizes_figure(inputs):
    """Coupling (top) and score (bottom) against size, depth, width and training tokens, with their OLS
    fits (Figs 35 and 8)."""
    models, K = inputs.models, inputs.Ks[-1]
    sizes = {"log10_params": ("log10 parameters", np.log10(models.n_params.astype(float))),
             "n_layers": ("layers", models.n_layers), "d_model": ("width d", models.d_model),
             "log10_tokens": ("log10 training tokens", np.log10(models.training_tokens.astype(float)))}
    fig, axes = plt.subplots(2, len(sizes), figsize=(4.2 * len(sizes), 8), layout="constrained", squeeze=False)
    for col, (name, (label, x)) in enumerate(sizes.items()):
        plot_fit(axes[0, col], x, models[f"coupling_K{K}"], _fit_row(inputs, "coupling", name, K),
                 labels=models.model)
        axes[0, col].set(xlabel=label, ylabel=f"mean coupling (K = {K})")
        plot_fit(axes[1, col], x, models.score, _fit_row(inputs, "score", name), labels=models.model)
        axes[1, col].set(xlabel=label,
                         ylabel="benchmark score" if inputs.has_score else "score (coupling.scores not set)")
    fig.suptitle("Coupling and score against model size, depth, width and training tokens")
    return fig


def per_K_figure(inputs):
    """Benchmark score against coupling at every K, with the OLS fits (Fig. 36)."""
    models, Ks = inputs.models, inputs.Ks
    fig, axes = plt.subplots(1, len(Ks), figsize=(4.5 * len(Ks), 4), layout="constrained", squeeze=False)
    for ax, k in zip(axes[0], Ks):
        plot_fit(ax, models[f"coupling_K{k}"], models.score, _fit_row(inputs, "score", "coupling", k),
                 labels=models.model)
        ax.set(xlabel=f"mean coupling (K = {k})", ylabel="benchmark score" if inputs.has_score else "score (not set)")
    fig.suptitle("Benchmark score against coupling at each K")
    return fig


#: Rule plot_coupling_models's outputs, in order, and the function drawing each.
ALL_MODELS_FIGURES = {
    "over_training": over_training_all_figure,
    "vs_score": vs_score_figure,
    "regularity": regularity_models_figure,
    "sizes": sizes_figure,
    "per_K": per_K_figure,
    "vs_loss": vs_loss_figure,
    "gsm8k": gsm8k_figure,
}
