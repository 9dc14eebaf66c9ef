from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "alignment")  # no GPU here: name the key before any work

import numpy as np

from crosslayer.alignment.measure import align_checkpoint
from crosslayer.models.checkpoints import verified_manifest

manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
result = align_checkpoint(
    manifest,
    k=snakemake.params.k,
    method=snakemake.params.svd_method,
    gap_tol=snakemake.params.gap_tol,
    device=device,
)
np.savez(snakemake.output.npz, **result)
