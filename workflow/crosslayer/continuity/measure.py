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
composite ``W_o W_v`` (d x d; query head h reads value head ``h // (n_heads / n_kv_heads)``). This
module computes the SVDs (of a checkpoint: :func:`measure_checkpoint`; in memory:
:func:`projection_continuity`; of every checkpoint of a training run, with their statistics:
:func:`measure_run`); the statistics over them are :mod:`crosslayer.continuity.statistics`.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from crosslayer.continuity.statistics import adjacent_cosines, checkpoint_summary
from crosslayer.continuity.tables import steps_table
from crosslayer.errors import CheckpointError, naming_checkpoint
from crosslayer.jacobians.closed_form import grouped_w_o
from crosslayer.linalg.effective_rank import effective_rank
from crosslayer.malloc import release_freed_memory
from crosslayer.models.adapters.base import PROJECTIONS as WEIGHT_PROJECTIONS
from crosslayer.models.weights import open_checkpoint

__all__ = [
    "PROJECTIONS",
    "ContinuitySettings",
    "measure_checkpoint",
    "measure_run",
    "ov_composite",
    "projection_continuity",
    "stack_continuity",
    "weighted_alignment",
]

PROJECTIONS = (*WEIGHT_PROJECTIONS, "ov")  # the stored projections and the OV composite
_WEIGHTS = PROJECTIONS[:-1]  # read from the checkpoint; "ov" is composed from o and v


@dataclass(frozen=True)
class ContinuitySettings:
    """What the SVDs of one checkpoint depend on (the ``projection_continuity`` rule's params; the
    statistics over them have settings of their own, :func:`crosslayer.continuity.statistics.checkpoint_summary`).

    Attributes
    ----------
    projections : tuple of str, default=PROJECTIONS
        ``continuity.projections``: a non-empty subset of :data:`PROJECTIONS`, without repeats;
        any sequence is kept as a tuple, in its order.

    Raises
    ------
    ValueError
        An unknown or repeated projection, or none.
    """

    projections: tuple = PROJECTIONS

    def __post_init__(self):
        projections = (self.projections,) if isinstance(self.projections, str) else tuple(self.projections)
        unknown = sorted(set(projections) - set(PROJECTIONS))
        if unknown or not projections or len(set(projections)) < len(projections):
            raise ValueError(f"continuity.projections must be distinct names among {PROJECTIONS}, got "
                             f"{list(projections)}" + (f" (unknown: {unknown})" if unknown else ""))
        object.__setattr__(self, "projections", projections)


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
    return grouped_w_o(o, n_heads=n_heads, n_kv_heads=n_kv_heads) @ v


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


def projection_continuity(read_layer, n_layers, settings=ContinuitySettings(), *, device="cpu", progress=None):
    """SVD of every layer's projections, streamed one layer at a time.

    Parameters
    ----------
    read_layer : callable
        ``read_layer(layer) -> {name: (out, in) tensor}``; names it leaves out (a family without
        the projection) are absent from the result, names beyond ``settings.projections`` ignored.
    n_layers : int
    settings : ContinuitySettings
    device : str
        Where the SVDs run (float32).
    progress : callable, optional
        Wraps the layer iterator.

    Returns
    -------
    dict of ndarray
        Per present projection ``p``: ``{p}.u1`` (L, out) and ``{p}.v1`` (L, in) float32, the
        second singular pair ``{p}.u2``, ``{p}.v2`` likewise, ``{p}.s`` (L, r) singular values,
        ``{p}.wa_u`` and ``{p}.wa_v`` (L - 1,) per-pair sigma^2-weighted alignments.

    Raises
    ------
    ValueError
        An SVD is not finite.
    """
    projections = settings.projections
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


def measure_checkpoint(manifest, settings=ContinuitySettings(), *, device="cpu"):
    """The ``projection_continuity`` job: :func:`projection_continuity` of the checkpoint a manifest
    describes, read one layer at a time (``"ov"`` composed from each layer's o and v).

    Parameters
    ----------
    manifest : dict
        As :func:`crosslayer.models.checkpoints.verified_manifest` returns it (``path``, ``model``,
        ``revision``, ``step``).
    settings : ContinuitySettings
    device : str, default="cpu"
        Where the SVDs run.

    Returns
    -------
    dict of ndarray
        The arrays of :func:`projection_continuity` plus ``step`` and ``n_layers``.

    Raises
    ------
    CheckpointError
        The checkpoint cannot be read, has fewer than 2 layers, or an SVD is not finite; the
        message names the model, revision and checkpoint.
    """
    release_freed_memory()
    projections = settings.projections
    with naming_checkpoint(manifest), open_checkpoint(manifest["path"], model=manifest["model"],
                                                      revision=manifest.get("revision")) as reader:
        g = reader.geometry
        if g.n_layers < 2:
            raise CheckpointError(f"continuity needs at least 2 layers, the checkpoint has {g.n_layers}")
        names = [name for name in projections if name != "ov"]
        if "ov" in projections:
            names = sorted(set(names) | {"o", "v"}, key=_WEIGHTS.index)

        def read_layer(layer):
            weights = reader.projections(layer, names=names)
            if "ov" in projections:
                weights["ov"] = ov_composite(weights["o"], weights["v"], n_heads=g.n_heads, n_kv_heads=g.n_kv_heads)
            return {name: w for name, w in weights.items() if name in projections}

        result = projection_continuity(
            read_layer, g.n_layers, settings, device=device,
            progress=lambda layers: tqdm(layers, desc=f"{manifest['model']} {manifest.get('revision')}", unit="layer"))
    return {**result, "step": manifest["step"], "n_layers": g.n_layers}


def measure_run(run, settings=ContinuitySettings(), *, model, save_steps, summary, device="cpu"):
    """The ``ablation_continuity`` job: :func:`measure_checkpoint` of every checkpoint a training run
    saved, and the statistics of each (:func:`crosslayer.continuity.statistics.checkpoint_summary`).

    Parameters
    ----------
    run : str or path-like
        A :func:`crosslayer.models.train.train_model` directory: ``step<N>/`` checkpoints and
        ``outcome.json``.
    settings : ContinuitySettings
    model : str
        The run's name, named in errors (each checkpoint's revision is ``step<N>``).
    save_steps : sequence of int
        The steps the run was to save; a diverged run saved only those before its divergence.
    summary : dict
        Keyword arguments of :func:`~crosslayer.continuity.statistics.checkpoint_summary`.
    device : str, default="cpu"

    Returns
    -------
    arrays : dict of ndarray
        The last checkpoint's :func:`measure_checkpoint` arrays and per-layer statistics; for a
        diverged run, those of no checkpoint (every projection absent).
    table : DataFrame
        One row per checkpoint and projection (:func:`crosslayer.continuity.tables.steps_table`);
        a diverged run's last step is the one it diverged at, every projection absent.
    """
    run = Path(run)
    outcome = json.loads((run / "outcome.json").read_text())
    steps = [step for step in save_steps if (run / f"step{step}").is_dir()]
    if not steps and outcome["diverged_step"] is None:
        raise ValueError(f"{run} holds none of the checkpoints of steps {list(save_steps)}")
    tables = []
    for step in tqdm(steps, desc="checkpoints", unit="step"):
        manifest = {"path": str(run / f"step{step}"), "model": model, "revision": f"step{step}", "step": step}
        result = measure_checkpoint(manifest, settings, device=device)
        table, arrays = checkpoint_summary(result, **summary)
        tables.append(table)
    if outcome["diverged_step"] is not None:  # no final checkpoint: every projection reported absent there
        result = {}
        table, arrays = checkpoint_summary(result, **summary)
        tables.append(table)
        steps.append(outcome["steps"])
    return {**result, **arrays}, steps_table(tables, steps)
