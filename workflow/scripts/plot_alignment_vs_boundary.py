from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.plotting import format_step
from crosslayer.stats.permutation import spearman_permutation

params = snakemake.params
method = params.method
points = pd.concat(
    pd.read_csv(path, sep="\t").query("method == @method").assign(model=model, step=step)
    for model, step, path in zip(params.models, params.steps, snakemake.input.layers)
)
summary = pd.read_csv(snakemake.input.summary, sep="\t").query("method == @method")
fit = spearman_permutation(points["self_alignment"], points["cohens_d"], n_permutations=params.permutations,
                           seed=params.seed)

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
cells = [[m, format_step(s), f"{r:.2f}", f"{p:.2g}"]
         for m, s, r, p in summary[["model", "step", "rho_alignment_d", "p_alignment_d"]].itertuples(index=False)]
table = side.table(cellText=cells, colLabels=["model", "step", "ρ across layers", "p"], loc="upper center")
table.auto_set_font_size(False)
table.set_fontsize(8)
fig.suptitle(f"Self-alignment vs boundary coupling ({method}; paper 004, Figure 8)")
fig.savefig(snakemake.output.png, dpi=params.dpi)
fig.savefig(snakemake.output.pdf)
