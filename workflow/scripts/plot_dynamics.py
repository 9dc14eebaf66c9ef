from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.dynamics.figures import FIGURES, load_figure_inputs
from crosslayer.plotting import save_figures

inputs = load_figure_inputs(model=snakemake.wildcards.model, steps=snakemake.params.steps,
                            tables=snakemake.input.tables, eigenvalues=snakemake.input.eigenvalues,
                            schur=snakemake.input.schur)
save_figures(FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
