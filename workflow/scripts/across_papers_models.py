from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.across.catalog import from_legend
from crosslayer.across.tables import across_models

models, inputs = snakemake.params.models, snakemake.input
tables = {model: pd.read_csv(path, sep="\t") for model, path in zip(models, inputs.boundaries)}
legends = pd.concat([pd.read_csv(path, sep="\t", dtype={"paper": str}) for path in inputs.measures])
measures = from_legend(legends.drop_duplicates("measure"))  # every model's, in the first model's order
heldout = {model: pd.read_csv(path, sep="\t") for model, path in zip(models, inputs.heldout)}
across_models(tables, measures, heldout).to_csv(snakemake.output.models, sep="\t", index=False)
