"""Shared test setup. Tiny random models of every family: tests/tiny_families.py (``tiny_model(family)``
and the shared shapes); the reduced workflow config: tests/configs/tiny.yaml."""

import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")  # figures in tests never need a display

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """The workflow run for real on tests/configs/tiny.yaml, once per session (minutes): the outputs
    test_workflow.py checks, and those test_module.py compares a run through a module with."""
    workdir = tmp_path_factory.mktemp("tiny_run")
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
         "--cores", "2", "--configfile", str(ROOT / "tests" / "configs" / "tiny.yaml")],
        capture_output=True, text=True, timeout=900,
    )
    if result.returncode != 0:
        pytest.fail(f"the tiny run failed (rc={result.returncode}):\n{(result.stdout + result.stderr)[-6000:]}")
    return workdir


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
