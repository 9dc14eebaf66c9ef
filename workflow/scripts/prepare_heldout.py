from _setup import start

start(snakemake)

import logging

from crosslayer.data.corpus import heldout_texts
from crosslayer.data.samples import dataset_texts, describe_source, write_samples

settings = snakemake.params.heldout
if settings["source"] == "corpus":
    texts = heldout_texts(snakemake.input.tokenizer, snakemake.input.tokens)
else:
    texts = dataset_texts(**settings["dataset"], key="evaluation.heldout.dataset")
n = write_samples(texts, snakemake.output.texts, source=describe_source(settings, "evaluation.heldout"))
logging.info("wrote %d non-empty held-out texts of %d (source: %s)", n, len(texts), settings["source"])
