from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.dynamics.regimes import regime_summary

summaries = []
for step, path in zip(snakemake.params.steps, snakemake.input.tables):
    table = pd.read_csv(path, sep="\t", index_col="layer")
    stats = table.drop(columns=["regime", "baseline_mean", "baseline_sd"])
    summaries.append(regime_summary(stats, table["regime"]).reset_index().assign(step=step))
table = pd.concat(summaries).set_index(["step", "regime"])
table.insert(0, "n_layers", table.pop("n_layers"))
table.to_csv(snakemake.output.table, sep="\t")
