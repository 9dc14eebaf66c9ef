"""Shared test setup. Tests sit beside what they test: tests/<subpackage>/test_<module>.py for
workflow/crosslayer/<subpackage>/<module>.py, tests/bench/ for bench/, and tests/workflow/ for what
runs Snakemake or SLURM or checks the documents and envs. Helper modules at this level (importable
from every test through pytest's pythonpath): tiny random models of every family,
tests/tiny_families.py (``tiny_model(family)`` and the shared shapes); Snakemake in a subprocess,
tests/snakemake_runs.py; the reduced workflow config: tests/configs/tiny.yaml; the units of work
on pytest-xdist workers (make test runs one per core), tests/workers.py."""

import gc
import os
import shutil
import warnings

import matplotlib
import pytest
import torch
import transformers
from workers import FIRST, work_unit

matplotlib.use("Agg")  # figures in tests never need a display
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

# Tiny models gain nothing from threads on a shared machine; tiny vocabularies make transformers
# warn about token ids on every config.
torch.set_num_threads(1)
transformers.logging.set_verbosity_error()


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """The workflow run for real on tests/configs/tiny.yaml, once per session (minutes): the outputs
    tests/workflow/test_workflow.py checks, and those the other workflow tests start from. Under
    pytest-xdist, once for all workers: the first to ask makes it, the others wait for it."""
    from filelock import FileLock
    from snakemake_runs import TINY, snakemake

    if "PYTEST_XDIST_WORKER" not in os.environ:
        workdir = tmp_path_factory.mktemp("tiny_run")
        snakemake(workdir, "--cores", "2", "--configfile", str(TINY))
        return workdir
    shared = tmp_path_factory.getbasetemp().parent  # this session's, above each worker's own
    workdir, done = shared / "tiny_run", shared / "tiny_run.done"
    with FileLock(shared / "tiny_run.lock"):
        if not done.exists():  # a worker whose run failed left no mark: the next one tries again
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir()
            snakemake(workdir, "--cores", "2", "--configfile", str(TINY))
            done.touch()
    return workdir


def pytest_xdist_make_scheduler(config, log):
    """Units of work as :func:`work_unit` says (pytest-xdist's own ``--dist loadgroup`` groups
    nothing under pytest 9: pytest-dev/pytest-xdist#1386)."""
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return work_unit(nodeid)

    return Units(config, log)


def pytest_collection_modifyitems(config, items):
    """On a pytest-xdist worker, the FIRST units first (the controller keeps the order with
    --no-loadscope-reorder); elsewhere the order is the files'."""
    if hasattr(config, "workerinput"):
        rank = {unit: i for i, unit in enumerate(FIRST)}
        items.sort(key=lambda item: (rank.get(work_unit(item.nodeid), len(rank)),
                                     item.get_closest_marker("workflow") is None))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A real single-node SLURM cluster for one test module (tests/slurm_cluster.py). Skipped
    with the reason where none can run; under CI=true that is a failure instead."""
    from slurm_cluster import SlurmCluster, cluster_unavailable_reason

    reason = cluster_unavailable_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the SLURM tests: {reason}")
        pytest.skip(reason)
    with SlurmCluster(tmp_path_factory.mktemp("slurm")).start() as running:
        yield running


@pytest.fixture
def ax():
    """The axes of a new figure, closed after the test."""
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


@pytest.fixture
def strict():
    """Warnings are errors while the test runs (a singular axis makes matplotlib warn).

    Earlier tests' garbage is collected first: a finalizer's warning (an unclosed temporary
    folder) would otherwise be raised in this test, whichever test left it."""
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.fixture
def fig(strict):
    """A new figure in constrained layout, drawn with warnings as errors, closed after the test."""
    fig = plt.figure(layout="constrained")
    yield fig
    plt.close(fig)


@pytest.fixture
def offline(monkeypatch):
    """The Hugging Face hub switched off, as HF_HUB_OFFLINE=1 does for a new process."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads HF_HUB_OFFLINE once, when huggingface_hub.constants is imported,
    # and is_offline_mode() (checked before every HTTP request) returns that constant, so
    # setting the variable now is not enough: patch the constant too.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
