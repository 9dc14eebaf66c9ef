"""No process outlives its job: the Schur-form workers that ``dynamics.schur.workers`` spawns end
with the job's process however it ends (``kill -9``, the OOM killer, a node's ``scancel``), found
by PID in a real Snakemake run of a copy of the finished reduced pipeline."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from processes import _cmdline, _pid_alive
from snakemake_runs import SNAKEMAKE, TINY, overlay

TABLE = "results/dynamics/tiny-gelu/step8.schur.tsv"


def _parent(pid):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _descendants(pid):
    """Every live process below `pid`, from /proc."""
    parents = {int(p.name): _parent(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()}
    found, todo = [], [pid]
    while todo:
        above = todo.pop()
        kids = [child for child, parent in parents.items() if parent == above]
        found += kids
        todo += kids
    return found


@pytest.mark.parametrize("victim, sig", [("job", signal.SIGKILL), ("job", signal.SIGTERM),
                                         ("snakemake", signal.SIGKILL)])
def test_no_schur_worker_outlives_its_job(tiny_run, tmp_path, victim, sig):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, symlinks=True)
    # many control draws keep the job's sweep busy while its two workers wait for the next forms
    config = overlay(tmp_path / "workers.yaml", "dynamics: {schur: {workers: 2, draws: 3000}}\n")
    command = [*SNAKEMAKE, "--directory", str(run), "--force", TABLE, "--cores", "2", "--configfile", str(TINY), config]
    snakemake = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        workers, deadline = [], time.monotonic() + 300
        while len(workers) < 2 and time.monotonic() < deadline and snakemake.poll() is None:
            workers = [p for p in _descendants(snakemake.pid) if "spawn_main" in _cmdline(p)]
            time.sleep(0.2)
        assert len(workers) == 2, "the schur_surgery job never started its two Schur-form workers"
        job = _parent(workers[0])
        left = [job, *_descendants(job)]  # the job, its workers and multiprocessing's resource tracker
        assert set(workers) <= set(left) and any("resource_tracker" in _cmdline(p) for p in left)
        os.kill(job if victim == "job" else snakemake.pid, sig)
        deadline = time.monotonic() + 20
        while any(map(_pid_alive, left)) and time.monotonic() < deadline:
            time.sleep(0.2)
        alive = {p: _cmdline(p) for p in left if _pid_alive(p)}
        assert alive == {}, f"left after the {victim} got {sig.name}: {alive}"
    finally:
        try:
            os.killpg(snakemake.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        snakemake.wait()
