"""The report's first page: the verdict matrix, one line per paper, and every claim with its
verdicts and the figure that shows it, above the workflow's own description.

The ``claims`` rule writes :func:`report_text` to ``results/claims/report.rst``; the Snakefile's
``report:`` points there once it exists (``snakemake --report`` runs after the workflow), so the
verdicts open the report. Figures are linked by their file names, the targets Snakemake's report
defines for every report item.
"""

import base64
from pathlib import Path

from crosslayer.claims.verdicts import ALL_MODELS, readings
from crosslayer.stages import stage

__all__ = ["report_text"]


def report_text(verdicts, catalogues, matrix_png, description):
    """reStructuredText of the verdicts, followed by `description` (the workflow's report text).

    Parameters
    ----------
    verdicts : pandas.DataFrame
        :func:`crosslayer.claims.verdicts.verdict_table`.
    catalogues : sequence of Catalogue
    matrix_png : str or Path
        The verdict matrix, embedded as a data URI (the first page shows it without a click).
    description : str
        The rest of the first page (``workflow/report/workflow.rst``, a Jinja template).

    Returns
    -------
    str
    """
    png = base64.b64encode(Path(matrix_png).read_bytes()).decode()
    lines = readings(verdicts, catalogues)
    out = ["Do the papers' findings hold here?", "=" * 34, "",
           "Each claim of the four papers (catalogue: ``crosslayer/claims/catalogue``; docs/claims.md) tested on",
           "this run's own tables at the paper's strength: **holds** when its interval (its error rate measured",
           "on planted nulls: docs/claims.md) lies on the paper's side (inside the margin of an absence),",
           "**weaker** when the sign holds but falls short of a size the paper's words state, **contradicted**",
           "when on the other side or when that size is ruled out, **inconclusive** when it straddles, **not",
           "testable** when the run lacks the comparison (the table ``results/claims/claims.tsv`` gives each",
           "reason; a verdict on a model the paper does not state the claim for, or on the paper's own",
           "experiment trained below a tenth of its budget, says so and is left out of the paper's line).",
           "A finding that does not hold at this scale is a result, not a defect.",
           "",
           # the PNG in short lines: docutils refuses long ones, and a data URI's base64 ignores the breaks
           ".. raw:: html", "", '   <img style="width: 100%" alt="verdict matrix" src="data:image/png;base64,',
           *(f"   {png[i:i + 76]}" for i in range(0, len(png), 76)), '   ">', ""]
    for catalogue in catalogues:
        out += [f"* **{catalogue.paper}** ({catalogue.title}): {lines[catalogue.paper]}"]
    out += ["", "Per claim (each verdict links to the figure that shows it)", "-" * 59, ""]
    # a model's own figure for a model; "all models" (a claim no model's files could test) is none
    models = set(verdicts.loc[verdicts["scope"] == "model", "subject"]) - {ALL_MODELS}
    for catalogue in catalogues:
        for claim in catalogue.claims:
            rows = verdicts[verdicts["claim"] == claim.id]
            cells = "; ".join(_cell(claim, r.subject, r.verdict, models) for r in rows.itertuples())
            out.append(f"* ``{claim.id}`` (section {claim.section}): {cells}")
    # one final newline: a module's source cache serves workflow.rst without its own
    return "\n".join(out) + "\n\n" + description.rstrip("\n") + "\n"


def _cell(claim, subject, verdict, models):
    """``subject: verdict``, the verdict a link to the claim's figure for that subject where the
    report has one (the model's own figure, else the figure over all models)."""
    target = figure_file(claim.figure, subject if subject in models else None)
    return f"{subject}: `{verdict} <{target}_>`__" if target else f"{subject}: {verdict}"


def figure_file(figure, model):
    """The report's file name (its link target) of `figure` (``<stage>/<name>``) for `model`, or the
    figure over all models; None where neither exists."""
    if not figure:
        return None
    stage_name, _, name = figure.partition("/")
    found = stage(stage_name)
    for candidate, all_models in ((found.figures, False), (found.all_model_figures, True)):
        if model is None and not all_models:
            continue
        for f in candidate:
            if f.name == name:
                return Path(found.figure_path(f, all_models=all_models).format(model=model)).name + ".png"
    return None
