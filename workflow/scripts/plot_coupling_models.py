from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.coupling.plots import plot_fit, plot_trained_vs_untrained
from crosslayer.plotting import save_png_and_pdf, set_step_axis

params, output = snakemake.params, snakemake.output
models = pd.read_csv(snakemake.input.models, sep="\t")
fits = pd.read_csv(snakemake.input.fits, sep="\t").query("subset == 'all'")  # subsets: Table 4, in the TSV
K = max(int(c.removeprefix("coupling_K")) for c in models.columns if c.startswith("coupling_K"))

# 1. coupling (Fig. 1b) and the line-shape score (Fig. 27, left) over training, every model
raw = "" if params.final_norm else "_raw"
fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), layout="constrained")
all_steps = set()
for model, path in zip(params.models, snakemake.input.steps):
    part = pd.read_csv(path, sep="\t").query("source == 'all' and variant == 'plain' and K == @K")
    all_steps |= set(part.step)
    axes[0].errorbar(part.step, part.coupling_mean, yerr=part.coupling_sd, marker="o", ms=3, capsize=2, label=model)
    axes[1].plot(part.step, part[f"lss{raw}_median"], marker="o", ms=3, label=model)
for ax in axes:
    set_step_axis(ax, sorted(all_steps))
    ax.legend(frameon=False, fontsize="x-small")
axes[0].set(ylabel=f"mean depth-wise coupling (K = {K}, {params.metric})", title="coupling (mean ± sd over prompts)")
axes[1].set(ylabel="line-shape score (median over tokens)", title="trajectory linearity")
fig.suptitle("Over training, every model")
save_png_and_pdf(fig, output.over_training, dpi=params.dpi)

# 2. score (or size) against coupling with the OLS fit (Figs 1a, 7, 35)
has_score = models.score.notna().all()
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
        ax.plot(row.intercept + row.slope * np.log10(np.sort(models.n_params)), np.log10(np.sort(models.n_params)),
                color="C1")
    title = f"OLS: R² = {row.r2:.2f}, p = {row.p:.2g}, n = {int(row.n)}"
ax.set(xlabel=f"mean depth-wise coupling (K = {K}, {params.metric})", ylabel=y_label, title=title)
fig.suptitle("Coupling across models" + ("" if has_score else " (no coupling.scores: size instead of score)"))
save_png_and_pdf(fig, output.vs_score, dpi=params.dpi)

# 3. trajectory regularity, untrained vs trained, every model by size (Figs 5 and 25)
regularity = pd.read_csv(snakemake.input.regularity, sep="\t")
fig, axes = plt.subplots(1, 2, figsize=(max(10, 1.3 * models.model.nunique() + 4), 4.5), layout="constrained")
for ax, (name, label) in zip(axes, (("lss", "line-shape score"), ("ed", "expodistance"))):
    plot_trained_vs_untrained(ax, regularity, name + raw)
    ax.set(ylabel=f"{label} (median, IQR over tokens)")
last = "after" if params.final_norm else "before"
fig.suptitle(f"Regularity of token trajectories, untrained (step 0) vs trained, models by size\n(x^L {last} the "
             "final norm)")
save_png_and_pdf(fig, output.regularity, dpi=params.dpi)


def fit_row(y, x, K=None):
    rows = fits[(fits.y == y) & (fits.x == x) & (fits.K.isna() if K is None else fits.K == K)]
    return rows.iloc[0] if len(rows) else None


# 4. coupling and score against size, depth, width and training tokens (Figs 35 and 8)
sizes = {"log10_params": ("log10 parameters", np.log10(models.n_params.astype(float))),
         "n_layers": ("layers", models.n_layers), "d_model": ("width d", models.d_model),
         "log10_tokens": ("log10 training tokens", np.log10(models.training_tokens.astype(float)))}
fig, axes = plt.subplots(2, len(sizes), figsize=(4.2 * len(sizes), 8), layout="constrained", squeeze=False)
for col, (name, (label, x)) in enumerate(sizes.items()):
    plot_fit(axes[0, col], x, models[f"coupling_K{K}"], fit_row("coupling", name, K), labels=models.model)
    axes[0, col].set(xlabel=label, ylabel=f"mean coupling (K = {K})")
    plot_fit(axes[1, col], x, models.score, fit_row("score", name), labels=models.model)
    axes[1, col].set(xlabel=label, ylabel="benchmark score" if has_score else "score (coupling.scores not set)")
fig.suptitle("Coupling and score against model size, depth, width and training tokens")
save_png_and_pdf(fig, output.sizes, dpi=params.dpi)

# 5. score against coupling at every K (Fig. 36)
Ks = sorted(int(c.removeprefix("coupling_K")) for c in models.columns if c.startswith("coupling_K"))
fig, axes = plt.subplots(1, len(Ks), figsize=(4.5 * len(Ks), 4), layout="constrained", squeeze=False)
for ax, k in zip(axes[0], Ks):
    plot_fit(ax, models[f"coupling_K{k}"], models.score, fit_row("score", "coupling", k), labels=models.model)
    ax.set(xlabel=f"mean coupling (K = {k})", ylabel="benchmark score" if has_score else "score (not set)")
fig.suptitle("Benchmark score against coupling at each K")
save_png_and_pdf(fig, output.per_K, dpi=params.dpi)
