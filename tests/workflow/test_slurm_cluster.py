"""Tests of the single-node SLURM test cluster harness (tests/slurm_cluster.py).

Skipped with the reason when no cluster can run here (not root, not Linux, no
packages and no way to install them); under CI=true that is a failure instead.
"""

import time

import pytest
from slurm_cluster import _pid_alive

pytestmark = pytest.mark.workflow  # starts SLURM's daemons: the slower tier


def _wait_job_done(cluster, jobid, timeout=30):
    """Wait until squeue reports the job finished; return its final state."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        proc = cluster.run("squeue", "-h", "-j", jobid, "-t", "all", "-o", "%T")
        state = proc.stdout.strip()
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
            return state
        time.sleep(0.3)
    raise AssertionError(f"job {jobid} not finished after {timeout}s (state {state!r})")


def _sbatch(cluster, tmp_path, *args):
    proc = cluster.run("sbatch", "--parsable", f"--chdir={tmp_path}", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split(";")[0]


def test_node_idle_with_gpu(cluster):
    proc = cluster.run("sinfo", "-h", "-N", "-o", "%N|%t|%G|%P")
    assert proc.returncode == 0, proc.stderr
    node, state, gres, partition = proc.stdout.strip().split("|")
    assert node == cluster.hostname
    assert state == "idle"
    assert gres.startswith("gpu:1"), gres
    assert partition.rstrip("*") == cluster.partition


def test_sbatch_wrap_runs(cluster, tmp_path):
    out = tmp_path / "hostname.out"
    jobid = _sbatch(cluster, tmp_path, f"--output={out}", "--wrap", "hostname")
    assert _wait_job_done(cluster, jobid) == "COMPLETED"
    deadline = time.monotonic() + 10
    while not (out.exists() and out.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.read_text().strip() == cluster.hostname


def test_gpu_job_runs(cluster, tmp_path):
    out = tmp_path / "gpu.out"
    jobid = _sbatch(
        cluster, tmp_path, "--gpus=1", f"--output={out}",
        "--wrap", "echo gpus=$SLURM_GPUS_ON_NODE cuda=$CUDA_VISIBLE_DEVICES",
    )
    assert _wait_job_done(cluster, jobid) == "COMPLETED"
    detail = cluster.run("scontrol", "show", "job", jobid).stdout
    assert "gpu:1" in detail, detail
    assert "cuda=0" in out.read_text()


def test_scancel_long_job(cluster, tmp_path):
    jobid = _sbatch(cluster, tmp_path, "--output=/dev/null", "--wrap", "sleep 300")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        state = cluster.run("squeue", "-h", "-j", jobid, "-o", "%T").stdout.strip()
        if state == "RUNNING":
            break
        time.sleep(0.2)
    assert state == "RUNNING"
    assert cluster.run("scancel", jobid).returncode == 0
    assert _wait_job_done(cluster, jobid) == "CANCELLED"


def test_stop_kills_daemons(cluster):
    # Must stay the last test in this file: it stops the module's cluster
    # (stop() is idempotent, so the fixture's own stop() afterwards is a no-op).
    pids = cluster.pids()
    assert {"slurmctld", "slurmd"} <= pids.keys()
    assert all(pid is not None and _pid_alive(pid) for pid in pids.values()), pids
    t0 = time.monotonic()
    cluster.stop()
    assert time.monotonic() - t0 < 30
    alive = {name: pid for name, pid in pids.items() if _pid_alive(pid)}
    assert not alive, f"daemons still alive after stop(): {alive}"
    cluster.stop()  # idempotent
