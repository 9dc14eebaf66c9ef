from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "embedding_noise")  # no GPU here: name the key before any work

from crosslayer.coupling.noise import NoiseSettings, measure_noise
from crosslayer.models.checkpoints import verified_manifest

params = snakemake.params
settings = NoiseSettings(levels=params.levels, draws=params.draws, seed=params.seed, final_norm=params.final_norm,
                         max_tokens=params.max_tokens)
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
table = measure_noise(manifest, settings, prompts=snakemake.input.prompts, device=device)
table.to_csv(snakemake.output.table, sep="\t", index=False, float_format="%.6g")
