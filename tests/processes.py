"""Processes of the SLURM test cluster (tests/slurm_cluster.py): is a pid alive, what does it run,
and stopping a daemon or a job's leftovers without touching an unrelated process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie counts as gone
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _read_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _kill_pidfile(pidfile: Path, name: str, timeout: float = 10.0) -> None:
    """SIGTERM the daemon named in pidfile, SIGKILL it after timeout seconds.

    Only kills when the process's command line names the expected daemon, so a
    stale pid file can never take down an unrelated process that reused the pid.
    """
    pid = _read_pid(pidfile)
    if pid is None or not _pid_alive(pid) or name not in _cmdline(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.1)


def _kill_job_leftovers() -> None:
    """SIGKILL processes that job steps started and that outlived their job.

    With ``ProctrackType=proctrack/linuxproc`` SLURM tracks a job's processes through their
    parents, and a cancelled job's ``snakemake --mode remote`` (waiting for files, in its own
    process group) was seen to survive ``scancel`` and the daemons. Such processes carry
    ``SLURM_JOB_ID`` in their environment.
    """
    me = os.getpid()
    # never the job these tests may themselves run inside (pytest under sbatch)
    own = os.environ.get("SLURM_JOB_ID")
    own = f"SLURM_JOB_ID={own}\0".encode() if own else None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
            if b"SLURM_JOB_ID=" in environ and (own is None or own not in environ):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):  # gone already, or not ours to read
            pass
