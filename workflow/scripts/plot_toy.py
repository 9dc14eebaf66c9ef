from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from crosslayer.continuity.plots import plot_run_bars, plot_run_metrics, plot_run_scatter, plot_runs_over_epochs
from crosslayer.plotting import save_png_and_pdf

params, output = snakemake.params, snakemake.output
runs, dpi = params.runs, params.dpi
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

# 2. the last epoch per run (paper Table 1 as bars); weight continuity against the gradient's rank (Fig. 13)
bars_width = max(7.0, 0.75 * len(runs) + 2)
fig, (ax, right) = plt.subplots(1, 2, figsize=(bars_width + 4.5, 4.2), layout="constrained",
                                width_ratios=[bars_width, 4.5])
plot_run_bars(ax, final, ["G0.v1", "W.v1", "W.u1", "W.wa_v", "Gcum.v1", "accuracy"], runs=runs)
ax.legend(fontsize="small", ncol=3, loc="upper right")
ax.set_title("toy residual MLP, last epoch per run (mean ± sd over seeds)")
plot_run_scatter(right, final, "G.erank", "W.v1", colors=colors)
right.set(xlabel="effective rank of the gradient (last epoch)", ylabel="weight continuity $v_1$", ylim=(0, 1))
right.set_title("continuity vs gradient rank (Fig. 13, this dataset)", fontsize="medium")
save_png_and_pdf(fig, output.final, dpi=dpi)

# 3. formation and drift, one panel per run, accuracy on a second axis (paper Fig. 2)
drift = [run for run in params.drift_runs if run in runs] or runs[:2]
fig, axes = plt.subplots(1, len(drift), figsize=(5.2 * len(drift), 3.8), layout="constrained", squeeze=False)
for ax, run in zip(axes[0], drift):
    lines, accuracy = plot_run_metrics(ax, epochs, run, {"W.v1": "weights $v_1$", "W.u1": "weights $u_1$",
                                                         "G.v1": "gradient $v_1$"}, accuracy=True)
    ax.set(title=run, ylabel="continuity")
    ax.legend(handles=[*lines, accuracy], fontsize="small", loc="lower left")
fig.suptitle("continuity forming and drifting\n(weights and each epoch's first gradient, mean ± sd over seeds)",
             fontsize="medium")
save_png_and_pdf(fig, output.drift, dpi=dpi)

# 4. gradient continuity precedes weight continuity; which gradient average the weights follow (paper Fig. 12)
run = params.ema_run if params.ema_run in runs else runs[0]
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
plot_run_metrics(left, epochs, run, {"G.v1": "gradient $v_1$", "W.v1": "weights $v_1$"})
left.set(title=f"{run}: continuity", ylabel="continuity")
left.legend(fontsize="small")
stacks = {"G.align_v": "raw gradient", "Gcum.align_v": "cumulative gradient",
          **{column: f"EMA β = {column[3:-8]}" for column in epochs.columns
             if column.startswith("ema") and column.endswith(".align_v")}}
plot_run_metrics(right, epochs, run, stacks)
right.set(title=f"{run}: alignment of $v_1$(W) with each gradient's $v_1$", ylabel="mean$_l$ |cos|")
right.legend(fontsize="small")
save_png_and_pdf(fig, output.ema_alignment, dpi=dpi)
