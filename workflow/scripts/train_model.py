from _setup import start

start(snakemake, torch_threads=True)

from crosslayer.train import train_model

train_model(
    snakemake.input.tokens,
    snakemake.input.tokenizer,
    snakemake.output.run,
    threads=snakemake.threads,
    **snakemake.params.settings,
)
