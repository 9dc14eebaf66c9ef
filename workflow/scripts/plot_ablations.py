from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from crosslayer.continuity.plots import CONTINUITY_SPACES, plot_continuity_bars
from crosslayer.continuity.tables import TABLE2_ORDER
from crosslayer.plotting import save_png_and_pdf

summary = pd.read_csv(snakemake.input.summary, sep="\t").set_index("run")
tables = dict(zip(snakemake.params.runs, (pd.read_csv(path, sep="\t") for path in snakemake.input.tables)))
finished = [run for run in tables if pd.isna(summary.loc[run, "diverged_step"])]
diverged = [f"{run} at step {int(summary.loc[run, 'diverged_step'])}" for run in tables if run not in finished]

fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained", sharey=True)
if finished:
    for ax, space in zip(axes, CONTINUITY_SPACES):
        plot_continuity_bars(ax, [tables[run] for run in finished], space=space, order=TABLE2_ORDER, fade=False,
                             labels=[f"{run} (ppl {summary.loc[run, 'perplexity']:.3g})" for run in finished])
    axes[1].legend(fontsize="small", loc="upper right")
else:
    for ax in axes:
        ax.text(0.5, 0.5, "every run diverged", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
title = "transformer ablations: continuity of adjacent layers' principal singular vectors"
fig.suptitle(title + (f"\ndiverged (no continuity): {', '.join(diverged)}" if diverged else ""))
save_png_and_pdf(fig, snakemake.output.png, dpi=snakemake.params.dpi)
