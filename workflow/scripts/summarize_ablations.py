from _setup import start

start(snakemake)

import json
from pathlib import Path

import pandas as pd

from crosslayer.continuity.tables import ablation_table, table2

runs = snakemake.params.runs
outcomes = {run: json.loads((Path(path) / "outcome.json").read_text()) for run, path in zip(runs, snakemake.input.runs)}
steps = {run: pd.read_csv(path, sep="\t") for run, path in zip(runs, snakemake.input.tables)}
last = {run: table[table["step"] == outcomes[run]["steps"]].drop(columns="step") for run, table in steps.items()}
ablation_table(outcomes, last).to_csv(snakemake.output.table, sep="\t", index=False, float_format="%.6g")
table2(steps).rename(columns={"model": "run"}).to_csv(snakemake.output.over_training, sep="\t", index=False,
                                                      float_format="%.6g")
