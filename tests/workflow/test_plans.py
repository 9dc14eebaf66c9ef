"""The in-process dry run the re-run tests use (tests/plans.py) cleans up after itself."""

import gc
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from plans import planned
from snakemake_runs import TINY

pytestmark = pytest.mark.workflow


def _temporary_folders():
    return {id(o): o for o in gc.get_objects() if type(o) is TemporaryDirectory}


def test_a_dry_run_in_this_process_removes_the_temporary_folders_it_made(tmp_path):
    # Snakemake leaves its source cache's folder to the garbage collector, whose ResourceWarning
    # then surfaced in whichever later test ran, failing one that makes warnings errors (CI, stop 65)
    before = _temporary_folders()
    assert planned(tmp_path, TINY)
    made = [o.name for i, o in _temporary_folders().items() if i not in before]
    assert made, "the dry run made no temporary folder: this test no longer tests anything"
    assert [name for name in made if Path(name).exists()] == []
