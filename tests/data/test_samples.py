import json

import pytest

from crosslayer.data.corpus import read_articles
from crosslayer.data.samples import corpus_paragraphs, dataset_texts, describe_source, read_samples, write_samples


@pytest.fixture
def local_dataset(tmp_path):
    """A local dataset directory that `datasets.load_dataset` reads like a hub dataset."""
    root = tmp_path / "wikitext-like"
    root.mkdir()
    rows = ["", " = Heading = ", "A first paragraph of text .", "", "A second , longer paragraph of text ."]
    (root / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in rows))
    return root, rows


def test_dataset_texts_come_back_in_dataset_order(local_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    root, rows = local_dataset
    assert dataset_texts(str(root), name=None, cache_dir=str(tmp_path / "cache")) == rows


def test_dataset_errors_say_what_to_check(local_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, _ = local_dataset
    with pytest.raises(KeyError, match=r"no column 'content'.*\['text'\]"):
        dataset_texts(str(root), name=None, field="content", cache_dir=str(tmp_path / "cache"))
    with pytest.raises(RuntimeError, match="cannot load dataset 'no-such/dataset'.*dynamics.samples.dataset"):
        dataset_texts("no-such/dataset", cache_dir=str(tmp_path / "cache"))


def test_samples_round_trip_keeps_source_indices_and_drops_empty_texts(tmp_path):
    path = tmp_path / "texts.jsonl"
    texts = ["", " one \n", "  ", "two \u00e9", "three\twith tab"]
    assert write_samples(texts, path) == 3
    ids, kept = read_samples(path)
    assert ids == [1, 3, 4] and kept == ["one", "two \u00e9", "three\twith tab"]  # stripped: no trailing newline


def test_writing_no_texts_is_an_error_and_leaves_no_file(tmp_path):
    with pytest.raises(ValueError, match="no non-empty texts"):
        write_samples(["", " "], tmp_path / "texts.jsonl")
    assert not (tmp_path / "texts.jsonl").exists()


def test_an_empty_text_set_names_its_key_and_dataset(tmp_path):
    # the probe: an empty held-out dataset failed with "no non-empty texts to write", naming neither
    settings = {"source": "dataset", "dataset": {"path": "Salesforce/wikitext", "name": "wikitext-2-raw-v1",
                                                 "split": "test", "field": "text"}}
    with pytest.raises(ValueError, match=r"^evaluation\.heldout\.dataset \('Salesforce/wikitext', config "
                                         r"'wikitext-2-raw-v1', split 'test', field 'text'\): no non-empty texts to "
                                         r"write \(2 rows, all empty or blank\)"):
        write_samples(["", " "], tmp_path / "texts.jsonl", source=describe_source(settings, "evaluation.heldout"))
    assert describe_source({"source": "corpus"}, "dynamics.samples") == "dynamics.samples.source: corpus"


def test_corpus_paragraphs_are_the_lines_of_every_article(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("Title one\nfirst para\n\nTitle two\nsecond para\nthird para\n")
    assert corpus_paragraphs(path) == ["Title one", "first para", "Title two", "second para", "third para"]
    assert len(corpus_paragraphs(path)) == sum(len(a.splitlines()) for a in read_articles(path))
