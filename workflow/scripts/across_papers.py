from _setup import start

start(snakemake)

import logging

import pandas as pd

from crosslayer.across import measures as read
from crosslayer.across.catalog import catalog, legend
from crosslayer.across.tables import boundary_table, correlations, emergence, emergence_order
from crosslayer.npz import load_npz

params, inputs, settings = snakemake.params, snakemake.input, snakemake.params.settings
steps, analyses = params.steps, params.analyses


def tsv(path):
    return pd.read_csv(path, sep="\t")


columns = catalog(projections=settings["projections"], Ks=settings["Ks"], metric=params.metric,
                       community_method=settings["community_method"])
parts, spectra = [], {step: tsv(path) for step, path in zip(steps, inputs.get("spectra", []))}
if "alignment" in analyses:
    parts.append(read.alignment_measures(tsv(inputs.adjacent), tsv(inputs.alignment_baseline)))
if "continuity" in analyses:
    checkpoints = {step: (load_npz(a), tsv(t)) for step, a, t in zip(steps, inputs.continuity_npz, inputs.continuity_tables)}
    parts.append(read.continuity_measures(checkpoints, settings["projections"]))
if "coupling" in analyses:
    parts.append(read.coupling_measures(tsv(inputs.depthwise), Ks=settings["Ks"],
                                        variant=settings["coupling_variant"], metric=params.metric))
if "dynamics" in analyses:
    parts.append(read.jacobian_measures(spectra))
if "topology" in analyses:
    partitions = {step: load_npz(path) for step, path in zip(steps, inputs.partitions)}
    parts.append(read.community_measures(partitions, method=settings["community_method"],
                                         draws=settings["baseline_draws"], seed=settings["seed"]))
values = pd.concat(parts or [pd.DataFrame(columns=read.COLUMNS)], ignore_index=True)

measures = [m for m in columns if m.analysis in settings["measures"]]
present = set(values["measure"])
for analysis in settings["measures"]:
    if analysis not in analyses:
        logging.warning("no %s results for %s (not among its analyses, or the stage is off): columns %s left empty",
                        analysis, snakemake.wildcards.model,
                        ", ".join(m.name for m in measures if m.analysis == analysis))
if empty := [m.name for m in measures if m.analysis in analyses and m.name not in present]:
    logging.warning("no values (the family lacks the projection, or the variant is absent): %s", ", ".join(empty))

table = boundary_table(values, measures, read.depth_regimes(spectra))
table.to_csv(snakemake.output.boundaries, sep="\t", index=False)
legend(measures, present).to_csv(snakemake.output.measures, sep="\t", index=False)
correlations(table, q=settings["fdr_q"]).to_csv(snakemake.output.correlations, sep="\t", index=False)
if 0 not in steps:
    logging.warning("no step 0 (untrained) checkpoint: no random band, so no emergence steps")
found = emergence(table, [m for m in measures if m.name in present], reference_step=0 if 0 in steps else None,
                  band_sd=settings["band_sd"])
found.to_csv(snakemake.output.emergence, sep="\t", index=False)
emergence_order(found, n_permutations=settings["permutations"], seed=settings["seed"]).to_csv(
    snakemake.output.emergence_order, sep="\t", index=False)
