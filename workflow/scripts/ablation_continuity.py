from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "continuity")  # no GPU here: name the key before any work

import json
from pathlib import Path

import numpy as np
from tqdm import tqdm

from crosslayer.continuity.measure import PROJECTIONS, continuity_checkpoint
from crosslayer.continuity.statistics import checkpoint_summary
from crosslayer.continuity.tables import steps_table

params, run = snakemake.params, Path(snakemake.input.run)
outcome = json.loads((run / "outcome.json").read_text())
summary = {"projections": PROJECTIONS, "erank_power": params.erank_power, "n_components": params.pca_components,
           "draws": params.baseline_draws, "seed": params.seed}
# every saved step (a diverged run keeps those before its divergence); the npz is the last step's
steps = [step for step in params.save_steps if (run / f"step{step}").is_dir()]
tables = []
for step in tqdm(steps, desc="checkpoints", unit="step"):
    manifest = {"path": str(run / f"step{step}"), "model": snakemake.wildcards.ablation, "revision": f"step{step}",
                "step": step}
    result = continuity_checkpoint(manifest, projections=params.projections, device=device)
    table, arrays = checkpoint_summary(result, **summary)
    tables.append(table)
if outcome["diverged_step"] is not None:  # no final checkpoint: every projection reported absent there
    result = {}
    table, arrays = checkpoint_summary(result, **summary)
    tables.append(table)
    steps.append(outcome["steps"])
np.savez(snakemake.output.npz, **result, **arrays)
steps_table(tables, steps).to_csv(snakemake.output.table, sep="\t", index=False)
