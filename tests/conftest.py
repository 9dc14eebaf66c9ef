"""Shared test setup. Tiny random models of every family: tests/tiny_families.py (``tiny_model(family)``
and the shared shapes); the reduced workflow config: tests/configs/tiny.yaml."""

import os

import matplotlib
import pytest

matplotlib.use("Agg")  # figures in tests never need a display


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
