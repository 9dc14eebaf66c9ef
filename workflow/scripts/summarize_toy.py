from _setup import start

start(snakemake)

import json

import pandas as pd

from crosslayer.continuity.toy_tables import epoch_table, final_table, stack_runs

statuses = [json.loads(open(path).read()) for path in snakemake.input.status]
long = stack_runs([pd.read_csv(path, sep="\t") for path in snakemake.input.epochs], statuses)
final_table(long, statuses, snakemake.params.runs).to_csv(snakemake.output.final, sep="\t", index=False)
epoch_table(long).to_csv(snakemake.output.epochs, sep="\t", index=False)
