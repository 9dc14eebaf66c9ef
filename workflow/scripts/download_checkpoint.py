from _setup import start

start(snakemake)

from crosslayer.models.checkpoints import download_checkpoint, write_manifest
from crosslayer.models.loading import check_tensors

model, step = snakemake.wildcards.model, int(snakemake.wildcards.step)
repo, revision = snakemake.params.checkpoint["repo"], snakemake.params.checkpoint["revision"]
snapshot = download_checkpoint(
    repo,
    revision,
    cache_dir=snakemake.params.cache_dir,
    model=model,
    attempts=snakemake.params.attempts,
    backoff_s=snakemake.params.backoff_s,
)
check_tensors(snapshot, model=model, revision=revision)  # refused whole, before any manifest
write_manifest(
    snakemake.output.manifest,
    model=model,
    step=step,
    source="hub",
    checkpoint_dir=snapshot,
    repo=repo,
    revision=revision,
)
