from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.alignment.tables import GATED_COLUMNS, gated_rows
from crosslayer.npz import open_npz

rows = []
for model, step, static, gated in zip(snakemake.params.models, snakemake.params.steps, snakemake.input.static,
                                      snakemake.input.gated):
    with open_npz(static) as s, open_npz(gated) as g:
        if g["gated"]:  # hub models without a gate leave an empty result
            rows += gated_rows(model, [step], [dict(s)], [dict(g)])
pd.DataFrame(rows, columns=GATED_COLUMNS).to_csv(snakemake.output.tsv, sep="\t", index=False, float_format="%.6g")
