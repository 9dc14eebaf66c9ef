import gzip
import os
import warnings

import igraph
import numpy as np
import pytest
import torch

from crosslayer.errors import DegenerateInputWarning
from crosslayer.stats import graphs as G

# Hand-built symmetric 5x5 "correlation" matrix. Top-2 by |r| per row (self excluded):
#   row 0: |.9| (1), |-.7| (4)     row 1: |.9| (0), |-.8| (3)     row 2: |.6| (3), |-.4| (4)
#   row 3: |-.8| (1), |.6| (2)     row 4: |-.7| (0), |.5| (3)
# {3, 4} is kept by row 4 only (row 3 has .8 and .6 above .5): the union keeps it.
R5 = np.array([
    [1.0, 0.9, -0.2, 0.1, -0.7],
    [0.9, 1.0, 0.3, -0.8, 0.05],
    [-0.2, 0.3, 1.0, 0.6, -0.4],
    [0.1, -0.8, 0.6, 1.0, 0.5],
    [-0.7, 0.05, -0.4, 0.5, 1.0],
])
R5_TOP2 = [(0, 1, 0.9), (0, 4, -0.7), (1, 3, -0.8), (2, 3, 0.6), (2, 4, -0.4), (3, 4, 0.5)]
# top-1: 0 -> 1, 1 -> 0, 2 -> 3, 3 -> 1, 4 -> 0
R5_TOP1 = [(0, 1, 0.9), (0, 4, -0.7), (1, 3, -0.8), (2, 3, 0.6)]


def as_list(edges):
    s, t, w = edges
    return list(zip(s.tolist(), t.tolist(), w.tolist()))


def reference_top_k(R, k):
    """Loop reference: per row the k largest |R[i, j]| (j != i), union, larger |w| wins
    (opposite-sign tie: the upper-triangle entry)."""
    d = R.shape[0]
    kept = {}
    for i in range(d):
        a = np.abs(R[i]).astype(float)
        a[i] = -1
        for j in np.argsort(-a, kind="stable")[:k]:
            pair, w = (min(i, j), max(i, j)), R[i, j]
            old = kept.get(pair)
            if old is None or abs(w) > abs(old) or (abs(w) == abs(old) and i < j):
                kept[pair] = w
    return [(s, t, kept[(s, t)]) for s, t in sorted(kept)]


def factor_snapshot(N=500, d=40, seed=0):
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((N, 4))
    return F @ rng.standard_normal((4, d)) + rng.standard_normal((N, d))


# --------------------------------------------------------------------------- correlation


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_correlation_matches_corrcoef(dtype):
    X = (factor_snapshot(N=300, d=25) * np.linspace(0.1, 50, 25) + 7.0).astype(dtype)  # scales and offsets differ
    R = G.correlation_matrix(X)
    expected = np.corrcoef(X.astype(np.float64), rowvar=False)
    assert R.dtype == np.float64 and R.shape == (25, 25)
    np.testing.assert_allclose(R, expected, rtol=0, atol=1e-12)
    assert np.array_equal(R, R.T) and np.all(np.diag(R) == 1.0)


def test_correlation_accepts_torch():
    X = factor_snapshot(N=100, d=8)
    np.testing.assert_allclose(G.correlation_matrix(torch.from_numpy(X)), np.corrcoef(X, rowvar=False), atol=1e-12)


def test_constant_units_are_named():
    X = factor_snapshot(N=50, d=12)
    X[:, 3] = 0.1  # a constant that leaves rounding residue when centred
    X[:, 7] = 0.0
    with pytest.raises(ValueError, match=r"2 constant unit.*\[3, 7\]"):
        G.correlation_matrix(X)


def test_many_constant_units_are_counted_and_truncated():
    X = factor_snapshot(N=50, d=30)
    X[:, 5:25] = -3.0
    with pytest.raises(ValueError, match=r"20 constant unit.*\[5, 6, 7, 8, 9, 10, 11, 12, 13, 14\] \.\.\."):
        G.correlation_matrix(X)


def test_large_mean_small_variance_unit_is_not_constant():
    X = factor_snapshot(N=200, d=6)
    X[:, 2] = 1e4 + 1e-3 * X[:, 2]  # "massive activation": relative spread 1e-7, still a variable unit
    np.testing.assert_allclose(G.correlation_matrix(X), np.corrcoef(X, rowvar=False), atol=1e-8)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_raises(bad):
    X = factor_snapshot(N=50, d=6)
    X[10, 4] = bad
    with pytest.raises(ValueError, match=r"non-finite.*\[\[10, 4\]\]"):
        G.correlation_matrix(X)


@pytest.mark.parametrize("shape", [(2, 5), (0, 5), (10,), (3, 4, 5)])
def test_bad_shapes_raise(shape):
    with pytest.raises(ValueError, match="`X`"):
        G.correlation_matrix(np.random.default_rng(0).standard_normal(shape))


def test_fewer_samples_than_units_warns_but_is_correct():
    X = factor_snapshot(N=20, d=40)
    with pytest.warns(DegenerateInputWarning, match=r"N = 20 < d = 40.*rank <= N - 1 = 19"):
        R = G.correlation_matrix(X)
    np.testing.assert_allclose(R, np.corrcoef(X, rowvar=False), atol=1e-12)
    assert np.linalg.matrix_rank(R) <= 19
    assert issubclass(DegenerateInputWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # N >= d: silent
        G.correlation_matrix(factor_snapshot(N=40, d=40))


# --------------------------------------------------------------------------- top-k


@pytest.mark.parametrize("k, expected", [(1, R5_TOP1), (2, R5_TOP2)])
def test_top_k_hand_built(k, expected):
    assert as_list(G.top_k_edges(R5, k)) == expected


def test_top_k_all_pairs_when_k_is_d_minus_1():
    s, t, w = G.top_k_edges(R5, 4)
    iu = np.triu_indices(5, 1)
    assert np.array_equal(s, iu[0]) and np.array_equal(t, iu[1]) and np.array_equal(w, R5[iu])


def test_symmetrization_keeps_larger_abs_weight_on_non_symmetric_input():
    # k = 1: row 0 keeps 0->1 (.3), row 1 keeps 1->0 (-.9), row 2 keeps 2->1 (.95).
    # {0, 1}: both directions kept, -.9 wins over .3; {1, 2}: only 2->1 kept, so .95 (R[1, 2] = .2
    # was not kept and never competes); R[2, 0] = .5 is not kept by row 2.
    R = np.array([[1.0, 0.3, 0.1], [-0.9, 1.0, 0.2], [0.5, 0.95, 1.0]])
    assert as_list(G.top_k_edges(R, 1)) == [(0, 1, -0.9), (1, 2, 0.95)]
    # the other way round: the larger value sits in the upper triangle
    assert as_list(G.top_k_edges(R.T, 1)) == [(0, 1, -0.9), (1, 2, 0.95)]
    # an exact tie of opposite signs keeps the upper-triangle entry
    tie = np.array([[1.0, 0.5, 0.1], [-0.5, 1.0, 0.2], [0.1, 0.3, 1.0]])
    assert as_list(G.top_k_edges(tie, 1))[0] == (0, 1, 0.5)


@pytest.mark.parametrize("d, k", [(7, 1), (7, 3), (30, 29), (60, 5)])
def test_top_k_matches_loop_reference_on_random_non_symmetric(d, k, monkeypatch):
    monkeypatch.setattr(G, "_CHUNK_BYTES", 8 * d * 4)  # 4 rows per chunk: exercises the chunking
    R = np.random.default_rng(d + k).standard_normal((d, d))
    assert as_list(G.top_k_edges(R, k)) == reference_top_k(R, k)


def test_top_k_ignores_diagonal_and_has_no_self_loops():
    R = np.random.default_rng(1).uniform(-0.5, 0.5, (20, 20))
    np.fill_diagonal(R, 100.0)  # would win every row if not excluded
    s, t, w = G.top_k_edges(R, 3)
    assert np.all(s < t) and np.all(np.abs(w) <= 0.5)
    assert np.all(np.diff(s * 20 + t) > 0)  # sorted, unique


@pytest.mark.parametrize("k", [0, -1, 5, 6, 2.0, True, None])
def test_k_out_of_range_raises(k):
    with pytest.raises(ValueError, match="`k`"):
        G.top_k_edges(R5, k)
    with pytest.raises(ValueError, match="`k`"):
        G.correlation_graph(factor_snapshot(N=30, d=5), k=k)


def test_top_k_rejects_bad_R():
    with pytest.raises(ValueError, match="square"):
        G.top_k_edges(np.ones((3, 4)), 1)
    bad = R5.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        G.top_k_edges(bad, 1)


# --------------------------------------------------------------------------- graph


def test_correlation_graph_matches_top_k_of_correlation():
    X = factor_snapshot(N=400, d=30, seed=2)
    graph = G.correlation_graph(X, k=4)
    s, t, w = G.top_k_edges(np.corrcoef(X, rowvar=False), 4)
    assert not graph.is_directed() and graph.is_simple() and graph.vcount() == 30
    assert graph.vs["unit"] == list(range(30))
    assert graph.get_edgelist() == list(zip(s.tolist(), t.tolist()))
    np.testing.assert_allclose(graph.es["weight"], w, atol=1e-12)
    assert min(graph.degree()) >= 4


def test_signed_subgraphs_split_by_sign():
    graph = G._build_graph(5, *map(np.asarray, zip(*R5_TOP2)))
    graph.add_edge(1, 4, weight=0.0)
    G_pos, G_neg = G.signed_subgraphs(graph)
    assert G_pos.vcount() == G_neg.vcount() == 5 and G_pos.vs["unit"] == list(range(5))
    assert sorted(zip(G_pos.get_edgelist(), G_pos.es["weight"])) == [((0, 1), 0.9), ((2, 3), 0.6), ((3, 4), 0.5)]
    assert sorted(zip(G_neg.get_edgelist(), G_neg.es["weight"])) == [((0, 4), 0.7), ((1, 3), 0.8), ((2, 4), 0.4)]
    assert graph.es["weight"][1] == -0.7  # input untouched


def test_graph_round_trip_is_exact(tmp_path):
    graph = G.correlation_graph(factor_snapshot(N=300, d=50, seed=3), k=5)
    graph.es[0]["weight"] = 1 / 3  # needs all 17 digits
    graph.es[1]["weight"] = -5e-324  # subnormal: igraph's GraphML reader cannot parse these
    graph.es[2]["weight"] = 1e-310
    path = tmp_path / "g.graphml.gz"
    G.write_graph(graph, path)
    back = G.read_graph(path)
    assert back.get_edgelist() == graph.get_edgelist() and not back.is_directed()
    assert np.array_equal(np.asarray(back.es["weight"]), np.asarray(graph.es["weight"]))
    assert back.vs["unit"] == list(range(50)) and all(type(u) is int for u in back.vs["unit"])
    assert back.vs.attributes() == ["unit"] and sorted(back.es.attributes()) == ["weight"]
    assert "weight_repr" not in graph.es.attributes()  # write_graph does not modify its input
    # plain igraph opens the file too (weights to GraphML's 15 digits)
    plain = igraph.Graph.Read_GraphMLz(str(path))
    np.testing.assert_allclose(plain.es["weight"], graph.es["weight"], rtol=1e-14, atol=1e-300)
    assert gzip.open(path).read().startswith(b"<?xml")
    os.utime(path, (1, 1))
    G.write_graph(graph, tmp_path / "again.graphml.gz")  # no time or file name in the gzip header
    assert (tmp_path / "again.graphml.gz").read_bytes() == path.read_bytes()


def test_read_graph_detects_edited_weights(tmp_path):
    graph = G._build_graph(5, *map(np.asarray, zip(*R5_TOP2)))
    graph.es["weight_repr"] = [repr(w) for w in graph.es["weight"]]
    graph.es[2]["weight"] = 0.123  # edited by another tool, the exact copy left stale
    path = tmp_path / "edited.graphml.gz"
    graph.write_graphmlz(str(path))
    with pytest.raises(ValueError, match="differ from their exact copy"):
        G.read_graph(path)


@pytest.mark.parametrize("graph, vertices, message", [
    ("not a graph", False, r"must be an igraph\.Graph, got str"),
    (igraph.Graph(n=2, edges=[(0, 1)], directed=True), False, "must be undirected"),
    (igraph.Graph(n=2, edges=[(0, 1)]), False, "no edge attribute 'weight'"),
    (igraph.Graph(), True, "no vertices"),
])
def test_check_graph_refuses_what_the_graph_functions_cannot_use(graph, vertices, message):
    with pytest.raises(ValueError, match=message):
        G.check_graph(graph, vertices=vertices)


def test_check_graph_accepts_an_empty_graph_unless_vertices_are_needed():
    G.check_graph(igraph.Graph())  # writing or splitting a graph of no vertices is well defined
    G.check_graph(igraph.Graph(n=3), vertices=True)  # no edges: no weights needed
