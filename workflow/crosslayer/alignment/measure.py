"""Cross-layer alignment of MLP weight products (paper 000, "Common Origins, Divergent Destinations").

Per layer l the MLP product ``M_l = W_down @ W_up`` (d x d; SwiGLU gate ignored, biases and norm
gains ignored) has top-k left (output-space, U) and right (input-space, V) singular subspaces.
Their overlaps between all layer pairs are the alignment; this module computes them per
checkpoint (:func:`measure_checkpoint`, in memory :func:`mlp_alignment`); :mod:`crosslayer.alignment.tables`
summarises them across checkpoints, and :mod:`crosslayer.alignment.gated` conditions the product on
the gate of gated MLPs.
"""

from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from crosslayer.errors import CheckpointError, naming_checkpoint
from crosslayer.linalg.subspace import SVD_METHODS, pairwise_overlap, top_singular_subspaces
from crosslayer.malloc import release_freed_memory
from crosslayer.models.weights import open_checkpoint
from crosslayer.settings import require_choice, require_int, require_number

__all__ = ["AlignmentSettings", "measure_checkpoint", "mlp_alignment", "mlp_product"]


@dataclass(frozen=True)
class AlignmentSettings:
    """What the alignment of one checkpoint depends on (the config's ``alignment`` block; the params of
    the ``mlp_alignment`` and ``gated_alignment`` rules), static and gate-conditioned alike.

    Attributes
    ----------
    k : int, default=10
        Subspace dimension (``alignment.k``); below ``min(d_model, d_ff)`` of the checkpoint.
    svd_method : {"arpack", "full"}, default="arpack"
        See :func:`crosslayer.linalg.subspace.top_singular_subspaces`.
    gap_tol : float, default=1e-3
        When the relative gap ``(s_k - s_{k+1}) / s_k`` is below this, the float32 product does
        not pin the top-k subspace down well; the product is recomputed in float64 and used.

    Raises
    ------
    ValueError
        A field out of its range, naming its config key.
    """

    k: int = 10
    svd_method: str = "arpack"
    gap_tol: float = 1e-3

    def __post_init__(self):
        require_int("alignment.k", self.k, minimum=1)
        require_choice("alignment.svd_method", self.svd_method, SVD_METHODS)
        require_number("alignment.gap_tol", self.gap_tol, minimum=0)


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


def mlp_alignment(read_mlp, n_layers, settings=AlignmentSettings(), *, device="cpu", progress=None):
    """Top-k MLP-product subspaces of every layer and their pairwise overlaps.

    Parameters
    ----------
    read_mlp : callable
        ``read_mlp(layer) -> (up, down)`` float tensors; called once per layer, so only one
        layer's matrices are held at a time.
    n_layers : int
    settings : AlignmentSettings
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

    Raises
    ------
    ValueError
        A product is not finite, or its numerical rank is below k.
    """
    k, method, gap_tol = settings.k, settings.svd_method, settings.gap_tol
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


def measure_checkpoint(manifest, settings=AlignmentSettings(), *, device="cpu"):
    """The ``mlp_alignment`` job: :func:`mlp_alignment` of the checkpoint a manifest describes, read
    one layer at a time.

    Parameters
    ----------
    manifest : dict
        As :func:`crosslayer.models.checkpoints.verified_manifest` returns it (``path``, ``model``,
        ``revision``, ``step``).
    settings : AlignmentSettings
    device : str, default="cpu"
        Where the products are formed.

    Returns
    -------
    result : dict
        The arrays of :func:`mlp_alignment` plus ``d_model``, ``k``, ``step``.

    Raises
    ------
    CheckpointError
        The checkpoint cannot be read, `settings.k` is too large for it, or a layer's product is
        refused; the message names the model, revision and checkpoint.
    """
    release_freed_memory()  # else heap fragmentation grows memory by ~35 MiB per layer at d = 2048
    k = settings.k
    with naming_checkpoint(manifest), open_checkpoint(manifest["path"], model=manifest["model"],
                                                      revision=manifest.get("revision")) as reader:
        geometry = reader.geometry
        if not k < min(geometry.d_model, geometry.d_ff):
            raise CheckpointError(
                f"alignment.k = {k} must be below d_model = {geometry.d_model} and d_ff = {geometry.d_ff} (the rank "
                "bound of W_down @ W_up)")
        result = mlp_alignment(
            reader.mlp, geometry.n_layers, settings, device=device,
            progress=lambda layers: tqdm(layers, desc=f"{manifest['model']} {manifest.get('revision')}", unit="layer"))
    return {**result, "d_model": geometry.d_model, "k": k, "step": manifest["step"]}
