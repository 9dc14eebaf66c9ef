from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "continuity")  # no GPU here: name the key before any work

import numpy as np

from crosslayer.continuity.measure import PROJECTIONS, ContinuitySettings, measure_checkpoint
from crosslayer.models.checkpoints import verified_manifest

settings = ContinuitySettings(projections=snakemake.params.projections)
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
result = measure_checkpoint(manifest, settings, device=device)
# the statistics over these are continuity_statistics': a change to them re-runs no SVD
np.savez(snakemake.output.svd, projections=np.array(PROJECTIONS), **result)
