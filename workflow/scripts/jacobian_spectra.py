from _setup import start

start(snakemake)

import numpy as np

from crosslayer.spectra import spectral_profile

params = snakemake.params
with np.load(snakemake.input.jacobians) as jacobians:
    table = spectral_profile(jacobians["mean"], k=params.k, seed=params.seed, draws=params.baseline_draws)
    for name in jacobians.files:  # medians of the per-sample distributions (L, N), of J and J - I
        if name != "mean":
            table[f"median_{name}"] = np.median(jacobians[name], axis=1)
table = table.assign(**table.attrs)
table.to_csv(snakemake.output.table, sep="\t")
