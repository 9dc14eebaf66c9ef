"""The suite's units of work on pytest-xdist workers (make test: -n auto --dist loadscope; the
scheduler and the order are in tests/conftest.py)."""

#: Test modules that run on one pytest-xdist worker (make test: -n auto --dist loadscope): those that
#: start from the tiny run, and the two that start a SLURM cluster (two at once would share its
#: ports). Every other module is a unit of its own, so that its module-scoped fixtures are made once.
SHARED = {
    "tiny_run": tuple(f"tests/workflow/test_{name}.py" for name in (
        "workflow", "workflow_checkpoints", "workflow_reruns", "reruns", "own_models", "process_cleanup")),
    "cluster": ("tests/workflow/test_slurm_cluster.py", "tests/workflow/test_slurm_workflow.py"),
}
#: The longest units first, so that the workers end together: the tiny run's, the module test's own
#: run of it (on another worker: it asks for the tiny run only at the end), the cluster's.
FIRST = ("tiny_run", "tests/workflow/test_module.py", "cluster")


def work_unit(nodeid):
    """The unit of work a test belongs to: its SHARED group, else its module."""
    module = nodeid.split("::", 1)[0]
    return next((group for group, modules in SHARED.items() if module in modules), module)
