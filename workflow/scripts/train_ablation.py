from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

import json
from pathlib import Path

from crosslayer.models.train import TrainConfig, train_model, training_outcome

settings = snakemake.params.settings
# A failure control (NoNorm, NoRes) may diverge: that is its result, recorded with its step.
config = TrainConfig(arch="llama", stop_on_divergence=True, **settings)
log = train_model(snakemake.input.tokens, snakemake.input.tokenizer, snakemake.output.run, config, threads=snakemake.threads)
outcome = training_outcome(log, steps=settings["save_steps"][-1])
switches = {key: settings[key] for key in ("activation", "residual", "norm")}
(Path(snakemake.output.run) / "outcome.json").write_text(json.dumps(switches | outcome, indent=2) + "\n")
