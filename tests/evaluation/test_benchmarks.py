"""Benchmark scores through lm-evaluation-harness, offline: a tiny model on a task defined from local
files, its accuracy against an independent computation of the same log-likelihood score."""

import json
import math

import numpy as np
import pytest
import torch

from crosslayer.data import corpus
from crosslayer.errors import CheckpointError
from crosslayer.evaluation.benchmarks import (
    LEADERBOARD_V1, SCORE_COLUMNS, BenchmarkSettings, evaluate_checkpoint, fetch_tasks,
)

pytest.importorskip("lm_eval", reason="the [eval] extra (make test installs it)")

WORDS = ["song", "mountain", "dog", "water", "air", "fire", "river", "park", "earth", "bird", "cat", "tree"]
TASK = """task: toy_words
dataset_path: json
dataset_kwargs:
  data_files:
    train: {train}
    test: {test}
output_type: multiple_choice
training_split: train
test_split: test
fewshot_split: train
doc_to_text: "Question: Which word is {{{{question}}}}?\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
metric_list:
  - metric: acc
  - metric: acc_norm
metadata:
  version: 1.0
"""


def documents(n, seed):
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n):
        choices = [str(w) for w in rng.choice(WORDS, 4, replace=False)]
        label = int(rng.integers(4))
        docs.append({"question": choices[label], "choices": choices, "label": label})
    return docs


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random Llama with a byte-level BPE trained on the offline corpus, saved like a
    checkpoint, and a local multiple-choice task folder."""
    import transformers as T

    root = tmp_path_factory.mktemp("bench")
    corpus.extract_wikipedia_text(root / "wiki.txt", max_chars=100_000)
    tokenizer_dir = corpus.train_tokenizer(root / "wiki.txt", root / "model", vocab_size=400)
    tokenizer = T.AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = T.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=len(tokenizer), max_position_embeddings=256)
    T.LlamaForCausalLM(config).save_pretrained(root / "model")
    tasks = root / "tasks"
    tasks.mkdir()
    for split, n, seed in (("train", 8, 1), ("test", 30, 2)):
        (tasks / f"{split}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents(n, seed)))
    (tasks / "toy_words.yaml").write_text(TASK.format(train=tasks / "train.jsonl", test=tasks / "test.jsonl"))
    manifest = {"path": str(root / "model"), "model": "m", "revision": "step7", "step": 7}
    return manifest, tasks


def independent_scores(path, docs):
    """acc and acc_norm of 0-shot multiple choice, by hand: each choice's summed log-probability as
    the continuation " choice" of "Question: ...\\nAnswer:" (its tokens: those of context + choice
    beyond the context's), the largest wins; acc_norm divides by the choice's characters."""
    import transformers as T

    model = T.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tokenizer = T.AutoTokenizer.from_pretrained(path)
    right, right_norm = [], []
    for doc in docs:
        context = f"Question: Which word is {doc['question']}?\nAnswer:"
        n_context = len(tokenizer(context, add_special_tokens=False)["input_ids"])
        scores = []
        for choice in doc["choices"]:
            ids = tokenizer(context + " " + choice, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
            scores.append(sum(float(logp[i - 1, ids[i]]) for i in range(n_context, len(ids))))
        right.append(int(np.argmax(scores)) == doc["label"])
        right_norm.append(int(np.argmax([s / len(c) for s, c in zip(scores, doc["choices"])])) == doc["label"])
    return np.array(right, float), np.array(right_norm, float)


def test_harness_accuracy_equals_an_independent_log_likelihood_score(checkpoint):
    manifest, tasks = checkpoint
    tasks_spec = [{"task": "toy_words", "shots": 0, "metric": "acc,none"}]
    settings = BenchmarkSettings(tasks=tasks_spec, limit=20, batch_size=4, include_path=str(tasks), builtin=False)
    table = evaluate_checkpoint(manifest, settings)
    assert list(table.columns) == list(SCORE_COLUMNS) and list(table.task) == ["toy_words", "average"]
    docs = [json.loads(line) for line in (tasks / "test.jsonl").read_text().splitlines()][:20]  # limit: the first 20
    acc, acc_norm = independent_scores(manifest["path"], docs)
    row = table.iloc[0]
    assert (row.value, row.n, row.shots, row.limit) == (pytest.approx(acc.mean()), 20, 0, 20)
    assert row.stderr == pytest.approx(acc.std(ddof=1) / math.sqrt(len(acc)))
    norm = evaluate_checkpoint(manifest, BenchmarkSettings(
        tasks=[{**tasks_spec[0], "metric": "acc_norm,none"}], limit=20, include_path=str(tasks), builtin=False))
    assert norm.value.iloc[0] == pytest.approx(acc_norm.mean())
    assert 0 < acc.mean() < 1 and acc.tolist() != acc_norm.tolist()  # the two rules differ on this model


def test_few_shot_groups_and_the_average(checkpoint):
    manifest, tasks = checkpoint
    spec = [{"task": "toy_words", "shots": 2, "metric": "acc,none"}]
    settings = BenchmarkSettings(tasks=spec, limit=10, include_path=str(tasks), builtin=False)
    table = evaluate_checkpoint(manifest, settings)
    assert table.shots.iloc[0] == 2 and table.n.iloc[0] == 10
    assert table.value.iloc[1] == table.value.iloc[0] and table.task.iloc[1] == "average"
    assert table.equals(evaluate_checkpoint(manifest, settings))  # the harness's fixed seeds: same scores
    half = evaluate_checkpoint(manifest, BenchmarkSettings(tasks=spec, limit=10, include_path=str(tasks),
                                                           builtin=False, dtype="bfloat16"))
    assert half.n.iloc[0] == 10 and 0 <= half.value.iloc[0] <= 1
    with pytest.raises(CheckpointError, match="model 'm' revision 'step7'.*reports no 'f1,none'.*acc,none"):
        evaluate_checkpoint(manifest, BenchmarkSettings(tasks=[{**spec[0], "metric": "f1,none"}], limit=2,
                                                        include_path=str(tasks), builtin=False))


def test_fetching_builds_every_task_and_counts_its_items(checkpoint):
    _, tasks = checkpoint
    spec = [{"task": "toy_words", "shots": 0, "metric": "acc,none"}]
    records = fetch_tasks(BenchmarkSettings(tasks=spec, include_path=str(tasks), builtin=False))
    assert records == [{"task": "toy_words", "dataset_path": "json", "dataset_name": None, "n_docs": 30}]


def test_settings_refusals_name_the_key():
    assert [t["task"] for t in BenchmarkSettings().tasks] == [t["task"] for t in LEADERBOARD_V1]
    for kwargs, match in (({"tasks": ()}, "tasks is empty"),
                          ({"tasks": [{"task": "a", "shots": 0}]}, r"tasks\[0\] must have"),
                          ({"tasks": [{"task": "a", "shots": -1, "metric": "acc,none"}]}, r"tasks\[0\].shots"),
                          ({"tasks": [{"task": "a", "shots": 0, "metric": "m"}] * 2}, "twice"),
                          ({"limit": 0}, "benchmarks.limit"),
                          ({"dtype": "float16"}, "benchmarks.dtype"),
                          ({"builtin": False}, "include_path is not set")):
        with pytest.raises(ValueError, match=match):
            BenchmarkSettings(**kwargs)
