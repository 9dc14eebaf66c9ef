"""Communities of activation-correlation graphs and statistics of partitions (paper 004).

Input graphs are undirected ``igraph.Graph`` objects with a signed edge attribute ``"weight"``
(as built by :func:`crosslayer.stats.graphs.correlation_graph`). A partition is a membership vector:
an int ndarray (d,) giving each vertex's community. Every detector returns it relabelled
canonically (:func:`canonical_membership`: communities numbered 0, 1, ... by decreasing size,
ties by smallest member), so equal partitions compare equal element-wise.

Detectors (:data:`METHODS`, dispatched by :func:`detect_communities`):

* ``"signed_cpm"``: signed Leiden CPM, the paper's backbone. The positive and negative layers
  (:func:`crosslayer.stats.graphs.signed_subgraphs`) are optimised jointly with layer weights +1 / -1;
* ``"modularity"``: unsigned Leiden modularity on ``|w|``;
* ``"infomap"``: igraph's InfoMap on ``|w|``;
* ``"signed_modularity"``: signed Leiden modularity, ``ModularityVertexPartition`` on the
  positive and negative layers with layer weights +1 / -1 (leidenalg's recipe for negative links);
* ``"signed_rb"``: signed Leiden with the configuration null (``RBConfigurationVertexPartition``,
  Reichardt-Bornholdt; Traag & Bruggeman 2009) at resolutions gamma+ / gamma-, layer weights
  +1 / -1.

:data:`METHOD_LABELS` names each method as paper 004's Table 1 does; :func:`signed_quality` is the
objective a signed method maximises, as leidenalg computes it.

Partition statistics: community sizes, the number of non-degenerate (non-singleton)
communities, normalized mutual information between two partitions, seed stability, and the
participation coefficient of every vertex.
"""

import random
import warnings
from itertools import combinations

import igraph
import leidenalg
import numpy as np
import scipy.sparse

from crosslayer.errors import DegenerateInputWarning
from crosslayer.settings import is_int
from crosslayer.stats.graphs import check_graph, signed_subgraphs

__all__ = [
    "METHODS",
    "SIGNED_METHODS",
    "METHOD_LABELS",
    "canonical_membership",
    "signed_leiden",
    "signed_leiden_modularity",
    "signed_leiden_rb",
    "signed_quality",
    "leiden_modularity",
    "infomap",
    "detect_communities",
    "community_sizes",
    "n_nondegenerate",
    "partition_nmi",
    "seed_stability",
    "participation_coefficient",
]

METHODS = ("signed_cpm", "modularity", "infomap", "signed_modularity", "signed_rb")

#: The methods optimised as a signed multiplex (positive layer +1, negative layer -1).
SIGNED_METHODS = ("signed_cpm", "signed_modularity", "signed_rb")

#: How paper 004's Table 1 (and ``method_comparison.tsv``) names each method.
METHOD_LABELS = {
    "signed_cpm": "signed Leiden CPM",
    "signed_modularity": "signed Leiden (modularity)",
    "signed_rb": "signed Leiden (RB configuration)",
    "modularity": "Leiden modularity (|w|)",
    "infomap": "InfoMap",
}


# --------------------------------------------------------------------------- validation


def _abs_weights(graph):
    """|w| of every edge as a float64 array; NaN/inf raise."""
    w = np.abs(np.asarray(graph.es["weight"] if graph.ecount() else [], dtype=np.float64))
    if not np.isfinite(w).all():
        raise ValueError(f"`graph` has {int((~np.isfinite(w)).sum())} non-finite edge weights")
    return w


def _check_membership(name, membership, n=None):
    m = np.asarray(membership)
    if m.ndim != 1 or m.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D sequence of community labels, got shape {m.shape}")
    if not np.issubdtype(m.dtype, np.integer):
        raise ValueError(f"`{name}` must hold integer community labels, got dtype {m.dtype}")
    if n is not None and m.size != n:
        raise ValueError(f"`{name}` has {m.size} entries but the graph has {n} vertices")
    return m


def _igraph_seed(seed):
    if not is_int(seed) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_iterations(n_iterations):
    if not is_int(n_iterations) or n_iterations == 0:
        raise ValueError(f"`n_iterations` must be a non-zero integer (negative: until stable), got {n_iterations!r}")
    return int(n_iterations)


# --------------------------------------------------------------------------- detectors


def canonical_membership(membership):
    """Relabel a partition canonically.

    Parameters
    ----------
    membership : (d,) array_like of int
        Any integer labels.

    Returns
    -------
    membership : (d,) int64 ndarray
        The same partition with communities numbered 0, 1, ... by decreasing size, ties broken by
        the smallest vertex index in the community. Two memberships describe the same partition
        iff their canonical forms are equal.
    """
    m = _check_membership("membership", membership)
    _, first, inverse, counts = np.unique(m, return_index=True, return_inverse=True, return_counts=True)
    order = np.lexsort((first, -counts))  # first occurrence = smallest member
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[inverse.ravel()]


def signed_leiden(graph, *, resolution_pos=0.05, resolution_neg=0.05, seed=0, n_iterations=-1):
    """Signed Leiden CPM: positive and negative layers optimised jointly.

    Parameters
    ----------
    graph : igraph.Graph
        Undirected, signed edge attribute ``"weight"``.
    resolution_pos, resolution_neg : float, default=0.05
        CPM resolutions gamma+ of the positive layer and gamma- of the negative layer (>= 0).
    seed : int, default=0
        Seed of the Leiden optimiser; the same seed gives the same partition.
    n_iterations : int, default=-1
        Leiden iterations; negative runs until an iteration no longer improves the quality.

    Returns
    -------
    membership : (d,) int64 ndarray
        Canonical (see :func:`canonical_membership`).

    Notes
    -----
    ``leidenalg.Optimiser.optimise_partition_multiplex`` over ``CPMVertexPartition(G_pos, w,
    gamma+)`` and ``CPMVertexPartition(G_neg, |w|, gamma-)`` with layer weights ``[1, -1]``
    maximises

        Q = sum_c [ w+_c - gamma+ * n_c (n_c - 1) / 2 ] - sum_c [ |w-|_c - gamma- * n_c (n_c - 1) / 2 ]

    with ``w+_c`` (``|w-|_c``) the positive (absolute negative) weight inside community c and n_c
    its size. The two null-model terms have opposite signs, so only ``gamma+ - gamma-`` matters:
    **with gamma+ = gamma- (the default 0.05 / 0.05) they cancel** and Q is the signed weight
    inside communities. Then two groups joined by any net positive weight merge, and groups stay
    apart only where negative edges (or no edges) separate them. For a resolution that also
    penalises large positive-only communities, take ``resolution_neg < resolution_pos`` (e.g.
    0.05 / 0).
    """
    return _optimise_signed(graph, "signed_cpm", seed, n_iterations, resolution_pos=resolution_pos,
                            resolution_neg=resolution_neg)


def _signed_layers(graph, method, membership=None, *, resolution_pos=0.05, resolution_neg=0.05,
                   rb_resolution_pos=1.0, rb_resolution_neg=1.0):
    """The leidenalg partitions of the positive and negative layers of a signed method, with their
    layer weights (+1, -1). A layer without edges adds nothing to any of these qualities and is left
    out (modularity is undefined on it), except in CPM, whose layers are always both kept."""
    G_pos, G_neg = signed_subgraphs(graph)
    kw = {} if membership is None else {"initial_membership": [int(c) for c in membership]}
    layers, weights = [], []
    for G, sign, gamma_cpm, gamma_rb in ((G_pos, 1, resolution_pos, rb_resolution_pos),
                                         (G_neg, -1, resolution_neg, rb_resolution_neg)):
        w = G.es["weight"] if G.ecount() else None
        if method == "signed_cpm":
            layers.append(leidenalg.CPMVertexPartition(G, weights=w, resolution_parameter=float(gamma_cpm), **kw))
        elif not G.ecount():
            continue
        elif method == "signed_modularity":
            layers.append(leidenalg.ModularityVertexPartition(G, weights=w, **kw))
        else:
            layers.append(leidenalg.RBConfigurationVertexPartition(G, weights=w, resolution_parameter=float(gamma_rb),
                                                                   **kw))
        weights.append(sign)
    return layers, weights


def _check_resolutions(**resolutions):
    for name, value in resolutions.items():
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"`{name}` must be a finite number >= 0, got {value!r}")


def _optimise_signed(graph, method, seed, n_iterations, **resolutions):
    check_graph(graph, vertices=True)
    _check_resolutions(**resolutions)
    seed, n_iterations = _igraph_seed(seed), _check_iterations(n_iterations)
    w = _abs_weights(graph)  # NaN/inf check
    if method != "signed_cpm" and not w.sum() > 0:  # CPM of no edge is defined: every unit alone
        raise ValueError(f"`graph` has no edge of non-zero weight: {method} is undefined")
    layers, weights = _signed_layers(graph, method, **resolutions)
    optimiser = leidenalg.Optimiser()
    optimiser.set_rng_seed(seed)
    optimiser.optimise_partition_multiplex(layers, layer_weights=weights, n_iterations=n_iterations)
    return canonical_membership(layers[0].membership)


def signed_leiden_modularity(graph, *, seed=0, n_iterations=-1):
    """Signed Leiden modularity: the positive and negative layers' modularities, +1 / -1.

    Parameters
    ----------
    graph : igraph.Graph
        Undirected, signed edge attribute ``"weight"``, at least one non-zero edge.
    seed : int, default=0
    n_iterations : int, default=-1
        Negative runs until stable.

    Returns
    -------
    membership : (d,) int64 ndarray
        Canonical.

    Notes
    -----
    ``optimise_partition_multiplex`` over ``ModularityVertexPartition(G_pos, w)`` and
    ``ModularityVertexPartition(G_neg, |w|)`` with layer weights ``[1, -1]`` maximises

        Q = Q+ - Q-,   Q+- = 1/(2 m+-) sum_ij (A+-_ij - k+-_i k+-_j / (2 m+-)) delta(c_i, c_j)

    (each layer's modularity with its own total weight m+- and strengths k+-): positive weight
    inside communities beyond its configuration-model expectation, and negative weight inside
    them below its own. A graph without negative edges reduces to unsigned modularity of the
    positive layer.
    """
    return _optimise_signed(graph, "signed_modularity", seed, n_iterations)


def signed_leiden_rb(graph, *, resolution_pos=1.0, resolution_neg=1.0, seed=0, n_iterations=-1):
    """Signed Leiden with the configuration null at resolutions gamma+ / gamma-
    (Reichardt-Bornholdt; Traag & Bruggeman 2009).

    Parameters
    ----------
    graph : igraph.Graph
        Undirected, signed edge attribute ``"weight"``, at least one non-zero edge.
    resolution_pos, resolution_neg : float, default=1.0
        gamma+ and gamma- (>= 0); 1 / 1 weighs every expectation as modularity does.
    seed : int, default=0
    n_iterations : int, default=-1

    Returns
    -------
    membership : (d,) int64 ndarray
        Canonical.

    Notes
    -----
    ``RBConfigurationVertexPartition`` layers with layer weights ``[1, -1]`` maximise

        Q = sum_ij [(A+_ij - gamma+ k+_i k+_j / (2 m+)) - (A-_ij - gamma- k-_i k-_j / (2 m-))] delta(c_i, c_j),

    the unnormalised signed modularity: unlike ``"signed_modularity"`` the two layers are not
    divided by their own total weight, so the layer with more weight counts more.
    """
    _check_resolutions(resolution_pos=resolution_pos, resolution_neg=resolution_neg)  # named as the caller names them
    return _optimise_signed(graph, "signed_rb", seed, n_iterations, rb_resolution_pos=resolution_pos,
                            rb_resolution_neg=resolution_neg)


def signed_quality(graph, membership, method, *, resolution_pos=0.05, resolution_neg=0.05, rb_resolution_pos=1.0,
                   rb_resolution_neg=1.0):
    """The objective a signed method maximises, for a given partition, as leidenalg computes it.

    Parameters
    ----------
    graph : igraph.Graph
    membership : (d,) array_like of int
    method : {"signed_cpm", "signed_modularity", "signed_rb"}
    resolution_pos, resolution_neg : float, default=0.05
        CPM resolutions (``"signed_cpm"``).
    rb_resolution_pos, rb_resolution_neg : float, default=1.0
        Configuration-null resolutions (``"signed_rb"``).

    Returns
    -------
    quality : float
        ``sum_layers weight * partition.quality()`` with layer weights +1 (positive layer) and -1
        (negative layer): the value ``optimise_partition_multiplex`` increases.
    """
    if method not in SIGNED_METHODS:
        raise ValueError(f"`method` must be one of {', '.join(SIGNED_METHODS)}; got {method!r}")
    check_graph(graph, vertices=True)
    _abs_weights(graph)
    membership = _check_membership("membership", membership, graph.vcount())
    layers, weights = _signed_layers(graph, method, membership, resolution_pos=resolution_pos,
                                     resolution_neg=resolution_neg, rb_resolution_pos=rb_resolution_pos,
                                     rb_resolution_neg=rb_resolution_neg)
    return float(sum(w * layer.quality() for layer, w in zip(layers, weights)))


def leiden_modularity(graph, *, seed=0, n_iterations=-1):
    """Unsigned Leiden modularity on ``|w|``.

    Parameters
    ----------
    graph : igraph.Graph
        Undirected, edge attribute ``"weight"`` (its sign is dropped). Needs at least one edge
        of non-zero weight (modularity is undefined otherwise).
    seed : int, default=0
    n_iterations : int, default=-1
        Negative runs until stable.

    Returns
    -------
    membership : (d,) int64 ndarray
        Canonical.
    """
    check_graph(graph, vertices=True)
    seed, n_iterations = _igraph_seed(seed), _check_iterations(n_iterations)
    w = _abs_weights(graph)
    if not w.sum() > 0:
        raise ValueError("`graph` has no edge of non-zero weight: modularity is undefined")
    partition = leidenalg.ModularityVertexPartition(graph, weights=w.tolist())
    optimiser = leidenalg.Optimiser()
    optimiser.set_rng_seed(seed)
    optimiser.optimise_partition(partition, n_iterations=n_iterations)
    return canonical_membership(partition.membership)


def infomap(graph, *, seed=0, trials=10):
    """InfoMap (igraph ``community_infomap``) on ``|w|``.

    Parameters
    ----------
    graph : igraph.Graph
        Undirected, edge attribute ``"weight"`` (its sign is dropped).
    seed : int, default=0
        Seeds igraph's random number generator for this call.
    trials : int, default=10
        Independent InfoMap runs; the best code length wins.

    Returns
    -------
    membership : (d,) int64 ndarray
        Canonical.

    Notes
    -----
    igraph draws from a process-wide generator; this function installs a ``random.Random(seed)``
    for the call and afterwards restores igraph's default (Python's ``random`` module), so a
    custom generator installed by the caller with ``igraph.set_random_number_generator`` is
    replaced by the default.
    """
    check_graph(graph, vertices=True)
    seed = _igraph_seed(seed)
    if not is_int(trials) or trials < 1:
        raise ValueError(f"`trials` must be a positive integer, got {trials!r}")
    w = _abs_weights(graph)
    igraph.set_random_number_generator(random.Random(seed))
    try:
        clustering = graph.community_infomap(edge_weights=w.tolist() if w.size else None, trials=int(trials))
    finally:
        igraph.set_random_number_generator(random)
    return canonical_membership(clustering.membership)


def detect_communities(graph, method, *, seed=0, resolution_pos=0.05, resolution_neg=0.05, rb_resolution_pos=1.0,
                       rb_resolution_neg=1.0):
    """Communities by one of :data:`METHODS`.

    Parameters
    ----------
    graph : igraph.Graph
    method : {"signed_cpm", "modularity", "infomap", "signed_modularity", "signed_rb"}
    seed : int, default=0
    resolution_pos, resolution_neg : float, default=0.05
        Used by ``"signed_cpm"`` only (see :func:`signed_leiden`); ignored by the others.
    rb_resolution_pos, rb_resolution_neg : float, default=1.0
        Used by ``"signed_rb"`` only (see :func:`signed_leiden_rb`).

    Returns
    -------
    membership : (d,) int64 ndarray
        Canonical.
    """
    if method == "signed_cpm":
        return signed_leiden(graph, resolution_pos=resolution_pos, resolution_neg=resolution_neg, seed=seed)
    if method == "modularity":
        return leiden_modularity(graph, seed=seed)
    if method == "infomap":
        return infomap(graph, seed=seed)
    if method == "signed_modularity":
        return signed_leiden_modularity(graph, seed=seed)
    if method == "signed_rb":
        return signed_leiden_rb(graph, resolution_pos=rb_resolution_pos, resolution_neg=rb_resolution_neg, seed=seed)
    raise ValueError(f"`method` must be one of {', '.join(METHODS)}; got {method!r}")


# --------------------------------------------------------------------------- partition stats


def community_sizes(membership):
    """Size of every community.

    Parameters
    ----------
    membership : (d,) array_like of int

    Returns
    -------
    sizes : (n_communities,) int64 ndarray
        Decreasing; entry c is the size of community c of the canonical relabelling.
    """
    m = canonical_membership(membership)
    return np.bincount(m).astype(np.int64)


def n_nondegenerate(membership, min_size=2):
    """Number of communities with at least ``min_size`` members.

    Parameters
    ----------
    membership : (d,) array_like of int
    min_size : int, default=2
        With the default, singleton communities are the degenerate ones: a single vertex is not
        a mesoscale group (CPM and InfoMap leave weakly tied vertices alone).

    Returns
    -------
    count : int
    """
    if not is_int(min_size) or min_size < 1:
        raise ValueError(f"`min_size` must be a positive integer, got {min_size!r}")
    return int((community_sizes(membership) >= min_size).sum())


def partition_nmi(a, b):
    """Normalized mutual information between two partitions of the same vertices.

    Parameters
    ----------
    a, b : (d,) array_like of int
        Memberships (any labels).

    Returns
    -------
    nmi : float
        ``I(a; b) / ((H(a) + H(b)) / 2)`` (arithmetic-mean normalisation, scikit-learn's default),
        in [0, 1]; independent of the labels. Computed by igraph's
        ``compare_communities(method="nmi")``.

    Notes
    -----
    Identical partitions (up to relabelling) give exactly 1.0. This includes two
    single-community partitions, where ``0 / 0`` would be undefined: they are identical, so their
    disruption ``1 - NMI`` is 0 (igraph and scikit-learn also return 1 there). A single-community
    partition against any other partition gives 0 (``I = 0`` while ``H > 0``).
    """
    a, b = canonical_membership(a), canonical_membership(b)
    if a.size != b.size:
        raise ValueError(f"`a` and `b` must have the same length, got {a.size} and {b.size}")
    if np.array_equal(a, b):
        return 1.0  # igraph's rounding can give 1 - 2e-16 for two equal partitions
    return float(igraph.compare_communities(a.tolist(), b.tolist(), method="nmi"))


def seed_stability(graph, method, seeds, **kw):
    """Agreement of the partitions found from different seeds.

    Parameters
    ----------
    graph : igraph.Graph
    method : str
        One of :data:`METHODS`.
    seeds : sequence of int
        At least two seeds.
    **kw
        Passed to :func:`detect_communities` (``resolution_pos``, ``resolution_neg``,
        ``rb_resolution_pos``, ``rb_resolution_neg``).

    Returns
    -------
    stability : float
        Mean :func:`partition_nmi` over all pairs of seeds (1 = every seed finds the same
        partition).
    memberships : (n_seeds, d) int64 ndarray
        Canonical membership per seed, in the order of ``seeds``.
    """
    seeds = list(seeds)
    if len(seeds) < 2:
        raise ValueError(f"`seeds` must hold at least two seeds, got {seeds!r}")
    memberships = np.stack([detect_communities(graph, method, seed=seed, **kw) for seed in seeds])
    nmis = [partition_nmi(memberships[i], memberships[j]) for i, j in combinations(range(len(seeds)), 2)]
    return float(np.mean(nmis)), memberships


def participation_coefficient(graph, membership):
    """Participation coefficient of every vertex.

    Parameters
    ----------
    graph : igraph.Graph
        Undirected, edge attribute ``"weight"`` (its sign is dropped).
    membership : (d,) array_like of int

    Returns
    -------
    P : (d,) float64 ndarray
        ``P_i = 1 - sum_c (k_ic / k_i)^2`` with ``k_ic`` the sum of ``|w|`` over the edges from i
        into community c and ``k_i = sum_c k_ic``. 0 when all of i's weight stays in one
        community; up to ``1 - 1/n_c`` when it spreads evenly over n_c communities. NaN for a
        vertex with ``k_i = 0`` (no edge of non-zero weight), where the ratio is undefined.

    Warns
    -----
    DegenerateInputWarning
        When some vertices have ``k_i = 0`` (their P is NaN), and when the partition has a single
        community (P = 0 everywhere, which is correct but says nothing about the vertices).

    Notes
    -----
    A self-loop counts once, into the vertex's own community; parallel edges add up.
    """
    check_graph(graph, vertices=True)
    d = graph.vcount()
    m = canonical_membership(_check_membership("membership", membership, d))
    w = _abs_weights(graph)
    edges = np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    s, t = edges[:, 0], edges[:, 1]
    other = s != t  # both directions for ordinary edges, once for a self-loop
    A = scipy.sparse.csr_matrix(
        (np.concatenate([w, w[other]]), (np.concatenate([s, t[other]]), np.concatenate([t, s[other]]))),
        shape=(d, d),
    )
    n_communities = int(m.max()) + 1
    C = scipy.sparse.csr_matrix((np.ones(d), (np.arange(d), m)), shape=(d, n_communities))
    K = (A @ C).tocsr()  # K[i, c] = k_ic
    k = np.asarray(K.sum(axis=1)).ravel()
    squares = np.asarray(K.multiply(K).sum(axis=1)).ravel()
    isolated = k == 0
    P = np.full(d, np.nan)
    P[~isolated] = 1.0 - squares[~isolated] / k[~isolated] ** 2
    np.clip(P, 0.0, 1.0, out=P)  # rounding; NaN stays NaN
    if isolated.any():
        warnings.warn(
            f"{int(isolated.sum())} vertices have no edge of non-zero weight; their participation coefficient"
            f" is NaN (first: {np.flatnonzero(isolated)[:10].tolist()})",
            DegenerateInputWarning,
            stacklevel=2,
        )
    if n_communities == 1:
        warnings.warn(
            "the partition has a single community: every participation coefficient is 0, which is"
            " uninformative",
            DegenerateInputWarning,
            stacklevel=2,
        )
    return P
