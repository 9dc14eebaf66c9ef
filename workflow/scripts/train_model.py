from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.models.train import TrainConfig, train_model

train_model(
    snakemake.input.tokens,
    snakemake.input.tokenizer,
    snakemake.output.run,
    TrainConfig(**snakemake.params.settings),
    threads=snakemake.threads,
)
