from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.across.figures import FIGURES, load_figure_inputs
from crosslayer.plotting import save_figures

inputs = load_figure_inputs(model=snakemake.wildcards.model, steps=snakemake.params.steps,
                            boundaries=snakemake.input.boundaries, measures=snakemake.input.measures,
                            correlations=snakemake.input.correlations, emergence=snakemake.input.emergence)
save_figures(FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
