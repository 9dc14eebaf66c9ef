from _setup import start

start(snakemake)

import csv
import sys

from crosslayer.models.checkpoints import identical_steps, read_manifest

model = snakemake.wildcards.model
repeats = identical_steps(read_manifest(path) for path in snakemake.input.manifests)
columns = ["step", "revision", "same_as_step", "same_as_revision", "sha256"]
for row in repeats:
    message = (f"model '{model}': step {row['step']} ({row['revision']}) has byte-identical weights to step "
               f"{row['same_as_step']} ({row['same_as_revision']}); its analyses repeat that step's")
    print(f"WARNING: {message}", file=sys.__stderr__)  # on the console, not only in the log
    print(f"WARNING: {message}", file=sys.stderr)
if repeats and snakemake.params.policy == "error":
    raise SystemExit(f"model '{model}': {len(repeats)} step(s) repeat earlier weights (duplicate_steps: error); "
                     "drop them from the model's steps or set duplicate_steps: warn")
with open(snakemake.output.tsv, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=columns, delimiter="\t", lineterminator="\n")
    writer.writeheader()
    writer.writerows(repeats)
