from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

import json

import pandas as pd
from tqdm import tqdm

from crosslayer.continuity.toy import ToyConfig, as_tensors, train_toy
from crosslayer.npz import load_npz

run, data = snakemake.wildcards.run, as_tensors(load_npz(snakemake.input.data))
for seed, epochs_path, status_path in zip(snakemake.params.seeds, snakemake.output.epochs, snakemake.output.status):
    settings = {**snakemake.params.settings, "seed": seed}
    config = ToyConfig(**settings)
    records, status, _ = train_toy(config, data, erank_power=snakemake.params.erank_power,
                                   progress=lambda tracked: tqdm(tracked, desc=f"{run} seed {seed}", unit="row"))
    pd.DataFrame(records).to_csv(epochs_path, sep="\t", index=False)
    with open(status_path, "w") as f:
        json.dump({"run": run, **settings, "ema_betas": list(config.ema_betas), **status}, f, indent=1)  # no timings: the bytes are reproducible
