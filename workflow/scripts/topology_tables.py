from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.dynamics.topology import method_comparison

summary = pd.concat(
    pd.read_csv(path, sep="\t").assign(model=model, step=step)
    for model, step, path in zip(snakemake.params.models, snakemake.params.steps, snakemake.input.summaries)
)
first = ["model", "step", "method"]
summary = summary[first + [c for c in summary.columns if c not in first]]
summary.to_csv(snakemake.output.summary, sep="\t", index=False)
method_comparison(summary.to_dict("records")).to_csv(snakemake.output.comparison, sep="\t", index=False)
