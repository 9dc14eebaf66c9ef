"""Idle math-library threads sleep instead of spinning in every rule script's process (issue 49):
`_setup.start` sets PASSIVE_THREADS before numpy, scipy or torch load their thread pools, and
torch's own OpenMP runtime reads them."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))
from _setup import PASSIVE_THREADS  # noqa: E402

sys.path.remove(str(SCRIPTS))

# as a job starts: _setup first, then the libraries; the script prints what its process sees
JOB = textwrap.dedent("""
    import json, os, sys, types
    before = sorted({{"numpy", "scipy", "torch"}} & set(sys.modules))
    sys.path.insert(0, {scripts!r})
    from _setup import start
    start(types.SimpleNamespace(log=[{log!r}], scriptdir={scripts!r}, rule="probe", threads=2))
    import torch
    torch.set_num_threads(2)
    torch.ones(512, 512) @ torch.ones(512, 512)
    print(json.dumps({{"before": before, "env": {{k: os.environ.get(k) for k in {names!r}}},
                      "parallel_info": torch.__config__.parallel_info()}}))
""")


def job_env(**values):
    """The test runner's environment without any PASSIVE_THREADS value, plus `values`; libgomp
    prints its effective settings to stderr (fd 2) when it loads, with torch."""
    env = {k: v for k, v in os.environ.items() if k not in PASSIVE_THREADS}
    return {**env, "OMP_NUM_THREADS": "2", "OMP_DISPLAY_ENV": "VERBOSE", **values}


def run_job(tmp_path, **values):
    code = JOB.format(scripts=str(SCRIPTS), log=str(tmp_path / "job.log"), names=list(PASSIVE_THREADS))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=job_env(**values),
                            timeout=300, check=True)
    return json.loads(result.stdout.splitlines()[-1]), result.stderr


def gomp_settings(stderr):
    """{'OMP_WAIT_POLICY': 'PASSIVE', 'GOMP_SPINCOUNT': '0', ...} as libgomp displays them."""
    block = stderr.split("OPENMP DISPLAY ENVIRONMENT BEGIN", 1)[1].split("OPENMP DISPLAY ENVIRONMENT END", 1)[0]
    return dict(line.strip().replace("'", "").split(" = ", 1) for line in block.splitlines() if " = " in line)


def test_torch_threads_wait_passively_in_a_job(tmp_path):
    seen, stderr = run_job(tmp_path)
    assert seen["before"] == []
    assert seen["env"] == PASSIVE_THREADS
    if "OPENMP DISPLAY ENVIRONMENT" not in stderr:  # another OpenMP runtime: the environment must do
        pytest.skip("torch's OpenMP runtime is not libgomp")
    settings = gomp_settings(stderr)  # what torch's OpenMP runtime took: no spinning before sleeping
    assert (settings["OMP_WAIT_POLICY"], settings["GOMP_SPINCOUNT"]) == ("PASSIVE", "0")
    assert "OpenMP" in seen["parallel_info"] and "omp_get_max_threads() : 2" in seen["parallel_info"]


def test_a_users_own_values_win(tmp_path):
    seen, stderr = run_job(tmp_path, OMP_WAIT_POLICY="ACTIVE", GOMP_SPINCOUNT="1000", OPENBLAS_THREAD_TIMEOUT="20")
    assert seen["env"] == {**PASSIVE_THREADS, "OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "1000",
                           "OPENBLAS_THREAD_TIMEOUT": "20"}
    if "OPENMP DISPLAY ENVIRONMENT" in stderr:
        assert gomp_settings(stderr)["GOMP_SPINCOUNT"] == "1000"


PROBE = textwrap.dedent("""
    import json, os, sys
    before = sorted({{"numpy", "scipy", "torch", "pandas"}} & set(sys.modules))
    sys.path.insert(0, {scripts!r})
    from _setup import start
    start(snakemake)
    display = os.open(snakemake.output.display, os.O_WRONLY | os.O_CREAT)
    os.dup2(display, 2)  # libgomp writes its settings to fd 2 as torch loads it
    import torch
    torch.ones(256, 256) @ torch.ones(256, 256)
    with open(snakemake.output.seen, "w") as f:
        json.dump({{"before": before, "env": {{k: os.environ.get(k) for k in {names!r}}}}}, f)
""")


@pytest.mark.workflow
def test_snakemake_script_preamble_loads_no_math_library(tmp_path):
    """The premise of setting the variables in start(): Snakemake's preamble (unpickling the
    snakemake object) has imported none of numpy, scipy, torch, pandas when a script's first line runs."""
    (tmp_path / "probe.py").write_text(PROBE.format(scripts=str(SCRIPTS), names=list(PASSIVE_THREADS)))
    (tmp_path / "Snakefile").write_text(textwrap.dedent("""
        rule probe:
            output: seen="seen.json", display="display.txt"
            log: "probe.log"
            threads: 2
            script: "probe.py"
    """))
    env = {k: v for k, v in os.environ.items() if k not in PASSIVE_THREADS}
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--directory", str(tmp_path), "--snakefile",
                    str(tmp_path / "Snakefile")], env={**env, "OMP_DISPLAY_ENV": "VERBOSE"}, capture_output=True,
                   timeout=300, check=True)
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"before": [], "env": PASSIVE_THREADS}
    display = (tmp_path / "display.txt").read_text()
    if "OPENMP DISPLAY ENVIRONMENT" in display:
        assert "GOMP_SPINCOUNT = '0'" in display
