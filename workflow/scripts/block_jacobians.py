from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "dynamics")  # no GPU here: name the key before any work

import numpy as np
from tqdm import tqdm

from crosslayer.dynamics.checkpoint import checkpoint_activations, checkpoint_jacobian_stats
from crosslayer.errors import CheckpointError
from crosslayer.models.checkpoints import verified_manifest
from crosslayer.models.loading import load_model

params = snakemake.params
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
# One load for both outputs: at 8B scale reading the checkpoint is minutes, not seconds.
model, tokenizer = load_model(manifest, device=device)
activations = checkpoint_activations(
    manifest,
    snakemake.input.samples,
    n_samples=params.n_samples,
    min_tokens=params.min_tokens,
    max_tokens=params.max_tokens,
    device=device,
    loaded=(model, tokenizer),
)
np.savez(snakemake.output.activations, **activations)
try:
    result = checkpoint_jacobian_stats(
        model,
        activations["acts"],
        method=params.method,
        chunk_bytes=snakemake.config["dynamics"]["chunk_mb"] * 2**20,  # not a param: no reruns
        spectra_dtype=params.per_sample_dtype,  # per-sample statistics on the Jacobians' device
        condition=params.condition_number,  # False: no SVD, no condition_number(_res) in the npz
        progress=lambda layers: tqdm(layers, desc="layers", unit="layer"),
        token_inputs=activations.get("token_inputs"),  # Gemma 4's per-layer token inputs, else None
    )
except ValueError as err:  # a non-finite input or Jacobian names layer and sample; add the checkpoint
    raise CheckpointError(str(err), model=manifest["model"], revision=manifest.get("revision"),
                          file=manifest["path"]) from err
np.savez(snakemake.output.npz, **result)
