from _setup import start

start(snakemake)

from crosslayer.alignment.tables import load_alignment, summarize_model

params = snakemake.params
try:
    tables = summarize_model(
        load_alignment(snakemake.input.npz, params.steps),
        reference_step=params.reference_step,
        threshold=params.threshold,
        distances=params.distances,
        baseline_draws=params.baseline_draws,
        seed=params.seed,
        peak_min_sd=params.peak_min_sd,
    )
except ValueError as err:
    raise ValueError(f"model '{snakemake.wildcards.model}': {err}") from err
for name, table in tables.items():
    table.to_csv(snakemake.output[name], sep="\t", index=False)
