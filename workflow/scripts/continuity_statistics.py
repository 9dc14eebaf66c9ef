from _setup import start

start(snakemake)

import numpy as np

from crosslayer.continuity.statistics import checkpoint_summary
from crosslayer.npz import load_npz

params = snakemake.params
result = load_npz(snakemake.input.svd)
projections = [str(name) for name in result.pop("projections")]  # table order, absent ones included
table, arrays = checkpoint_summary(result, projections=projections, erank_power=params.erank_power,
                                   n_components=params.pca_components, draws=params.baseline_draws, seed=params.seed)
np.savez(snakemake.output.npz, **result, **arrays)
table.to_csv(snakemake.output.table, sep="\t", index=False)
