from _setup import start

start(snakemake)

import math

import matplotlib

matplotlib.use("Agg")
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

model, k, steps = snakemake.wildcards.model, snakemake.params.k, snakemake.params.steps
adjacent = pd.read_csv(snakemake.input.adjacent, sep="\t")
baseline = pd.read_csv(snakemake.input.baseline, sep="\t").iloc[0]
by_boundary = adjacent.pivot(index="boundary", columns="step", values="left")


def save(fig, name):
    fig.savefig(snakemake.output[name], dpi=snakemake.params.dpi)
    fig.savefig(snakemake.output[f"{name}_pdf"])
    plt.close(fig)


# Fig. 1/5: mean adjacent-layer overlap vs step, both singular spaces, over the random baseline
fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
means = adjacent.groupby("step")[["left", "right"]].mean()
plot_random_baseline(ax, baseline["mean"], baseline["sd"])
for space in ("left", "right"):
    plot_adjacent_mean(ax, means.index, means[space], label=SPACE_LABELS[space])
ax.set_title(f"{model}: adjacent layers, top-{k} (d = {int(baseline['d_model'])})")
ax.legend(frameon=False, fontsize="small")
save(fig, "adjacent_mean")

# Fig. 2: boundary x step heatmap
fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
mesh = plot_boundary_heatmap(ax, steps, by_boundary.to_numpy())
fig.colorbar(mesh, ax=ax, label=f"top-{k} overlap (baseline {baseline['mean']:.2f})")
ax.set_title(f"{model}: adjacent-layer overlap by depth")
save(fig, "boundary_heatmap")

# Fig. 3: per-boundary trajectories, blue (early) to red (late)
fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
mappable = plot_boundary_trajectories(ax, steps, by_boundary.to_numpy())
ax.axhline(baseline["mean"], color="0.5", ls="--", lw=1)
fig.colorbar(mappable, ax=ax, label="layer boundary (early → late)")
ax.set_title(f"{model}: per-boundary overlap")
save(fig, "boundary_trajectories")

# Fig. 4/7: all-pairs overlap matrix at every checkpoint
data = load_alignment(snakemake.input.npz, steps)
cols = min(4, len(steps))
rows = math.ceil(len(steps) / cols)
fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.5 * rows), layout="constrained", squeeze=False)
vmax = max(float(data["overlap_left"][:, ~np.eye(data["overlap_left"].shape[1], dtype=bool)].max()), baseline["mean"])
for ax, step, overlap in zip(axes.flat, steps, data["overlap_left"]):
    image = plot_overlap_matrix(ax, overlap, vmin=0.0, vmax=vmax)
    ax.set_title(f"step {format_step(step)}")
for ax in axes.flat[len(steps) :]:
    ax.set_visible(False)
fig.colorbar(image, ax=axes, label=f"top-{k} overlap", shrink=0.8)
fig.suptitle(f"{model}: pairwise overlap of MLP output subspaces")
save(fig, "pairwise")
