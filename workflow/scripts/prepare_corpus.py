from _setup import start

start(snakemake)

import logging

from crosslayer.corpus import encode_corpus, extract_wikipedia_text, train_tokenizer

out = snakemake.output
stats = extract_wikipedia_text(out.text, max_chars=snakemake.params.max_chars)
logging.info("corpus: %s", stats)
train_tokenizer(out.text, out.tokenizer, vocab_size=snakemake.params.vocab_size)
logging.info("tokens: %d", encode_corpus(out.text, out.tokenizer, out.tokens))
