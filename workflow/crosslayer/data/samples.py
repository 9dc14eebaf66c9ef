"""The texts whose residual stream the dynamics stages record (paper 004).

Two sources, one file format, so the later stages never ask where texts came from:

* ``corpus``: the paragraphs of the embedded default's offline training text, in file order;
* ``dataset``: a Hugging Face dataset loaded with ``datasets`` (the paper: WikiText-2 train),
  in dataset order.

Either way the texts are written as JSON lines ``{"id": <index in the source>, "text": ...}``,
stripped of surrounding whitespace (WikiText rows end in " \n", which would make the last token,
where the residual stream is read, a newline for every text) and empty texts dropped. The length filter is applied later, per model, because it counts tokens
of that model's tokenizer.
"""

import json
from pathlib import Path

from crosslayer.config import DATASETS_EXTRA
from crosslayer.data.corpus import read_articles

__all__ = ["SAMPLE_SOURCES", "corpus_paragraphs", "dataset_texts", "describe_source", "write_samples", "read_samples"]

SAMPLE_SOURCES = ("corpus", "dataset")


def corpus_paragraphs(text_path):
    """Non-empty lines of a corpus text file (one paragraph per line, like WikiText's rows)."""
    return [line for article in read_articles(text_path) for line in article.splitlines()]


def dataset_texts(path, *, name=None, split="train", revision=None, field="text", cache_dir=None,
                  key="dynamics.samples.dataset"):
    """One column of a Hugging Face dataset, in dataset order.

    Parameters
    ----------
    path : str
        Hub dataset id (e.g. ``"Salesforce/wikitext"``) or a local dataset directory.
    name : str, optional
        Configuration (e.g. ``"wikitext-2-raw-v1"``).
    split : str
    revision : str, optional
        Hub revision (tag, branch or commit) - pin it for a reproducible sample set.
    field : str
        Column holding the text.
    cache_dir : str, optional
        ``datasets`` cache (default: its own, ``HF_DATASETS_CACHE``).
    key : str
        The config key these arguments come from, named in errors.

    Raises
    ------
    RuntimeError
        The dataset cannot be loaded; the message names it and says what to check.
    KeyError
        ``field`` is not a column; the message lists the columns.
    """
    try:
        import datasets
    except ImportError:
        raise ImportError(f"{key} asks for a Hugging Face dataset, which needs the optional package "
                          f"'datasets': {DATASETS_EXTRA}") from None
    try:
        data = datasets.load_dataset(path, name, split=split, revision=revision, cache_dir=cache_dir)
    except Exception as err:  # offline, unknown id/config/split: one message that says what to do
        raise RuntimeError(
            f"cannot load dataset {path!r} (config {name!r}, split {split!r}, revision {revision!r}): {err}. "
            f"Check the names in {key} and that the hub is reachable from this machine "
            "(this step runs locally, not on cluster nodes)."
        ) from err
    if field not in data.column_names:
        raise KeyError(f"dataset {path!r} has no column {field!r}; columns: {data.column_names} "
                       f"(set {key}.field)")
    return list(data[field])


def write_samples(texts, out_path, *, source="the text set"):
    """Write the texts, stripped, as JSON lines with their index in ``texts``, empty ones left out;
    returns how many were written. `source` (the config key and what it names) is named when every
    text is empty."""
    n = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for i, text in enumerate(texts):
            text = (text or "").strip()
            if text:
                out.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
                n += 1
    if n == 0:
        Path(out_path).unlink()
        raise ValueError(f"{source}: no non-empty texts to write ({len(texts)} rows, all empty or blank): choose "
                         "another dataset, split or field")
    return n


def describe_source(settings, key):
    """How a text set's settings (``source`` and ``dataset``) are named in errors, e.g.
    ``evaluation.heldout.dataset ('Salesforce/wikitext', config 'wikitext-2-raw-v1', split 'test',
    field 'text')``."""
    if settings["source"] != "dataset":
        return f"{key}.source: {settings['source']}"
    data = settings["dataset"]
    return (f"{key}.dataset ({data['path']!r}, config {data.get('name')!r}, split {data.get('split', 'train')!r}, "
            f"field {data.get('field', 'text')!r})")


def read_samples(path):
    """``(ids, texts)`` from a file written by :func:`write_samples`."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    return [row["id"] for row in rows], [row["text"] for row in rows]
