from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

import numpy as np
from tqdm import tqdm

from crosslayer.checkpoints import read_manifest
from crosslayer.dynamics import checkpoint_jacobian_stats, load_model

model, _ = load_model(read_manifest(snakemake.input.manifest), device=snakemake.params.device)
with np.load(snakemake.input.activations) as activations:
    result = checkpoint_jacobian_stats(
        model,
        activations["acts"],
        chunk_bytes=snakemake.params.chunk_mb * 2**20,
        progress=lambda layers: tqdm(layers, desc="layers", unit="layer"),
    )
np.savez(snakemake.output.npz, **result)
