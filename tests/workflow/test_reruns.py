"""Which jobs each config key re-runs, as Snakemake plans them on the finished reduced pipeline
(tests/configs/tiny.yaml): every key of the schema is changed alone, and the jobs a dry run plans
are recorded. The table in docs/reruns.md is this test's output (it fails when the workflow and the
table disagree; CROSSLAYER_WRITE_DOCS=1 rewrites the table), and no key outside EXPENSIVE_KEYS may
plan an expensive job again: a statistic, a summary or a figure setting re-runs only what reads it."""

import multiprocessing
import os

import pytest
import yaml
from plans import EXPENSIVE, planned
from snakemake_runs import ROOT, TINY

pytestmark = pytest.mark.workflow

DOC = ROOT / "docs" / "reruns.md"

#: Each key of config/schema.yaml and the value it is changed to (from tiny.yaml's or the default's).
CHANGES = {
    "duplicate_steps": "error",
    "corpus.source": "dataset",
    "corpus.dataset.path": "other/wikitext",
    "corpus.dataset.name": "other",
    "corpus.dataset.split": "validation",
    "corpus.dataset.revision": "abc123",
    "corpus.dataset.field": "page",
    "corpus.dataset.cache_dir": "elsewhere",
    "corpus.tokenizer": "EleutherAI/pythia-70m",
    "corpus.tokenizer_revision": "main",
    "corpus.vocab_size": 600,
    "corpus.max_chars": 150000,
    "train.lr": 0.002,
    "train.threads": 2,
    "hub.cache_dir": "elsewhere",
    "hub.attempts": 2,
    "hub.backoff_s": 1,
    "alignment.k": 2,
    "alignment.svd_method": "full",
    "alignment.gap_tol": 0.01,
    "alignment.device": "cuda",
    "alignment.threads": 2,
    "alignment.baseline_draws": 100,
    "alignment.seed": 1,
    "alignment.threshold": 0.4,
    "alignment.distances": [1, 2],
    "alignment.peak_min_sd": 2,
    "dynamics.activate": False,
    "dynamics.samples.source": "dataset",
    "dynamics.samples.dataset.path": "other/wikitext",
    "dynamics.samples.dataset.name": "other",
    "dynamics.samples.dataset.split": "validation",
    "dynamics.samples.dataset.revision": "abc123",
    "dynamics.samples.dataset.field": "page",
    "dynamics.samples.dataset.cache_dir": "elsewhere",
    "dynamics.n_samples": 36,
    "dynamics.min_tokens": 6,
    "dynamics.max_tokens": 20,
    "dynamics.k": 2,
    "dynamics.baseline_draws": 50,
    "dynamics.seed": 1,
    "dynamics.jacobian_method": "functional",
    "dynamics.rank": 16,
    "dynamics.regime_boundaries": [1, 3],
    "dynamics.schur.alphas": [0.0, 1.0],
    "dynamics.schur.draws": 2,
    "dynamics.schur.modes": ["J"],
    "dynamics.schur.device": "cuda",
    "dynamics.schur.workers": 2,
    "dynamics.chunk_mb": 17,
    "dynamics.per_sample_dtype": "float32",
    "dynamics.condition_number": False,
    "dynamics.folds": 2,
    "dynamics.device": "cuda",
    "dynamics.threads": 2,
    "topology.activate": False,
    "topology.k": 2,
    "topology.methods": ["signed_cpm", "modularity"],
    "topology.resolution_pos": 0.1,
    "topology.resolution_neg": 0.0,
    "topology.rb_resolution_pos": 0.5,
    "topology.rb_resolution_neg": 0.5,
    "topology.seeds": [0],
    "topology.random_partitions": 10,
    "topology.tail": 0.2,
    "topology.permutations": 100,
    "topology.rate_permutations": 100,
    "topology.fdr_q": 0.1,
    "topology.seed": 1,
    "coupling.activate": False,
    "coupling.prompts.file": None,
    "coupling.prompts.corpus_paragraphs": 3,
    "coupling.prompts.min_words": 10,
    "coupling.prompts.datasets": [{"label": "arc", "path": "allenai/ai2_arc", "name": "ARC-Challenge",
                                   "split": "test", "field": "question", "n": 2, "seed": 0}],
    "coupling.prompts.cot": False,
    "coupling.prompts.max_tokens": 20,
    "coupling.Ks": [3, 6],
    "coupling.metric": "released_l2",
    "coupling.depthwise_token": -2,
    "coupling.token_wise.layer_pairs": [[1, 2]],
    "coupling.token_wise.prompts": 1,
    "coupling.token_wise.tokens": 5,
    "coupling.window": 5,
    "coupling.regularity_source": "corpus",
    "coupling.example_prompt": "The capital of Italy is",
    "coupling.example_blocks": [1, 3],
    "coupling.pca_prompts": 1,
    "coupling.final_norm": False,
    "coupling.pca_fit": "all",
    "coupling.scores": "scores.csv",
    "coupling.fit_subsets": {"both": ["tiny-gelu", "tiny-swiglu"]},
    "coupling.hold_mb": 1,
    "coupling.chunk_mb": 5,
    "coupling.device": "cuda",
    "coupling.threads": 2,
    "continuity.activate": False,
    "continuity.projections": ["q", "k", "v", "o"],
    "continuity.erank_power": 1,
    "continuity.pca_components": 1,
    "continuity.baseline_draws": 20,
    "continuity.seed": 1,
    "continuity.device": "cuda",
    "continuity.threads": 2,
    "toy.activate": False,
    "toy.data.source": "torchvision",
    "toy.data.directory": "mnist",
    "toy.data.test_fraction": 0.2,
    "toy.data.seed": 1,
    "toy.seeds": [0],
    "toy.activation": "gelu",
    "toy.residual": False,
    "toy.layernorm": True,
    "toy.width": 8,
    "toy.depth": 3,
    "toy.init_scale": 0.5,
    "toy.lr": 0.002,
    "toy.beta1": 0.8,
    "toy.beta2": 0.99,
    "toy.eps": 1e-7,
    "toy.batch_size": 64,
    "toy.steps": 40,
    "toy.track": 1,
    "toy.ema_betas": [0.9],
    "toy.erank_power": 1,
    "toy.threads": 2,
    "toy.device": "cuda",
    "toy.drift_runs": ["res_relu"],
    "toy.ema_run": "nores_none",
    "toy.datasets.names": ["fashion_mnist"],
    "toy.datasets.runs": ["res_relu"],
    "toy.datasets.directory": "sets",
    "toy.runs": {"res_relu": {"activation": "gelu"}},  # merged into tiny.yaml's runs: this run changes
    "transformer_ablations.activate": False,
    "transformer_ablations.steps": 5,
    "transformer_ablations.checkpoints": [0],
    "transformer_ablations.train.lr": 0.002,
    "transformer_ablations.runs": {"res_silu": {"norm": False}},
    "across_papers.activate": False,
    "across_papers.measures": ["alignment", "continuity"],
    "across_papers.projections": ["q", "k"],
    "across_papers.Ks": [8],
    "across_papers.coupling_variant": "cot",
    "across_papers.community_method": "modularity",
    "across_papers.band_sd": 2.0,
    "across_papers.fdr_q": 0.1,
    "across_papers.baseline_draws": 20,
    "across_papers.permutations": 100,
    "across_papers.seed": 1,
    "embedding_noise.activate": True,
    "embedding_noise.levels": [0.5],
    "embedding_noise.draws": 2,
    "embedding_noise.seed": 1,
    "embedding_noise.device": "cuda",
    "embedding_noise.threads": 1,
    "evaluation.activate": False,
    "evaluation.heldout.source": "dataset",
    "evaluation.heldout.dataset.path": "other/wikitext",
    "evaluation.heldout.dataset.name": "other",
    "evaluation.heldout.dataset.split": "validation",
    "evaluation.heldout.dataset.revision": "abc123",
    "evaluation.heldout.dataset.field": "page",
    "evaluation.heldout.dataset.cache_dir": "elsewhere",
    "evaluation.heldout.context": 16,
    "evaluation.heldout.max_windows": 8,
    "evaluation.heldout.batch_size": 4,
    "evaluation.device": "cuda",
    "evaluation.threads": 1,
    "benchmarks.activate": True,
    "benchmarks.steps": "all",
    "benchmarks.tasks": [{"task": "arc_easy", "shots": 0, "metric": "acc,none"}],
    "benchmarks.limit": 10,
    "benchmarks.batch_size": 4,
    "benchmarks.include_path": "tasks",
    "benchmarks.builtin": False,
    "benchmarks.dtype": "bfloat16",
    "benchmarks.device": "cuda",
    "benchmarks.threads": 1,
    "claims.activate": False,
    "claims.confidence": 0.9,
    "claims.n_boot": 500,
    "claims.seed": 1,
    "plots.dpi": 70,
}

#: Keys that cannot change alone (the config would be refused), and the keys changed with them.
ALONG = {"dynamics.activate": {"topology.activate": False}, "toy.data.source": {"toy.data.directory": "mnist"},
         "toy.datasets.names": {"toy.datasets.runs": ["res_relu"], "toy.datasets.directory": "sets"}}

#: Keys not changed alone here, and why.
STRUCTURAL = {
    "models": "which models there are: an added model's or step's jobs run, no other model's re-run",
    "run_models": "which of the models run: as `models`",
}

#: Keys that change what an expensive job computes (so re-running it is right).
EXPENSIVE_KEYS = {
    "corpus.source", "corpus.tokenizer", "corpus.vocab_size", "corpus.max_chars",
    "train.lr", "alignment.k", "alignment.svd_method", "alignment.gap_tol",
    "dynamics.samples.source", "dynamics.n_samples", "dynamics.min_tokens", "dynamics.max_tokens",
    "dynamics.jacobian_method", "dynamics.rank", "dynamics.schur.alphas", "dynamics.schur.draws",
    "dynamics.schur.modes", "dynamics.seed", "dynamics.per_sample_dtype", "dynamics.condition_number",
    "dynamics.folds", "coupling.prompts.file", "coupling.prompts.corpus_paragraphs", "coupling.prompts.min_words",
    "coupling.prompts.datasets", "coupling.prompts.cot", "coupling.prompts.max_tokens", "coupling.Ks",
    "coupling.depthwise_token", "coupling.token_wise.layer_pairs", "coupling.token_wise.prompts",
    "coupling.token_wise.tokens", "coupling.example_prompt", "coupling.pca_prompts", "coupling.final_norm",
    "coupling.pca_fit", "continuity.projections",
    "toy.data.source", "toy.data.test_fraction", "toy.data.seed", "toy.residual", "toy.layernorm", "toy.width",
    "toy.depth", "toy.init_scale", "toy.lr", "toy.beta1", "toy.beta2", "toy.eps", "toy.batch_size", "toy.steps", "toy.track",
    "toy.ema_betas",
    "toy.erank_power",  # measured per epoch inside train_toy, which keeps no singular values (left as is)
    "toy.seeds",  # one job per run trains its seeds in turn: a changed list re-runs every run (issue 42)
    "toy.datasets.names",  # its runs on the other image sets
    "benchmarks.activate",  # scores every model's last checkpoint: new jobs, none re-run
    "toy.runs", "transformer_ablations.steps", "transformer_ablations.checkpoints", "transformer_ablations.train.lr",
    "transformer_ablations.runs",
}


def schema_keys():
    """Every leaf key of config/schema.yaml, dotted (an object without properties is one leaf)."""
    found = []

    def walk(node, path):
        if node.get("properties") and node.get("type") in ("object", None):
            for key, child in node["properties"].items():
                walk(child, [*path, key])
        else:
            found.append(".".join(path))

    walk(yaml.safe_load((ROOT / "config" / "schema.yaml").read_text()), [])
    return found


def overlay(key, value):
    """``{"a": {"b": value}}`` for ``a.b``, with the keys that must change along with it (ALONG)."""
    changes, out = [(key, value), *ALONG.get(key, {}).items()], {}
    for dotted, leaf in changes:
        *parents, last = dotted.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = leaf
    return out


def _flow(value):
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip()


def render(reruns):
    lines = [
        "# What each config key re-runs",
        "",
        "Generated by `tests/workflow/test_reruns.py` (`CROSSLAYER_WRITE_DOCS=1 python -m pytest tests/workflow/test_reruns.py`",
        "rewrites it; the test fails when the workflow and this page disagree). Each key of",
        "`config/schema.yaml` is changed alone on the finished reduced pipeline (`tests/configs/tiny.yaml`:",
        "two models of 4 checkpoints each) and the jobs Snakemake then plans are listed, per rule. **Bold**:",
        "the expensive rules (training, downloads, twins, SVDs and Jacobians of whole checkpoints), which",
        "only keys that change what they compute may re-run. Keys of a stage that is off, or of a source",
        "that is not selected, re-run nothing. Settings of speed (`threads`, `chunk_mb`, `hold_mb`, and",
        "the analyses' `device`, which like threads changes only float rounding) re-run nothing either.",
        "",
        "**The library's code** re-runs jobs as settings do: each rule's `library` parameter is the digest",
        "of the `crosslayer` modules its script imports, directly or not, and of their packages' data",
        "files (`workflow/crosslayer/code_digest.py`). After `git pull`, a changed module re-runs the jobs",
        "of every rule whose script imports it, and what reads their outputs; comments, docstrings and",
        "layout re-run nothing. Where you know a change leaves a finished run's results as they are,",
        "`snakemake --touch` (with your usual arguments) records the present code as theirs instead.",
        "",
        "| key | changed to | jobs planned again (rule: jobs) |",
        "|---|---|---|",
    ]
    for key, value in STRUCTURAL.items():
        lines.append(f"| `{key}` | — | {value} |")
    for key, jobs in reruns.items():
        shown = ", ".join(f"**{rule}**: {n}" if rule in EXPENSIVE else f"{rule}: {n}" for rule, n in sorted(jobs.items()))
        along = ", ".join(f"`{other}: {_flow(value)}`" for other, value in ALONG.get(key, {}).items())
        value = f"`{_flow(CHANGES[key])}`" + (f" (and {along})" if along else "")
        lines.append(f"| `{key}` | {value} | {shown or 'nothing'} |")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def reruns(tiny_run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("changes")
    (tiny_run / "scores.csv").write_text("model,score\ntiny-gelu,30\ntiny-swiglu,31\n")
    (tiny_run / "mnist").mkdir(exist_ok=True)
    assert planned(tiny_run, TINY) == {}  # the finished run plans nothing
    jobs = []
    for key, value in CHANGES.items():
        (folder / f"{key}.yaml").write_text(yaml.safe_dump(overlay(key, value)))
        jobs.append((tiny_run, TINY, folder / f"{key}.yaml"))
    # dry runs only read the run's files: two at a time, one per core; spawned, not forked (a fork
    # copies locks other threads hold), and closed, not terminated: the workers end on their own
    pool = multiprocessing.get_context("spawn").Pool(2)
    try:
        return dict(zip(CHANGES, pool.starmap(planned, jobs, chunksize=4)))
    finally:
        pool.close()
        pool.join()


def test_every_key_of_the_schema_is_changed_or_said_why_not():
    # a key whose block has no listed properties (`train`: a model's overrides) by one of its keys
    leaves = schema_keys()
    assert [key for key in leaves if key not in STRUCTURAL and not any(
        change == key or change.startswith(f"{key}.") for change in CHANGES)] == []
    assert [change for change in CHANGES if not any(
        change == key or change.startswith(f"{key}.") for key in leaves)] == []
    assert EXPENSIVE_KEYS <= set(CHANGES)


def test_only_keys_that_change_an_expensive_jobs_output_re_run_it(reruns):
    expensive = {key: sorted(set(jobs) & EXPENSIVE) for key, jobs in reruns.items()}
    assert {key: rules for key, rules in expensive.items() if rules and key not in EXPENSIVE_KEYS} == {}
    # and each key said to be expensive re-runs something expensive (else it belongs to the cheap ones)
    assert sorted(key for key in EXPENSIVE_KEYS if not expensive[key]) == []


def test_the_table_in_the_docs_is_what_the_workflow_plans(reruns):
    table = render(reruns)
    if os.environ.get("CROSSLAYER_WRITE_DOCS") == "1":
        DOC.write_text(table)
    assert DOC.read_text() == table, "docs/reruns.md is out of date: CROSSLAYER_WRITE_DOCS=1 python -m pytest tests/workflow/test_reruns.py"
