"""The signed Leiden variants of paper 004's Table 1: their objectives against dense NumPy formulas,
the optimised partitions against planted ones under leidenalg's own quality functions, and the
planted signed partition recovered."""

import leidenalg
import numpy as np
import pandas as pd
import pytest
from test_communities import planted_graph

from crosslayer.dynamics.topology import method_comparison
from crosslayer.stats import communities as C
from crosslayer.stats.graphs import _build_graph, signed_subgraphs


def dense_layers(graph):
    """(A+, A-) symmetric dense adjacency of the positive and |negative| weights."""
    d = graph.vcount()
    A = np.zeros((d, d))
    for (i, j), w in zip(graph.get_edgelist(), graph.es["weight"]):
        A[i, j] = A[j, i] = w
    return np.clip(A, 0, None), np.clip(-A, 0, None)


def reference_quality(graph, membership, method, *, gamma=(0.05, 0.05), gamma_rb=(1.0, 1.0)):
    """Positive-layer objective minus negative-layer objective, by dense formulas (pairs i != j, both orders):
    CPM sum (A_ij - gamma); modularity 1/2m sum (A_ij - k_i k_j / 2m); RB sum (A_ij - gamma k_i k_j / 2m)."""
    same = np.equal.outer(membership, membership)
    off = same & ~np.eye(len(membership), dtype=bool)
    total = 0.0
    for A, sign, g, g_rb in zip(dense_layers(graph), (1, -1), gamma, gamma_rb):
        k = A.sum(1)
        two_m = k.sum()
        if method == "signed_cpm":
            q = ((A - g) * off).sum()
        elif two_m == 0:
            q = 0.0
        elif method == "signed_modularity":
            q = ((A - np.outer(k, k) / two_m) * same).sum() / two_m
        else:
            q = ((A - g_rb * np.outer(k, k) / two_m) * same).sum()
        total += sign * q
    return total


@pytest.mark.parametrize("method", C.SIGNED_METHODS)
@pytest.mark.parametrize("seed", range(3))
def test_signed_quality_is_the_dense_formula(method, seed):
    graph, labels = planted_graph(seed, p_in=0.2, p_noise=0.1)
    rng = np.random.default_rng(seed)
    kw = dict(resolution_pos=0.1, resolution_neg=0.02, rb_resolution_pos=0.8, rb_resolution_neg=1.3)
    for membership in (labels, rng.integers(0, 6, labels.size), np.arange(labels.size)):
        expected = reference_quality(graph, membership, method, gamma=(0.1, 0.02), gamma_rb=(0.8, 1.3))
        assert C.signed_quality(graph, membership, method, **kw) == pytest.approx(expected, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("method, resolutions", [
    ("signed_modularity", {}),
    ("signed_rb", {"rb_resolution_pos": 1.0, "rb_resolution_neg": 1.0}),
    ("signed_rb", {"rb_resolution_pos": 1.5, "rb_resolution_neg": 0.5}),
    ("signed_cpm", {"resolution_pos": 0.05, "resolution_neg": 0.0}),
])
@pytest.mark.parametrize("seed", range(3))
def test_optimised_partition_recovers_the_planted_one_and_scores_at_least_as_high(method, resolutions, seed):
    graph, labels = planted_graph(seed)
    found = C.detect_communities(graph, method, seed=seed, **resolutions)
    assert C.partition_nmi(found, labels) >= 0.95
    quality = C.signed_quality(graph, found, method, **resolutions)
    assert quality >= C.signed_quality(graph, labels, method, **resolutions) - 1e-9
    assert quality > C.signed_quality(graph, np.arange(labels.size), method, **resolutions)  # singletons
    assert quality > C.signed_quality(graph, np.zeros(labels.size, dtype=int), method, **resolutions)  # one block


def test_signed_modularity_is_leidenalgs_multiplex_objective():
    # the quality reported is sum_layers weight * ModularityVertexPartition.quality(), layers built by hand
    graph, _ = planted_graph(4, p_in=0.2, p_noise=0.1)
    found = C.signed_leiden_modularity(graph, seed=2)
    G_pos, G_neg = signed_subgraphs(graph)
    by_hand = sum(sign * leidenalg.ModularityVertexPartition(G, weights=G.es["weight"],
                                                              initial_membership=found.tolist()).quality()
                  for G, sign in ((G_pos, 1), (G_neg, -1)))
    assert C.signed_quality(graph, found, "signed_modularity") == pytest.approx(by_hand, rel=1e-12)


def test_negative_edges_split_what_unsigned_modularity_joins():
    # two groups held together by positive edges only through one strong bridge, and pushed apart by
    # many negative edges: the signed objectives separate them, modularity of |w| cannot see the sign
    i, j, w = [], [], []
    for base in (0, 6):
        for a in range(base, base + 6):
            for b in range(a + 1, base + 6):
                i.append(a), j.append(b), w.append(1.0)
    for a in range(6):
        for b in range(6, 12):
            i.append(a), j.append(b), w.append(-1.0 if (a + b) % 2 else 0.2)
    graph = _build_graph(12, np.array(i), np.array(j), np.array(w))
    planted = np.repeat([0, 1], 6)
    for method in ("signed_modularity", "signed_rb"):
        np.testing.assert_array_equal(C.detect_communities(graph, method, seed=0), planted)
    assert C.signed_quality(graph, planted, "signed_rb") > C.signed_quality(graph, np.zeros(12, int), "signed_rb")


def test_graph_without_negative_edges_is_unsigned_modularity():
    graph, labels = planted_graph(1, negative_pairs=(), p_noise=0.03)
    graph.es["weight"] = np.abs(graph.es["weight"]).tolist()
    found = C.signed_leiden_modularity(graph, seed=0)
    unsigned = leidenalg.ModularityVertexPartition(graph, weights=graph.es["weight"], initial_membership=found.tolist())
    assert C.signed_quality(graph, found, "signed_modularity") == pytest.approx(unsigned.quality(), rel=1e-12)
    assert C.partition_nmi(found, labels) >= 0.95


def test_rb_resolution_reaches_the_optimiser():
    graph, _ = planted_graph(2, p_in=0.2, p_noise=0.1)
    coarse = C.detect_communities(graph, "signed_rb", seed=0, rb_resolution_pos=0.2)
    fine = C.detect_communities(graph, "signed_rb", seed=0, rb_resolution_pos=5.0)
    assert C.community_sizes(fine).size > C.community_sizes(coarse).size


def test_signed_variants_validate_input():
    graph, labels = planted_graph(0)
    with pytest.raises(ValueError, match="`resolution_neg`"):
        C.signed_leiden_rb(graph, resolution_neg=-1.0)
    with pytest.raises(ValueError, match="`seed`"):
        C.signed_leiden_modularity(graph, seed=-2)
    with pytest.raises(ValueError, match="`method` must be one of signed_cpm"):
        C.signed_quality(graph, labels, "infomap")
    with pytest.raises(ValueError, match="has 3 entries"):
        C.signed_quality(graph, [0, 1, 2], "signed_rb")
    empty = _build_graph(4, np.array([0]), np.array([1]), np.array([0.0]))
    with pytest.raises(ValueError, match="no edge of non-zero weight"):
        C.signed_leiden_modularity(empty)


def test_method_comparison_names_methods_as_the_paper():
    rows = [{"model": "m", "step": 0, "method": method, "frac_significant": 0.5, "n_significant": 1, "n_layers": 2,
             "median_abs_d": 0.1, "median_excess": 0.0, "frac_mesoscale": 1.0} for method in C.METHODS]
    table = method_comparison(rows)
    assert dict(zip(table["method"], table["label"])) == C.METHOD_LABELS
    assert table.columns[-1] == "label" and set(C.METHOD_LABELS) == set(C.METHODS)
    assert table["label"].isin(["signed Leiden CPM", "InfoMap"]).sum() == 2
    assert isinstance(table, pd.DataFrame)
