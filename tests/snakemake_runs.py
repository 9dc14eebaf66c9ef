"""Snakemake in a subprocess, as a user runs it, for the workflow tests: the runner, the jobs a dry
run's output plans, and config overlays on the reduced pipeline (tests/configs/tiny.yaml)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]


def snakemake(workdir, *args, command=SNAKEMAKE, cwd=None, env=None, check=True, timeout=900):
    """Run `command` (Snakemake on this workflow's Snakefile) with `workdir` as its directory; the
    completed process, stdout and stderr merged as ``output``. `check`: a failed run fails the test."""
    result = subprocess.run([*command, "--directory", str(workdir), *args], cwd=cwd, capture_output=True, text=True,
                            env={**os.environ, **(env or {})}, timeout=timeout)
    result.output = result.stdout + result.stderr
    if check and result.returncode != 0:
        pytest.fail(f"snakemake {' '.join(args)} failed (rc={result.returncode}):\n{result.output[-6000:]}")
    return result


def planned_jobs(output, prefix=""):
    """Rule -> count from a dry run's 'Job stats' table, `prefix` taken off the rule names."""
    table = output.split("Job stats:", 1)[1] if "Job stats:" in output else ""
    return {m[1].removeprefix(prefix): int(m[2])
            for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "total"}


def overlay(path, text):
    """A config overlay: --configfile TINY OVERLAY merges the two (--config would pass strings)."""
    path.write_text(text)
    return str(path)
