"""Cross-layer alignment of MLP weight products (paper 000, "Common Origins, Divergent Destinations").

Per layer l the MLP product ``M_l = W_down @ W_up`` (d x d; SwiGLU gate ignored, biases and norm
gains ignored) has top-k left (output-space, U) and right (input-space, V) singular subspaces.
Their overlaps between all layer pairs are the alignment; this module computes them per
checkpoint and summarises them across checkpoints.

For gated MLPs, the paper's proposed next step is the gate-conditioned product
``W_down diag(g(x)) W_up`` averaged over inputs, ``g`` the gate activation at the MLP input;
being linear in ``g`` it equals ``W_down diag(mean g) W_up`` (:func:`gated_alignment`).
"""

import numpy as np
import torch
from tqdm import tqdm

from crosslayer.errors import CheckpointError
from crosslayer.jacobians.closed_form import activation, apply_norm
from crosslayer.linalg.subspace import pairwise_overlap, top_singular_subspaces
from crosslayer.malloc import release_freed_memory
from crosslayer.models.adapters import adapter_for
from crosslayer.models.weights import open_checkpoint

__all__ = [
    "mlp_product",
    "checkpoint_alignment",
    "align_checkpoint",
    "mean_gate",
    "gated_alignment",
]


def mlp_product(up, down, *, dtype=torch.float32):
    """``W_down @ W_up``: the MLP's linear read-write map in the residual stream.

    Parameters
    ----------
    up : (d_ff, d) torch.Tensor
    down : (d, d_ff) torch.Tensor

    Returns
    -------
    M : (d, d) torch.Tensor of `dtype`, on `up`'s device.
    """
    if up.ndim != 2 or down.ndim != 2 or down.shape[1] != up.shape[0] or down.shape[0] != up.shape[1]:
        raise ValueError(f"need up (d_ff, d) and down (d, d_ff), got {tuple(up.shape)} and {tuple(down.shape)}")
    return down.to(dtype) @ up.to(dtype)


def checkpoint_alignment(read_mlp, n_layers, *, k=10, method="arpack", gap_tol=1e-3, device="cpu", progress=None):
    """Top-k MLP-product subspaces of every layer and their pairwise overlaps.

    Parameters
    ----------
    read_mlp : callable
        ``read_mlp(layer) -> (up, down)`` float tensors; called once per layer, so only one
        layer's matrices are held at a time.
    n_layers : int
    k : int, default=10
        Subspace dimension.
    method : {"arpack", "full"}
        See :func:`crosslayer.linalg.subspace.top_singular_subspaces`.
    gap_tol : float, default=1e-3
        When the relative gap ``(s_k - s_{k+1}) / s_k`` is below this, the float32 product does
        not pin the top-k subspace down well; the product is recomputed in float64 and used.
    device : str, default="cpu"
        Where the product is formed.
    progress : callable, optional
        Wraps the layer iterator (e.g. ``tqdm``).

    Returns
    -------
    result : dict of ndarray
        ``left``, ``right`` (L, d, k) float32 bases; ``singular_values`` (L, k+1);
        ``relative_gap`` (L,); ``float64_recomputed`` (L,) bool; ``overlap_left``,
        ``overlap_right`` (L, L) symmetric with ones on the diagonal; ``overlap_cross`` (L, L),
        ``[i, j]`` = overlap of layer i's left (write) with layer j's right (read) subspace.
    """
    layers = range(n_layers)
    left, right, svals, gaps, recomputed = [], [], [], [], []
    for layer in progress(layers) if progress else layers:
        up, down = (t.to(device) for t in read_mlp(layer))
        M = mlp_product(up, down)
        if not torch.isfinite(M).all():
            raise ValueError(f"layer {layer}: W_down @ W_up has non-finite entries (float32 overflow?)")
        U, s, V = top_singular_subspaces(M.double().cpu().numpy(), k, method=method, seed=layer)
        gap = (s[k - 1] - s[k]) / s[k - 1] if s[k - 1] > 0 else 0.0
        if gap < gap_tol:
            M = mlp_product(up, down, dtype=torch.float64)
            U, s, V = top_singular_subspaces(M.cpu().numpy(), k, method=method, seed=layer)
        _check_rank(s, k, layer, size=max(up.shape), dtype=M.dtype)
        left.append(U)
        right.append(V)
        svals.append(s)
        gaps.append(gap)
        recomputed.append(gap < gap_tol)
        del up, down
    left, right = np.stack(left), np.stack(right)
    return {
        "left": left.astype(np.float32),
        "right": right.astype(np.float32),
        "singular_values": np.stack(svals),
        "relative_gap": np.asarray(gaps),
        "float64_recomputed": np.asarray(recomputed),
        "overlap_left": pairwise_overlap(left),
        "overlap_right": pairwise_overlap(right),
        "overlap_cross": pairwise_overlap(left, right),
    }


def _check_rank(s, k, layer, *, size, dtype):
    """Refuse a top-k subspace that holds rounding noise: the k-th singular value must lie above
    numpy's rank tolerance ``s_1 * max(d, d_ff) * eps`` of the product's dtype."""
    tol = s[0] * size * torch.finfo(dtype).eps
    if not s[k - 1] > tol:
        rank = int((s > tol).sum())
        raise ValueError(
            f"layer {layer}: W_down @ W_up has numerical rank {rank} < k = {k} "
            f"(s_{k} = {s[k - 1]:.3g}, tolerance {tol:.3g}), so its top-{k} subspace would hold rounding noise; "
            "choose a smaller alignment.k")


def align_checkpoint(manifest, *, k=10, method="arpack", gap_tol=1e-3, device="cpu"):
    """:func:`checkpoint_alignment` of the checkpoint a manifest describes, one layer at a time.

    Parameters
    ----------
    manifest : dict
        As written by :func:`crosslayer.models.checkpoints.write_manifest` (``path``, ``model``,
        ``revision``, ``step``).

    Returns
    -------
    result : dict
        The arrays of :func:`checkpoint_alignment` plus ``d_model``, ``k``, ``step``.
    """
    release_freed_memory()  # else heap fragmentation grows memory by ~35 MiB per layer at d = 2048

    model, revision = manifest["model"], manifest.get("revision")
    with open_checkpoint(manifest["path"], model=model, revision=revision) as reader:
        geometry = reader.geometry
        if not 1 <= k < min(geometry.d_model, geometry.d_ff):
            raise CheckpointError(
                f"alignment.k = {k} must be below d_model = {geometry.d_model} and d_ff = {geometry.d_ff} (the rank "
                "bound of W_down @ W_up)", model=model, revision=revision, file=manifest["path"])
        try:
            result = checkpoint_alignment(
                reader.mlp,
                geometry.n_layers,
                k=k,
                method=method,
                gap_tol=gap_tol,
                device=device,
                progress=lambda layers: tqdm(layers, desc=f"{model} {revision}", unit="layer"),
            )
        except ValueError as err:
            raise CheckpointError(str(err), model=model, revision=revision, file=manifest["path"]) from err
    return {**result, "d_model": geometry.d_model, "k": k, "step": manifest["step"]}


def mean_gate(parts, h):
    """Mean gate activation ``act(W_gate n(h) + b_gate)`` over samples, float64 ``(d_ff,)``.

    Parameters
    ----------
    parts : crosslayer.models.adapters.base.GateParts
        A block's gated MLP (:meth:`~crosslayer.models.adapters.base.FamilyAdapter.gate_parts`); ``n`` is its
        input norm (identity when it has none).
    h : (N, d) torch.Tensor
        The residual stream entering the MLP sub-layer, one row per sample.
    """
    x = apply_norm(parts.pre_norm, h.to(torch.float32))
    z = x @ parts.w_gate.T.to(x.device) + (0 if parts.b_gate is None else parts.b_gate.to(x.device))
    return activation(parts.activation, z.double()).mean(0)


def gated_alignment(model, acts, *, k=10, method="arpack", gap_tol=1e-3, progress=None):
    """:func:`checkpoint_alignment` of the gate-conditioned products ``W_down diag(mean g) W_up``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A gated decoder (Llama, OLMo, Qwen, Gemma, ...), from :func:`crosslayer.models.loading.load_model`.
    acts : (N, 2L, d) ndarray
        The residual stream of :func:`crosslayer.models.residual.record_residual_stream`; entry ``2l + 1``
        is what enters layer l's MLP.

    Returns
    -------
    result : dict of ndarray
        The arrays of :func:`checkpoint_alignment` plus ``mean_gate`` (L, d_ff), NaN-padded where
        a layer's MLP is narrower than the widest (Gemma 4's double-wide MLPs).

    Raises
    ------
    ValueError
        The model's MLPs are not gated, or `acts` does not match its depth.
    """
    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    if not adapter.geometry.gated_mlp:
        raise ValueError(f"{adapter.model_type}: the MLP has no gate, so there is no gate-conditioned product")
    acts = np.asarray(acts, dtype=np.float32)
    if acts.ndim != 3 or acts.shape[1] != 2 * len(blocks):
        raise ValueError(f"`acts` must be (N, 2L = {2 * len(blocks)}, d), got shape {acts.shape}")
    gates = []

    def read_mlp(layer):
        parts = adapter.gate_parts(blocks[layer])
        with torch.no_grad():
            g = mean_gate(parts, torch.from_numpy(acts[:, 2 * layer + 1]))
        gates.append(g.float().numpy())
        return g.float()[:, None] * parts.w_up, parts.w_down  # diag(g) W_up

    result = checkpoint_alignment(read_mlp, len(blocks), k=k, method=method, gap_tol=gap_tol, progress=progress)
    mean = np.full((len(gates), max(len(g) for g in gates)), np.nan, dtype=np.float32)
    for layer, g in enumerate(gates):
        mean[layer, : len(g)] = g
    return {**result, "mean_gate": mean}
