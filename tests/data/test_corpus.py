"""Offline corpus: Wikipedia text from gensim's test data, BPE tokenizer, token ids."""

import json

import numpy as np
import pytest

from crosslayer.data import corpus

VOCAB = 1024  # small keeps tokenizer training quick; the workflow uses 4096


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    text = root / "wiki.txt"
    stats = corpus.extract_wikipedia_text(text)
    tok_dir = corpus.train_tokenizer(text, root / "tokenizer", vocab_size=VOCAB)
    n_tokens = corpus.encode_corpus(text, tok_dir, root / "tokens.npy")
    return {"root": root, "text": text, "stats": stats, "tok_dir": tok_dir, "n_tokens": n_tokens}


def test_dump_is_found_in_gensim():
    path = corpus.wikipedia_dump_path()
    assert path.is_file() and path.name == corpus.WIKI_DUMP_NAME
    assert "gensim" in path.parts


def test_extraction_gives_plain_english_articles(built):
    stats, text = built["stats"], built["text"].read_text(encoding="utf-8")
    assert stats["n_articles"] > 50
    assert stats["n_chars"] == len(text) > 1_000_000
    articles = text.strip("\n").split("\n\n")
    assert len(articles) == stats["n_articles"]
    assert all(a.strip() and "\n\n" not in a for a in articles)
    for markup in ("[[", "]]", "{{", "}}", "'''", "''", "==", "<ref", "&nbsp;", "alt="):
        assert markup not in text, markup
    assert articles[0].startswith("Anarchism is a political philosophy")  # dump order kept
    words = text.split()
    assert words.count("the") / len(words) > 0.03  # English prose, not lists or tables


def test_extraction_is_deterministic_and_respects_max_chars(built, tmp_path):
    stats = corpus.extract_wikipedia_text(tmp_path / "short.txt", max_chars=20_000)
    short = (tmp_path / "short.txt").read_text(encoding="utf-8")
    assert stats["n_chars"] == len(short) <= 20_000
    assert stats["n_articles"] >= 1
    full = built["text"].read_text(encoding="utf-8")
    assert full.startswith(short.rstrip("\n"))


def test_tokenizer_loads_and_round_trips(built):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built["tok_dir"])
    assert len(tok) == VOCAB
    assert tok.eos_token == tok.bos_token == corpus.EOS_TOKEN
    assert tok.pad_token == corpus.PAD_TOKEN and tok.pad_token_id != tok.eos_token_id
    text = built["text"].read_text(encoding="utf-8")
    samples = [text[:3000], text[-2000:], "  Two  spaces,\ttabs\nand ünïcödé — 中文 ✓ 1.5e-3 "]
    for sample in samples:
        ids = tok.encode(sample, add_special_tokens=False)
        assert tok.decode(ids) == sample
    assert len(tok.encode(text[:3000], add_special_tokens=False)) < 3000 / 2  # merges learnt


def test_encoded_corpus(built):
    from transformers import AutoTokenizer

    ids = np.load(built["root"] / "tokens.npy")
    assert ids.dtype == np.uint16 and ids.ndim == 1
    assert len(ids) == built["n_tokens"] > 200_000
    assert int(ids.max()) < VOCAB
    tok = AutoTokenizer.from_pretrained(built["tok_dir"])
    # Articles are joined by exactly one EOS each.
    assert int((ids == tok.eos_token_id).sum()) == built["stats"]["n_articles"] - 1
    first_eos = int(np.argmax(ids == tok.eos_token_id))
    first_article = built["text"].read_text(encoding="utf-8").split("\n\n")[0]
    assert tok.decode(ids[:first_eos].tolist()) == first_article


def test_tokenizer_training_is_deterministic(built, tmp_path):
    again = corpus.train_tokenizer(built["text"], tmp_path / "again", vocab_size=VOCAB)
    first = json.loads((built["tok_dir"] / "tokenizer.json").read_text())
    second = json.loads((again / "tokenizer.json").read_text())
    assert first == second
    assert (built["tok_dir"] / "tokenizer.json").read_bytes() == (again / "tokenizer.json").read_bytes()


def test_vocab_too_small(built, tmp_path):
    with pytest.raises(ValueError, match=r"vocab_size=100 is too small.*at least 259"):
        corpus.train_tokenizer(built["text"], tmp_path / "tok", vocab_size=100)


def test_empty_text(built, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        corpus.train_tokenizer(empty, tmp_path / "tok")
    with pytest.raises(ValueError, match="empty"):
        corpus.encode_corpus(empty, built["tok_dir"], tmp_path / "ids.npy")


def test_bad_max_chars(tmp_path):
    with pytest.raises(ValueError, match="max_chars"):
        corpus.extract_wikipedia_text(tmp_path / "x.txt", max_chars=0)


def test_missing_gensim_data(monkeypatch, tmp_path):
    monkeypatch.setattr(corpus, "WIKI_DUMP_NAME", "no-such-dump.xml.bz2")
    with pytest.raises(FileNotFoundError, match=r"no-such-dump.*gensim 4\.4\.0"):
        corpus.extract_wikipedia_text(tmp_path / "x.txt")
    assert not (tmp_path / "x.txt").exists()


def test_text_blocks_of_dataset_rows_round_trip_through_read_articles(tmp_path):
    rows = ["", " = Heading = ", "First paragraph .\n\n  \nits second line .", "   ", "Last , longer paragraph ."]
    stats = corpus.write_text_blocks(rows, tmp_path / "t.txt")
    assert corpus.read_articles(tmp_path / "t.txt") == ["= Heading =", "First paragraph .\nits second line .",
                                                         "Last , longer paragraph ."]
    assert stats == {"n_blocks": 3, "n_chars": len((tmp_path / "t.txt").read_text(encoding="utf-8"))}
    cut = corpus.write_text_blocks(iter(rows), tmp_path / "cut.txt", max_chars=40)
    assert cut["n_chars"] <= 40 and corpus.read_articles(tmp_path / "cut.txt")[-1] == "First paragraph .\nits"
    with pytest.raises(ValueError, match="no text could be written"):
        corpus.write_text_blocks(["", " \n "], tmp_path / "none.txt")
    assert not (tmp_path / "none.txt").exists()


def test_encoding_in_batches_equals_one_batch(built, tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "_ENCODE_BATCH", 7)  # 101 articles: 15 batches
    corpus.encode_corpus(built["text"], built["tok_dir"], tmp_path / "ids.npy")
    assert np.array_equal(np.load(tmp_path / "ids.npy"), np.load(built["root"] / "tokens.npy"))


def test_an_existing_tokenizer_is_saved_as_is(built, tmp_path):
    out = corpus.save_tokenizer(str(built["tok_dir"]), tmp_path / "tok")
    assert json.loads((out / "tokenizer.json").read_text()) == json.loads((built["tok_dir"] / "tokenizer.json").read_text())
    missing = str(tmp_path / "no-such-tokenizer")  # neither a directory nor a repo id: fails without the network
    with pytest.raises(RuntimeError, match=r"(?s)cannot load tokenizer '.*no-such-tokenizer'.*corpus\.tokenizer"):
        corpus.save_tokenizer(missing, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_a_tokenizer_without_eos_is_refused(built, tmp_path):
    from transformers import PreTrainedTokenizerFast

    PreTrainedTokenizerFast(tokenizer_file=str(built["tok_dir"] / "tokenizer.json")).save_pretrained(tmp_path / "no_eos")
    with pytest.raises(RuntimeError, match="has no EOS token"):
        corpus.save_tokenizer(str(tmp_path / "no_eos"), tmp_path / "out")
