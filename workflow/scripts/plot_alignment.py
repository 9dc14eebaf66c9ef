from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.alignment.figures import FIGURES, load_figure_inputs
from crosslayer.plotting import save_figures

inputs = load_figure_inputs(model=snakemake.wildcards.model, k=snakemake.params.k, steps=snakemake.params.steps,
                            adjacent=snakemake.input.adjacent, baseline=snakemake.input.baseline,
                            npz=snakemake.input.npz)
save_figures(FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
