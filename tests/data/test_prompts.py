import json

import numpy as np
import pytest

from crosslayer.data.prompts import (
    COT_SUFFIX,
    collect_prompts,
    file_prompts,
    prompt_token_ids,
    read_prompts,
    write_prompts,
)


def test_prompt_file_lines_comments_and_ids(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("# a comment\nFirst prompt\n\n  Second prompt  \n#another\n")
    assert file_prompts(path) == [("p.txt:2", "First prompt"), ("p.txt:4", "Second prompt")]
    (tmp_path / "empty.txt").write_text("# only comments\n\n")
    with pytest.raises(ValueError, match="holds no prompts"):
        file_prompts(tmp_path / "empty.txt")


def test_the_shipped_prompt_file_has_a_few_dozen_prompts():
    from pathlib import Path

    rows = file_prompts(Path(__file__).parents[2] / "config" / "prompts" / "default.txt")
    assert 24 <= len(rows) <= 60 and len({text for _, text in rows}) == len(rows)


def test_sources_in_order_with_the_cot_variant_and_a_round_trip(tmp_path):
    (tmp_path / "p.txt").write_text("One\nTwo\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Title\n" + " ".join(["word"] * 25) + "\nshort one\n" + " ".join(["more"] * 30) + "\n")
    rows = collect_prompts(file=tmp_path / "p.txt", corpus=corpus, corpus_paragraphs=2, min_words=20, cot=True)
    assert [r["id"] for r in rows] == ["p.txt:1", "p.txt:2", "corpus:0", "corpus:1", "p.txt:1+cot", "p.txt:2+cot",
                                       "corpus:0+cot", "corpus:1+cot"]
    assert rows[4]["text"] == "One" + COT_SUFFIX and rows[4]["variant"] == "cot" and rows[0]["variant"] == "plain"
    write_prompts(rows, tmp_path / "out.jsonl")
    assert read_prompts(tmp_path / "out.jsonl") == rows
    only_corpus = collect_prompts(file=tmp_path / "p.txt", corpus=corpus, corpus_paragraphs=2, cot=["corpus"])
    assert [r["id"] for r in only_corpus] == ["p.txt:1", "p.txt:2", "corpus:0", "corpus:1", "corpus:0+cot",
                                              "corpus:1+cot"]
    with pytest.raises(ValueError, match=r"coupling.prompts.cot: \['gsm8k'\] are not prompt sources; choose from "
                                         r"\['file', 'corpus'\]"):
        collect_prompts(file=tmp_path / "p.txt", corpus=corpus, corpus_paragraphs=2, cot=["gsm8k"])
    with pytest.raises(ValueError, match="only 2 paragraphs of >= 20 words; .*asks for 3"):
        collect_prompts(corpus=corpus, corpus_paragraphs=3)
    with pytest.raises(ValueError, match="the prompt set is empty"):
        collect_prompts()


def test_dataset_prompts_from_a_local_dataset_directory(tmp_path):
    """The real datasets loader on a local directory (the hub is unreachable here)."""
    data = tmp_path / "gsm"
    data.mkdir()
    with open(data / "test.jsonl", "w") as out:
        for i in range(5):
            out.write(json.dumps({"question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n")
    spec = {"label": "gsm8k", "path": str(data), "split": "test", "field": "question", "n": 3,
            "cache_dir": str(tmp_path / "cache")}
    rows = collect_prompts(datasets=[spec])
    assert [(r["id"], r["source"], r["text"]) for r in rows] == [
        ("gsm8k:0", "gsm8k", "What is 0 + 0?"), ("gsm8k:1", "gsm8k", "What is 1 + 1?"),
        ("gsm8k:2", "gsm8k", "What is 2 + 2?")]
    with pytest.raises(ValueError, match="5 rows in split 'test', fewer than n = 9"):
        collect_prompts(datasets=[{**spec, "n": 9}])
    with open(data / "test.jsonl", "a") as out:
        out.write(json.dumps({"question": "  ", "answer": ""}) + "\n")
    with pytest.raises(ValueError, match="dataset 'gsm8k' row 5 .* is an empty prompt"):
        collect_prompts(datasets=[{**spec, "n": 6}])


def test_a_seeded_dataset_sample_spans_the_split_in_order_and_keeps_row_ids(tmp_path):
    # MMLU's `all` config is sorted by subject: its first rows are one or two subjects
    data = tmp_path / "mmlu"
    data.mkdir()
    subjects = [f"subject{i // 10}" for i in range(50)]
    with open(data / "test.jsonl", "w") as out:
        for i, subject in enumerate(subjects):
            out.write(json.dumps({"question": f"{subject} question {i}"}) + "\n")
    spec = {"label": "mmlu", "path": str(data), "split": "test", "field": "question", "n": 10, "seed": 3,
            "cache_dir": str(tmp_path / "cache")}
    rows = collect_prompts(datasets=[spec])
    picked = np.sort(np.random.default_rng(3).choice(50, size=10, replace=False))  # the draw, independently
    assert [r["id"] for r in rows] == [f"mmlu:{i}" for i in picked]
    assert [r["text"] for r in rows] == [f"{subjects[i]} question {i}" for i in picked]
    assert len({subjects[i] for i in picked}) > 2  # the first 10 rows would be one subject
    assert rows == collect_prompts(datasets=[spec])  # the same seed, the same prompts
    assert rows != collect_prompts(datasets=[{**spec, "seed": 4}])
    first = collect_prompts(datasets=[{**spec, "seed": None}])
    assert [r["id"] for r in first] == [f"mmlu:{i}" for i in range(10)]
    with pytest.raises(ValueError, match="50 rows in split 'test', fewer than n = 51"):
        collect_prompts(datasets=[{**spec, "n": 51}])


def test_min_words_skips_blank_rows_and_headings_as_in_wikitext(tmp_path):
    # WikiText-2's rows: blank lines, " = Heading = " lines and paragraphs
    data = tmp_path / "wikitext"
    data.mkdir()
    texts = []
    for i in range(30):
        texts += ["", f" = Section {i} = \n", " ".join([f"w{i}"] * (5 + i)) + " \n"]
    with open(data / "test.jsonl", "w") as out:
        for text in texts:
            out.write(json.dumps({"text": text}) + "\n")
    spec = {"label": "wikitext", "path": str(data), "split": "test", "field": "text", "n": 4, "seed": 1,
            "min_words": 20, "cache_dir": str(tmp_path / "cache")}
    long_rows = [3 * i + 2 for i in range(15, 30)]  # the paragraphs of >= 20 words
    picked = np.sort(np.random.default_rng(1).choice(long_rows, size=4, replace=False))
    rows = collect_prompts(datasets=[spec])
    assert [r["id"] for r in rows] == [f"wikitext:{i}" for i in picked]  # ids keep the dataset's row numbers
    assert all(len(r["text"].split()) >= 20 and r["text"] == texts[int(r["id"][9:])].strip() for r in rows)
    first = collect_prompts(datasets=[{**spec, "seed": None}])
    assert [r["id"] for r in first] == [f"wikitext:{i}" for i in long_rows[:4]]
    with pytest.raises(ValueError, match="'wikitext' has 15 rows of >= 20 words in split 'test', fewer than n = 16"):
        collect_prompts(datasets=[{**spec, "n": 16}])
    with pytest.raises(ValueError, match="'wikitext' row 0 .* is an empty prompt"):  # without min_words
        collect_prompts(datasets=[{**spec, "min_words": None, "seed": None}])


def test_a_long_chain_of_thought_prompt_keeps_its_suffix_when_cut():
    words = {}

    def tokenizer(text, add_special_tokens=True):  # one id per word, a start token like many tokenizers
        ids = [words.setdefault(w, len(words) + 1) for w in text.split()]
        return {"input_ids": ([0] if add_special_tokens else []) + ids}

    base = " ".join(f"w{i}" for i in range(30))
    rows = [{"variant": "plain", "text": base}, {"variant": "cot", "text": base + COT_SUFFIX},
            {"variant": "cot", "text": "short" + COT_SUFFIX}]
    plain, cot, short = prompt_token_ids(tokenizer, rows, max_tokens=12)
    suffix = tokenizer(COT_SUFFIX, add_special_tokens=False)["input_ids"]
    assert len(plain) == len(cot) == 12 and plain != cot
    assert cot == plain[: 12 - len(suffix)] + suffix and short == tokenizer("short" + COT_SUFFIX)["input_ids"]
    assert prompt_token_ids(tokenizer, rows)[1] == tokenizer(base + COT_SUFFIX)["input_ids"]  # no cut: whole
    with pytest.raises(ValueError, match="max_tokens = 4 leaves no room .* raise it"):
        prompt_token_ids(tokenizer, rows, max_tokens=4)
