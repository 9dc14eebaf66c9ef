from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.models.train import train_model

train_model(
    snakemake.input.tokens,
    snakemake.input.tokenizer,
    snakemake.output.run,
    threads=snakemake.threads,
    **snakemake.params.settings,
)
