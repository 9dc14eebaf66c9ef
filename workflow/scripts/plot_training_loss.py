from _setup import start

start(snakemake)

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from crosslayer.plotting import plot_training_loss

fig, ax = plt.subplots(figsize=(5, 3.2), layout="constrained")
plot_training_loss(ax, pd.read_csv(Path(snakemake.input.run) / "loss.tsv", sep="\t"))
ax.set_title(f"{snakemake.wildcards.model}: training loss")
fig.savefig(snakemake.output.png, dpi=snakemake.params.dpi)
