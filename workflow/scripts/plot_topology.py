from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.dynamics.topology_figures import FIGURES, load_figure_inputs
from crosslayer.plotting import save_figures

params, paths = snakemake.params, snakemake.input
inputs = load_figure_inputs(model=snakemake.wildcards.model, steps=params.steps, method=params.method,
                            fdr_q=params.fdr_q, tail=params.tail, communities=paths.communities, layers=paths.layers,
                            summaries=paths.summaries, partitions=paths.partitions, jacobians=paths.jacobians)
save_figures(FIGURES, inputs, snakemake.output, dpi=params.dpi)
