from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from crosslayer.across.plots import (
    correlation_matrix,
    emergence_colorbar,
    emergence_matrix,
    emergence_steps,
    order_measures,
    plot_correlation_matrix,
    plot_emergence,
    plot_measure_profile,
    short_name,
    step_colors,
)
from crosslayer.plotting import format_step, pick_steps, save_png_and_pdf

model, dpi, output = snakemake.wildcards.model, snakemake.params.dpi, snakemake.output
steps = sorted(int(step) for step in snakemake.params.steps)
boundaries = pd.read_csv(snakemake.input.boundaries, sep="\t")
measures = order_measures(pd.read_csv(snakemake.input.measures, sep="\t", dtype={"paper": str}), boundaries)
correlations = pd.read_csv(snakemake.input.correlations, sep="\t")
emergence = pd.read_csv(snakemake.input.emergence, sep="\t", dtype={"paper": str})
names, papers = list(measures["measure"]), list(measures["paper"])
n_boundaries = int(boundaries["boundary"].max()) + 1 if len(boundaries) else 0


def nothing(text, size=(6, 2.5)):
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    ax.set(xticks=[], yticks=[])
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize="large")
    return fig, ax


# 1. every measure against depth at the first, middle and last checkpoint, over its random baseline
shown = pick_steps(sorted(set(boundaries["step"])), 3)
colors = step_colors(shown)
if names:
    ncols = min(6, len(names))
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.7 * ncols, 2.1 * nrows + 1.0), sharex=True, squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for k, (ax, name, paper) in enumerate(zip(axes.flat, names, papers)):
        plot_measure_profile(ax, boundaries, name, steps=shown, colors=colors)
        ax.set_title(f"{name} (paper {paper})", fontsize="small")
        ax.tick_params(labelsize="small")
        if k + ncols >= len(names):  # the lowest panel of each column
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("layer boundary l|l+1", fontsize="small")
    handles = [Line2D([], [], color=colors[step], marker="o", ms=3, label=f"step {format_step(step)}")
               for step in shown] + [Line2D([], [], color="0.45", ls="--", label="random baseline")]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False)
    fig.supylabel("value of the measure (dashed: its random baseline)", fontsize="medium")
else:
    fig, _ = nothing("no measure has values")
fig.suptitle(f"{model}: the papers' adjacent-layer measures against depth")
save_png_and_pdf(fig, output.profiles, dpi=dpi)

# 2. Spearman's rho of every pair of measures along depth, at up to 6 checkpoints
corr_steps = pick_steps(sorted(set(correlations["step"])), 6)
if corr_steps and len(names) >= 2:
    ncols = min(3, len(corr_steps))
    nrows = -(-len(corr_steps) // ncols)
    size = max(3.0, 0.17 * len(names) + 1.0)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 2.2, size * nrows + 1.6), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(corr_steps):]:
        ax.set_visible(False)
    for k, (ax, step) in enumerate(zip(axes.flat, corr_steps)):
        rho, significant, n = correlation_matrix(correlations, names, step)
        mesh = plot_correlation_matrix(ax, rho, significant, labels=[short_name(m) for m in names] if k == 0 else None,
                                       papers=papers)
        ax.set_title(f"step {format_step(step)} (n = {n})")
    fig.colorbar(mesh, ax=axes.flat[:len(corr_steps)], label="Spearman's rho along depth", shrink=0.6)
    fig.suptitle(f"{model}: correlations of the measures along depth (dots: significant after Benjamini-Hochberg)")
else:
    fig, _ = nothing("fewer than two measures with values: no correlations")
    fig.suptitle(f"{model}: correlations of the measures along depth")
save_png_and_pdf(fig, output.correlations, dpi=dpi)

# 3. the step at which each measure leaves its step-0 band, per boundary
rows = [name for name in names if name in set(emergence["measure"])]
row_papers = [paper for name, paper in zip(names, papers) if name in rows]
index, sign, stays_out = emergence_matrix(emergence, rows, n_boundaries, steps)
heatmap = rows and emergence_steps(steps)  # else a text: no measure, or step 0 is the only checkpoint
fig, ax = plt.subplots(figsize=(max(5.5, 0.55 * n_boundaries + 4.0), 0.28 * len(rows) + 1.8) if heatmap else (6, 2.5),
                       layout="constrained")
artist = plot_emergence(ax, index, sign, stays_out, steps=steps, labels=[short_name(m) for m in rows],
                        papers=row_papers)
bar = emergence_colorbar(fig, artist, steps, ax=ax, label="left the step-0 band at step", shrink=0.8)
fig.suptitle(f"{model}: when each measure leaves its random band\n(+ above, \u2212 below; pale: back in later)"
             if bar is not None else f"{model}: when each measure leaves its random band")
save_png_and_pdf(fig, output.emergence, dpi=dpi)
