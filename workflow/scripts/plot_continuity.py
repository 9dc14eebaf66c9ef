from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.continuity.plots import (
    CONTINUITY_SPACES,
    plot_adjacent_cosines,
    plot_continuity_bars,
    plot_continuity_over_training,
    plot_trajectory_3d,
    projection_colors,
)
from crosslayer.continuity.tables import TABLE2_ORDER
from crosslayer.npz import load_npz
from crosslayer.plotting import format_step, save_png_and_pdf

model, steps, dpi, output = snakemake.wildcards.model, snakemake.params.steps, snakemake.params.dpi, snakemake.output
table = pd.read_csv(snakemake.input.steps, sep="\t")
last_step = steps[-1]
last = table[table["step"] == last_step].set_index("projection")
present = [name for name in TABLE2_ORDER if last.loc[name, "present"]]
colors = {name: color for name, color in projection_colors(TABLE2_ORDER).items() if name in present}
arrays = load_npz(snakemake.input.npz[-1])
shown = sorted({steps[0], last_step})  # the random-init null (when step 0 is configured) and the last step
labels = [f"step {format_step(step)}" + (" (init)" if step == 0 else "") for step in shown]
title = lambda what: f"{model}: {what}"  # noqa: E731


def name_of(projection):
    return "OV" if projection == "ov" else projection.capitalize()


def two_panels():
    return plt.subplots(1, 2, figsize=(11, 3.9), layout="constrained", sharey=True)


# 1. continuity per projection, first vs last step, with the random baseline (paper Table 2 as bars)
fig, axes = two_panels()
for ax, space in zip(axes, CONTINUITY_SPACES):
    plot_continuity_bars(ax, [table[table["step"] == step] for step in shown], space=space, labels=labels,
                         order=TABLE2_ORDER)
axes[0].legend(fontsize="small", loc="upper right")
fig.suptitle(title("continuity of adjacent layers' principal singular vectors"))
save_png_and_pdf(fig, output.bars, dpi=dpi)

# 2. continuity over training
fig, axes = two_panels()
for ax, space in zip(axes, CONTINUITY_SPACES):
    plot_continuity_over_training(ax, table, space=space, colors=colors)
axes[1].legend(fontsize="small", ncol=2, loc="upper left")
fig.suptitle(title("continuity over training"))
save_png_and_pdf(fig, output.over_training, dpi=dpi)

# 3. |cos| of each adjacent layer pair at the last step
fig, axes = two_panels()
for ax, space in zip(axes, CONTINUITY_SPACES):
    plot_adjacent_cosines(ax, {name: arrays[f"{name}.cos_{space}"] for name in present}, colors=colors)
    ax.set_title(CONTINUITY_SPACES[space])
axes[1].legend(fontsize="small", ncol=2)
fig.suptitle(title(f"layer-wise continuity at step {format_step(last_step)}"))
save_png_and_pdf(fig, output.layers, dpi=dpi)

# 4. 3-D PCA trajectories of the principal vectors, coloured by depth (paper Figs 4 and 5)
fig = plt.figure(figsize=(2.5 * len(present), 5.8), layout="constrained")
for row, space in enumerate(CONTINUITY_SPACES):
    for col, name in enumerate(present):
        ax = fig.add_subplot(2, len(present), row * len(present) + col + 1, projection="3d")
        coords = arrays[f"{name}.pca_{space}"]
        points = plot_trajectory_3d(ax, np.pad(coords, ((0, 0), (0, max(0, 3 - coords.shape[1])))))
        ax.set_title(f"{name_of(name)} ${space}_1$: EVR {last.loc[name, f'evr_{space}']:.0%}\n"
                     f"(random {last.loc[name, f'evr_baseline_{space}']:.0%})", fontsize="small")
fig.colorbar(points, ax=fig.axes, label="layer", shrink=0.5)
fig.suptitle(title(f"principal vectors across depth on their top principal components, step {format_step(last_step)}"))
save_png_and_pdf(fig, output.pca, dpi=dpi)
