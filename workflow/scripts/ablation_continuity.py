from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import check_device

check_device(snakemake.params.device, "continuity.device")  # no GPU here: name the key before any work

import json
from pathlib import Path

import numpy as np

from crosslayer.continuity.measure import checkpoint_summary, continuity_checkpoint

params, run = snakemake.params, Path(snakemake.input.run)
outcome = json.loads((run / "outcome.json").read_text())
result = {}  # a diverged run has no final checkpoint: every projection is reported absent
if outcome["diverged_step"] is None:
    step = outcome["steps"]
    manifest = {"path": str(run / f"step{step}"), "model": snakemake.wildcards.ablation, "revision": f"step{step}",
                "step": step}
    result = continuity_checkpoint(manifest, projections=params.projections, device=params.device)
table, arrays = checkpoint_summary(result, erank_power=params.erank_power, n_components=params.pca_components,
                                   draws=params.baseline_draws, seed=params.seed)
np.savez(snakemake.output.npz, **result, **arrays)
table.to_csv(snakemake.output.table, sep="\t", index=False)
