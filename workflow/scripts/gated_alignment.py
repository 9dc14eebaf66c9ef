from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

import numpy as np
from tqdm import tqdm

from crosslayer.alignment.measure import gated_alignment
from crosslayer.errors import CheckpointError
from crosslayer.models.checkpoints import verified_manifest
from crosslayer.models.loading import load_model
from crosslayer.models.weights import read_geometry
from crosslayer.npz import open_npz

params = snakemake.params
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
if not read_geometry(manifest["path"], model=manifest["model"], revision=manifest.get("revision")).gated_mlp:
    # a hub model's family is known only now: no gate, nothing to condition on (the table skips it)
    np.savez(snakemake.output.npz, gated=False, step=manifest["step"])
    raise SystemExit(0)
model, _ = load_model(manifest, tokenizer=False)
with open_npz(snakemake.input.activations) as activations:
    try:
        result = gated_alignment(model, activations["acts"], k=params.k, method=params.svd_method,
                                 gap_tol=params.gap_tol, progress=lambda layers: tqdm(layers, unit="layer"))
    except ValueError as err:  # no gate, or too small a rank: name the checkpoint
        raise CheckpointError(str(err), model=manifest["model"], revision=manifest.get("revision"),
                              file=manifest["path"]) from err
np.savez(snakemake.output.npz, **result, gated=True, step=manifest["step"], k=params.k)
