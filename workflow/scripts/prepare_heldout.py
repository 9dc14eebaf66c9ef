from _setup import start

start(snakemake)

import logging

from crosslayer.data.corpus import heldout_texts
from crosslayer.data.samples import dataset_texts, write_samples

settings = snakemake.params.heldout
if settings["source"] == "corpus":
    texts = heldout_texts(snakemake.input.tokenizer, snakemake.input.tokens)
else:
    texts = dataset_texts(**settings["dataset"], key="evaluation.heldout.dataset")
n = write_samples(texts, snakemake.output.texts)
logging.info("wrote %d non-empty held-out texts of %d (source: %s)", n, len(texts), settings["source"])
