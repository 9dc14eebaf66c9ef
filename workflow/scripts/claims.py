from _setup import start

start(snakemake)

import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from crosslayer.claims.catalogue import load_catalogue
from crosslayer.claims.figures import FIGURES
from crosslayer.claims.readers import read_tables
from crosslayer.claims.report import report_text
from crosslayer.claims.subjects import with_identities
from crosslayer.claims.verdicts import published_table, readings, verdict_table
from crosslayer.plotting import save_figures

papers, table_models = snakemake.params.run
settings, output = snakemake.params.settings, snakemake.output
catalogues = [load_catalogue(paper) for paper in papers]
data = with_identities(read_tables(".", table_models), snakemake.params.identities)
verdicts = verdict_table(catalogues, data, {name: list(models) for name, models in table_models.items()},
                         confidence=settings["confidence"], n_boot=settings["n_boot"], seed=settings["seed"])
for paper, line in readings(verdicts, catalogues).items():
    logging.info("paper %s: %s", paper, line)
verdicts.to_csv(output.table, sep="\t", index=False)
published_table(catalogues, data).to_csv(output.published, sep="\t", index=False)
save_figures(FIGURES, verdicts, output, dpi=snakemake.params.dpi)
description = Path(snakemake.input.description).read_text()
Path(output.report_text).write_text(report_text(verdicts, catalogues, output.verdicts, description))
