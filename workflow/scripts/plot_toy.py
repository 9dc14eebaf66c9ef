from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.continuity.figures import TOY_FIGURES, load_toy_inputs
from crosslayer.plotting import save_figures

inputs = load_toy_inputs(runs=snakemake.params.runs, drift_runs=snakemake.params.drift_runs,
                         ema_run=snakemake.params.ema_run, epochs=snakemake.input.epochs, final=snakemake.input.final)
save_figures(TOY_FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
