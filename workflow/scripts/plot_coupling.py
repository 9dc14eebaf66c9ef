from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.coupling.figures import FIGURES, load_figure_inputs
from crosslayer.plotting import save_figures

params = snakemake.params
inputs = load_figure_inputs(model=snakemake.wildcards.model, steps=params.steps, npz=snakemake.input.npz,
                            tables={name: snakemake.input[name] for name in params.tables}, metric=params.metric,
                            window=params.window, pca_fit=params.pca_fit, final_norm=params.final_norm,
                            example_blocks=params.example_blocks, unpooled=params.unpooled,
                            regularity_source=params.regularity_source)
save_figures(FIGURES, inputs, snakemake.output, dpi=params.dpi)
