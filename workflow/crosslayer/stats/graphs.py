"""Activation-correlation graphs, one per residual-stream snapshot (paper 004).

Input is a snapshot ``X`` of shape (N samples, d units): last-token residual-stream activations,
a float NumPy array or torch tensor. The graph over the d units is built in three steps:

1. z-score every unit across the N samples and take the Pearson correlation matrix ``R``
   (float64, one GEMM);
2. keep, for every unit, its top-k edges by ``|r|`` (self excluded);
3. symmetrize by the union of the kept directed edges, keeping the weight with the larger
   ``|w|`` where both directions were kept; no self-loops; signs are kept.

The result is an undirected ``igraph.Graph`` with d vertices (vertex attribute ``"unit"``, the
column of X) and a signed edge attribute ``"weight"``. :func:`signed_subgraphs` splits it into
the positive and the negative layer used by signed community detection
(:mod:`crosslayer.stats.communities`). Graphs are stored as gzipped GraphML (``.graphml.gz``), which
``igraph.Graph.Read_GraphMLz`` opens directly; :func:`read_graph` additionally restores the exact
float64 weights.

Degenerate input never yields a silent number: a constant unit, a non-finite value or fewer than
3 samples raise ``ValueError``; fewer samples than units (N < d) is allowed but warns with
:class:`DegenerateInputWarning`.
"""

import gzip
import tempfile
import warnings
from pathlib import Path

import igraph
import numpy as np

from crosslayer.errors import DegenerateInputWarning
from crosslayer.linalg.arrays import to_numpy
from crosslayer.settings import is_int

__all__ = [
    "check_graph",
    "correlation_matrix",
    "top_k_edges",
    "correlation_graph",
    "signed_subgraphs",
    "write_graph",
    "read_graph",
]

# A unit counts as constant when its standard deviation is below this fraction of its largest
# |value|: centring a constant float64 column leaves rounding residue of order 1e-16 relative,
# not an exact zero, and real units (even large-mean "massive activation" ones) are far above.
_CONSTANT_RTOL = 1e-10
# Rows of |R| handled at once by top_k_edges (bounds the |R| copy and the argpartition indices).
_CHUNK_BYTES = 64 * 2**20
# GraphML stores doubles with 15 significant digits; the exact value travels as a string.
_EXACT_WEIGHT = "weight_repr"
_TINY = np.finfo(np.float64).tiny  # smallest normal double


# --------------------------------------------------------------------------- validation


def _check_finite(name, A):
    bad = ~np.isfinite(A)
    if bad.any():
        where = np.argwhere(bad)[:3].tolist()
        raise ValueError(f"`{name}` has {int(bad.sum())} non-finite values (NaN or inf), first at {where}")


def _check_k(k, d):
    if not is_int(k):
        raise ValueError(f"`k` must be an integer, got {k!r}")
    if not 1 <= k <= d - 1:
        raise ValueError(f"`k` must satisfy 1 <= k <= d - 1 = {d - 1} (d = {d} nodes), got {k}")


def check_graph(graph, *, vertices=False):
    """Raise ValueError unless `graph` is an undirected ``igraph.Graph`` whose edges carry a
    ``"weight"`` attribute (and, with `vertices`, has at least one vertex)."""
    if not isinstance(graph, igraph.Graph):
        raise ValueError(f"`graph` must be an igraph.Graph, got {type(graph).__name__}")
    if graph.is_directed():
        raise ValueError("`graph` must be undirected")
    if vertices and graph.vcount() == 0:
        raise ValueError("`graph` has no vertices")
    if graph.ecount() and "weight" not in graph.es.attributes():
        raise ValueError("`graph` has no edge attribute 'weight'")


# --------------------------------------------------------------------------- correlation


def correlation_matrix(X):
    """Pearson correlation between the units (columns) of a snapshot.

    Parameters
    ----------
    X : (N, d) array_like or torch.Tensor
        N samples of d units; any float dtype (computed in float64).

    Returns
    -------
    R : (d, d) ndarray, float64
        Symmetric, unit diagonal, entries clipped to [-1, 1]; ``Z.T @ Z / N`` with Z the
        z-scored X.

    Raises
    ------
    ValueError
        X is not 2-D, has fewer than 3 samples, holds NaN/inf, or has a constant unit (zero
        variance: its correlation is undefined); the message names the first constant units and
        how many there are.

    Warns
    -----
    DegenerateInputWarning
        When N < d. Correlations are still defined, but ``R`` has rank <= N - 1 (centring removes
        one dimension), so it is singular and every entry is estimated from fewer samples than
        there are units: top-k neighbour sets and communities built from it are noisier. The
        paper's setting (N = 1,000 samples, d = 4,096 units) is in this regime.
    """
    X = to_numpy(X)
    if X.ndim != 2:
        raise ValueError(f"`X` must be 2-D (N samples, d units), got shape {X.shape}")
    N, d = X.shape
    if N < 3:
        raise ValueError(f"`X` needs at least 3 samples (rows) for a correlation, got N = {N}")
    if d < 1:
        raise ValueError(f"`X` has no units (columns), shape {X.shape}")
    X = X.astype(np.float64, copy=False)
    _check_finite("X", X)
    Z = X - X.mean(axis=0)
    std = np.sqrt(np.einsum("ij,ij->j", Z, Z) / N)
    constant = np.flatnonzero(std <= _CONSTANT_RTOL * np.abs(X).max(axis=0))
    if constant.size:
        raise ValueError(
            f"`X` has {constant.size} constant unit(s) (zero variance across samples; correlation undefined),"
            f" column indices {constant[:10].tolist()}{' ...' if constant.size > 10 else ''}"
        )
    if N < d:
        warnings.warn(
            f"fewer samples than units (N = {N} < d = {d}): the correlation matrix has rank <= N - 1 = {N - 1},"
            " so correlations are noisier and top-k neighbours less reliable",
            DegenerateInputWarning,
            stacklevel=2,
        )
    Z /= std
    R = Z.T @ Z
    R /= N
    np.clip(R, -1.0, 1.0, out=R)  # rounding can overshoot by an ulp
    np.fill_diagonal(R, 1.0)
    return R


# --------------------------------------------------------------------------- top-k graph


def top_k_edges(R, k):
    """Sparse signed edge list: every node's top-k edges by ``|r|``, symmetrized.

    Parameters
    ----------
    R : (d, d) array_like
        Edge weights, e.g. a correlation matrix; need not be symmetric. The diagonal is ignored.
    k : int
        Edges kept per node (row), ``1 <= k <= d - 1``.

    Returns
    -------
    sources, targets : (m,) int64 ndarray
        ``sources < targets``, sorted by (source, target); ``d * k / 2 <= m <= d * k``.
    weights : (m,) float64 ndarray
        Signed weights.

    Notes
    -----
    Row i keeps the directed edges ``i -> j`` for the k largest ``|R[i, j]|``, ``j != i``. The
    undirected edge {i, j} exists when either direction was kept (union). Its weight is the kept
    value with the larger absolute value: ``R[i, j]`` if only ``i -> j`` was kept, else whichever
    of ``R[i, j]`` and ``R[j, i]`` is larger in absolute value (on an exact tie of opposite signs
    the upper-triangle value ``R[min, max]`` wins). A value that was not kept is not an edge and
    never competes. For a symmetric R both directions carry the same value. Ties in ``|r|`` at the
    k-th place of a row are broken arbitrarily (deterministically for a given NumPy).
    """
    R = to_numpy(R)
    if R.ndim != 2 or R.shape[0] != R.shape[1]:
        raise ValueError(f"`R` must be a square 2-D (d, d) matrix, got shape {R.shape}")
    d = R.shape[0]
    if d < 2:
        raise ValueError(f"`R` needs at least 2 nodes, got shape {R.shape}")
    _check_k(k, d)
    R = R.astype(np.float64, copy=False)
    _check_finite("R", R)

    cols = np.empty((d, k), dtype=np.int64)
    step = max(1, _CHUNK_BYTES // (8 * d))
    for start in range(0, d, step):  # chunks of rows, not nodes: bounds the working memory
        stop = min(d, start + step)
        A = np.abs(R[start:stop])
        A[np.arange(stop - start), np.arange(start, stop)] = -1.0  # below any |r|: never chosen
        cols[start:stop] = np.argpartition(A, d - k, axis=1)[:, d - k:]
    rows = np.repeat(np.arange(d, dtype=np.int64), k)
    cols = cols.ravel()
    w = R[rows, cols]

    s, t = np.minimum(rows, cols), np.maximum(rows, cols)
    key = s * d + t
    # per undirected pair: largest |w| first, then the upper-triangle (row < col) entry
    order = np.lexsort((rows > cols, -np.abs(w), key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order[1:]] != key[order[:-1]]
    keep = order[first]  # sorted by key, i.e. by (source, target)
    return s[keep], t[keep], w[keep]


def correlation_graph(X, *, k=10):
    """Signed top-k activation-correlation graph of a snapshot.

    Parameters
    ----------
    X : (N, d) array_like or torch.Tensor
        N samples of d units (see :func:`correlation_matrix` for the checks and the N < d
        warning).
    k : int, default=10
        Edges kept per unit (see :func:`top_k_edges`).

    Returns
    -------
    graph : igraph.Graph
        Undirected, d vertices with attribute ``"unit"`` (column index into X), edges with the
        signed correlation as ``"weight"``; no self-loops, no multi-edges.
    """
    X = to_numpy(X)
    if X.ndim == 2:
        _check_k(k, X.shape[1])  # before the O(N d^2) correlation
    R = correlation_matrix(X)
    sources, targets, weights = top_k_edges(R, k)
    return _build_graph(R.shape[0], sources, targets, weights)


def _build_graph(n, sources, targets, weights):
    graph = igraph.Graph(n=n, edges=np.column_stack([sources, targets]).tolist(), directed=False)
    graph.vs["unit"] = list(range(n))
    graph.es["weight"] = np.asarray(weights, dtype=np.float64).tolist()
    return graph


def signed_subgraphs(graph):
    """Split a signed graph into its positive and negative layers.

    Parameters
    ----------
    graph : igraph.Graph
        Undirected, edge attribute ``"weight"`` (signed).

    Returns
    -------
    G_pos, G_neg : igraph.Graph
        Both on the same vertex set (and vertex attributes) as ``graph``. ``G_pos`` holds the
        edges with ``w > 0`` and weight w; ``G_neg`` the edges with ``w < 0`` and weight ``|w|``.
        Edges of weight exactly 0 carry no sign and are in neither.
    """
    check_graph(graph)
    w = np.asarray(graph.es["weight"] if graph.ecount() else [], dtype=np.float64)
    _check_finite("graph edge weights", w)
    G_pos = graph.subgraph_edges(np.flatnonzero(w > 0).tolist(), delete_vertices=False)
    G_neg = graph.subgraph_edges(np.flatnonzero(w < 0).tolist(), delete_vertices=False)
    if G_neg.ecount():
        G_neg.es["weight"] = np.abs(np.asarray(G_neg.es["weight"], dtype=np.float64)).tolist()
    return G_pos, G_neg


# --------------------------------------------------------------------------- storage


def write_graph(graph, path):
    """Write a graph as gzipped GraphML (use the suffix ``.graphml.gz``).

    Parameters
    ----------
    graph : igraph.Graph
    path : str or os.PathLike

    Notes
    -----
    ``igraph.Graph.Read_GraphMLz(path)`` opens the file directly. GraphML keeps doubles to 15
    significant digits, so the exact float64 weights are also stored as a string edge attribute
    ``"weight_repr"`` (shortest round-trip ``repr``); :func:`read_graph` restores them from it.
    igraph cannot parse subnormal doubles (``|w| < 2.2e-308``), so those are written as 0 in
    ``"weight"`` (their exact value is still in ``"weight_repr"``). ``graph`` itself is not
    modified.
    """
    check_graph(graph)
    out = graph.copy()
    if out.ecount():
        w = np.asarray(out.es["weight"], dtype=np.float64)
        out.es[_EXACT_WEIGHT] = [repr(x) for x in w.tolist()]
        # igraph's GraphML reader rejects subnormal doubles: the plain copy gets 0 instead
        out.es["weight"] = np.where(np.abs(w) < _TINY, 0.0, w).tolist()
    with tempfile.TemporaryDirectory() as tmp:  # igraph's own gzip would stamp the time and the file name
        plain = Path(tmp) / "graph.graphml"
        out.write_graphml(str(plain))
        Path(path).write_bytes(gzip.compress(plain.read_bytes(), mtime=0))


def read_graph(path):
    """Read a graph written by :func:`write_graph`.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    graph : igraph.Graph
        Edge weights exactly as written (float64), vertex attribute ``"unit"`` as int.

    Raises
    ------
    ValueError
        The stored exact weights disagree with the GraphML ``"weight"`` values beyond their 15
        significant digits (the file was edited by a tool that did not update
        ``"weight_repr"``).
    """
    graph = igraph.Graph.Read_GraphMLz(str(path))
    attributes = graph.vs.attributes()
    if "id" in attributes and graph.vs["id"] == [f"n{i}" for i in range(graph.vcount())]:
        del graph.vs["id"]  # node ids GraphML requires, added back by the reader
    if "unit" in attributes:
        unit = np.asarray(graph.vs["unit"], dtype=np.float64)
        if np.array_equal(unit, np.round(unit)):  # GraphML stored the ints as doubles
            graph.vs["unit"] = unit.astype(np.int64).tolist()
    if _EXACT_WEIGHT in graph.es.attributes():
        exact = np.array([float(s) for s in graph.es[_EXACT_WEIGHT]])
        stored = np.asarray(graph.es["weight"], dtype=np.float64)
        close = np.isclose(stored, exact, rtol=1e-13, atol=_TINY)
        if not close.all():
            bad = np.flatnonzero(~close)
            raise ValueError(
                f"{path}: {bad.size} edge weights differ from their exact copy '{_EXACT_WEIGHT}'"
                f" (first edge {int(bad[0])}: {stored[bad[0]]!r} vs {exact[bad[0]]!r}); was the file edited?"
            )
        graph.es["weight"] = exact.tolist()
        del graph.es[_EXACT_WEIGHT]
    return graph
