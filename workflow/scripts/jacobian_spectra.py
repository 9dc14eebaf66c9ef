from _setup import start

start(snakemake)

import numpy as np
from tqdm import tqdm

from crosslayer.dynamics.regimes import depth_regimes
from crosslayer.dynamics.spectra import spectral_profile
from crosslayer.linalg.conditioning import PER_SAMPLE_STATS
from crosslayer.npz import open_npz

params = snakemake.params
with open_npz(snakemake.input.jacobians) as jacobians:
    table, eigenvalues = spectral_profile(
        jacobians["mean"], k=params.k, seed=params.seed, draws=params.baseline_draws,
        rank=min(params.rank, jacobians["mean"].shape[-1]),  # r = d: exact products
        progress=lambda layers, label: tqdm(layers, desc=f"eigenvalues of {label}", unit="layer"),
    )
    # quartiles of the per-sample distributions (L, N), of J and J - I: whichever the npz holds
    # (no condition_number / condition_number_res when dynamics.condition_number is false)
    for name in jacobians.files:
        if name.removesuffix("_res") in PER_SAMPLE_STATS:
            quartiles = np.percentile(jacobians[name], [25, 50, 75], axis=1)  # one read of the array
            for label, values in zip(("q25", "median", "q75"), quartiles):
                table[f"{label}_{name}"] = values
table.insert(0, "regime", depth_regimes(len(table), boundaries=params.regime_boundaries))
table = table.assign(**table.attrs)
table.to_csv(snakemake.output.table, sep="\t")
np.savez(snakemake.output.eigenvalues, eigenvalues=eigenvalues)
