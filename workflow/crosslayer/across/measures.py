"""Each paper's adjacent-layer measure, read from its own per-checkpoint results, one value per
boundary ``l | l+1`` with its random baseline (the measures' names and baselines:
:mod:`crosslayer.across.catalog`).

Readers return long tables (``step``, ``boundary``, ``measure``, ``value``, ``baseline``): the
values are those of the per-paper outputs, copied, never recomputed.
"""

import numpy as np
import pandas as pd

from crosslayer.dynamics.topology import block_nmi
from crosslayer.stats.communities import partition_nmi

__all__ = [
    "COLUMNS", "alignment_measures", "continuity_measures", "coupling_measures", "jacobian_measures",
    "community_measures", "depth_regimes",
]

COLUMNS = ["step", "boundary", "measure", "value", "baseline"]

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
