from _setup import start

start(snakemake)

from crosslayer.models.checkpoints import download_checkpoint, write_manifest
from crosslayer.models.untrained import build_untrained

model, params = snakemake.wildcards.model, snakemake.params
source = params.checkpoint
if "directory" in source:
    config_dir, repo, revision = source["directory"], source["directory"], f"init-seed{params.seed}"
else:  # only config.json and the tokenizer: the weights are not needed
    config_dir = download_checkpoint(source["repo"], source["revision"], cache_dir=params.cache_dir, model=model,
                                     attempts=params.attempts, backoff_s=params.backoff_s, weights=False)
    repo, revision = source["repo"], f"{source['revision']}:init-seed{params.seed}"
build_untrained(config_dir, snakemake.output.weights, seed=params.seed, model=model)
write_manifest(snakemake.output.manifest, model=model, step=0, source="init", checkpoint_dir=snakemake.output.weights,
               repo=repo, revision=revision)
