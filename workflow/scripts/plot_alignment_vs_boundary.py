from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.dynamics.topology_figures import ALL_MODELS_FIGURES, load_all_models_inputs
from crosslayer.plotting import save_figures

params = snakemake.params
inputs = load_all_models_inputs(models=params.models, steps=params.steps, method=params.method,
                                permutations=params.permutations, seed=params.seed, layers=snakemake.input.layers,
                                summary=snakemake.input.summary)
save_figures(ALL_MODELS_FIGURES, inputs, snakemake.output, dpi=params.dpi)
