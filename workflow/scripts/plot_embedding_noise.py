from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")

import pandas as pd

from crosslayer.coupling.figures import NOISE_FIGURES, NoiseFigureInputs
from crosslayer.plotting import save_figures

inputs = NoiseFigureInputs(model=snakemake.wildcards.model, table=pd.read_csv(snakemake.input.table, sep="\t"))
save_figures(NOISE_FIGURES, inputs, snakemake.output, dpi=snakemake.params.dpi)
