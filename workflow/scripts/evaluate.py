from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "benchmarks")  # no GPU here: name the key before any work

import logging

from crosslayer.evaluation.benchmarks import BenchmarkSettings, evaluate_checkpoint
from crosslayer.models.checkpoints import verified_manifest

params = snakemake.params
settings = BenchmarkSettings(tasks=params.tasks, limit=params.limit, include_path=snakemake.input.tasks or None,
                             builtin=params.builtin, dtype=params.dtype,
                             batch_size=snakemake.config["benchmarks"]["batch_size"])  # speed only: not a param
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
table = evaluate_checkpoint(manifest, settings, device=device)
for row in table.itertuples():
    logging.info("%-16s %-26s %.4f ± %.4f (n = %s)", row.task, row.metric, row.value, row.stderr, row.n)
table.to_csv(snakemake.output.table, sep="\t", index=False, float_format="%.6g")
