from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "alignment")  # no GPU here: name the key before any work

import numpy as np

from crosslayer.alignment.measure import AlignmentSettings, measure_checkpoint
from crosslayer.models.checkpoints import verified_manifest

params = snakemake.params
settings = AlignmentSettings(k=params.k, svd_method=params.svd_method, gap_tol=params.gap_tol)
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
np.savez(snakemake.output.npz, **measure_checkpoint(manifest, settings, device=device))
