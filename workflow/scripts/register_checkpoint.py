from _setup import start

start(snakemake)

from crosslayer.checkpoints import write_manifest
from crosslayer.models import check_tensors

model, revision = snakemake.wildcards.model, snakemake.params.revision
check_tensors(snakemake.params.directory, model=model, revision=revision)  # refused whole, before any manifest
write_manifest(
    snakemake.output.manifest,
    model=model,
    step=int(snakemake.wildcards.step),
    source=snakemake.params.source,
    checkpoint_dir=snakemake.params.directory,
    revision=revision,
)
