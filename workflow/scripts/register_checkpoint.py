from _setup import start

start(snakemake)

from crosslayer.checkpoints import write_manifest

write_manifest(
    snakemake.output.manifest,
    model=snakemake.wildcards.model,
    step=int(snakemake.wildcards.step),
    source=snakemake.params.source,
    checkpoint_dir=snakemake.params.directory,
    revision=snakemake.params.revision,
)
