from _setup import start

start(snakemake)

from crosslayer.coupling.tables import load_checkpoint, summarize_steps

tables = summarize_steps([load_checkpoint(path) for path in snakemake.input.npz], snakemake.params.steps,
                         metric=snakemake.params.metric, window=snakemake.params.window, unpooled=snakemake.params.unpooled)
for name, table in tables.items():
    table.to_csv(snakemake.output[name], sep="\t", index=False)
