from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the running products' SVDs run in torch

import numpy as np
import pandas as pd

from crosslayer.spectra import dose_response_table, schur_dose_response

params = snakemake.params
with np.load(snakemake.input.jacobians) as jacobians:
    Js = jacobians["mean"]
tables = []
for mode in params.modes:
    result = schur_dose_response(Js, alphas=params.alphas, mode=mode, rank=min(params.rank, Js.shape[-1]), draws=params.draws,
                                 seed=params.seed)
    tables.append(dose_response_table(result).assign(mode=mode))
pd.concat(tables).to_csv(snakemake.output.table, sep="\t", index=False)
