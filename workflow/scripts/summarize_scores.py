from _setup import start

start(snakemake)

from crosslayer.evaluation.tables import scores_table

scores_table(dict(zip(snakemake.params.steps, snakemake.input.tables))).to_csv(
    snakemake.output.table, sep="\t", index=False, float_format="%.6g")
