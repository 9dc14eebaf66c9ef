from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.config import read_scores
from crosslayer.coupling.tables import (across_models, load_checkpoint, regularity_across_models, subset_fits,
                                       training_fits)

models = snakemake.params.models
scores = read_scores(snakemake.input.scores, models=models) if snakemake.input.scores else None
final = {model: (pd.read_csv(steps, sep="\t"), load_checkpoint(npz))
         for model, steps, npz in zip(models, snakemake.input.steps, snakemake.input.npz)}
heldout = {model: pd.read_csv(path, sep="\t") for model, path in zip(models, snakemake.input.heldout)} or None
table = across_models(final, scores=scores, training_tokens=snakemake.params.training_tokens, heldout=heldout)
table.to_csv(snakemake.output.models, sep="\t", index=False)
subset_fits(table, snakemake.params.subsets).to_csv(snakemake.output.fits, sep="\t", index=False)
steps = {model: steps for model, (steps, _) in final.items()}
training_fits(steps, heldout).to_csv(snakemake.output.training_fits, sep="\t", index=False)
regularity_across_models(steps, table).to_csv(snakemake.output.regularity, sep="\t", index=False)
