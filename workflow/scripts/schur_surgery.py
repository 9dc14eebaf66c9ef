from _setup import start

start(snakemake)

import numpy as np
import pandas as pd

from crosslayer.spectra import TORCH_MIN_WIDTH, dose_response_table, schur_dose_response

params = snakemake.params
with np.load(snakemake.input.jacobians) as jacobians:
    Js = jacobians["mean"]
if Js.shape[-1] >= TORCH_MIN_WIDTH:  # the running products run in torch at this width
    import torch

    torch.set_num_threads(snakemake.threads)
tables = []
for mode in params.modes:
    result = schur_dose_response(Js, alphas=params.alphas, mode=mode, rank=min(params.rank, Js.shape[-1]), draws=params.draws,
                                 seed=params.seed)
    tables.append(dose_response_table(result).assign(mode=mode))
pd.concat(tables).to_csv(snakemake.output.table, sep="\t", index=False)
