from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "evaluation")  # no GPU here: name the key before any work

import json
import logging

from crosslayer.data.samples import read_samples
from crosslayer.evaluation.heldout import HeldoutSettings, measure_checkpoint
from crosslayer.models.checkpoints import verified_manifest

# batch_size is speed only, so not a param (a change re-runs nothing); the logits stay within
# heldout.LOGITS_MB whatever it is
settings = HeldoutSettings(context=snakemake.params.context, max_windows=snakemake.params.max_windows,
                           batch_size=snakemake.config["evaluation"]["heldout"]["batch_size"])
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
_, texts = read_samples(snakemake.input.texts)
row = measure_checkpoint(manifest, settings, texts=texts, device=device)
if row["skipped"]:
    logging.info("models.%s is %s, so its held-out loss is not measured (NaN)", manifest["model"], row["skipped"])
else:
    logging.info("held-out loss %.4f nats/token (perplexity %.2f, %.4f bits/byte) over %d windows of %d tokens",
                 row["loss"], row["perplexity"], row["bits_per_byte"], row["n_windows"], row["context"])
with open(snakemake.output.json, "w", encoding="utf-8") as out:
    json.dump(row, out, indent=1)
