"""Per-checkpoint topology of the residual stream and its tests against the Jacobians (paper 004,
section 3): the glue between graphs / communities / stats and the workflow's files.

Snapshots are indexed as in :mod:`crosslayer.models.residual`: ``2l`` is the input of block l
(pre-attention), ``2l + 1`` the residual entering its MLP. Block l's Jacobian is taken at
snapshot ``2l``, so layer-level statistics pair ``J_l`` with the partition of snapshot ``2l``.
"""

import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd

from crosslayer.dynamics.statistics import (
    boundary_node_test,
    jacobian_column_norms,
    mesoscale_test,
    mesoscale_top_singular,
    rate_level_test,
)
from crosslayer.models.snapshots import snapshot_name
from crosslayer.stats.communities import (
    METHOD_LABELS,
    METHODS,
    community_sizes,
    detect_communities,
    n_nondegenerate,
    participation_coefficient,
    partition_nmi,
    seed_stability,
)
from crosslayer.stats.graphs import correlation_graph
from crosslayer.stats.permutation import bh_fdr, spearman_permutation

__all__ = ["warnings_about", "snapshot_graphs", "checkpoint_communities", "block_nmi", "layer_statistics", "topology_summary",
           "method_comparison"]


@contextmanager
def warnings_about(where):
    """Re-issue the warnings raised inside the block prefixed with `where` (e.g. "layer 3"), so
    a log line says which snapshot, layer or method a degenerate input belongs to."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        warnings.warn(f"{where}: {w.message}", w.category, stacklevel=3)


def snapshot_graphs(acts, *, k=10, progress=None):
    """The signed top-k correlation graph of every snapshot of an (N, 2L, d) activation array."""
    acts = np.asarray(acts)
    snapshots = range(acts.shape[1])
    graphs = []
    for s in progress(snapshots) if progress else snapshots:
        with warnings_about(snapshot_name(s)):
            try:
                graphs.append(correlation_graph(acts[:, s], k=k))
            except ValueError as err:  # a constant unit, too few samples, ...: say where
                raise ValueError(f"{snapshot_name(s)} (snapshot {s}): {err}") from err
    return graphs


def checkpoint_communities(graphs, *, methods=METHODS, seeds=(0, 1, 2), resolution_pos=0.05, resolution_neg=0.05,
                           rb_resolution_pos=1.0, rb_resolution_neg=1.0, progress=None):
    """Partitions of every snapshot graph by every method, and their summary.

    The partition analysed downstream is the one from the first seed; the others only measure
    stability (mean pairwise NMI).

    Returns
    -------
    memberships : (M, S, d) int64 ndarray
    participation : (M, S, d) float ndarray
        NaN for isolated units.
    summary : pandas.DataFrame
        One row per (method, snapshot): ``n_communities`` (non-degenerate, >= 2 units),
        ``n_singletons``, ``largest``, ``median_size`` (of non-degenerate communities),
        ``seed_nmi`` (NaN with one seed) and ``next_nmi`` (NMI with the next snapshot's
        partition, NaN for the last).
    """
    seeds = list(seeds)
    M, S, d = len(methods), len(graphs), graphs[0].vcount()
    memberships = np.empty((M, S, d), dtype=np.int64)
    participation = np.empty((M, S, d))
    rows = []
    kw = {"resolution_pos": resolution_pos, "resolution_neg": resolution_neg,
          "rb_resolution_pos": rb_resolution_pos, "rb_resolution_neg": rb_resolution_neg}
    work = [(m, s) for m in range(M) for s in range(S)]
    for m, s in progress(work) if progress else work:
        method, graph = methods[m], graphs[s]
        with warnings_about(f"{method}, {snapshot_name(s)}"):
            if len(seeds) > 1:
                stability, found = seed_stability(graph, method, seeds, **kw)
            else:
                stability, found = np.nan, detect_communities(graph, method, seed=seeds[0], **kw)[None]
            participation[m, s] = participation_coefficient(graph, found[0])
        memberships[m, s] = found[0]
        sizes = community_sizes(found[0])
        real = sizes[sizes >= 2]
        rows.append({"method": method, "snapshot": s, "name": snapshot_name(s), "layer": s // 2,
                     "n_communities": n_nondegenerate(found[0]), "n_singletons": int((sizes == 1).sum()),
                     "largest": int(sizes.max()), "median_size": float(np.median(real)) if real.size else np.nan,
                     "seed_nmi": stability})
    summary = pd.DataFrame(rows)
    summary["next_nmi"] = [
        partition_nmi(memberships[m, s], memberships[m, s + 1]) if s + 1 < S else np.nan
        for m in range(M) for s in range(S)
    ]
    return memberships, participation, summary


def block_nmi(memberships):
    """NMI between the partitions of blocks l and l + 1 (snapshots 2l and 2l + 2), (L - 1,)."""
    inputs = memberships[::2]
    return np.array([partition_nmi(a, b) for a, b in zip(inputs[:-1], inputs[1:])])


def layer_statistics(Js, memberships, participation, *, n_random=100, tail=0.10, n_permutations=5000, q=0.05,
                     seed=0, progress=None):
    """Tests 2 and 3 of paper 004 for every layer, one method's partitions.

    Parameters
    ----------
    Js : (L, d, d) array_like
        Mean Jacobian per layer.
    memberships, participation : (2L, d) array_like
        One method's partition and participation per snapshot; layer l uses snapshot 2l.
    n_random, tail, n_permutations, seed
        See :func:`crosslayer.dynamics.statistics.mesoscale_test` and :func:`crosslayer.dynamics.statistics.boundary_node_test`.
    q : float
        Benjamini-Hochberg level across the layers.
    progress : callable, optional
        Wraps the sequence of layers (e.g. a tqdm bar).

    Returns
    -------
    table : pandas.DataFrame
        Index ``layer``. Mesoscale operator: ``variance_captured``, ``null_mean``, ``null_sd``,
        ``excess``, ``t``, ``p_mesoscale``, ``top_singular``, ``n_communities``; boundary-node test:
        ``cohens_d``, ``p_boundary``, ``q_boundary``, ``significant`` (BH at level q),
        ``n_tail``.
    """
    Js = np.asarray(Js)
    rows = []
    layers = range(len(Js))
    for layer in progress(layers) if progress else layers:
        J, membership, part = Js[layer], memberships[2 * layer], participation[2 * layer]
        with warnings_about(f"layer {layer}"):
            meso = mesoscale_test(J, membership, n_random=n_random, seed=seed)
            boundary = boundary_node_test(jacobian_column_norms(J), part, tail=tail, n_permutations=n_permutations,
                                         seed=seed)
        rows.append({"layer": layer, "variance_captured": meso["observed"], "null_mean": meso["null_mean"],
                     "null_sd": meso["null_sd"], "excess": meso["excess"], "t": meso["t"],
                     "p_mesoscale": meso["p_value"], "top_singular": mesoscale_top_singular(J, membership),
                     "n_communities": meso["n_communities"], "cohens_d": boundary["cohens_d"],
                     "p_boundary": boundary["p_value"], "n_tail": boundary["n_top"]})
    table = pd.DataFrame(rows).set_index("layer")
    table["significant"], table["q_boundary"] = bh_fdr(table["p_boundary"].to_numpy(), q=q)
    return table


def topology_summary(table, self_alignment, next_nmi, *, n_permutations=10000, seed=0):
    """Per-checkpoint summaries of one method's layer table.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`layer_statistics`.
    self_alignment : (L,) array_like
        Self-alignment of each layer's mean J (:mod:`crosslayer.dynamics.spectra`).
    next_nmi : (L - 1,) array_like
        NMI between the partitions of blocks l and l + 1 (snapshots 2l and 2l + 2).

    Returns
    -------
    row : dict
        ``frac_significant``, ``n_significant``, ``n_layers``, ``median_abs_d``, ``median_d``,
        ``median_excess``, ``frac_mesoscale`` (layers with p < 0.05 for Test 2); Spearman across
        layers of self-alignment vs Cohen's d (``rho_alignment_d``, ``p_alignment_d``); rate-level
        test (``rho_rate_top_singular``, ``p_rate_top_singular``, ``rho_rate_variance``,
        ``p_rate_variance``).
    rate : dict of (L - 1,) ndarray
        What the rate-level test correlates: ``disruption`` (1 - NMI between blocks l and l + 1),
        ``delta_top_singular`` and ``delta_variance`` (absolute changes from l to l + 1).
    """
    d = table["cohens_d"].to_numpy()
    fit = spearman_permutation(self_alignment, d, n_permutations=n_permutations, seed=seed)
    rate = rate_level_test(next_nmi, table["top_singular"].to_numpy(), table["variance_captured"].to_numpy(),
                               n_permutations=n_permutations, seed=seed)
    row = {
        "n_layers": len(table),
        "n_significant": int(table["significant"].sum()),
        "frac_significant": float(table["significant"].mean()),
        "median_abs_d": float(np.nanmedian(np.abs(d))),
        "median_d": float(np.nanmedian(d)),
        "median_excess": float(np.nanmedian(table["excess"])),
        "frac_mesoscale": float((table["p_mesoscale"] < 0.05).mean()),
        "rho_alignment_d": fit["rho"],
        "p_alignment_d": fit["p_value"],
        "rho_rate_top_singular": rate["top_singular"]["rho"],
        "p_rate_top_singular": rate["top_singular"]["p_value"],
        "rho_rate_variance": rate["variance"]["rho"],
        "p_rate_variance": rate["variance"]["p_value"],
    }
    return row, {key: rate[key] for key in ("disruption", "delta_top_singular", "delta_variance")}


def method_comparison(rows):
    """The paper's Table 1 shape from :func:`topology_summary` rows tagged with ``model``,
    ``step`` and ``method``: one row per (model, step, method), with ``label``, the method as the
    paper's table names it (:data:`crosslayer.stats.communities.METHOD_LABELS`), last."""
    columns = ["model", "step", "method", "frac_significant", "n_significant", "n_layers", "median_abs_d",
               "median_excess", "frac_mesoscale"]
    table = pd.DataFrame(rows)[columns].sort_values(["model", "step", "method"]).reset_index(drop=True)
    return table.assign(label=table["method"].map(METHOD_LABELS))
