"""The columns of the across-papers tables: every measure a config asks for, its paper, and where its
random baseline comes from, so that a measure whose analysis did not run is an empty column with a
name, not a missing one. No numerical dependencies: the figure and across-model jobs read it.
"""

from dataclasses import dataclass

import pandas as pd

from crosslayer.stages import ANALYSES, paper_of

__all__ = ["Measure", "ANALYSIS_PAPERS", "catalog", "legend", "from_legend"]

#: The stage behind each measure family, and its paper.
ANALYSIS_PAPERS = {name: paper_of(name) for name in ANALYSES}

@dataclass(frozen=True)
class Measure:
    """One column of the boundary table.

    ``distance`` marks a value that is minus a distance (paper 002's coupling is minus the
    mis-coupling): its ratio is baseline / value, so that for every measure a ratio above 1 means
    more aligned than random.
    """

    name: str
    analysis: str
    description: str
    baseline: str
    distance: bool = False

    @property
    def paper(self):
        return ANALYSIS_PAPERS[self.analysis]


def catalog(*, projections=(), Ks=(), metric="paper", community_method="signed_cpm"):
    """Every measure of the boundary table, in column order.

    Parameters
    ----------
    projections : sequence of str
        Paper 003's projections (q, k, v, o, gate, up, down, ov): ``continuity_{p}_u1`` and ``_v1``.
    Ks : sequence of int
        Paper 002's K: ``coupling_K{K}_fwd`` (J_l on J_{l+1}'s basis) and ``_bwd`` (J_{l+1} on J_l's).
    metric : str
        Paper 002's mis-coupling metric; only ``paper`` has a random baseline.
    community_method : str
        Paper 004's community detector whose partitions are compared.

    Returns
    -------
    list of Measure
    """
    subspaces = "random k-subspaces of R^d, Monte Carlo"
    measures = [
        Measure("alignment_output", "alignment", "overlap of adjacent MLP products' top-k output (left) subspaces",
                f"{subspaces} (alignment/<model>/baseline.tsv)"),
        Measure("alignment_input", "alignment", "overlap of adjacent MLP products' top-k input (right) subspaces",
                f"{subspaces} (alignment/<model>/baseline.tsv)"),
    ]
    for p in projections:
        for vector, space in (("u1", "left (output)"), ("v1", "right (input)")):
            measures.append(Measure(f"continuity_{p}_{vector}", "continuity",
                                    f"|cos| of adjacent {p.upper()}'s first {space} singular vectors",
                                    "E|cos| of independent random unit vectors, exact (continuity step tables)"))
    coupling_baseline = ("Haar-random singular bases: mis-coupling sqrt(1 - 1/K)" if metric == "paper"
                         else f"none: metric {metric!r} has no random baseline")
    for K in Ks:
        measures += [
            Measure(f"coupling_K{K}_fwd", "coupling", f"coupling of J_l on J_l+1's top-{K} singular vectors",
                    coupling_baseline, distance=True),
            Measure(f"coupling_K{K}_bwd", "coupling", f"coupling of J_l+1 on J_l's top-{K} singular vectors",
                    coupling_baseline, distance=True),
        ]
    measures += [
        Measure("jacobian_alignment", "dynamics", "overlap of mean J_l's top-k output and J_l+1's input subspaces",
                f"{subspaces} (dynamics step spectra, baseline_mean)"),
        Measure("jacobian_alignment_res", "dynamics", "the same for J - I",
                f"{subspaces} (dynamics step spectra, baseline_mean)"),
        Measure("community_nmi", "topology", f"NMI of the {community_method} communities at blocks l and l+1",
                "the same partitions, one side's labels permuted: mean NMI"),
    ]
    return measures


def legend(measures, present):
    """``measures.tsv``: one row per measure (name, paper, analysis, description, where its baseline
    comes from, how its ratio is taken, and whether `present`, the set of measures with values, has it)."""
    return pd.DataFrame([{"measure": m.name, "paper": m.paper, "analysis": m.analysis, "description": m.description,
                          "baseline": m.baseline, "ratio": "baseline / value" if m.distance else "value / baseline",
                          "present": m.name in present} for m in measures])


def from_legend(table):
    """The measures of a :func:`legend` table, in its order."""
    return [Measure(row.measure, row.analysis, row.description, row.baseline, distance=row.ratio == "baseline / value")
            for row in table.itertuples()]
