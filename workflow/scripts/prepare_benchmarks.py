from _setup import start

start(snakemake)

import json
import logging

from crosslayer.evaluation.benchmarks import BenchmarkSettings, fetch_tasks

settings = BenchmarkSettings(tasks=snakemake.params.tasks, include_path=snakemake.input.tasks or None,
                             builtin=snakemake.params.builtin)
records = fetch_tasks(settings)
for record in records:
    logging.info("%-40s %s %s: %s items", record["task"], record["dataset_path"], record["dataset_name"],
                 record["n_docs"])
with open(snakemake.output.tasks, "w", encoding="utf-8") as out:
    json.dump(records, out, indent=1)
