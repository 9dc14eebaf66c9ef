from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.dynamics.figures import ALL_MODELS_FIGURES, load_models_inputs
from crosslayer.plotting import save_figures

inputs = load_models_inputs({(model, step): path for (model, step), path in zip(snakemake.params.checkpoints,
                                                                               snakemake.input.schur)})
inputs.recovery.to_csv(snakemake.output.recovery, sep="\t", index=False, float_format="%.6g")
save_figures(ALL_MODELS_FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
