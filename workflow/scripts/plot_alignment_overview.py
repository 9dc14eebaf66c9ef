from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from crosslayer.alignment.plots import plot_adjacent_mean, plot_random_baseline

models, k = snakemake.params.models, snakemake.params.k
# Fig. 1: one panel per model (baselines differ with d), shared y axis
fig, axes = plt.subplots(
    1, len(models), figsize=(3.6 * len(models), 3.2), sharey=True, layout="constrained", squeeze=False
)
for ax, model, adjacent_path, baseline_path in zip(axes[0], models, snakemake.input.adjacent, snakemake.input.baseline):
    means = pd.read_csv(adjacent_path, sep="\t").groupby("step")["left"].mean()
    baseline = pd.read_csv(baseline_path, sep="\t").iloc[0]
    plot_random_baseline(ax, baseline["mean"], baseline["sd"])
    plot_adjacent_mean(ax, means.index, means, label="mean over boundaries")
    ax.set_title(f"{model} (d = {int(baseline['d_model'])})")
for ax in axes[0][1:]:
    ax.set_ylabel("")
axes[0][0].legend(frameon=False, fontsize="small")
fig.suptitle(f"Mean adjacent-layer top-{k} MLP subspace overlap across training")
fig.savefig(snakemake.output.png, dpi=snakemake.params.dpi)
fig.savefig(snakemake.output.pdf)
