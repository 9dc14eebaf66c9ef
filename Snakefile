# crosslayer: cross-layer geometry of transformer language models.
# Stages: checkpoints -> weights -> alignment -> tables and figures -> report.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/checkpoints.smk"
include: "workflow/rules/alignment.smk"


rule all:
    input:
        get_final_output(),
    default_target: True
