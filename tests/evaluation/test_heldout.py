"""Held-out loss: the windows, the loss against a hand-written loop, the corpus's held-out articles, an
encoder's row that says why it has no loss."""

import json
import logging
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from crosslayer.data import corpus
from crosslayer.evaluation.heldout import HeldoutSettings, heldout_loss, heldout_windows, measure_checkpoint
from crosslayer.evaluation.tables import HELDOUT_COLUMNS, heldout_table
from crosslayer.models.checkpoints import read_manifest, write_manifest
from tiny_checkpoints import WORDS, save_checkpoint, text
from tiny_families import tiny_model


def hand_loss(model, windows):
    """Mean next-token loss, one window and one position at a time, in float64 from the logits."""
    total, count = 0.0, 0
    with torch.no_grad():
        for window in windows:
            logits = model(input_ids=window[None, :-1]).logits[0].double()
            for t in range(len(window) - 1):
                row = logits[t]
                total += float(torch.logsumexp(row, 0) - row[window[t + 1]])
                count += 1
    return total / count


def word_tokenizer():
    import transformers as T
    from tokenizers import Tokenizer, models, pre_tokenizers

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return T.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")


def test_windows_are_the_joined_texts_ids_and_bytes_are_the_scored_text():
    texts = [text(10, start=1), text(9, start=20)]
    windows, n_bytes = heldout_windows(word_tokenizer(), texts, context=4)
    ids = list(range(1, 11)) + list(range(20, 29))
    assert windows.tolist() == [ids[0:5], ids[5:10], ids[10:15]]  # 19 ids: 3 whole windows of 5, 4 dropped
    scored = [WORDS[i] for w in windows.tolist() for i in w[1:]]
    assert n_bytes == sum(len(w) for w in scored) + 3 * 3  # the spaces between each window's 4 scored words
    limited, _ = heldout_windows(word_tokenizer(), texts, context=4, max_windows=2)
    assert limited.tolist() == windows[:2].tolist()


def test_too_short_a_text_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="evaluation.heldout.context"):
        heldout_windows(word_tokenizer(), [text(3)], context=8)


@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_loss_equals_a_hand_written_loop(family):
    model = tiny_model(family)
    windows = torch.randint(1, 100, (5, 9), generator=torch.Generator().manual_seed(1))
    row = heldout_loss(model, windows, batch_size=2, n_bytes=123)
    expected = hand_loss(model, windows)
    assert row["loss"] == pytest.approx(expected, rel=1e-6)
    assert row["perplexity"] == pytest.approx(math.exp(expected), rel=1e-6)
    assert row["bits_per_byte"] == pytest.approx(expected * 5 * 8 / math.log(2) / 123, rel=1e-6)
    assert (row["n_tokens"], row["n_windows"], row["context"]) == (40, 5, 8)
    assert set(row) == set(HELDOUT_COLUMNS)
    assert heldout_loss(model, windows, batch_size=5)["loss"] == pytest.approx(row["loss"], rel=1e-6)
    assert math.isnan(heldout_loss(model, windows, batch_size=5)["bits_per_byte"])  # no offsets, no bytes


def test_a_checkpoint_is_scored_on_its_own_tokenizer_with_the_context_capped(tmp_path):
    manifest = save_checkpoint("gpt2", tmp_path / "ckpt")  # n_positions 64
    texts = [text(80), text(80, start=5)]
    row = measure_checkpoint(manifest, HeldoutSettings(context=1000, batch_size=2), texts=texts)
    assert (row["context"], row["n_windows"]) == (64, 2)  # 160 words: two windows of 65
    windows, n_bytes = heldout_windows(word_tokenizer(), texts, context=64)
    model = tiny_model("gpt2")
    assert row["loss"] == pytest.approx(hand_loss(model, windows), rel=1e-6)
    assert row["n_bytes"] == n_bytes


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_equals_cpu(tmp_path):
    manifest = save_checkpoint("llama", tmp_path / "ckpt")
    texts = [text(80), text(80, start=5)]
    settings = HeldoutSettings(context=32, batch_size=2)
    cpu = measure_checkpoint(manifest, settings, texts=texts)
    gpu = measure_checkpoint(manifest, settings, texts=texts, device="cuda")
    assert gpu["loss"] == pytest.approx(cpu["loss"], rel=1e-5)
    assert (gpu["n_tokens"], gpu["n_bytes"]) == (cpu["n_tokens"], cpu["n_bytes"])


def test_settings_refusals_name_the_key():
    with pytest.raises(ValueError, match="evaluation.heldout.context"):
        HeldoutSettings(context=1)
    with pytest.raises(ValueError, match="evaluation.heldout.max_windows"):
        HeldoutSettings(max_windows=0)


def test_table_is_sorted_by_step():
    row = dict.fromkeys(HELDOUT_COLUMNS, 1.0)
    table = heldout_table({10: row, 0: {**row, "loss": 2.0}})
    assert table.step.tolist() == [0, 10] and table.loss.tolist() == [2.0, 1.0]
    assert list(table.columns) == ["step", *HELDOUT_COLUMNS]


def bert_manifest(path):
    """A registered tiny BERT (an encoder) checkpoint's manifest path."""
    import transformers as T

    T.BertForMaskedLM(T.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                   vocab_size=101)).save_pretrained(path / "bert")
    write_manifest(path / "step0.json", model="enc", step=0, source="local", checkpoint_dir=path / "bert")
    return path / "step0.json"


def test_an_encoder_row_says_why_it_has_no_loss(tmp_path):
    row = measure_checkpoint(read_manifest(bert_manifest(tmp_path)), HeldoutSettings(), texts=[text(80)])
    assert set(row) == set(HELDOUT_COLUMNS) and math.isnan(row["loss"]) and row["n_windows"] == 0
    assert row["skipped"] == "an encoder (model_type bert): it predicts no next token"
    path = tmp_path / "heldout.tsv"  # as summarize_heldout writes it: the reason kept, measured rows empty
    measured = {**dict.fromkeys(HELDOUT_COLUMNS[:7], 1.0), "skipped": ""}
    heldout_table({0: row, 5: measured}).to_csv(path, sep="\t", index=False)
    table = pd.read_csv(path, sep="\t", keep_default_na=False)
    assert table.skipped.tolist() == [row["skipped"], ""]


def test_rows_written_before_the_skipped_column_read_as_measured():
    old = {c: 1.0 for c in HELDOUT_COLUMNS if c != "skipped"}
    assert heldout_table({0: old}).skipped.tolist() == [""]


def test_the_job_log_says_the_encoder_is_not_measured(tmp_path, monkeypatch, caplog):
    scripts = Path(__file__).parents[2] / "workflow/scripts"
    monkeypatch.syspath_prepend(str(scripts))
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # start() sends stderr to the log; put it back after
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the tests' one thread stays
    texts = tmp_path / "heldout.jsonl"
    texts.write_text(json.dumps({"id": "a", "text": text(80)}) + "\n")
    out = tmp_path / "step0.heldout.json"
    snakemake = SimpleNamespace(
        rule="heldout_loss", threads=1, scriptdir=str(scripts), log=[str(tmp_path / "job.log")],
        input=SimpleNamespace(manifest=str(bert_manifest(tmp_path)), texts=str(texts)),
        output=SimpleNamespace(json=str(out)), params=SimpleNamespace(context=16, max_windows=None),
        config={"evaluation": {"device": "cpu", "heldout": {"batch_size": 8}}})
    with caplog.at_level(logging.INFO):
        try:
            exec(compile((scripts / "heldout_loss.py").read_text(), "heldout_loss", "exec"), {"snakemake": snakemake})
        finally:
            if getattr(sys.stderr, "name", "") == snakemake.log[0]:
                sys.stderr.close()
    assert ("models.enc is an encoder (model_type bert): it predicts no next token, so its held-out loss is not "
            "measured (NaN)") in caplog.text
    assert "over 0 windows" not in caplog.text
    assert json.loads(out.read_text())["skipped"].startswith("an encoder")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    corpus.extract_wikipedia_text(root / "wiki.txt", max_chars=400_000)
    paragraphs = [p for a in corpus.read_articles(root / "wiki.txt") for p in a.splitlines() if p.strip()]
    path = root / "paragraphs.txt"
    corpus.write_text_blocks(paragraphs, path)  # many short articles: the held-out tail spans several
    tokenizer = corpus.train_tokenizer(path, root / "tokenizer", vocab_size=512)
    corpus.encode_corpus(path, tokenizer, root / "tokens.npy")
    return path, tokenizer, root / "tokens.npy"


def test_corpus_heldout_text_is_the_text_of_the_tokens_training_holds_out(built):
    from transformers import AutoTokenizer

    path, tokenizer_dir, tokens_path = built
    held = corpus.heldout_texts(tokenizer_dir, tokens_path)
    articles = corpus.read_articles(path)
    k = len(held)
    assert 2 <= k < len(articles) and held[1:] == articles[-(k - 1):]  # whole articles after the first part
    assert articles[-k].endswith(held[0]) and held[0] != articles[-k]  # the tail of the article it cuts
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    n_held = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in held) + k - 1
    n_tokens = len(np.load(tokens_path))
    assert abs(n_held - int(n_tokens * corpus.EVAL_FRACTION)) <= 2  # the cut article's first token may re-encode
