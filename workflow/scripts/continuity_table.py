from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.continuity.tables import table2

steps = {model: pd.read_csv(path, sep="\t") for model, path in zip(snakemake.params.models, snakemake.input.steps)}
table2(steps).to_csv(snakemake.output.table2, sep="\t", index=False)
