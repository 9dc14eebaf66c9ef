"""The score tables and how scores reach paper 002's fits: one source per model, never mixed."""

import pandas as pd
import pytest

from crosslayer.evaluation.tables import merge_scores, model_score, scores_table

TASKS = ["arc", "gsm"]


def score_file(path, values):
    rows = [{"task": t, "metric": "acc,none", "shots": 0, "value": v, "stderr": 0.01, "n": 10, "limit": None}
            for t, v in values.items()]
    pd.DataFrame(rows).to_csv(path, sep="\t", index=False)
    return path


def test_the_summary_stacks_the_scored_steps(tmp_path):
    table = scores_table({10: score_file(tmp_path / "b.tsv", {"arc": 0.3, "gsm": 0.1, "average": 0.2}),
                          2: score_file(tmp_path / "a.tsv", {"arc": 0.2, "gsm": 0.0, "average": 0.1})})
    assert list(table.columns)[:2] == ["step", "task"] and list(table.step) == [2, 2, 2, 10, 10, 10]
    assert model_score(table, model="m", step=10, tasks=TASKS) == 0.2


def test_a_score_of_another_step_or_of_other_tasks_is_refused_by_name(tmp_path):
    table = scores_table({5: score_file(tmp_path / "a.tsv", {"arc": 0.3, "average": 0.3})})
    with pytest.raises(ValueError, match="benchmark scores of m: none at step 9.*scored: \\[5\\]"):
        model_score(table, model="m", step=9, tasks=TASKS)
    with pytest.raises(ValueError, match="m at step 5 are for tasks \\['arc'\\], not the configured \\['arc', 'gsm'\\]"):
        model_score(table, model="m", step=5, tasks=TASKS)


def test_the_users_scores_win_and_the_benchmarks_fill_in(tmp_path):
    table = scores_table({5: score_file(tmp_path / "a.tsv", {"arc": 0.3, "gsm": 0.1, "average": 0.2})})
    scores, sources = merge_scores(["a", "b"], given={"a": 61.0}, benchmarks={"a": table, "b": table},
                                   last_steps={"a": 5, "b": 5}, tasks=TASKS)
    assert scores == {"a": 61.0, "b": 0.2} and sources == {"a": "coupling.scores", "b": "lm-eval"}
    assert merge_scores(["a"], given={}, benchmarks={}, last_steps={"a": 5}, tasks=TASKS) == ({}, {})
    with pytest.raises(ValueError, match="no score for \\['b'\\]"):
        merge_scores(["a", "b"], given={"a": 61.0}, benchmarks={}, last_steps={"a": 5, "b": 5}, tasks=TASKS)
