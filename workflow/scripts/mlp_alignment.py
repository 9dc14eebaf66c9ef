from _setup import start

start(snakemake, torch_threads=True)

import numpy as np

from crosslayer.alignment import align_checkpoint
from crosslayer.checkpoints import read_manifest

result = align_checkpoint(
    read_manifest(snakemake.input.manifest),
    k=snakemake.params.k,
    method=snakemake.params.svd_method,
    gap_tol=snakemake.params.gap_tol,
    device=snakemake.params.device,
)
np.savez(snakemake.output.npz, **result)
