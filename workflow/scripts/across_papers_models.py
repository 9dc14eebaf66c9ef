from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.across.catalog import Measure
from crosslayer.across.tables import across_models

tables = {model: pd.read_csv(path, sep="\t") for model, path in zip(snakemake.params.models, snakemake.input.boundaries)}
legend = pd.concat([pd.read_csv(path, sep="\t") for path in snakemake.input.measures]).drop_duplicates("measure")
measures = [Measure(row.measure, row.analysis, row.description, row.baseline, distance=row.ratio == "baseline / value")
            for row in legend.itertuples()]
across_models(tables, measures).to_csv(snakemake.output.models, sep="\t", index=False)
