from _setup import start

start(snakemake)

from pathlib import Path

from crosslayer.checkpoints import write_manifest

write_manifest(
    snakemake.output.manifest,
    model=snakemake.wildcards.model,
    step=int(snakemake.wildcards.step),
    source=snakemake.params.source,
    checkpoint_dir=Path(snakemake.input.checkpoint) / snakemake.params.subdir,
    revision=snakemake.params.revision,
)
