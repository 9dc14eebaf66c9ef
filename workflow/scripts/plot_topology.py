from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from crosslayer.dynamics.plots import plot_unit_coupling
from crosslayer.dynamics.statistics import jacobian_column_norms, participation_tails
from crosslayer.npz import open_npz
from crosslayer.plotting import depth_colors, format_step, plot_depth_profile, save_png_and_pdf, step_grid

model, steps, method, dpi = (snakemake.wildcards.model, snakemake.params.steps, snakemake.params.method,
                             snakemake.params.dpi)
output = snakemake.output
communities = {step: pd.read_csv(path, sep="\t").query("method == @method").set_index("snapshot")
               for step, path in zip(steps, snakemake.input.communities)}
layers = {step: pd.read_csv(path, sep="\t").query("method == @method").set_index("layer")
          for step, path in zip(steps, snakemake.input.layers)}
null_note = "step 0 = random-init null, dashed" if 0 in communities else "no step-0 checkpoint configured"


def save(fig, name):
    save_png_and_pdf(fig, getattr(output, name), dpi=dpi)  # the PDFs are listed in output.pdfs


# 1. communities per snapshot
fig, axes = plt.subplots(2, 2, figsize=(10, 7), layout="constrained")
for ax, (column, title) in zip(axes.flat, [("n_communities", "non-degenerate communities (≥ 2 units)"),
                                          ("largest", "largest community (units)"),
                                          ("seed_nmi", "stability across seeds (NMI)"),
                                          ("next_nmi", "NMI with the next snapshot")]):
    plot_depth_profile(ax, communities, column)
    ax.set_xlabel("snapshot (2l: block l input, 2l + 1: before its MLP)")
    ax.set_title(title, fontsize="medium")
axes[0, 0].legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: communities of the activation-correlation graphs ({method}; {null_note})")
save(fig, "communities")

# 2. boundary coupling and 3. mesoscale variance, one panel per checkpoint
for name, draw in (("boundary", "cohens_d"), ("mesoscale", "variance_captured")):
    fig, axes = step_grid(len(steps))
    for ax, step in zip(axes, steps):
        table = layers[step]
        if draw == "cohens_d":
            significant = table["significant"].astype(bool)
            ax.axhline(0, color="0.6", lw=0.8)
            ax.plot(table.index, table["cohens_d"], color="C0", lw=1)
            ax.scatter(table.index[significant], table["cohens_d"][significant], color="C3", zorder=3,
                       label=f"BH q < {snakemake.params.fdr_q}")
            ax.scatter(table.index[~significant], table["cohens_d"][~significant], facecolor="white",
                       edgecolor="C0", zorder=3, label="not significant")
            ax.set_ylabel("Cohen's d (top vs bottom participation)")
            ax.set_title(f"step {format_step(step)}: {int(significant.sum())}/{len(table)} layers", fontsize="medium")
        else:
            beats = table["p_mesoscale"] < 0.05
            ax.fill_between(table.index, table["null_mean"] - 2 * table["null_sd"],
                            table["null_mean"] + 2 * table["null_sd"], color="0.85", label="random partitions ±2 sd")
            ax.plot(table.index, table["variance_captured"], color="C2", lw=1)
            ax.scatter(table.index[beats], table["variance_captured"][beats], color="C2", zorder=3, label="p < 0.05")
            ax.scatter(table.index[~beats], table["variance_captured"][~beats], facecolor="white", edgecolor="C2",
                       zorder=3, label="p ≥ 0.05")
            ax.set_ylabel("variance of J captured by communities")
            ax.set_title(f"step {format_step(step)}: {int(beats.sum())}/{len(table)} layers above null",
                         fontsize="medium")
        ax.set_xlabel("layer")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes[0].legend(frameon=False, fontsize="x-small")
    what = "boundary-node coupling" if name == "boundary" else "mesoscale operator vs random partitions"
    fig.suptitle(f"{model}: {what} ({method})")
    save(fig, name)

# 4. rate-level coupling: disruption between blocks vs change of the mesoscale operator
summaries = {step: pd.read_csv(path, sep="\t").query("method == @method").iloc[0]
             for step, path in zip(steps, snakemake.input.summaries)}
fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
n_layers = len(layers[steps[0]])
colors = depth_colors(n_layers, "viridis")
markers = dict(zip(steps, "xos^vD<>ph"))  # beyond ten checkpoints: dots
for ax, column, key, title in ((axes[0], "delta_top_singular", "top_singular", "top singular value of BᵀJB"),
                               (axes[1], "delta_variance", "variance", "variance captured")):
    handles = []
    for step in steps:
        table = layers[step].dropna(subset=["disruption"])
        marker = markers.get(step, ".")
        # "x" has no face: it is drawn in its colour (an edge colour for it makes matplotlib warn)
        ax.scatter(table["disruption"], table[column], c=colors[table.index], marker=marker, s=28,
                   linewidths=1 if marker == "x" else 0.5, **({} if marker == "x" else {"edgecolors": "k"}))
        fit = summaries[step]
        handles.append(Line2D([], [], color="0.3", marker=marker, ls="", label=(
            f"step {format_step(step)}: ρ = {fit[f'rho_rate_{key}']:.2f}, p = {fit[f'p_rate_{key}']:.2g}")))
    ax.legend(handles=handles, frameon=False, fontsize="x-small")
    ax.set(xlabel="topology disruption 1 − NMI (block l → l + 1)", ylabel=f"|Δ {title}|")
colorbar = fig.colorbar(plt.cm.ScalarMappable(plt.Normalize(-0.5, n_layers - 0.5), "viridis"), ax=axes,
                        label="layer l", shrink=0.8)
colorbar.ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
fig.suptitle(f"{model}: rate-level topology–dynamics coupling ({method})")
save(fig, "rate")

# 5. per-unit view of the boundary coupling (Fig. 7a): column norm against participation at one layer, the
# layer with the largest |Cohen's d| at the last checkpoint (significant layers first), for every checkpoint
last = layers[steps[-1]]
candidates = last[last["significant"].astype(bool)] if last["significant"].astype(bool).any() else last
layer = int(candidates["cohens_d"].abs().idxmax())
fig, axes = step_grid(len(steps))
for ax, step, partitions_path, jacobians_path in zip(axes, steps, snakemake.input.partitions,
                                                     snakemake.input.jacobians):
    with open_npz(partitions_path) as npz:
        m = list(npz["methods"]).index(method)
        participation = npz["participation"][m, 2 * layer]  # block l's input snapshot
    with open_npz(jacobians_path) as npz:
        norms = jacobian_column_norms(npz["mean"][layer].astype(np.float64))
    bottom, top = participation_tails(participation, tail=snakemake.params.tail)
    plot_unit_coupling(ax, participation, norms, bottom, top)
    row = layers[step].loc[layer]
    ax.set_title(f"step {format_step(step)}, layer {layer}: d = {row['cohens_d']:.2f}, q = {row['q_boundary']:.2g}",
                 fontsize="medium")
axes[0].legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: Jacobian column norm of every unit against its participation ({method})")
save(fig, "units")
