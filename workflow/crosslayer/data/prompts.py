"""The prompt set of the coupling stage (paper 002).

Three sources, concatenated in this order, one file format for the later stages:

* a prompt file: one prompt per line, ``#`` comments and blank lines skipped;
* paragraphs of the offline training corpus (the embedded default);
* test prompts of benchmark datasets loaded with ``datasets`` (the paper: ARC, GSM8K, HellaSwag,
  MMLU, TruthfulQA, Winogrande; 200 each): the first ``n`` rows, or with a ``seed`` ``n`` rows drawn
  across the whole split (MMLU's ``all`` is sorted by subject: its first 200 rows are two subjects),
  kept in dataset order; with ``min_words`` only rows of at least that many words (WikiText's rows
  include blank lines and section headings).

With ``cot`` every prompt of the named sources (or of all, with ``True``) also appears with the
zero-shot chain-of-thought suffix (:data:`COT_SUFFIX`) as variant ``cot``; the paper compares the
two on GSM8K (its Fig. 15). Each prompt is written as a JSON
line ``{"id", "source", "variant", "text"}``; ids name where a prompt came from (``default.txt:12``
is line 12 of that file), so an error about a prompt can be traced to it.
"""

import json
from pathlib import Path

import numpy as np

from crosslayer.data.samples import corpus_paragraphs, dataset_texts

__all__ = ["COT_SUFFIX", "collect_prompts", "file_prompts", "prompt_token_ids", "read_prompts", "write_prompts"]

COT_SUFFIX = " Let's think step by step."


def file_prompts(path):
    """``[(id, text)]`` of a prompt file; ids are ``<file name>:<line number>``."""
    path = Path(path)
    rows = [(f"{path.name}:{n}", line.strip()) for n, line in
            enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)]
    rows = [(pid, text) for pid, text in rows if text and not text.startswith("#")]
    if not rows:
        raise ValueError(f"prompt file {path} holds no prompts (one per line; # starts a comment)")
    return rows


def _corpus_prompts(text_path, n, min_words):
    paragraphs = [p for p in corpus_paragraphs(text_path) if len(p.split()) >= min_words][:n]
    if len(paragraphs) < n:
        raise ValueError(f"the corpus has only {len(paragraphs)} paragraphs of >= {min_words} words; "
                         f"coupling.prompts.corpus_paragraphs asks for {n}")
    return [(f"corpus:{i}", p.strip()) for i, p in enumerate(paragraphs)]


def _dataset_prompts(spec):
    texts = dataset_texts(spec["path"], name=spec.get("name"), split=spec["split"], revision=spec.get("revision"),
                          field=spec["field"], cache_dir=spec.get("cache_dir"), key="coupling.prompts.datasets")
    label, n, min_words = spec.get("label") or spec["path"], spec["n"], spec.get("min_words")
    # with min_words, rows too short to be prompts (WikiText's blank lines and headings) are skipped
    candidates = np.arange(len(texts)) if min_words is None else np.array(
        [i for i, text in enumerate(texts) if len((text or "").split()) >= min_words], dtype=int)
    if len(candidates) < n:
        rows_of = "rows" if min_words is None else f"rows of >= {min_words} words"
        raise ValueError(f"dataset {label!r} has {len(candidates)} {rows_of} in split {spec['split']!r}, "
                         f"fewer than n = {n}")
    rows = candidates[:n] if spec.get("seed") is None else np.sort(
        np.random.default_rng(spec["seed"]).choice(candidates, size=n, replace=False))
    prompts = []
    for i in map(int, rows):  # ids keep the dataset's row number, so a prompt can be traced to its row
        text = (texts[i] or "").strip()
        if not text:
            raise ValueError(f"dataset {label!r} row {i} (field {spec['field']!r}) is an empty prompt; "
                             "choose another field or split")
        prompts.append((f"{label}:{i}", text))
    return prompts


def collect_prompts(*, file=None, corpus=None, corpus_paragraphs=0, min_words=20, datasets=(), cot=False):
    """The prompt set as rows ``{"id", "source", "variant", "text"}``.

    Parameters
    ----------
    file : path, optional
        A prompt file (:func:`file_prompts`).
    corpus : path, optional
        The corpus text file; its first `corpus_paragraphs` paragraphs of at least `min_words`
        words are used.
    datasets : sequence of dict
        ``label``, ``path``, ``name``, ``split``, ``field``, ``n``, optional ``seed``, ``min_words``
        (only rows of at least this many words), ``revision`` and ``cache_dir`` (arguments of
        :func:`crosslayer.data.samples.dataset_texts`).
    cot : bool or sequence of str
        Add every prompt again with :data:`COT_SUFFIX` (variant ``cot``; the others ``plain``): all
        sources with ``True``, else those named (``file``, ``corpus`` or a dataset's label).
    """
    sources = []
    if file:
        sources.append(("file", file_prompts(file)))
    if corpus_paragraphs:
        sources.append(("corpus", _corpus_prompts(corpus, corpus_paragraphs, min_words)))
    for spec in datasets:
        sources.append((spec.get("label") or spec["path"], _dataset_prompts(spec)))
    rows = [{"id": pid, "source": source, "variant": "plain", "text": text}
            for source, prompts in sources for pid, text in prompts]
    if not rows:
        raise ValueError("the prompt set is empty: set coupling.prompts.file, corpus_paragraphs or datasets")
    names = [source for source, _ in sources]
    cot = names if cot is True else list(cot or ())
    unknown = [source for source in cot if source not in names]
    if unknown:
        raise ValueError(f"coupling.prompts.cot: {unknown} are not prompt sources; choose from {names}")
    rows += [{**row, "id": row["id"] + "+cot", "variant": "cot", "text": row["text"] + COT_SUFFIX}
             for row in rows if row["source"] in cot]
    return rows


def write_prompts(rows, path):
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_prompts(path):
    """Rows written by :func:`write_prompts`."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def prompt_token_ids(tokenizer, rows, max_tokens=None):
    """Token ids of each prompt, cut to `max_tokens` (None: whole). A chain-of-thought prompt too
    long for the cut keeps its suffix: its plain text is cut to leave room for the suffix's
    tokens, so that the two variants of a long prompt never become the same tokens.

    Parameters
    ----------
    tokenizer : callable
        ``tokenizer(text, add_special_tokens=...)["input_ids"]`` (a transformers tokenizer).
    rows : sequence of dict
        :func:`collect_prompts` rows.
    max_tokens : int, optional
    """
    out = []
    for row in rows:
        ids = tokenizer(row["text"])["input_ids"]
        if max_tokens is not None and len(ids) > max_tokens and row["variant"] == "cot":
            suffix = tokenizer(COT_SUFFIX, add_special_tokens=False)["input_ids"]
            if len(suffix) >= max_tokens:
                raise ValueError(f"coupling.prompts.max_tokens = {max_tokens} leaves no room for a prompt before "
                                 f"the {len(suffix)} tokens of the chain-of-thought suffix; raise it")
            ids = tokenizer(row["text"].removesuffix(COT_SUFFIX))["input_ids"][: max_tokens - len(suffix)] + suffix
        out.append(ids[:max_tokens])
    return out
