"""Snakemake's plan for a config, from a dry run in this process (a fraction of a second, where a
``snakemake -n`` subprocess takes seconds): rule -> jobs."""

import logging
import signal
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Jobs that train, download, build twins or read a whole checkpoint for SVDs or Jacobians: hours
#: at paper scale (docs/benchmarks.md).
EXPENSIVE = {"prepare_corpus", "train_model", "train_ablation", "train_toy", "train_toy_dataset", "download_checkpoint",
             "build_untrained", "register_checkpoint", "mlp_alignment", "gated_alignment", "block_jacobians",
             "block_coupling", "projection_continuity", "schur_surgery", "bottleneck_folds", "evaluate"}


class _RunInfo(logging.Handler):
    """Keeps the per-rule job counts of the plan Snakemake logs."""

    counts = None

    def emit(self, record):
        from snakemake_interface_logger_plugins.common import LogEvent

        if getattr(record, "event", None) == LogEvent.RUN_INFO:
            self.counts = {rule: n for rule, n in record.stats.items() if rule not in ("total", "all")}


def planned(workdir, *configfiles):
    """Rule -> jobs a dry run plans in `workdir` (in this process: a fraction of a second each).

    Snakemake's scheduler installs a SIGTERM handler that only flags a graceful stop, and leaves it
    installed: the caller's is restored, else this process ignores SIGTERM afterwards (a pool worker
    then never ends on ``Pool.terminate``, and the re-run table's fixture hung)."""
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        return _planned(workdir, *configfiles)
    finally:
        signal.signal(signal.SIGTERM, sigterm)


@contextmanager
def _dry_workflow(workdir, configfiles):
    """Snakemake's workflow API for a dry run of `configfiles` in `workdir`. Its source cache's
    temporary folder is removed on leaving: left to the garbage collector, its ResourceWarning
    surfaced in whichever later test ran then (a figure test that makes warnings errors failed)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL}, dryrun=True)) as api:
        workflow = api.workflow(resource_settings=ResourceSettings(cores=2),
                                config_settings=ConfigSettings(configfiles=[Path(f) for f in configfiles]),
                                snakefile=ROOT / "Snakefile", workdir=Path(workdir))
        try:
            yield workflow
        finally:
            runtime_cache = workflow._workflow.sourcecache.runtime_cache  # no public API closes it
            if runtime_cache is not None:
                runtime_cache.cleanup()


def _planned(workdir, *configfiles):
    from snakemake.logging import logger
    from snakemake.settings.types import DAGSettings

    run_info = _RunInfo()
    with _dry_workflow(workdir, configfiles) as workflow:
        logger.addHandler(run_info)
        try:
            workflow.dag(DAGSettings()).execute_workflow(executor="dryrun")
        finally:
            logger.removeHandler(run_info)
    return run_info.counts or {}


def refusal(workdir, *configfiles):
    """The message of the error a dry run of `configfiles` in `workdir` stops with while Snakemake
    parses the workflow (an invalid config), in this process; None when it plans."""
    from snakemake.exceptions import WorkflowError

    try:
        planned(workdir, *configfiles)
    except WorkflowError as error:
        return str(error)
    return None


def rule_params(workdir, rule, *configfiles):
    """The params of `rule` as the workflow parses them for `configfiles` (those not computed per job):
    what Snakemake compares with a finished job's to decide whether it re-runs."""
    with _dry_workflow(workdir, configfiles) as workflow:
        return dict(workflow._workflow.get_rule(rule).params.items())  # no public API reads a rule's params


def library_params(workdir, *configfiles):
    """Each rule that runs a script: (the script's file name, the rule's `library` parameter)."""
    with _dry_workflow(workdir, configfiles) as workflow:
        return {rule.name: (Path(rule.script).name, rule.params.get("library"))
                for rule in workflow._workflow.rules if rule.script}
