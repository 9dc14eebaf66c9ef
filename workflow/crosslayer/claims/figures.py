"""The verdict matrix: claims (rows, grouped by paper) x models, and a last column for the claims
that compare groups of models (the groups named beside the claim); each cell coloured by its
verdict, blank where a claim does not apply (a SwiGLU claim on a GELU model, a model claim in the
last column). A claim no model can test is grey on every model.

:data:`FIGURES` maps the ``claims`` rule's figure to its function, which takes the verdict table
(:func:`crosslayer.claims.verdicts.verdict_table`) and returns a new matplotlib Figure.
"""

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from crosslayer.claims.engine import VERDICTS
from crosslayer.claims.verdicts import ALL_MODELS

__all__ = ["VERDICT_COLORS", "ACROSS", "verdicts_figure", "FIGURES"]

#: The column of claims that compare models (one verdict per group, named beside the claim).
ACROSS = "across models"

#: One colour per verdict (colour-blind safe: blue / light blue / orange / light orange / grey).
VERDICT_COLORS = {"holds": "#2c7bb6", "weaker": "#abd9e9", "contradicted": "#e66101", "inconclusive": "#fdd9a0",
                  "not testable": "#bdbdbd"}
_MARKS = {"holds": "✓", "weaker": "≈", "contradicted": "✗", "inconclusive": "?", "not testable": "–"}


def verdicts_figure(verdicts):
    """The verdict matrix of one run (module docstring)."""
    claims = list(dict.fromkeys(verdicts["claim"]))
    models = [s for s in dict.fromkeys(verdicts.loc[verdicts["scope"] == "model", "subject"])]
    across = (verdicts["scope"] == "group").any()
    subjects = models + ([ACROSS] if across else [])
    index = {v: i for i, v in enumerate(VERDICTS)}
    grid = np.full((len(claims), len(subjects)), np.nan)
    labels, beyond = list(claims), set()
    for row in verdicts.itertuples():
        i = claims.index(row.claim)
        if row.scope == "group":
            columns = [len(subjects) - 1]
            labels[i] = f"{row.claim} ({row.subject})"
        elif row.subject == ALL_MODELS:  # beyond the tables, or no model of the run has them
            columns = list(range(len(subjects)))
        else:
            columns = [subjects.index(row.subject)]
        grid[i, columns] = index[row.verdict]
        if not getattr(row, "in_paper_scope", True):
            beyond.update((i, j) for j in columns)
    width = 3.2 + 0.9 * len(subjects)
    fig, ax = plt.subplots(figsize=(width, 1.2 + 0.28 * len(claims)), layout="constrained")
    ax.imshow(np.ma.masked_invalid(grid), cmap=ListedColormap([VERDICT_COLORS[v] for v in VERDICTS]),
              vmin=-0.5, vmax=len(VERDICTS) - 0.5, aspect="auto", interpolation="nearest")
    for (i, j), value in np.ndenumerate(grid):
        if not np.isnan(value):
            mark = _MARKS[VERDICTS[int(value)]] + ("*" if (i, j) in beyond else "")
            ax.text(j, i, mark, ha="center", va="center", fontsize=8,
                    color="white" if VERDICTS[int(value)] in ("holds", "contradicted") else "black")
    ax.set_xticks(range(len(subjects)), subjects, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(claims)), labels, fontsize=7)
    papers = [c.split("-", 1)[0] for c in claims]
    for i in range(1, len(claims)):
        if papers[i] != papers[i - 1]:
            ax.axhline(i - 0.5, color="black", lw=1)
    ax.set_xticks(np.arange(len(subjects) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(claims) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=0.8)
    ax.tick_params(which="minor", length=0)
    title = "The papers' claims on this run (blank: does not apply)" + (
        "; *: beyond the paper's scope, a model it does not state the claim for or a run below a tenth of its "
        "budget" if beyond else "")
    # wrapped to the figure's width (about 13 characters an inch at 9 points): a narrow matrix cut it off
    ax.set_title(textwrap.fill(title, width=int(12 * width)), fontsize=9, loc="left")
    ax.legend(handles=[Patch(color=VERDICT_COLORS[v], label=f"{_MARKS[v]} {v}") for v in VERDICTS],
              loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return fig


FIGURES = {"verdicts": verdicts_figure}
