"""Offline English training text, a byte-level BPE tokenizer and encoded token ids.

The embedded default suite trains tiny language models without network access. Its
text comes from the short Wikipedia dump that gensim ships as test data (about a
hundred real articles, ~3 MB of plain text once the wiki markup is removed).

Typical use::

    stats = extract_wikipedia_text("resources/corpus/wiki.txt")
    train_tokenizer("resources/corpus/wiki.txt", "resources/tokenizer", vocab_size=4096)
    n_tokens = encode_corpus("resources/corpus/wiki.txt", "resources/tokenizer",
                             "resources/corpus/tokens.npy")

The text file holds one article per block; blocks are separated by one blank line and
contain no blank lines themselves, so ``text.split("\\n\\n")`` gives the articles back.
"""

from __future__ import annotations

import bz2
import importlib.metadata
import importlib.resources
import os
import re
from pathlib import Path

import numpy as np

__all__ = [
    "EOS_TOKEN",
    "EVAL_FRACTION",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "WIKI_DUMP_NAME",
    "clean_wiki_article",
    "encode_corpus",
    "extract_wikipedia_text",
    "heldout_texts",
    "iter_wikipedia_articles",
    "read_articles",
    "save_tokenizer",
    "train_tokenizer",
    "wikipedia_dump_path",
    "write_text_blocks",
]

#: The last 5 % of the corpus tokens are held out from training (``eval_loss``, the held-out loss).
EVAL_FRACTION = 0.05

WIKI_DUMP_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
"""File name of the Wikipedia dump in gensim's ``test/test_data`` folder."""

# GPT-2/Pythia conventions: one end-of-text token doubling as BOS, a separate pad token.
EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|padding|>"
SPECIAL_TOKENS = (EOS_TOKEN, PAD_TOKEN)

# Trailing sections that are lists of links and citations rather than prose.
_BACK_MATTER = {
    "see also", "references", "external links", "further reading", "notes",
    "bibliography", "sources", "citations", "footnotes", "notes and references",
    "works cited", "primary sources", "secondary sources",
}
_HEADING = re.compile(r"^(=+)\s*(.*?)\s*\1$")
_LIST_MARK = re.compile(r"^[*#:;]+\s*")
_GALLERY_LINE = re.compile(r"^(file|image|media|category)\s*:", re.IGNORECASE)
# Image captions survive filter_wiki as "caption|alt=text", "File.jpg|caption|200px".
_IMAGE_FILE_LINE = re.compile(r"^[^|]*\.(jpe?g|png|gif|svg|tiff?)\s*\|", re.IGNORECASE)
_ALT_TEXT = re.compile(r"\|?\s*\balt=.*$", re.IGNORECASE)
_IMAGE_OPTION = re.compile(r"\|\s*(\d+(x\d+)?px|(upright(=[\d.]+)?|thumb|left|right|center)\b)", re.IGNORECASE)
_HTML_TAG = re.compile(r"<[^>\n]*>")
_BOLD_ITALIC = re.compile(r"'{2,}")
# Citations and templates are removed by filter_wiki, often leaving "( ; )", "(, born)".
_EMPTY_PARENS = re.compile(r"\(\s*[,;:]*\s*\)")
_PAREN_LEAD = re.compile(r"\(\s*[,;:]+\s*")
_PAREN_TRAIL = re.compile(r"\s*[,;:]+\s*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+([,.;:!?)])")
_SPACES = re.compile(r"[ \t\u00a0]+")
_ENCODE_BATCH = 8192  # articles per batch: ids go to numpy per batch, not to one Python list (WikiText-103: 1e8 ids)
_BLANK_LINES = re.compile(r"\n\s*\n")
_MIN_WORDS = 50  # gensim's WikiCorpus uses the same floor (ARTICLE_MIN_WORDS)


def wikipedia_dump_path() -> Path:
    """Locate the Wikipedia dump inside the installed gensim package.

    Returns
    -------
    pathlib.Path
        Path of ``gensim/test/test_data/enwiki-...-shortened.bz2``.

    Raises
    ------
    FileNotFoundError
        If gensim is not installed or its test data lacks the dump.
    """
    try:
        version = importlib.metadata.version("gensim")
        root = importlib.resources.files("gensim")
    except (importlib.metadata.PackageNotFoundError, ModuleNotFoundError) as exc:
        raise FileNotFoundError(
            f"the offline corpus {WIKI_DUMP_NAME} ships with gensim 4.4.0 "
            "(gensim/test/test_data/), but gensim is not installed: pip install gensim==4.4.0"
        ) from exc
    path = Path(str(root / "test" / "test_data" / WIKI_DUMP_NAME))
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: the offline corpus ships as test data with gensim 4.4.0 "
            f"(installed: gensim {version}); reinstall with pip install gensim==4.4.0"
        )
    return path


def clean_wiki_article(wikitext: str) -> str:
    """Turn the wiki markup of one article into plain text.

    gensim's ``filter_wiki`` removes links, templates, tables, references and comments;
    this strips what it leaves behind (bold/italic quotes, headings, list markers,
    gallery lines, image alt text, empty brackets) and drops back-matter sections
    (See also, References, External links, ...).

    Parameters
    ----------
    wikitext : str
        Raw MediaWiki markup of one article.

    Returns
    -------
    str
        Paragraphs separated by single newlines, with no blank lines.
    """
    from gensim.corpora.wikicorpus import filter_wiki

    lines = []
    for line in filter_wiki(wikitext).splitlines():
        line = line.strip()
        heading = _HEADING.match(line)
        if heading:
            if heading.group(2).strip().lower() in _BACK_MATTER:
                break  # back matter comes last; nothing after it is prose
            line = heading.group(2)
        if _GALLERY_LINE.match(line) or _IMAGE_FILE_LINE.match(line):
            continue
        line = _LIST_MARK.sub("", line)
        line = _ALT_TEXT.sub("", line)
        line = _IMAGE_OPTION.sub("", line)
        line = _HTML_TAG.sub("", line)
        line = _BOLD_ITALIC.sub("", line)
        line = _EMPTY_PARENS.sub("", line)
        line = _PAREN_LEAD.sub("(", line)
        line = _PAREN_TRAIL.sub(")", line)
        line = _SPACES.sub(" ", line)
        line = _SPACE_BEFORE_PUNCT.sub(r"\1", line).strip()
        if any(c.isalpha() for c in line):
            lines.append(line)
    return "\n".join(lines)


def iter_wikipedia_articles(dump_path: str | os.PathLike | None = None):
    """Yield ``(title, plain_text)`` for the articles of a Wikipedia XML dump, in order.

    Redirects, non-article namespaces (``Wikipedia:``, ``Talk:``, ...), disambiguation
    pages and articles under 50 words after cleaning are skipped.

    Parameters
    ----------
    dump_path : path-like, optional
        A ``.xml.bz2`` dump; defaults to the one shipped with gensim.
    """
    from gensim.corpora.wikicorpus import IGNORED_NAMESPACES, extract_pages

    path = Path(dump_path) if dump_path is not None else wikipedia_dump_path()
    with bz2.open(path, "rb") as handle:
        for title, wikitext, _pageid in extract_pages(handle):
            if not wikitext or wikitext.lstrip().lower().startswith("#redirect"):
                continue
            if any(title.startswith(ns + ":") for ns in IGNORED_NAMESPACES):
                continue
            if title.endswith("(disambiguation)"):
                continue
            text = clean_wiki_article(wikitext)
            if len(text.split()) >= _MIN_WORDS:
                yield title, text


def extract_wikipedia_text(out_path, *, max_chars: int | None = None, dump_path=None) -> dict:
    """Write the plain text of gensim's Wikipedia sample to a UTF-8 file.

    Parameters
    ----------
    out_path : path-like
        Text file to write; articles are separated by one blank line.
    max_chars : int, optional
        Stop once the file holds this many characters; the last article is cut at a
        line or word boundary. ``None`` keeps everything (~3 M characters).
    dump_path : path-like, optional
        Another ``.xml.bz2`` dump to read instead of gensim's sample.

    Returns
    -------
    dict
        ``n_articles`` (articles written, a cut one included), ``n_chars`` (characters
        in the file), ``source`` (the dump read).

    Raises
    ------
    FileNotFoundError
        If the dump is missing (names the gensim version that provides it).
    ValueError
        If ``max_chars`` is not positive or no text could be extracted.
    """
    source = Path(dump_path) if dump_path is not None else wikipedia_dump_path()
    try:
        stats = write_text_blocks((text for _title, text in iter_wikipedia_articles(source)), out_path,
                                  max_chars=max_chars)
    except ValueError as err:
        raise ValueError(f"{err} (from {source})") from None
    return {"n_articles": stats["n_blocks"], "n_chars": stats["n_chars"], "source": str(source)}


def write_text_blocks(texts, out_path, *, max_chars: int | None = None) -> dict:
    """Write texts as the blocks :func:`read_articles` reads back: one block per non-blank text,
    blocks separated by one blank line, blank lines inside a text removed.

    Parameters
    ----------
    texts : iterable of str
        Articles, or the rows of a dataset (consumed lazily: a ``max_chars`` cut stops reading).
    out_path : path-like
        UTF-8 text file to write.
    max_chars : int, optional
        Stop once the file holds this many characters; the last block is cut at a line or word
        boundary. ``None`` keeps everything.

    Returns
    -------
    dict
        ``n_blocks`` (a cut one included) and ``n_chars`` (characters in the file).

    Raises
    ------
    ValueError
        If ``max_chars`` is not positive or no text was written.
    """
    if max_chars is not None and max_chars <= 0:
        raise ValueError(f"max_chars must be a positive number of characters, got {max_chars}")
    limit = None if max_chars is None else max_chars - 1  # room for the final newline
    blocks, n_chars = [], 0
    for text in texts:
        text = _BLANK_LINES.sub("\n", text.strip())
        if not text:
            continue
        sep = 2 if blocks else 0  # the blank line before every block but the first
        if limit is not None and n_chars + sep + len(text) > limit:
            room = limit - n_chars - sep
            cut = max(text.rfind("\n", 0, room + 1), text.rfind(" ", 0, room + 1))
            if cut > 0:
                blocks.append(text[:cut].rstrip())
                n_chars += sep + len(blocks[-1])
            break
        blocks.append(text)
        n_chars += sep + len(text)
    if not blocks:
        cap = "" if max_chars is None else f" within max_chars={max_chars}"
        raise ValueError(f"no text could be written{cap}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    body = "\n\n".join(blocks) + "\n"
    out_path.write_text(body, encoding="utf-8")
    return {"n_blocks": len(blocks), "n_chars": len(body)}


def read_articles(text_path) -> list[str]:
    """Read a text file written by :func:`extract_wikipedia_text` back into articles.

    Raises
    ------
    ValueError
        If the file holds no text.
    """
    text = Path(text_path).read_text(encoding="utf-8")
    articles = [a.strip("\n") for a in text.split("\n\n") if a.strip()]
    if not articles:
        raise ValueError(f"{text_path} is empty: no text to train a tokenizer on or to encode")
    return articles


def train_tokenizer(text_path, out_dir, *, vocab_size: int = 4096, min_frequency: int = 2):
    """Train a byte-level BPE tokenizer and save it as a ``PreTrainedTokenizerFast``.

    Byte-level BPE (as in GPT-2 and Pythia) encodes any string and decodes it back
    exactly. ``<|endoftext|>`` serves as EOS and BOS, ``<|padding|>`` as pad.

    Parameters
    ----------
    text_path : path-like
        Text file from :func:`extract_wikipedia_text`.
    out_dir : path-like
        Folder to ``save_pretrained`` into; ``AutoTokenizer.from_pretrained(out_dir)``
        loads it.
    vocab_size : int
        Target vocabulary size, special tokens included; at least 256 bytes + 2 + 1.
    min_frequency : int
        Minimum pair count for a merge.

    Returns
    -------
    pathlib.Path
        ``out_dir``.

    Raises
    ------
    ValueError
        If ``vocab_size`` is too small or the text file is empty.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    # 256 byte symbols and the special tokens are always in the vocabulary; anything
    # smaller would leave no room for a single merge.
    floor = 256 + len(SPECIAL_TOKENS) + 1
    if vocab_size < floor:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for byte-level BPE: it needs at least "
            f"{floor} (256 bytes + {len(SPECIAL_TOKENS)} special tokens + 1 merge)"
        )
    articles = read_articles(text_path)

    tok = Tokenizer(models.BPE())
    # add_prefix_space=False keeps decode(encode(s)) == s for every string.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(articles, trainer=trainer, length=len(articles))

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        bos_token=EOS_TOKEN,
        unk_token=EOS_TOKEN,  # never produced by byte-level BPE; set so no library guesses one
        pad_token=PAD_TOKEN,
        model_max_length=2048,
        clean_up_tokenization_spaces=False,  # would break exact round trips
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wrapped.save_pretrained(out_dir)
    return out_dir


def save_tokenizer(name, out_dir, *, revision: str | None = None, cache_dir=None):
    """Save an existing tokenizer (the paper's GPT-2 one, say) where :func:`train_tokenizer` would.

    Parameters
    ----------
    name : str
        Hub repository id (e.g. ``"openai-community/gpt2"``) or a local tokenizer directory.
    out_dir : path-like
    revision : str, optional
        Hub revision; pin a commit for a reproducible vocabulary.
    cache_dir : path-like, optional
        huggingface_hub cache.

    Returns
    -------
    pathlib.Path
        ``out_dir``.

    Raises
    ------
    RuntimeError
        The tokenizer cannot be loaded (the message says what to check) or has no EOS token
        (articles are joined with it).
    """
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name, revision=revision, cache_dir=cache_dir, trust_remote_code=False)
    except Exception as err:
        raise RuntimeError(
            f"cannot load tokenizer {name!r} (revision {revision!r}): {err}. Check corpus.tokenizer and that the hub "
            "is reachable from this machine (this step runs locally, not on cluster nodes)") from err
    if tokenizer.eos_token_id is None:
        raise RuntimeError(f"tokenizer {name!r} has no EOS token to join the corpus's texts with")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def encode_corpus(text_path, tokenizer_dir, out_path) -> int:
    """Tokenize a text file and save the token ids as a 1-D ``.npy`` array.

    Articles are encoded separately and joined with the EOS token, so a model sees a
    document boundary between them.

    Parameters
    ----------
    text_path : path-like
        Text file from :func:`extract_wikipedia_text`.
    tokenizer_dir : path-like
        Folder written by :func:`train_tokenizer`.
    out_path : path-like
        ``.npy`` file to write (exactly this path); ``uint16`` if the vocabulary fits,
        else ``uint32``.

    Returns
    -------
    int
        Number of tokens written.

    Raises
    ------
    ValueError
        If the text file is empty.
    """
    from transformers import AutoTokenizer

    articles = read_articles(text_path)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, trust_remote_code=False, local_files_only=True)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError(f"tokenizer in {tokenizer_dir} has no EOS token to join articles with")
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.uint32
    chunks = []
    for start in range(0, len(articles), _ENCODE_BATCH):
        # The Rust backend encodes a batch in parallel and skips Python-side overhead.
        for enc in tokenizer.backend_tokenizer.encode_batch(articles[start : start + _ENCODE_BATCH],
                                                             add_special_tokens=False):
            if chunks:
                chunks.append(np.array([eos], dtype=dtype))
            chunks.append(np.asarray(enc.ids, dtype=dtype))
    array = np.concatenate(chunks)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "wb") as handle:  # np.save(path) would append ".npy" to other names
        np.save(handle, array)
    return int(array.size)


def heldout_texts(tokenizer_dir, tokens_path, *, fraction=EVAL_FRACTION):
    """The text of the corpus tokens the training holds out, one document per article (or part).

    Training holds out at least the last `fraction` of the tokens (``crosslayer.models.train``); those
    are decoded with the corpus's byte-level BPE, which decodes exactly, and split at the EOS tokens
    that :func:`encode_corpus` puts between articles. The first document is the
    tail of an article whose start was trained on.
    """
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, trust_remote_code=False, local_files_only=True)
    tokens = np.load(tokens_path)
    tail = tokens[len(tokens) - int(len(tokens) * fraction):].astype(np.int64)
    cuts = np.flatnonzero(tail == tokenizer.eos_token_id)
    parts = np.split(tail, cuts)
    texts = [tokenizer.decode(part[1:] if i else part) for i, part in enumerate(parts)]  # drop each EOS
    return [t for t in texts if t.strip()]
