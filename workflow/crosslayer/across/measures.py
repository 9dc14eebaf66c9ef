"""Each paper's adjacent-layer measure, read from its own per-checkpoint results, one value per
boundary ``l | l+1`` with its random baseline.

Readers return long tables (``step``, ``boundary``, ``measure``, ``value``, ``baseline``): the
values are those of the per-paper outputs, copied, never recomputed. :func:`catalog` names every
measure a config asks for, with its paper and where its baseline comes from, so that a measure
whose analysis did not run is an empty column with a name, not a missing one.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "Measure", "ANALYSIS_PAPERS", "catalog", "alignment_measures", "continuity_measures", "coupling_measures",
    "jacobian_measures", "community_measures", "depth_regimes",
]

#: The stage behind each measure family, and its paper.
ANALYSIS_PAPERS = {"alignment": "000", "continuity": "003", "coupling": "002", "dynamics": "004",
                   "topology": "004"}

COLUMNS = ["step", "boundary", "measure", "value", "baseline"]


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


def _long(step, name, values, baseline):
    values = np.asarray(values, dtype=np.float64)
    return pd.DataFrame({"step": step, "boundary": np.arange(len(values)), "measure": name, "value": values,
                         "baseline": np.broadcast_to(np.asarray(baseline, dtype=np.float64), values.shape)})


def _concat(frames):
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def alignment_measures(adjacent, baseline):
    """Paper 000: ``alignment/<model>/adjacent.tsv`` (``left`` = output, ``right`` = input space) with
    the random-subspace mean of ``baseline.tsv``."""
    mean = float(baseline["mean"].iloc[0])
    return _concat([_long(step, name, group.sort_values("boundary")[space], mean)
                    for step, group in adjacent.groupby("step")
                    for space, name in (("left", "alignment_output"), ("right", "alignment_input"))])


def continuity_measures(checkpoints, projections):
    """Paper 003: per step, the adjacent ``|cos|`` arrays ``{p}.cos_u`` / ``{p}.cos_v`` of its npz
    and the exact baselines ``baseline_u`` / ``baseline_v`` of its step table.

    Parameters
    ----------
    checkpoints : dict
        ``{step: (arrays, table)}``: the step's npz as a mapping and its step table.
    projections : sequence of str
        Those to read; one the model lacks (``present`` False) gives no rows.
    """
    frames = []
    for step, (arrays, table) in checkpoints.items():
        table = table.set_index("projection")
        for p in projections:
            if p not in table.index or not bool(table.at[p, "present"]):
                continue
            frames += [_long(step, f"continuity_{p}_u1", arrays[f"{p}.cos_u"], table.at[p, "baseline_u"]),
                       _long(step, f"continuity_{p}_v1", arrays[f"{p}.cos_v"], table.at[p, "baseline_v"])]
    return _concat(frames)


def coupling_measures(depthwise, *, Ks, variant="plain", metric="paper"):
    """Paper 002: ``coupling/<model>/depthwise.tsv`` at boundary l | l+1, both directions: ``_fwd``
    is row (layer l, other l+1), J_l on the basis of J_l+1; ``_bwd`` is (layer l+1, other l).
    Baseline: minus the mis-coupling of Haar-random bases, ``-sqrt(1 - 1/K)`` (the off-diagonal
    share of ``||A||_F^2`` when every entry has the same variance), for the ``paper`` metric."""
    frames = []
    chosen = depthwise[depthwise["variant"] == variant]
    for (step, K), group in chosen[chosen["K"].isin(list(Ks))].groupby(["step", "K"]):
        M = group.pivot(index="layer", columns="other", values="coupling_mean").to_numpy(np.float64)
        baseline = -np.sqrt(1.0 - 1.0 / K) if metric == "paper" else np.nan
        frames += [_long(step, f"coupling_K{K}_fwd", np.diagonal(M, offset=1), baseline),
                   _long(step, f"coupling_K{K}_bwd", np.diagonal(M, offset=-1), baseline)]
    return _concat(frames)


def jacobian_measures(spectra):
    """Paper 004: ``forward_alignment`` and ``forward_alignment_res`` of each step's spectra table
    (layer l's value is boundary l | l+1; the last layer has none), baseline ``baseline_mean``.

    Parameters
    ----------
    spectra : dict
        ``{step: table}``: the step's ``.spectra.tsv``.
    """
    frames = []
    for step, table in spectra.items():
        baseline = float(table["baseline_mean"].iloc[0])
        for column, name in (("forward_alignment", "jacobian_alignment"),
                             ("forward_alignment_res", "jacobian_alignment_res")):
            frames.append(_long(step, name, table[column].to_numpy()[:-1], baseline))
    return _concat(frames)


def community_measures(partitions, *, method, draws=200, seed=0):
    """Paper 004: NMI between the partitions of blocks l and l + 1 (snapshots 2l and 2l + 2, as the
    topology stage's rate-level test), baseline the mean NMI after permuting block l+1's labels
    (`draws` permutations; the community sizes are kept).

    Parameters
    ----------
    partitions : dict
        ``{step: arrays}``: the step's ``.partitions.npz`` as a mapping (``memberships``, ``methods``).
    """
    from crosslayer.dynamics.topology import block_nmi  # igraph and leidenalg: only where used
    from crosslayer.stats.communities import partition_nmi

    frames = []
    for step, arrays in partitions.items():
        methods = [str(m) for m in arrays["methods"]]
        if method not in methods:
            raise ValueError(f"step {step}: no {method!r} partitions (the checkpoint has {methods})")
        blocks = arrays["memberships"][methods.index(method)][::2]  # (L, d): block inputs
        rng = np.random.default_rng([seed, step])
        baseline = [np.mean([partition_nmi(a, rng.permutation(b)) for _ in range(draws)])
                    for a, b in zip(blocks[:-1], blocks[1:])]
        frames.append(_long(step, "community_nmi", block_nmi(arrays["memberships"][methods.index(method)]),
                            baseline))
    return _concat(frames)


def depth_regimes(spectra):
    """Paper 004's depth regime of each boundary: ``regime`` of layers l and l + 1 from the spectra
    tables (``mid`` when both are, ``early/mid`` across a regime boundary).

    Returns
    -------
    pandas.DataFrame
        ``step``, ``boundary``, ``regime``.
    """
    frames = []
    for step, table in spectra.items():
        regime = table["regime"].astype(str).to_numpy()
        joined = [a if a == b else f"{a}/{b}" for a, b in zip(regime[:-1], regime[1:])]
        frames.append(pd.DataFrame({"step": step, "boundary": np.arange(len(joined)), "regime": joined}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["step", "boundary", "regime"])
