from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from crosslayer.continuity.plots import (
    CONTINUITY_SPACES,
    plot_continuity_bars,
    plot_continuity_over_training,
    projection_colors,
)
from crosslayer.continuity.tables import TABLE2_ORDER
from crosslayer.plotting import save_png_and_pdf

summary = pd.read_csv(snakemake.input.summary, sep="\t").set_index("run")
steps = dict(zip(snakemake.params.runs, (pd.read_csv(path, sep="\t") for path in snakemake.input.tables)))
tables = {run: table[table["step"] == summary.loc[run, "steps"]] for run, table in steps.items()}  # the last step
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

# continuity over each run's saved checkpoints: one column per run, input space above, output space below
runs = list(steps)
fig, axes = plt.subplots(2, len(runs), figsize=(3.6 * len(runs) + 1.5, 6.4), layout="constrained", sharey=True,
                         squeeze=False)
colors = projection_colors(TABLE2_ORDER)
for column, run in enumerate(runs):
    for row, space in enumerate(CONTINUITY_SPACES):
        ax = axes[row, column]
        if steps[run]["present"].astype(bool).any():
            plot_continuity_over_training(ax, steps[run], space=space, colors=colors)
        else:
            ax.text(0.5, 0.5, "no checkpoint", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(run if row == 0 else "", fontsize="medium")
        ax.set_ylabel(ax.get_ylabel() if column == 0 else "")
        if not pd.isna(summary.loc[run, "diverged_step"]):
            ax.axvline(summary.loc[run, "diverged_step"], color="C3", ls=":", lw=1)
handles = {line.get_label(): line for ax in axes.flat for line in ax.get_lines() if not line.get_label().startswith("_")}
fig.legend(handles.values(), handles.keys(), loc="outside right center", fontsize="small")
fig.suptitle("transformer ablations: continuity over training (dotted red: the step a run diverged)")
save_png_and_pdf(fig, snakemake.output.over_training, dpi=snakemake.params.dpi)
