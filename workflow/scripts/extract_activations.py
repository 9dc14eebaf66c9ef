from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import check_device

check_device(snakemake.params.device, "dynamics.device")  # no GPU here: name the key before any work

import numpy as np

from crosslayer.checkpoints import verified_manifest
from crosslayer.dynamics import checkpoint_activations

params = snakemake.params
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
result = checkpoint_activations(
    manifest,
    snakemake.input.samples,
    n_samples=params.n_samples,
    min_tokens=params.min_tokens,
    max_tokens=params.max_tokens,
    device=params.device,
)
np.savez(snakemake.output.npz, **result)
