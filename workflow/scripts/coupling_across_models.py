from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.coupling.tables import (across_models, load_checkpoint, regularity_across_models, subset_fits,
                                       training_fits)
from crosslayer.evaluation.tables import merge_scores
from crosslayer.score_file import read_scores

models = snakemake.params.models
final = {model: (pd.read_csv(steps, sep="\t"), load_checkpoint(npz))
         for model, steps, npz in zip(models, snakemake.input.steps, snakemake.input.npz)}
given = read_scores(snakemake.input.scores, models=models, complete=False,  # as checked before the run, once more
                    checkpoints=snakemake.params.scored_checkpoints) if snakemake.input.scores else {}
scores, sources = merge_scores(  # coupling.scores wins where it has a model
    models, given=given, benchmarks={m: pd.read_csv(p, sep="\t") for m, p in zip(models, snakemake.input.benchmarks)},
    last_steps={m: int(steps.step.max()) for m, (steps, _) in final.items()}, tasks=snakemake.params.tasks)
heldout = {model: pd.read_csv(path, sep="\t") for model, path in zip(models, snakemake.input.heldout)} or None
table = across_models(final, scores=scores or None, sources=sources, training_tokens=snakemake.params.training_tokens,
                      heldout=heldout)
table.to_csv(snakemake.output.models, sep="\t", index=False)
subset_fits(table, snakemake.params.subsets).to_csv(snakemake.output.fits, sep="\t", index=False)
steps = {model: steps for model, (steps, _) in final.items()}
training_fits(steps, heldout).to_csv(snakemake.output.training_fits, sep="\t", index=False)
regularity_across_models(steps, table).to_csv(snakemake.output.regularity, sep="\t", index=False)
