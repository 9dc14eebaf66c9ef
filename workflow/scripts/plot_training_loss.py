from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.plotting import TRAINING_FIGURES, load_training_inputs, save_figures

inputs = load_training_inputs(model=snakemake.wildcards.model, run=snakemake.input.run)
save_figures(TRAINING_FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi, pdf=False)  # a PNG only
