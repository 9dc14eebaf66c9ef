from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "dynamics")  # no GPU here: name the key before any work

import numpy as np

from crosslayer.dynamics.checkpoint import JacobianSettings, measure_checkpoint
from crosslayer.models.checkpoints import verified_manifest

params = snakemake.params
settings = JacobianSettings(
    n_samples=params.n_samples, min_tokens=params.min_tokens, max_tokens=params.max_tokens, method=params.method,
    per_sample_dtype=params.per_sample_dtype,  # per-sample statistics on the Jacobians' device
    condition_number=params.condition_number,  # False: no SVD, no condition_number(_res) in the npz
    folds=params.folds)  # the sample folds' mean Jacobians too: the bottleneck's independent units
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
# one load for both outputs: at 8B scale reading the checkpoint is minutes, not seconds
activations, jacobians = measure_checkpoint(manifest, settings, samples=snakemake.input.samples, device=device,
                                            chunk_bytes=snakemake.config["dynamics"]["chunk_mb"] * 2**20)  # no reruns
np.savez(snakemake.output.activations, **activations)
np.savez(snakemake.output.npz, **jacobians)
