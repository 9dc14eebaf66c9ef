from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.continuity.tables import steps_table

tables = [pd.read_csv(path, sep="\t") for path in snakemake.input.tables]
steps_table(tables, snakemake.params.steps).to_csv(snakemake.output.steps, sep="\t", index=False)
