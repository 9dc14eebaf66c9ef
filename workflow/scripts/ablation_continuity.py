from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "continuity")  # no GPU here: name the key before any work

import numpy as np

from crosslayer.continuity.measure import PROJECTIONS, ContinuitySettings, measure_run

params = snakemake.params
summary = {"projections": PROJECTIONS, "erank_power": params.erank_power, "n_components": params.pca_components,
           "draws": params.baseline_draws, "seed": params.seed}
arrays, table = measure_run(snakemake.input.run, ContinuitySettings(projections=params.projections),
                            model=snakemake.wildcards.ablation, save_steps=params.save_steps, summary=summary,
                            device=device)
np.savez(snakemake.output.npz, **arrays)
table.to_csv(snakemake.output.table, sep="\t", index=False)
