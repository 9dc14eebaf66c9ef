from _setup import start

start(snakemake)

import numpy as np
import pandas as pd
from tqdm import tqdm

from crosslayer.dynamics.topology import block_nmi, layer_statistics, topology_summary, warnings_about
from crosslayer.npz import load_npz, open_npz

params = snakemake.params
with open_npz(snakemake.input.jacobians) as npz:
    Js = npz["mean"].astype(np.float64)
partitions = load_npz(snakemake.input.partitions)
self_alignment = pd.read_csv(snakemake.input.spectra, sep="\t", index_col="layer")["self_alignment"].to_numpy()
layers, rows = [], []
for m, method in enumerate(partitions["methods"]):
    memberships = partitions["memberships"][m]
    with warnings_about(method):
        table = layer_statistics(Js, memberships, partitions["participation"][m], n_random=params.random_partitions,
                                 tail=params.tail, n_permutations=params.permutations, q=params.fdr_q,
                                 seed=params.seed,
                                 progress=lambda layers: tqdm(layers, desc=str(method), unit="layer"))
        row, rate = topology_summary(table, self_alignment, block_nmi(memberships),
                                        n_permutations=params.rate_permutations, seed=params.seed)
    rows.append({"method": method, **row})
    # rate-level inputs on the row of layer l (change from l to l + 1; NaN for the last layer)
    table = table.assign(self_alignment=self_alignment, **{k: np.append(v, np.nan) for k, v in rate.items()})
    layers.append(table.assign(method=method).reset_index())
pd.concat(layers).to_csv(snakemake.output.layers, sep="\t", index=False)
pd.DataFrame(rows).to_csv(snakemake.output.summary, sep="\t", index=False)
