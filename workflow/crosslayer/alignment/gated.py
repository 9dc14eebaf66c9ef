"""Gate-conditioned alignment of gated MLPs: paper 000's proposed next step.

The static product ``W_down @ W_up`` of :mod:`crosslayer.alignment.measure` ignores the SwiGLU gate.
Conditioned on it, a gated MLP's read-write map is ``W_down diag(g(x)) W_up`` averaged over inputs,
``g`` the gate activation at the MLP input; being linear in ``g`` it equals ``W_down diag(mean g) W_up``,
whose top-k subspaces and overlaps are computed as the static product's (:func:`gated_alignment`; the
job on a checkpoint and the residual stream the dynamics stage recorded for it,
:func:`measure_gated_checkpoint`).
"""

import numpy as np
import torch
from tqdm import tqdm

from crosslayer.alignment.measure import AlignmentSettings, mlp_alignment
from crosslayer.errors import naming_checkpoint
from crosslayer.jacobians.closed_form import activation, apply_norm
from crosslayer.models.adapters import adapter_for
from crosslayer.models.loading import load_model
from crosslayer.models.weights import read_geometry
from crosslayer.npz import open_npz

__all__ = ["gated_alignment", "mean_gate", "measure_gated_checkpoint"]


def measure_gated_checkpoint(manifest, settings=AlignmentSettings(), *, activations):
    """The ``gated_alignment`` job: :func:`gated_alignment` of the checkpoint a manifest describes, at
    the residual stream the dynamics stage recorded for it.

    Parameters
    ----------
    manifest : dict
        As for :func:`crosslayer.alignment.measure.measure_checkpoint`.
    settings : AlignmentSettings
    activations : str or path-like
        The ``.npz`` of :func:`crosslayer.dynamics.checkpoint.measure_checkpoint`'s activations (``acts``).

    Returns
    -------
    result : dict
        ``gated`` (False: the family's MLP has no gate, read from config.json alone, and nothing
        else but ``step`` is measured); else the arrays of :func:`gated_alignment` plus ``gated``,
        ``step`` and ``k``.

    Raises
    ------
    CheckpointError
        As :func:`crosslayer.alignment.measure.measure_checkpoint`.
    """
    model, revision = manifest["model"], manifest.get("revision")
    if not read_geometry(manifest["path"], model=model, revision=revision).gated_mlp:
        return {"gated": False, "step": manifest["step"]}  # a hub model's family is known only now
    with naming_checkpoint(manifest):
        loaded, _ = load_model(manifest, tokenizer=False)
        with open_npz(activations) as arrays:
            result = gated_alignment(loaded, arrays["acts"], settings,
                                     progress=lambda layers: tqdm(layers, unit="layer"))
    return {**result, "gated": True, "step": manifest["step"], "k": settings.k}


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


def gated_alignment(model, acts, settings=AlignmentSettings(), *, progress=None):
    """:func:`~crosslayer.alignment.measure.mlp_alignment` of the gate-conditioned products
    ``W_down diag(mean g) W_up``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A gated decoder (Llama, OLMo, Qwen, Gemma, ...), from :func:`crosslayer.models.loading.load_model`.
    acts : (N, 2L, d) ndarray
        The residual stream of :func:`crosslayer.models.residual.record_residual_stream`; entry ``2l + 1``
        is what enters layer l's MLP.
    settings : AlignmentSettings
    progress : callable, optional
        Wraps the layer iterator.

    Returns
    -------
    result : dict of ndarray
        The arrays of :func:`~crosslayer.alignment.measure.mlp_alignment` plus ``mean_gate`` (L, d_ff),
        NaN-padded where a layer's MLP is narrower than the widest (Gemma 4's double-wide MLPs).

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

    result = mlp_alignment(read_mlp, len(blocks), settings, progress=progress)
    mean = np.full((len(gates), max(len(g) for g in gates)), np.nan, dtype=np.float32)
    for layer, g in enumerate(gates):
        mean[layer, : len(g)] = g
    return {**result, "mean_gate": mean}
