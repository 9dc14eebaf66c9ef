from _setup import start

start(snakemake)

import logging

from crosslayer.data.corpus import (
    encode_corpus,
    extract_wikipedia_text,
    save_tokenizer,
    train_tokenizer,
    write_text_blocks,
)
from crosslayer.data.samples import dataset_texts

out, params = snakemake.output, snakemake.params
if params.source == "dataset":
    texts = dataset_texts(**params.dataset, key="corpus.dataset")
    stats = write_text_blocks(texts, out.text, max_chars=params.max_chars)
else:
    stats = extract_wikipedia_text(out.text, max_chars=params.max_chars)
logging.info("corpus: %s", stats)
if params.tokenizer is None:
    train_tokenizer(out.text, out.tokenizer, vocab_size=params.vocab_size)
else:
    save_tokenizer(params.tokenizer, out.tokenizer, revision=params.tokenizer_revision)
logging.info("tokens: %d", encode_corpus(out.text, out.tokenizer, out.tokens))
