from _setup import start

# Guarded: the Schur-form worker processes (dynamics.schur.workers) are spawned, and a spawned
# process imports the parent's main file again; it must neither run the job nor reopen its log.
if __name__ == "__main__":
    start(snakemake)

import pandas as pd
from tqdm import tqdm

from crosslayer.dynamics.surgery import dose_response_table, schur_dose_responses
from crosslayer.linalg.effective_rank import TORCH_MIN_WIDTH
from crosslayer.npz import open_npz


def main():
    params, schur = snakemake.params, snakemake.config["dynamics"]["schur"]
    # like threads, the device and the workers change speed and rounding only: read from the config,
    # not the params, so that changing them re-runs nothing
    device = schur["device"]
    if device != "cpu":  # no GPU here: name the key before any work
        from crosslayer.devices import check_device

        check_device(device, "dynamics.schur.device")
    with open_npz(snakemake.input.jacobians) as jacobians:
        Js = jacobians["mean"]
    if Js.shape[-1] >= TORCH_MIN_WIDTH or device != "cpu":  # the running products run in torch
        import torch

        torch.set_num_threads(snakemake.threads)
    results = schur_dose_responses(
        Js, modes=params.modes, alphas=params.alphas, rank=min(params.rank, Js.shape[-1]), draws=params.draws,
        seed=params.seed,  # the modes share each layer's Haar draws
        progress=lambda layers: tqdm(layers, desc="layers (last first)", unit="layer"),
        device=None if device == "cpu" else device, workers=schur["workers"], threads=snakemake.threads)
    tables = [dose_response_table(result).assign(mode=mode) for mode, result in results.items()]
    pd.concat(tables).to_csv(snakemake.output.table, sep="\t", index=False)


if __name__ == "__main__":
    main()
