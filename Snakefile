# crosslayer: cross-layer geometry of transformer language models.
# Stages: checkpoints -> weights -> alignment, continuity; prompts -> block Jacobians -> coupling, trajectories;
# activations -> Jacobians -> spectra; correlation
# graphs -> communities -> statistics; every paper's adjacent-layer measures side by side (across papers);
# tables and figures -> report.
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


# A --configfile (e.g. a suite) replaces the embedded default rather than merging into it,
# so a suite never inherits the default's tiny models; --config still overrides single keys.
if not workflow.overwrite_configfiles:

    configfile: Path(workflow.basedir) / "config" / "config.yaml"


# The report opens with the verdicts once the claims stage has written them (they include the
# workflow's description): `snakemake --report` runs after the workflow.
report: str(Path("results/claims/report.rst").absolute()) if Path("results/claims/report.rst").exists() else "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/checkpoints.smk"
include: "workflow/rules/evaluation.smk"
include: "workflow/rules/alignment.smk"
include: "workflow/rules/coupling.smk"
include: "workflow/rules/embedding_noise.smk"
include: "workflow/rules/continuity.smk"
include: "workflow/rules/toy.smk"
include: "workflow/rules/ablations.smk"
include: "workflow/rules/dynamics.smk"
include: "workflow/rules/topology.smk"
include: "workflow/rules/across_papers.smk"
include: "workflow/rules/claims.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
