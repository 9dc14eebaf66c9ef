from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.continuity.figures import FIGURES, load_figure_inputs
from crosslayer.plotting import save_figures

inputs = load_figure_inputs(model=snakemake.wildcards.model, steps=snakemake.params.steps,
                            table=snakemake.input.steps, npz=snakemake.input.npz)
save_figures(FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
