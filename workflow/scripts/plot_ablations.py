from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.continuity.figures import ABLATION_FIGURES, load_ablation_inputs
from crosslayer.plotting import save_figures

inputs = load_ablation_inputs(runs=snakemake.params.runs, summary=snakemake.input.summary,
                              tables=snakemake.input.tables)
save_figures(ABLATION_FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
