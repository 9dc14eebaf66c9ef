from _setup import start

start(snakemake)

import logging

from crosslayer.data.prompts import collect_prompts, write_prompts

settings = snakemake.params.prompts
rows = collect_prompts(file=snakemake.input.file or None, corpus=snakemake.input.text or None,
                       corpus_paragraphs=settings["corpus_paragraphs"], min_words=settings["min_words"],
                       datasets=settings["datasets"], cot=settings["cot"])
write_prompts(rows, snakemake.output.prompts)
logging.info("wrote %d prompts", len(rows))
