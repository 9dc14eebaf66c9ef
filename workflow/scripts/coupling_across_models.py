from _setup import start

start(snakemake)

import pandas as pd

from crosslayer.config import read_scores
from crosslayer.coupling.tables import across_models, load_checkpoint, regularity_across_models, subset_fits

models = snakemake.params.models
scores = read_scores(snakemake.input.scores, models=models) if snakemake.input.scores else None
final = {model: (pd.read_csv(steps, sep="\t"), load_checkpoint(npz))
         for model, steps, npz in zip(models, snakemake.input.steps, snakemake.input.npz)}
table = across_models(final, scores=scores, training_tokens=snakemake.params.training_tokens)
table.to_csv(snakemake.output.models, sep="\t", index=False)
subset_fits(table, snakemake.params.subsets).to_csv(snakemake.output.fits, sep="\t", index=False)
regularity_across_models({model: steps for model, (steps, _) in final.items()}, table).to_csv(
    snakemake.output.regularity, sep="\t", index=False)
