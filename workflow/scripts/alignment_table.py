from _setup import start

start(snakemake)

import pandas as pd

for name in ("table1", "cascade_fit"):
    # one table for all models, the model id as the first column
    per_model = {m: pd.read_csv(p, sep="\t") for m, p in zip(snakemake.params.models, snakemake.input[name])}
    table = pd.concat(per_model, names=["model", None]).reset_index(level=0)
    table.to_csv(snakemake.output[name], sep="\t", index=False, float_format="%.4g")
