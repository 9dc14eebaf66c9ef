from _setup import start

start(snakemake)

import logging

from crosslayer.data.samples import corpus_paragraphs, dataset_texts, describe_source, write_samples

settings = snakemake.params.samples
if settings["source"] == "corpus":
    texts = corpus_paragraphs(snakemake.input.text)
else:
    texts = dataset_texts(**settings["dataset"])
n = write_samples(texts, snakemake.output.samples, source=describe_source(settings, "dynamics.samples"))
logging.info("wrote %d non-empty texts of %d (source: %s)", n, len(texts), settings["source"])
