from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

from crosslayer.continuity.figures import TOY_DATASETS_FIGURES, load_toy_datasets_inputs
from crosslayer.plotting import save_figures

inputs = load_toy_datasets_inputs(runs=snakemake.params.runs, datasets=snakemake.params.image_sets,
                                  table=snakemake.input.table)
save_figures(TOY_DATASETS_FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
