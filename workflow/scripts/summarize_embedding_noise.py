from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.coupling.tables import noise_summary

tables = {step: pd.read_csv(path, sep="\t") for step, path in zip(snakemake.params.steps, snakemake.input.tables)}
noise_summary(tables).to_csv(snakemake.output.table, sep="\t", index=False, float_format="%.6g")
