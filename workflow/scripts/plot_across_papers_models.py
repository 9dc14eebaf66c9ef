from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.across.plots import log2_ratios, plot_ratio_heatmap, robust_limit
from crosslayer.plotting import format_step, save_png_and_pdf

models = pd.read_csv(snakemake.input.models, sep="\t")
measures = pd.concat([pd.read_csv(path, sep="\t", dtype={"paper": str}) for path in snakemake.input.measures])
log2, papers = log2_ratios(models, measures)
log2.index = [f"{model} (step {format_step(int(step))})" for model, step in zip(models["model"], models["step"])]
title = "every model's last checkpoint: depth-mean ratio of each measure to its random baseline"

if log2.shape[1]:
    vmax = robust_limit(log2.to_numpy())
    below, above = np.nanmin(log2.to_numpy()) < -vmax, np.nanmax(log2.to_numpy()) > vmax
    extend = {(True, True): "both", (True, False): "min", (False, True): "max"}.get((below, above), "neither")
    fig, ax = plt.subplots(figsize=(0.42 * log2.shape[1] + 3.5, 0.45 * len(log2) + 2.8), layout="constrained")
    mesh = plot_ratio_heatmap(ax, log2, papers, vmax=vmax)
    fig.colorbar(mesh, ax=ax, label="log2(ratio to random baseline)", extend=extend,
                 shrink=0.9)
else:
    fig, ax = plt.subplots(figsize=(6, 2.5), layout="constrained")
    ax.set(xticks=[], yticks=[])
    ax.text(0.5, 0.5, "no measure has a ratio to its baseline", ha="center", va="center", transform=ax.transAxes)
fig.suptitle(title)
save_png_and_pdf(fig, snakemake.output.png, dpi=snakemake.params.dpi)
