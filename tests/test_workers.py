"""The suite's units of work on pytest-xdist workers (tests/workers.py): every module that takes a
shared fixture is listed with it, so that one worker runs them all and makes the fixture once."""

import ast
from pathlib import Path

from workers import SHARED, work_unit

TESTS = Path(__file__).parent


def modules_taking(fixture):
    """The test modules with a test or fixture that takes `fixture` as an argument."""
    found = set()
    for path in TESTS.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and fixture in [a.arg for a in node.args.args]:
                found.add(f"tests/{path.relative_to(TESTS).as_posix()}")
    return found


def test_every_module_that_takes_a_shared_fixture_is_listed_with_it():
    for fixture, modules in SHARED.items():
        assert modules_taking(fixture) == set(modules), fixture


def test_a_test_belongs_to_its_shared_group_or_else_its_module():
    assert work_unit("tests/workflow/test_workflow.py::test_x[a-b]") == "tiny_run"
    assert work_unit("tests/workflow/test_slurm_cluster.py::test_y") == "cluster"
    assert work_unit("tests/linalg/test_svd.py::test_z") == "tests/linalg/test_svd.py"
