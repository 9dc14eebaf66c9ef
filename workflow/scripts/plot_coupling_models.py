from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.coupling.figures_models import ALL_MODELS_FIGURES, load_all_models_inputs
from crosslayer.plotting import save_figures

params = snakemake.params
inputs = load_all_models_inputs(steps=dict(zip(params.models, snakemake.input.steps)), models=snakemake.input.models,
                                fits=snakemake.input.fits, regularity=snakemake.input.regularity,
                                metric=params.metric, final_norm=params.final_norm,
                                training_fits=snakemake.input.training_fits,
                                heldout=dict(zip(params.models, snakemake.input.heldout)),
                                benchmarks=dict(zip(params.models, snakemake.input.benchmarks)))
save_figures(ALL_MODELS_FIGURES, inputs, snakemake.output, dpi=params.dpi)
