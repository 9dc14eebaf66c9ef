"""Geometric continuity of weight matrices across depth (paper 003, "Why geometric continuity
emerges in deep neural networks").

Per projection type P and layer l, ``W_l = U_l S_l V_l^T`` (economy SVD, ``r = min(out, in)``
singular triplets). With ``u_1`` the principal left (output-space) and ``v_1`` the principal
right (input-space) singular vector:

* continuity ``C_u = mean_l |<u_1^l, u_1^{l+1}>|`` over the ``L - 1`` adjacent pairs, ``C_v``
  likewise; against two independent uniform unit vectors of R^n, ``E|cos| =
  Gamma(n/2) / (sqrt(pi) Gamma((n+1)/2))``, about ``sqrt(2 / (pi n))``;
* sigma^2-weighted alignment ``WA_u = mean_l sum_i w_i^l |<u_i^l, u_i^{l+1}>|`` with
  ``w_i^l = s_i^2 / sum_j s_j^2`` of layer l (the earlier layer; reconstructed, METHODS.md);
* effective rank ``exp(H(p))``, ``p_i = s_i^power / sum_j s_j^power`` (paper 003: power 2);
* PCA of the L principal vectors after L2 normalization and sequential sign alignment (flip
  layer l when its dot with layer l-1, as aligned, is negative): the explained-variance ratio
  of the first components, against the same pipeline on L independent random unit vectors
  (seeded Monte Carlo).

Every quantity is invariant to the signs of singular vectors, and ``C``/``WA`` of one space to a
common orthogonal change of basis of that space across layers.

Projections come from :mod:`crosslayer.models.weights` in canonical ``(out, in)`` layout, plus the OV
composite ``W_o W_v`` (d x d; query head h reads value head ``h // (n_heads / n_kv_heads)``).
"""

import math

import numpy as np
import pandas as pd
import torch
from scipy.special import gammaln
from tqdm import tqdm

from crosslayer.errors import CheckpointError
from crosslayer.linalg.effective_rank import effective_rank
from crosslayer.malloc import release_freed_memory
from crosslayer.models.adapters.base import PROJECTIONS as WEIGHT_PROJECTIONS
from crosslayer.models.weights import open_checkpoint

__all__ = [
    "PROJECTIONS",
    "adjacent_cosines",
    "checkpoint_continuity",
    "continuity_checkpoint",
    "checkpoint_summary",
    "expected_abs_cosine",
    "ov_composite",
    "principal_pca",
    "random_evr_baseline",
    "sign_aligned",
    "stack_continuity",
    "weighted_alignment",
]

PROJECTIONS = (*WEIGHT_PROJECTIONS, "ov")  # the stored projections and the OV composite
_WEIGHTS = PROJECTIONS[:-1]  # read from the checkpoint; "ov" is composed from o and v


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


def weighted_alignment(bases_a, bases_b, s_a):
    """sigma^2-weighted alignment of one layer pair: ``sum_i w_i |<a_i, b_i>|``, ``w = s_a^2 / sum s_a^2``.

    Parameters
    ----------
    bases_a, bases_b : (n, r) array_like or torch.Tensor
        Singular vectors (columns, in order) of layer l and layer l + 1.
    s_a : (r,) array_like or torch.Tensor
        Singular values of layer l.

    Returns
    -------
    float in [0, 1]; ``|<a_1, b_1>|`` when layer l has rank 1.
    """
    a, b = torch.as_tensor(bases_a), torch.as_tensor(bases_b)
    s = torch.as_tensor(s_a, dtype=torch.float64, device=a.device)
    if a.ndim != 2 or a.shape != b.shape or s.shape != (a.shape[1],):
        raise ValueError(f"need bases (n, r) of equal shape and s (r,), got {tuple(a.shape)}, {tuple(b.shape)}, "
                         f"{tuple(s.shape)}")
    dots = torch.linalg.vecdot(a, b.to(a.dtype), dim=0).double()  # no (n, r) temporary: Gate's U is 235 MB at 8B
    w = s**2 / (s**2).sum()
    return float((w * dots.abs()).sum().clamp(0.0, 1.0))


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


def ov_composite(o, v, *, n_heads, n_kv_heads):
    """``W_o W_v``: the attention's value-output map of one token, (d, d).

    Parameters
    ----------
    o : (d, n_heads * head_dim) torch.Tensor
    v : (n_kv_heads * head_dim, d) torch.Tensor
        Canonical projections (:meth:`crosslayer.models.weights.WeightReader.projections`); under GQA
        query head h reads value head ``h // (n_heads // n_kv_heads)``.
    """
    if n_heads % n_kv_heads or v.shape[0] % n_kv_heads or o.shape[1] != v.shape[0] * (n_heads // n_kv_heads):
        raise ValueError(f"o {tuple(o.shape)} and v {tuple(v.shape)} do not match {n_heads} query and "
                         f"{n_kv_heads} key/value heads")
    group = n_heads // n_kv_heads
    head_dim = v.shape[0] // n_kv_heads
    o_grouped = o.reshape(o.shape[0], n_kv_heads, group, head_dim).sum(2)  # heads sharing a value head
    return o_grouped.reshape(o.shape[0], -1) @ v


def stack_continuity(stack, *, erank_power=2, vectors=False):
    """Continuity statistics of a stack of matrices held at once, from one batched SVD.

    Parameters
    ----------
    stack : (L, m, n) torch.Tensor or array_like
        One matrix per layer (e.g. the toy model's weights or gradients), L >= 2.
    erank_power : {1, 2}
    vectors : bool, default=False
        Also return the principal vectors ``u1_vectors`` (L, m) and ``v1_vectors`` (L, n)
        (None when a layer is all zero).

    Returns
    -------
    dict of float
        ``u1``, ``v1`` (continuity), ``u2``, ``v2`` (the same of the second singular pair; NaN
        when a layer has rank < 2), ``wa_u``, ``wa_v`` (sigma^2-weighted alignment, means over
        the L - 1 pairs), ``erank`` (mean over layers); all NaN when a layer is all zero or
        the stack holds NaN/Inf (a diverged run).
    """
    W = torch.as_tensor(stack).to(torch.float32)
    if W.ndim != 3 or W.shape[0] < 2:
        raise ValueError(f"`stack` must be (L >= 2, m, n), got shape {tuple(W.shape)}")
    failed = dict.fromkeys(("u1", "v1", "u2", "v2", "wa_u", "wa_v", "erank"), math.nan)
    failed |= {"u1_vectors": None, "v1_vectors": None} if vectors else {}
    if not bool(torch.isfinite(W).all()):
        return failed
    U, s, Vh = (x.double().cpu() for x in torch.linalg.svd(W, full_matrices=False))  # (L, m, r), (L, r), (L, r, n)
    if not bool((s[:, 0] > 0).all()):
        return failed
    u1, v1 = U[:, :, 0].numpy(), Vh[:, 0].numpy()
    tolerance = s[:, 0] * max(W.shape[1:]) * torch.finfo(torch.float32).eps  # numerical rank, as matrix_rank
    second = s.shape[1] > 1 and bool((s[:, 1] > tolerance).all())  # u2, v2 are defined
    pairs = range(len(s) - 1)
    return ({"u1_vectors": u1, "v1_vectors": v1} if vectors else {}) | {
        "u1": float(adjacent_cosines(u1).mean()),
        "v1": float(adjacent_cosines(v1).mean()),
        "u2": float(adjacent_cosines(U[:, :, 1].numpy()).mean()) if second else math.nan,
        "v2": float(adjacent_cosines(Vh[:, 1].numpy()).mean()) if second else math.nan,
        "wa_u": float(np.mean([weighted_alignment(U[l], U[l + 1], s[l]) for l in pairs])),
        "wa_v": float(np.mean([weighted_alignment(Vh[l].T, Vh[l + 1].T, s[l]) for l in pairs])),
        "erank": float(np.mean([effective_rank(row, power=erank_power) for row in s.numpy()])),
    }


def checkpoint_continuity(read_layer, n_layers, *, projections=PROJECTIONS, device="cpu", progress=None):
    """SVD of every layer's projections, streamed one layer at a time.

    Parameters
    ----------
    read_layer : callable
        ``read_layer(layer) -> {name: (out, in) tensor}``; names it leaves out (a family without
        the projection) are absent from the result.
    n_layers : int
    projections : iterable of str
        Subset of :data:`PROJECTIONS`.
    device : str
        Where the SVDs run (float32).
    progress : callable, optional
        Wraps the layer iterator.

    Returns
    -------
    dict of ndarray
        Per present projection ``p``: ``{p}.u1`` (L, out) and ``{p}.v1`` (L, in) float32, the
        second singular pair ``{p}.u2``, ``{p}.v2`` likewise, ``{p}.s`` (L, r) singular values, ``{p}.wa_u`` and ``{p}.wa_v`` (L - 1,) per-pair
        sigma^2-weighted alignments.
    """
    projections = tuple(projections)
    unknown = set(projections) - set(PROJECTIONS)
    if unknown:
        raise ValueError(f"unknown projection(s) {sorted(unknown)}; choose from {PROJECTIONS}")
    rows = {}
    previous = {}  # name -> (U, s, V) of the layer before
    layers = range(n_layers)
    for layer in progress(layers) if progress else layers:
        weights = read_layer(layer)
        for name in projections:
            if name not in weights:
                continue
            W = weights[name].to(device=device, dtype=torch.float32)
            if W.shape[0] < W.shape[1]:  # LAPACK is faster on tall matrices: 3.2x for Down at Llama-3.1-8B's shape (2 cores)
                V, s, Uh = torch.linalg.svd(W.T, full_matrices=False)
                U, Vh = Uh.T, V.T
            else:
                U, s, Vh = torch.linalg.svd(W, full_matrices=False)
            if not torch.isfinite(s).all():
                raise ValueError(f"layer {layer} projection '{name}': SVD is not finite")
            row = rows.setdefault(name, {"u1": [], "v1": [], "u2": [], "v2": [], "s": [], "wa_u": [], "wa_v": []})
            for i in (0, 1):  # the principal pair and its successor (NaN for a rank-1 shape)
                row[f"u{i + 1}"].append(U[:, i].cpu().numpy() if len(s) > i else np.full(U.shape[0], np.nan))
                row[f"v{i + 1}"].append(Vh[i].cpu().numpy() if len(s) > i else np.full(Vh.shape[1], np.nan))
            row["s"].append(s.double().cpu().numpy())
            if name in previous:
                U0, s0, V0 = previous[name]
                row["wa_u"].append(weighted_alignment(U0, U, s0))
                row["wa_v"].append(weighted_alignment(V0, Vh.T, s0))
            previous[name] = (U, s, Vh.T)
        del weights
    return {f"{name}.{key}": np.asarray(values, dtype=np.float64 if key in ("s", "wa_u", "wa_v") else np.float32)
            for name, row in rows.items() for key, values in row.items()}


def checkpoint_summary(result, *, erank_power=2, n_components=3, draws=1000, seed=0):
    """The checkpoint's continuity statistics: one table row per projection, and per-layer arrays.

    Parameters
    ----------
    result : dict of ndarray
        As returned by :func:`checkpoint_continuity`.
    erank_power : {1, 2}
        See :func:`crosslayer.linalg.effective_rank.effective_rank`.
    n_components : int
        Principal components summed in ``evr_u`` / ``evr_v``; below the number of layers.
    draws, seed : int
        Monte-Carlo draws of the random EVR baseline (one stream per vector dimension).

    Returns
    -------
    table : DataFrame
        One row per projection of :data:`PROJECTIONS`: ``projection``, ``present`` (False for a
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

    for name in PROJECTIONS:
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


def continuity_checkpoint(manifest, *, projections=PROJECTIONS, device="cpu"):
    """:func:`checkpoint_continuity` of the checkpoint a manifest describes, one layer at a time.

    Returns
    -------
    dict of ndarray
        The arrays of :func:`checkpoint_continuity` plus ``step`` and ``n_layers``.
    """
    release_freed_memory()
    model, revision = manifest["model"], manifest.get("revision")
    with open_checkpoint(manifest["path"], model=model, revision=revision) as reader:
        g = reader.geometry
        if g.n_layers < 2:
            raise CheckpointError(f"continuity needs at least 2 layers, the checkpoint has {g.n_layers}",
                                  model=model, revision=revision, file=manifest["path"])
        names = [name for name in projections if name != "ov"]
        if "ov" in projections:
            names = sorted(set(names) | {"o", "v"}, key=_WEIGHTS.index)

        def read_layer(layer):
            weights = reader.projections(layer, names=names)
            if "ov" in projections:
                weights["ov"] = ov_composite(weights["o"], weights["v"], n_heads=g.n_heads, n_kv_heads=g.n_kv_heads)
            return {name: w for name, w in weights.items() if name in projections}

        try:
            result = checkpoint_continuity(
                read_layer, g.n_layers, projections=projections, device=device,
                progress=lambda layers: tqdm(layers, desc=f"{model} {revision}", unit="layer"))
        except ValueError as err:
            raise CheckpointError(str(err), model=model, revision=revision, file=manifest["path"]) from err
    return {**result, "step": manifest["step"], "n_layers": g.n_layers}
