from _setup import start

start(snakemake)

import json
from pathlib import Path

import pandas as pd

from crosslayer.continuity.tables import ablation_table

runs = snakemake.params.runs
outcomes = {run: json.loads((Path(path) / "outcome.json").read_text()) for run, path in zip(runs, snakemake.input.runs)}
tables = {run: pd.read_csv(path, sep="\t") for run, path in zip(runs, snakemake.input.tables)}
ablation_table(outcomes, tables).to_csv(snakemake.output.table, sep="\t", index=False, float_format="%.6g")
