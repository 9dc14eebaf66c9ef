from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

import numpy as np

from crosslayer.alignment.gated import measure_gated_checkpoint
from crosslayer.alignment.measure import AlignmentSettings
from crosslayer.models.checkpoints import verified_manifest

params = snakemake.params
settings = AlignmentSettings(k=params.k, svd_method=params.svd_method, gap_tol=params.gap_tol)
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
# a family without a gate gives {"gated": False}: nothing to condition on (the table skips it)
np.savez(snakemake.output.npz, **measure_gated_checkpoint(manifest, settings, activations=snakemake.input.activations))
