from _setup import start

start(snakemake)

from crosslayer.files import check_tokenizer_files
from crosslayer.models.checkpoints import write_manifest

model, revision, source = snakemake.wildcards.model, snakemake.params.revision, snakemake.params.source
if source == "local":  # every tensor, before any manifest; the workflow's own checkpoints were checked when saved
    from crosslayer.models.loading import check_tensors

    check_tensors(snakemake.params.directory, model=model, revision=revision)
check_tokenizer_files(snakemake.params.directory, model=model, revision=revision)  # a malformed one named here
write_manifest(
    snakemake.output.manifest,
    model=model,
    step=int(snakemake.wildcards.step),
    source=source,
    checkpoint_dir=snakemake.params.directory,
    revision=revision,
)
