from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.dynamics.funnel import bottleneck_table, radius_vs_rank_drop
from crosslayer.dynamics.regimes import minimum_layer, regime_summary

summaries, funnel = [], []
for step, path in zip(snakemake.params.steps, snakemake.input.tables):
    table = pd.read_csv(path, sep="\t", index_col="layer")
    stats = table.drop(columns=["regime", "baseline_mean", "baseline_sd"])
    layer, value = minimum_layer(table["self_alignment"])  # Table 2's "min layer", over the whole depth
    summaries.append(regime_summary(stats, table["regime"]).reset_index()
                     .assign(step=step, min_self_alignment_layer=layer, min_self_alignment=value))
    funnel.append({"step": step, **radius_vs_rank_drop(table["spectral_radius"], table["cumulative_effective_rank"])})
table = pd.concat(summaries).set_index(["step", "regime"])
table.insert(0, "n_layers", table.pop("n_layers"))
table.to_csv(snakemake.output.table, sep="\t")
pd.DataFrame(funnel).to_csv(snakemake.output.funnel, sep="\t", index=False)
folds = {step: pd.read_csv(path, sep="\t") for step, path in zip(snakemake.params.steps, snakemake.input.folds)}
bottleneck_table(folds).to_csv(snakemake.output.bottleneck, sep="\t", index=False)
