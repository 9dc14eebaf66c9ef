"""The lowest transformers pyproject.toml admits, beside the newest one the suite itself runs on
(a fresh install resolves the newest 5.x the registry serves): the model-facing tests run again
in a subprocess with that release first on the path. transformers renames arguments between
releases (the key/value cache's `past_key_values` became `cache` in 5.2x) and adds config helpers
(Gemma 4's `kv_sharing_modes` in 5.23); the code must hold under both."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# block-call recording (the cache argument), strict loading and the registration check, Gemma 4's
# KV sharing, the generic path, and training with the paper-003 ablations
MODEL_FACING = ["jacobians/test_multi_token.py", "models/test_blocks.py",
                "bench/test_jacobians.py::test_bench_coupling_prints_a_row_per_layer_and_length",
                "models/test_loading.py", "models/adapters/test_gemma4.py", "models/adapters/test_generic.py",
                "bench/test_weights.py", "models/test_train.py"]


def lowest_transformers():
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'"transformers>=([\d.]+),<\d+"', text)[1]


@pytest.fixture(scope="module")
def lowest(tmp_path_factory):
    version = lowest_transformers()
    target = tmp_path_factory.mktemp(f"transformers-{version}")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                          f"transformers=={version}"], capture_output=True, text=True, timeout=600)
    if pip.returncode != 0:
        reason = f"cannot install transformers=={version}: {pip.stderr.strip()[-500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return version, target


def test_the_lower_bound_is_a_5x_release():
    assert lowest_transformers().startswith("5.")


def test_model_facing_tests_pass_on_the_lowest_transformers(lowest):
    version, target = lowest
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT / "workflow")])}
    found = subprocess.run([sys.executable, "-c", "import transformers; print(transformers.__version__)"],
                           capture_output=True, text=True, env=env, cwd=ROOT)
    assert found.stdout.strip() == version, found.stderr[-2000:]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
                          "error:`past_key_values`:FutureWarning", *(f"tests/{name}" for name in MODEL_FACING)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    assert run.returncode == 0, f"on transformers {version}:\n{run.stdout[-6000:]}"
    assert re.search(r"\d+ passed", run.stdout)
