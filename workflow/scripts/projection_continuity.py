from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import check_device

check_device(snakemake.params.device, "continuity.device")  # no GPU here: name the key before any work

import numpy as np

from crosslayer.continuity.measure import checkpoint_summary, continuity_checkpoint
from crosslayer.models.checkpoints import verified_manifest

params = snakemake.params
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
result = continuity_checkpoint(manifest, projections=params.projections, device=params.device)
table, arrays = checkpoint_summary(result, erank_power=params.erank_power, n_components=params.pca_components,
                                   draws=params.baseline_draws, seed=params.seed)
np.savez(snakemake.output.npz, **result, **arrays)
table.to_csv(snakemake.output.table, sep="\t", index=False)
