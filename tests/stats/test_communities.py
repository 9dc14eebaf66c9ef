"""Community detection (crosslayer.stats.communities): NMI, canonical memberships, planted partitions
recovered, the signed Leiden variants of paper 004's Table 1 (their objectives against dense NumPy
formulas, the optimised partitions under leidenalg's own quality functions), and participation
coefficients."""

import math
import warnings

import igraph
import leidenalg
import numpy as np
import pytest

from crosslayer.errors import DegenerateInputWarning
from crosslayer.stats import communities as C
from crosslayer.stats.graphs import _build_graph, correlation_graph, signed_subgraphs

SIZES = (25, 25, 25, 25)


def planted_graph(seed, *, negative_pairs=((0, 1), (2, 3), (0, 2)), p_in=0.5, p_neg=0.3, p_noise=0.03):
    """Signed SBM: dense positive edges inside blocks, dense negative edges between the listed
    block pairs, sparse noise edges of either sign between all other pairs. Returns the graph and
    the planted labels."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(SIZES)), SIZES)
    i, j = np.triu_indices(labels.size, 1)
    same = labels[i] == labels[j]
    pairs = set(negative_pairs) | {(b, a) for a, b in negative_pairs}
    negative = np.array([pair in pairs for pair in zip(labels[i].tolist(), labels[j].tolist())], dtype=bool)
    u = rng.random(i.size)
    w = np.zeros(i.size)
    inside, against = same & (u < p_in), negative & (u < p_neg)
    noise = ~same & ~negative & (u < p_noise)
    w[inside] = rng.uniform(0.5, 1.0, inside.sum())
    w[against] = -rng.uniform(0.5, 1.0, against.sum())
    w[noise] = rng.choice([-1.0, 1.0], noise.sum()) * rng.uniform(0.1, 0.5, noise.sum())
    keep = w != 0
    return _build_graph(labels.size, i[keep], j[keep], w[keep]), labels


def factor_snapshot(seed, N=2000, rho=-0.8):
    """N samples of 100 units in 4 blocks, each block driven by one latent factor (loadings 0.2 to
    0.8) plus unit noise; factors 0 and 1 anti-correlated (rho), so weakly loaded units get
    negative top-k edges into the other block."""
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((N, 4))
    F[:, 1] = rho * F[:, 0] + math.sqrt(1 - rho**2) * F[:, 1]
    labels = np.repeat(np.arange(4), SIZES)
    X = F[:, labels] * rng.uniform(0.2, 0.8, labels.size) + rng.standard_normal((N, labels.size))
    return X, labels


def two_cliques(bridge_weight=1.0, negative=0):
    """Two positive 5-cliques joined by a positive bridge (4-5), plus `negative` negative edges
    between them."""
    edges = [(i, j) for b in (0, 5) for i in range(b, b + 5) for j in range(i + 1, b + 5)]
    weights = [1.0] * len(edges)
    edges.append((4, 5))
    weights.append(bridge_weight)
    for n in range(negative):
        edges.append((n, 9 - n))
        weights.append(-1.0)
    graph = igraph.Graph(n=10, edges=edges)
    graph.es["weight"] = weights
    return graph


# --------------------------------------------------------------------------- NMI


def reference_nmi(a, b):
    """Entropy formula with a dense contingency table (log base 2), NMI = 2 I / (H_a + H_b)."""
    _, a = np.unique(a, return_inverse=True)
    _, b = np.unique(b, return_inverse=True)
    table = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(table, (a, b), 1)
    p = table / table.sum()
    pa, pb = p.sum(1), p.sum(0)
    nz = p > 0
    mutual = (p[nz] * np.log2(p[nz] / np.outer(pa, pb)[nz])).sum()
    h = -(pa * np.log2(pa)).sum() - (pb * np.log2(pb)).sum()
    return 2 * mutual / h


def test_nmi_hand_computed():
    # a = {0,1 | 2,3}, b = {0 | 1,2,3}: H_a = ln 2, H_b = H(1/4, 3/4), joint cells 1/4, 1/4, 1/2,
    # I = H_a + H_b - H_ab = ln 2 + H_b - 1.5 ln 2 = H_b - 0.5 ln 2
    h_b = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    expected = 2 * (h_b - 0.5 * math.log(2)) / (math.log(2) + h_b)
    assert C.partition_nmi([0, 0, 1, 1], [5, 9, 9, 9]) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.34371102, rel=1e-7)


@pytest.mark.parametrize("seed", range(6))
def test_nmi_matches_igraph_and_entropy_formula(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    a, b = rng.integers(0, rng.integers(1, 8), n), rng.integers(0, rng.integers(1, 8), n)
    if seed % 2:
        b = np.where(rng.random(n) < 0.7, a, b)  # correlated partitions
    nmi = C.partition_nmi(a, b)
    assert nmi == pytest.approx(igraph.compare_communities(a.tolist(), b.tolist(), method="nmi"), abs=1e-12)
    if len(set(a)) > 1 or len(set(b)) > 1:
        assert nmi == pytest.approx(reference_nmi(a, b), abs=1e-12)
    assert C.partition_nmi(b, a) == pytest.approx(nmi, abs=1e-15)


def test_nmi_identity_relabelling_and_trivial_partitions():
    a = np.random.default_rng(0).integers(0, 5, 50)
    assert C.partition_nmi(a, a) == 1.0
    assert C.partition_nmi(a, 7 * a + 3) == 1.0  # labels do not matter
    assert C.partition_nmi(np.zeros(6, int), np.ones(6, int)) == 1.0  # both single-community: identical
    assert C.partition_nmi(np.zeros(6, int), np.arange(6)) == 0.0
    assert C.partition_nmi(np.arange(6), np.arange(6)[::-1]) == 1.0
    with pytest.raises(ValueError, match="same length"):
        C.partition_nmi([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="integer"):
        C.partition_nmi([0.5, 1.0], [0, 1])


# --------------------------------------------------------------------------- partitions


def test_canonical_membership_orders_by_size_then_smallest_member():
    m = C.canonical_membership([7, 3, 3, 9, 9, 7, 3, 4])
    # sizes: 3 -> 3 members {1, 2, 6}; 7 -> {0, 5}; 9 -> {3, 4}; 4 -> {7}; tie 7 vs 9 by member 0 < 3
    assert m.tolist() == [1, 0, 0, 2, 2, 1, 0, 3]
    assert m.dtype == np.int64
    assert C.canonical_membership(m).tolist() == m.tolist()


def test_sizes_and_nondegenerate_count():
    m = [4, 4, 4, 1, 1, 2, 0, 0, 0, 0]
    assert C.community_sizes(m).tolist() == [4, 3, 2, 1]
    assert C.n_nondegenerate(m) == 3  # the singleton {5} is degenerate
    assert C.n_nondegenerate(m, min_size=3) == 2
    assert C.n_nondegenerate(m, min_size=1) == 4
    with pytest.raises(ValueError, match="`min_size`"):
        C.n_nondegenerate(m, min_size=0)


# --------------------------------------------------------------------------- detectors


@pytest.mark.parametrize("seed", range(3))
def test_signed_leiden_recovers_planted_signed_blocks(seed):
    graph, labels = planted_graph(seed)
    membership = C.signed_leiden(graph, resolution_pos=0.05, resolution_neg=0.0, seed=0)
    assert C.partition_nmi(membership, labels) >= 0.95
    assert C.community_sizes(membership).tolist()[:4] == [25, 25, 25, 25]


def test_signed_leiden_defaults_recover_blocks_separated_by_negative_edges():
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]  # every pair of blocks repels
    for seed in range(3):
        graph, labels = planted_graph(seed, negative_pairs=pairs)
        assert C.partition_nmi(C.signed_leiden(graph), labels) >= 0.95


def test_signed_leiden_uses_the_signs():
    # Blocks 0-1 and 2-3 are tied by dense negative edges. Unsigned modularity on |w| sees them
    # as connected and merges them; signed CPM keeps them apart.
    graph, labels = planted_graph(0, negative_pairs=((0, 1), (2, 3)), p_noise=0.0)
    assert C.partition_nmi(C.signed_leiden(graph), labels) == 1.0
    assert C.partition_nmi(C.leiden_modularity(graph), labels) < 0.8


def test_equal_resolutions_cancel():
    # gamma+ = gamma-: the CPM null-model terms cancel, so a single positive bridge merges two
    # cliques; a lower gamma- restores the penalty; negative edges separate them regardless.
    assert C.n_nondegenerate(C.signed_leiden(two_cliques())) == 1
    assert C.signed_leiden(two_cliques(), resolution_pos=0.5, resolution_neg=0.5).tolist() == [0] * 10
    split = [0] * 5 + [1] * 5
    assert C.signed_leiden(two_cliques(), resolution_neg=0.0).tolist() == split
    assert C.signed_leiden(two_cliques(negative=2)).tolist() == split


@pytest.mark.parametrize("seed", range(2))
def test_signed_leiden_recovers_factor_blocks_from_correlation_graph(seed):
    X, labels = factor_snapshot(seed)
    graph = correlation_graph(X, k=10)
    w = np.asarray(graph.es["weight"])
    s, t = np.asarray(graph.get_edgelist()).T
    assert ((labels[s] != labels[t]) & (w < 0)).sum() > 10  # the graph does carry negative cross-block edges
    assert C.partition_nmi(C.signed_leiden(graph), labels) >= 0.99


@pytest.mark.parametrize("method", ["modularity", "infomap"])
def test_unsigned_methods_recover_unsigned_planted_blocks(method):
    graph, labels = planted_graph(1, negative_pairs=(), p_noise=0.03)
    graph.es["weight"] = np.abs(graph.es["weight"]).tolist()  # unsigned: sparse positive noise between blocks
    assert C.partition_nmi(C.detect_communities(graph, method, seed=0), labels) >= 0.95
    # negative input weights are read as |w|
    graph.es["weight"] = (-np.asarray(graph.es["weight"])).tolist()
    assert C.partition_nmi(C.detect_communities(graph, method, seed=0), labels) >= 0.95


@pytest.mark.parametrize("method", C.METHODS)
def test_same_seed_same_membership(method):
    graph, _ = planted_graph(2, p_in=0.15, p_noise=0.1)  # noisy: the optimisers have choices to make
    first = C.detect_communities(graph, method, seed=11)
    assert first.dtype == np.int64 and first.shape == (100,)
    assert np.array_equal(first, C.detect_communities(graph, method, seed=11))
    assert np.array_equal(first, C.canonical_membership(first))


def test_seed_matters_on_ambiguous_graph():
    # random signed graph: no planted structure, so different seeds find different partitions
    # (catches a seed that is not passed on)
    rng = np.random.default_rng(0)
    i, j = np.triu_indices(200, 1)
    pick = rng.choice(i.size, 800, replace=False)
    w = rng.choice([-1.0, 1.0], 800) * rng.uniform(0.5, 1.0, 800)
    graph = _build_graph(200, i[pick], j[pick], w)
    for method in C.METHODS:
        stability, memberships = C.seed_stability(graph, method, [0, 1, 2])
        assert memberships.shape == (3, 200)
        assert stability < 1.0


def test_seed_stability_on_planted_blocks():
    graph, labels = planted_graph(0)
    stability, memberships = C.seed_stability(graph, "signed_cpm", [0, 1, 2], resolution_neg=0.0)
    assert stability == pytest.approx(1.0)
    assert all(C.partition_nmi(m, labels) >= 0.95 for m in memberships)
    with pytest.raises(ValueError, match="at least two seeds"):
        C.seed_stability(graph, "signed_cpm", [0])


def test_infomap_restores_igraph_default_generator():
    graph, _ = planted_graph(0)
    C.infomap(graph, seed=5)
    import random

    random.seed(123)
    a = igraph.Graph.Erdos_Renyi(n=30, m=60).get_edgelist()
    random.seed(123)
    assert igraph.Graph.Erdos_Renyi(n=30, m=60).get_edgelist() == a  # igraph draws from `random` again


def test_detect_communities_rejects_unknown_method():
    graph, _ = planted_graph(0)
    with pytest.raises(ValueError, match="infomap, signed_modularity, signed_rb; got 'louvain'"):
        C.detect_communities(graph, "louvain")


def test_detectors_validate_input():
    graph, _ = planted_graph(0)
    with pytest.raises(ValueError, match="`seed`"):
        C.signed_leiden(graph, seed=-1)
    with pytest.raises(ValueError, match="`resolution_neg`"):
        C.signed_leiden(graph, resolution_neg=float("nan"))
    with pytest.raises(ValueError, match="`n_iterations`"):
        C.signed_leiden(graph, n_iterations=0)
    with pytest.raises(ValueError, match="undirected"):
        C.signed_leiden(igraph.Graph(n=3, edges=[(0, 1)], directed=True))
    with pytest.raises(ValueError, match="'weight'"):
        C.leiden_modularity(igraph.Graph(n=3, edges=[(0, 1)]))
    with pytest.raises(ValueError, match="no edge of non-zero weight"):
        C.leiden_modularity(_build_graph(3, np.array([0]), np.array([1]), np.array([0.0])))


# --------------------------------------------------------------------------- participation


def hand_graph():
    """5 vertices, communities {0, 1, 2} and {3, 4}; one negative weight counted as |w|."""
    graph = igraph.Graph(n=5, edges=[(0, 1), (0, 2), (0, 3), (1, 2), (2, 4), (3, 4)])
    graph.es["weight"] = [2.0, -1.0, 1.0, 1.0, -3.0, 0.5]
    return graph


def test_participation_coefficient_hand_computed():
    # k_ic by hand (|w|):  0: c0 = 2 + 1, c1 = 1      -> 1 - (9 + 1) / 16
    #                      1: c0 = 2 + 1, c1 = 0      -> 0
    #                      2: c0 = 1 + 1, c1 = 3      -> 1 - (4 + 9) / 25
    #                      3: c0 = 1, c1 = 0.5        -> 1 - (1 + 0.25) / 2.25
    #                      4: c0 = 3, c1 = 0.5        -> 1 - (9 + 0.25) / 12.25
    expected = [6 / 16, 0.0, 12 / 25, 4 / 9, 12 / 49]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(C.participation_coefficient(hand_graph(), [0, 0, 0, 1, 1]), expected, rtol=1e-14)
        # labels are arbitrary
        np.testing.assert_allclose(C.participation_coefficient(hand_graph(), [9, 9, 9, 2, 2]), expected, rtol=1e-14)


def test_participation_all_singletons_and_self_loop():
    # every vertex its own community: P_i = 1 - sum_j (w_ij / k_i)^2 over neighbours
    P = C.participation_coefficient(hand_graph(), np.arange(5))
    assert P[1] == pytest.approx(1 - (4 + 1) / 9)  # neighbours 0 (2) and 2 (1)
    graph = hand_graph()
    graph.add_edge(1, 1, weight=3.0)  # a self-loop counts once, into 1's own community
    assert C.participation_coefficient(graph, [0, 0, 0, 1, 1])[1] == 0.0
    assert C.participation_coefficient(graph, [0, 1, 0, 1, 1])[1] == pytest.approx(1 - (9 + 9) / 36)


def test_participation_isolated_vertex_is_nan_with_warning():
    graph = hand_graph()
    graph.add_vertices(1)
    with pytest.warns(DegenerateInputWarning, match=r"1 vertices have no edge.*\[5\]"):
        P = C.participation_coefficient(graph, [0, 0, 0, 1, 1, 1])
    assert np.isnan(P[5]) and np.isfinite(P[:5]).all()


def test_participation_single_community_warns_and_is_zero():
    with pytest.warns(DegenerateInputWarning, match="single community"):
        P = C.participation_coefficient(hand_graph(), [3] * 5)
    assert P.tolist() == [0.0] * 5


def test_participation_validates_membership():
    with pytest.raises(ValueError, match="5 vertices"):
        C.participation_coefficient(hand_graph(), [0, 0, 1])


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
