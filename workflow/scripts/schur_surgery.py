from _setup import start

start(snakemake)

import pandas as pd
from tqdm import tqdm

from crosslayer.linalg.effective_rank import TORCH_MIN_WIDTH
from crosslayer.dynamics.surgery import dose_response_table, schur_dose_responses
from crosslayer.npz import open_npz

params = snakemake.params
with open_npz(snakemake.input.jacobians) as jacobians:
    Js = jacobians["mean"]
device = None if params.device == "cpu" else params.device
if Js.shape[-1] >= TORCH_MIN_WIDTH or device:  # the running products run in torch at this width
    import torch

    torch.set_num_threads(snakemake.threads)
results = schur_dose_responses(Js, modes=params.modes, alphas=params.alphas, rank=min(params.rank, Js.shape[-1]),
                               draws=params.draws, seed=params.seed,  # the modes share each layer's Haar draws
                               progress=lambda layers: tqdm(layers, desc="layers (last first)", unit="layer"),
                               device=device, workers=params.workers, threads=snakemake.threads)
tables = [dose_response_table(result).assign(mode=mode) for mode, result in results.items()]
pd.concat(tables).to_csv(snakemake.output.table, sep="\t", index=False)
