from _setup import start

start(snakemake)

import json

import pandas as pd

from crosslayer.continuity.toy_tables import datasets_table

params = snakemake.params
per_set = len(params.runs) * len(params.seeds)  # the inputs come in image set, run, seed order
parts = {}
for i, image_set in enumerate(params.image_sets):
    files = slice(i * per_set, (i + 1) * per_set)
    parts[image_set] = ([pd.read_csv(path, sep="\t") for path in snakemake.input.epochs[files]],
                        [json.loads(open(path).read()) for path in snakemake.input.status[files]])
datasets_table(parts, params.runs).to_csv(snakemake.output.table, sep="\t", index=False)
