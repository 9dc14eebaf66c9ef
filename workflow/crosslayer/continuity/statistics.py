"""Continuity statistics of a checkpoint's principal singular vectors and spectra (paper 003);
numpy, pandas and scipy only: a statistic changed in the config re-runs these, never the SVDs
(:mod:`crosslayer.continuity.measure`, which also defines the quantities).
"""

import math

import numpy as np
import pandas as pd
from scipy.special import gammaln

from crosslayer.linalg.effective_rank import effective_rank

__all__ = ["adjacent_cosines", "checkpoint_summary", "expected_abs_cosine", "principal_pca", "random_evr_baseline",
           "sign_aligned"]


def expected_abs_cosine(n):
    """``E|<a, b>|`` of two independent uniform unit vectors of R^n, exactly.

    Returns
    -------
    float
        ``Gamma(n/2) / (sqrt(pi) Gamma((n+1)/2))``: 2/pi at n = 2, 1/2 at n = 3, and
        ``sqrt(2 / (pi n)) (1 + 1/(4n) + O(1/n^2))`` for large n.
    """
    if n < 2:
        raise ValueError(f"`n` must be >= 2, got {n}")
    return float(math.exp(gammaln(n / 2) - gammaln((n + 1) / 2)) / math.sqrt(math.pi))


def _unit_rows(vectors, name="vectors"):
    X = np.asarray(vectors, dtype=float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"`{name}` must be 2-D (layers >= 2, dim), got shape {X.shape}")
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if not np.all(norms > 0):
        raise ValueError(f"`{name}` has a zero row (layer {int(np.argmin(norms))})")
    return X / norms


def adjacent_cosines(vectors):
    """``|<x_l, x_{l+1}>|`` of adjacent rows, after normalizing each row.

    Parameters
    ----------
    vectors : (L, n) array_like
        One principal vector per layer.

    Returns
    -------
    (L - 1,) ndarray in [0, 1]; their mean is the continuity C.
    """
    X = _unit_rows(vectors)
    return np.clip(np.abs(np.einsum("ln,ln->l", X[:-1], X[1:])), 0.0, 1.0)


def sign_aligned(vectors):
    """Rows normalized and flipped in sequence so that each has a non-negative dot product with
    the (aligned) row before it; the first row keeps its sign."""
    X = _unit_rows(vectors)
    for layer in range(1, len(X)):
        if X[layer] @ X[layer - 1] < 0:
            X[layer] = -X[layer]
    return X


def principal_pca(vectors, *, n_components=3):
    """PCA of one principal vector per layer (the paper's Figs 4 and 5).

    Parameters
    ----------
    vectors : (L, n) array_like
    n_components : int, default=3

    Returns
    -------
    coords : (L, n_components) ndarray
        The sign-aligned, normalized, centred vectors on the top principal components.
    evr : (n_components,) ndarray
        Explained-variance ratio of each component (their sum is the paper's "EVR in 3 PCs").
    """
    X = sign_aligned(vectors)
    if not 1 <= n_components < len(X):
        raise ValueError(f"`n_components` must be in [1, {len(X) - 1}] for {len(X)} vectors, got {n_components}")
    X -= X.mean(axis=0)
    # the L x L Gram matrix has the same nonzero spectrum as X^T X and is small when n >> L
    evals, evecs = np.linalg.eigh(X @ X.T)
    evals, evecs = np.clip(evals[::-1], 0.0, None), evecs[:, ::-1]
    coords = evecs[:, :n_components] * np.sqrt(evals[:n_components])
    total = evals.sum()  # 0 when every layer has the same direction: no variance to explain
    return coords, evals[:n_components] / total if total > 0 else np.full(n_components, np.nan)


def random_evr_baseline(n_vectors, dim, *, n_components=3, draws=1000, seed=0):
    """Explained-variance ratio of the top components for ``n_vectors`` independent uniform unit
    vectors of R^dim, through the same pipeline as :func:`principal_pca`.

    Returns
    -------
    mean, sd : float
        Of the summed EVR of ``n_components`` components over ``draws`` seeded draws.
    """
    if draws < 2:
        raise ValueError(f"`draws` must be >= 2, got {draws}")
    rng = np.random.default_rng(seed)
    values = np.array([principal_pca(rng.standard_normal((n_vectors, dim)), n_components=n_components)[1].sum()
                       for _ in range(draws)])
    return float(values.mean()), float(values.std(ddof=1))


def checkpoint_summary(result, *, projections, erank_power=2, n_components=3, draws=1000, seed=0):
    """The checkpoint's continuity statistics: one table row per projection, and per-layer arrays.

    Parameters
    ----------
    result : dict of ndarray
        As returned by :func:`crosslayer.continuity.measure.projection_continuity`.
    projections : sequence of str
        Every projection, in table order (:data:`crosslayer.continuity.measure.PROJECTIONS`);
        those missing from `result` get a row with ``present`` False.
    erank_power : {1, 2}
        See :func:`crosslayer.linalg.effective_rank.effective_rank`.
    n_components : int
        Principal components summed in ``evr_u`` / ``evr_v``; below the number of layers.
    draws, seed : int
        Monte-Carlo draws of the random EVR baseline (one stream per vector dimension).

    Returns
    -------
    table : DataFrame
        One row per projection of `projections`: ``projection``, ``present`` (False for a
        projection the family lacks: NaN values, not zeros), ``n_out``, ``n_in``, ``u1``, ``v1``
        (continuity), ``u2``, ``v2`` (that of the second singular pair, against the same
        baseline; NaN when it is missing, e.g. in a stored result without it), ``baseline_u``, ``baseline_v`` (exact ``E|cos|``), ``baseline_u_approx``,
        ``baseline_v_approx`` (``sqrt(2 / (pi n))``), ``wa_u``, ``wa_v``, ``erank`` (mean over
        layers), ``evr_u``, ``evr_v`` and their random baselines ``evr_baseline_u``, ``evr_baseline_v``.
    arrays : dict of ndarray
        Per present projection ``p``: ``{p}.cos_u``, ``{p}.cos_v`` (L - 1,) adjacent |cos|;
        ``{p}.pca_u``, ``{p}.pca_v`` (L, n_components) PCA coordinates; ``{p}.erank`` (L,).
    """
    rows, arrays, cache = [], {}, {}

    def evr_baseline(L, n):
        if (L, n) not in cache:
            cache[L, n] = random_evr_baseline(L, n, n_components=n_components, draws=draws, seed=seed)[0]
        return cache[L, n]

    for name in projections:
        if f"{name}.u1" not in result:
            rows.append({"projection": name, "present": False})
            continue
        u1, v1, s = result[f"{name}.u1"], result[f"{name}.v1"], result[f"{name}.s"]
        L, n_out, n_in = u1.shape[0], u1.shape[1], v1.shape[1]
        row = {"projection": name, "present": True, "n_out": n_out, "n_in": n_in}
        for space, vectors, n in (("u", u1, n_out), ("v", v1, n_in)):
            arrays[f"{name}.cos_{space}"] = adjacent_cosines(vectors)
            arrays[f"{name}.pca_{space}"], evr = principal_pca(vectors, n_components=n_components)
            second = result.get(f"{name}.{space}2")
            row[f"{space}2"] = math.nan if second is None or np.isnan(second).any() else adjacent_cosines(second).mean()
            row |= {f"{space}1": arrays[f"{name}.cos_{space}"].mean(), f"baseline_{space}": expected_abs_cosine(n),
                    f"baseline_{space}_approx": math.sqrt(2 / (math.pi * n)), f"wa_{space}": result[f"{name}.wa_{space}"].mean(),
                    f"evr_{space}": evr.sum(), f"evr_baseline_{space}": evr_baseline(L, n)}
        arrays[f"{name}.erank"] = np.array([effective_rank(values, power=erank_power) for values in s])
        rows.append(row | {"erank": arrays[f"{name}.erank"].mean()})
    columns = ["projection", "present", "n_out", "n_in", "u1", "v1", "u2", "v2", "baseline_u", "baseline_v", "baseline_u_approx",
               "baseline_v_approx", "wa_u", "wa_v", "erank", "evr_u", "evr_v", "evr_baseline_u", "evr_baseline_v"]
    table = pd.DataFrame(rows).reindex(columns=columns)
    table["n_out"], table["n_in"] = table["n_out"].astype("Int64"), table["n_in"].astype("Int64")
    return table, arrays
