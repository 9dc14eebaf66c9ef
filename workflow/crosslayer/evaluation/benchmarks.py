"""Benchmark scores of a checkpoint with EleutherAI's lm-evaluation-harness, the harness the Open LLM
Leaderboard (v1) ran: paper 002's performance axis.

:func:`evaluate_checkpoint` loads the checkpoint a verified manifest describes (our loader: float32,
the files the manifest registered) and hands the live model and its tokenizer to the harness's
``HFLM``; each group of tasks with the same number of few-shot examples is one
``lm_eval.simple_evaluate`` call (the harness takes one shot count per call). The harness's own
seeds are kept (few-shot examples drawn with its fixed seed), so a run is reproducible, and
``limit`` takes each task's first items. The table has one row per task (its reported metric, the
harness's standard error, the items scored) and an ``average`` row: the unweighted mean of the
tasks' values, as the leaderboard averaged its six.
"""

import logging
import math
import os
import warnings
from dataclasses import dataclass

import pandas as pd
import torch

from crosslayer.config import EVAL_EXTRA
from crosslayer.errors import naming_checkpoint
from crosslayer.models.loading import load_model
from crosslayer.settings import require_int

__all__ = ["LEADERBOARD_V1", "DTYPES", "BenchmarkSettings", "fetch_tasks", "score_model", "evaluate_checkpoint",
           "SCORE_COLUMNS"]

#: The Open LLM Leaderboard v1 tasks as the harness names them, their shots and reported metric.
LEADERBOARD_V1 = (
    {"task": "arc_challenge", "shots": 25, "metric": "acc_norm,none"},
    {"task": "hellaswag", "shots": 10, "metric": "acc_norm,none"},
    {"task": "mmlu", "shots": 5, "metric": "acc,none"},
    {"task": "truthfulqa_mc2", "shots": 0, "metric": "acc,none"},  # the harness reports mc2 as acc
    {"task": "winogrande", "shots": 5, "metric": "acc,none"},
    {"task": "gsm8k", "shots": 5, "metric": "exact_match,strict-match"},
)

#: The precisions the model may be scored in: our loader's float32, or bfloat16 as the leaderboard ran
#: most models (about 10x faster on a GPU; scores differ slightly).
DTYPES = ("float32", "bfloat16")

#: The columns of a checkpoint's score table.
SCORE_COLUMNS = ("task", "metric", "shots", "value", "stderr", "n", "limit")


@dataclass(frozen=True)
class BenchmarkSettings:
    """What a checkpoint's scores depend on (``benchmarks``).

    ``tasks`` are mappings ``{task, shots, metric}`` (metric as the harness keys it,
    ``"<metric>,<filter>"``); ``include_path`` a folder of task YAML files added to the harness's
    own (or, with ``builtin`` false, used alone: no 6-second index of its 14,000 tasks).
    """

    tasks: tuple = LEADERBOARD_V1
    limit: int | None = None
    batch_size: int = 8
    include_path: str | None = None
    builtin: bool = True
    dtype: str = "float32"

    def __post_init__(self):
        tasks = tuple(dict(t) for t in self.tasks)
        if not tasks:
            raise ValueError("benchmarks.tasks is empty: name at least one task")
        for i, task in enumerate(tasks):
            if set(task) != {"task", "shots", "metric"} or not isinstance(task["task"], str):
                raise ValueError(f"benchmarks.tasks[{i}] must have exactly task, shots and metric, got {task}")
            require_int(f"benchmarks.tasks[{i}].shots", task["shots"], minimum=0)
        names = [t["task"] for t in tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"benchmarks.tasks names a task twice: {names}")
        if "average" in names:
            raise ValueError("benchmarks.tasks: 'average' is the name of the mean row; rename the task")
        if self.limit is not None:
            require_int("benchmarks.limit", self.limit, minimum=1)
        require_int("benchmarks.batch_size", self.batch_size, minimum=1)
        if self.dtype not in DTYPES:
            raise ValueError(f"benchmarks.dtype must be one of {list(DTYPES)}, got {self.dtype!r}")
        if not self.builtin and not self.include_path:
            raise ValueError("benchmarks.builtin is false but include_path is not set: no task can be found")
        object.__setattr__(self, "tasks", tasks)


def _harness():
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise ImportError(f"benchmarks needs EleutherAI's lm-evaluation-harness (lm-eval): {EVAL_EXTRA}") from None
    return lm_eval, HFLM, TaskManager


def fetch_tasks(settings: BenchmarkSettings):
    """Build every configured task once, where the hub is reachable: the harness downloads each
    task's dataset into the Hugging Face cache, so that the scoring jobs on nodes without internet
    find it there. Returns one record per task the harness builds (a group such as ``mmlu`` gives
    its subtasks): ``task``, ``dataset_path``, ``dataset_name``, ``n_docs`` (items it would score)."""
    _, _, TaskManager = _harness()
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    manager = TaskManager(include_path=settings.include_path, include_defaults=settings.builtin)
    records = []
    for task in _leaf_tasks(manager, [t["task"] for t in settings.tasks]):
        config = task.config
        docs = task.test_docs() if task.has_test_docs() else task.validation_docs()
        records.append({"task": config.task, "dataset_path": config.dataset_path, "dataset_name": config.dataset_name,
                        "n_docs": len(docs) if docs is not None else None})
    return records


def _leaf_tasks(manager, names):
    """The tasks the harness builds for `names`, groups expanded (``get_task_dict``: its one entry
    point in every version from 0.4.10; 0.4.13 deprecates it for ``TaskManager.load``)."""
    from lm_eval.tasks import get_task_dict

    def leaves(tree):
        for value in tree.values():
            if isinstance(value, dict):
                yield from leaves(value)
            elif value is not None:
                yield value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return list(leaves(get_task_dict(names, manager)))


def score_model(model, tokenizer, settings: BenchmarkSettings):
    """The score table (:data:`SCORE_COLUMNS`) of a loaded causal LM on the settings' tasks.

    Raises
    ------
    ValueError
        A task's results lack its metric (the message lists the metrics it has).
    """
    lm_eval, HFLM, TaskManager = _harness()
    logging.getLogger("lm_eval").setLevel(logging.ERROR)  # "overwriting num_fewshot" and the like per call
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=settings.batch_size)
    manager = TaskManager(include_path=settings.include_path, include_defaults=settings.builtin)
    rows = []
    for shots in sorted({t["shots"] for t in settings.tasks}):
        group = [t for t in settings.tasks if t["shots"] == shots]
        out = lm_eval.simple_evaluate(model=lm, tasks=[t["task"] for t in group], num_fewshot=shots,
                                      limit=settings.limit, task_manager=manager, log_samples=False)
        for task in group:
            result = out["results"].get(task["task"], {})
            metric, _, where = task["metric"].partition(",")
            if task["metric"] not in result:
                have = sorted(k for k in result if "," in k and "_stderr" not in k)
                raise ValueError(f"lm-eval task {task['task']!r} reports no {task['metric']!r}: it has {have} "
                                 "(set benchmarks.tasks' metric)")
            stderr = result.get(f"{metric}_stderr,{where}", math.nan)
            n = out["n-samples"][task["task"]]["effective"] if task["task"] in out.get("n-samples", {}) else math.nan
            rows.append({"task": task["task"], "metric": task["metric"], "shots": shots,
                         "value": float(result[task["metric"]]),
                         "stderr": float(stderr) if isinstance(stderr, (int, float)) else math.nan,
                         "n": n, "limit": settings.limit})
    table = pd.DataFrame(rows, columns=SCORE_COLUMNS).set_index("task").loc[[t["task"] for t in settings.tasks]]
    table = table.reset_index()
    k = len(table)
    average = {"task": "average", "metric": "mean of the tasks", "shots": math.nan, "value": table.value.mean(),
               "stderr": math.sqrt((table.stderr**2).sum()) / k, "n": table.n.sum(), "limit": settings.limit}
    return pd.concat([table, pd.DataFrame([average])], ignore_index=True)[list(SCORE_COLUMNS)]


def evaluate_checkpoint(manifest, settings: BenchmarkSettings, *, device="cpu"):
    """:func:`score_model` of the checkpoint a verified manifest describes."""
    with naming_checkpoint(manifest):
        model, tokenizer = load_model(manifest, device=device)
        if tokenizer is None:
            raise ValueError("the checkpoint has no tokenizer for the benchmark prompts")
        return score_model(model.to(getattr(torch, settings.dtype)), tokenizer, settings)
