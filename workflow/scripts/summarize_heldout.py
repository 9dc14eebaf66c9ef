from _setup import start

start(snakemake)

import json

from crosslayer.evaluation.tables import heldout_table


def read(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


rows = {step: read(path) for step, path in zip(snakemake.params.steps, snakemake.input.json)}
heldout_table(rows).to_csv(snakemake.output.table, sep="\t", index=False, float_format="%.6g")
