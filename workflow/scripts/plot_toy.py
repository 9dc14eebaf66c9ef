from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from crosslayer.continuity.plots import plot_run_bars, plot_runs_over_epochs
from crosslayer.plotting import save_png_and_pdf

runs, dpi, output = snakemake.params.runs, snakemake.params.dpi, snakemake.output
epochs = pd.read_csv(snakemake.input.epochs, sep="\t")
final = pd.read_csv(snakemake.input.final, sep="\t")
cmap = plt.get_cmap("tab20")
colors = {run: cmap(i % 20) for i, run in enumerate(runs)}

# 1. continuity of weights and gradients over epochs (paper Figs 2 and 12)
panels = {"W.v1": "weights, input space $v_1$", "W.u1": "weights, output space $u_1$",
          "G.v1": "gradient (first mini-batch of the epoch), $v_1$", "Gcum.v1": "cumulative gradient, $v_1$"}
fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), layout="constrained", sharex=True)
for ax, (metric, title) in zip(axes.flat, panels.items()):
    plot_runs_over_epochs(ax, epochs, metric, colors=colors)
    ax.set_title(title, fontsize="medium")
    ax.set_ylabel("continuity")
fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="outside right center", fontsize="small")
fig.suptitle("toy residual MLP on MNIST: continuity of adjacent layers over training (mean ± sd over seeds)")
save_png_and_pdf(fig, output.over_epochs, dpi=dpi)

# 2. the last epoch per run (paper Table 1 as bars)
fig, ax = plt.subplots(figsize=(max(7.0, 0.75 * len(runs) + 2), 4.2), layout="constrained")
plot_run_bars(ax, final, ["G0.v1", "W.v1", "W.u1", "W.wa_v", "Gcum.v1", "accuracy"], runs=runs)
ax.legend(fontsize="small", ncol=3, loc="upper right")
ax.set_title("toy residual MLP, last epoch per run (mean ± sd over seeds)")
save_png_and_pdf(fig, output.final, dpi=dpi)
