from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "coupling")  # no GPU here: name the key before any work

import numpy as np

from crosslayer.coupling.checkpoint import CouplingSettings, measure_checkpoint
from crosslayer.models.checkpoints import verified_manifest

params = snakemake.params
settings = CouplingSettings(
    Ks=params.Ks, token=params.token, layer_pairs=params.token_wise["layer_pairs"],
    token_wise_prompts=params.token_wise["prompts"], token_wise_tokens=params.token_wise["tokens"],
    pca_prompts=params.pca_prompts, pca_fit=params.pca_fit, final_norm=params.final_norm,
    max_tokens=params.max_tokens, example_prompt=params.example_prompt)
memory = snakemake.config["coupling"]  # chunk_mb, hold_mb: speed only, so not params (a change re-runs nothing)
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
result = measure_checkpoint(manifest, settings, prompts=snakemake.input.prompts, device=device,
                            chunk_bytes=memory["chunk_mb"] * 2**20, hold_bytes=memory["hold_mb"] * 2**20)
np.savez(snakemake.output.npz, **result)
