from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

import dataclasses
import json

import pandas as pd
from tqdm import tqdm

from crosslayer.continuity.toy import ToyConfig, as_tensors, train_toy
from crosslayer.continuity.toy_batched import train_toy_seeds
from crosslayer.devices import configured_device
from crosslayer.npz import load_npz

run, data = snakemake.wildcards.run, as_tensors(load_npz(snakemake.input.data))
device, seeds = configured_device(snakemake.config, "toy"), snakemake.params.seeds
settings = snakemake.params.settings
config = ToyConfig(**settings)
if device == "cuda":  # the seeds stacked: one kernel per layer for all (on a CPU core, one at a time is faster)
    results = train_toy_seeds(config, seeds, data, erank_power=snakemake.params.erank_power, device=device,
                              progress=lambda tracked: tqdm(tracked, desc=f"{run} seeds {seeds}", unit="row"))
else:
    results = [train_toy(dataclasses.replace(config, seed=seed), data, erank_power=snakemake.params.erank_power,
                         progress=lambda tracked: tqdm(tracked, desc=f"{run} seed {seed}", unit="row"))[:2]
               for seed in seeds]
for seed, (records, status), epochs_path, status_path in zip(seeds, results, snakemake.output.epochs,
                                                            snakemake.output.status):
    pd.DataFrame(records).to_csv(epochs_path, sep="\t", index=False)
    with open(status_path, "w") as f:  # no timings: the bytes are reproducible
        json.dump({"run": run, **settings, "seed": seed, "ema_betas": list(config.ema_betas), **status}, f, indent=1)
