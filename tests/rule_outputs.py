"""The figures a plotting rule declares, read from its .smk file as text (no Snakemake parse): for tests
that hold a library's figure table against the plotting rule that saves it. A plotting rule declares
its figures as ``**figure_outputs("<stage>"[, all_models=True])``: the stage's figures in the
registry (crosslayer/stages.py), in order."""

import re
from pathlib import Path

from crosslayer.stages import stage

RULES = Path(__file__).resolve().parents[1] / "workflow" / "rules"


def _output_block(smk, rule):
    text = (RULES / smk).read_text()
    rule_block = re.search(rf"^rule {rule}:\n(.*?)(?=^\S|\Z)", text, re.M | re.S)
    assert rule_block, f"no rule {rule} in {smk}"
    output = re.search(r"^    output:\n(.*?)(?=^    \w+:|\Z)", rule_block.group(1), re.M | re.S)
    assert output, f"rule {rule} in {smk} declares no output"
    return output.group(1)


def rule_figures(smk, rule):
    """The names of the figures `rule` in ``workflow/rules/<smk>`` declares, in order (each the
    output's key and its file name: common.smk's figure_outputs)."""
    declared = re.fullmatch(r'\s*\*\*figure_outputs\("(\w+)"(, all_models=True)?\),\s*', _output_block(smk, rule))
    assert declared, f"rule {rule} in {smk} does not declare its figures as **figure_outputs(stage)"
    name, all_models = declared.groups()
    return [figure.name for figure in (stage(name).all_model_figures if all_models else stage(name).figures)]

