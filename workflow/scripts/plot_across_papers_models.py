from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.across.figures import ALL_MODELS_FIGURES, load_all_models_inputs
from crosslayer.plotting import save_figures

inputs = load_all_models_inputs(models=snakemake.input.models, measures=snakemake.input.measures)
save_figures(ALL_MODELS_FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
