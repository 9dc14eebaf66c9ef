"""Token trajectories through the residual stream (paper 002).

A prompt of ``T`` tokens through ``L`` blocks gives, per token, the trajectory ``x^0 .. x^L``:
``x^l`` is the input of block ``l`` (``x^0`` the embeddings as the first block sees them), from
hooks on the blocks themselves. Two conventions for ``x^L``: the paper's (eq. 7 counts the final
norm in the last block; ``output_hidden_states[-1]`` in transformers 5), and the raw residual
stream, the last block's output before the final norm. Their regularity statistics, numpy only:
:mod:`crosslayer.coupling.regularity`.
"""

import numpy as np
import torch

from crosslayer.coupling.regularity import as_trajectories
from crosslayer.models.adapters import adapter_for

__all__ = ["PCA_FITS", "logit_entropy", "record_trajectories", "trajectory_pca", "with_final_norm"]


def record_trajectories(model, input_ids, *, final_norm=False, noise=None):
    """``x^0 .. x^L`` of every token of one sequence.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A family :func:`crosslayer.models.adapters.adapter_for` supports.
    input_ids : (T,) sequence of int
    final_norm : bool
        ``x^L`` after the final norm (the paper's; :func:`with_final_norm`) instead of the last
        block's raw output.
    noise : (T, d) array_like, optional
        Added to ``x^0`` as the first block sees it (paper Fig. 32); the rest follows from it.

    Returns
    -------
    (L + 1, T, d) float32 ndarray

    Raises
    ------
    ValueError
        A non-finite state (names depth and token).
    """
    blocks = adapter_for(model).blocks(model)
    states = [None] * (len(blocks) + 1)

    def before(layer):
        def hook(module, args, kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            if layer == 0 and noise is not None:
                hidden = hidden + torch.as_tensor(noise, device=hidden.device, dtype=hidden.dtype)[None]
                args, kwargs = ((hidden, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": hidden})
            states[layer] = hidden[0].detach().float().cpu()
            return (args, kwargs) if layer == 0 and noise is not None else None
        return hook

    def after(module, args, output):
        states[-1] = (output[0] if isinstance(output, tuple) else output)[0].detach().float().cpu()

    handles = [b.register_forward_pre_hook(before(l), with_kwargs=True) for l, b in enumerate(blocks)]
    handles.append(blocks[-1].register_forward_hook(after))
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            model.base_model(input_ids=torch.as_tensor(list(input_ids), device=device)[None], use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    traj = torch.stack(states).numpy()
    bad = ~np.isfinite(traj).all(axis=-1)
    if bad.any():
        depth, token = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"non-finite residual stream at depth {depth} (input of block {depth}), token {token}")
    return with_final_norm(model, traj) if final_norm else traj


def _final_norm_of(model, states):
    """The model's final norm of (T, d) float32 states, as a float32 tensor on the model's device."""
    parameter = next(model.parameters())
    with torch.no_grad():
        norm = adapter_for(model).final_norm(model)
        return norm(torch.as_tensor(states, device=parameter.device, dtype=parameter.dtype)).float()


def with_final_norm(model, traj):
    """Raw trajectories (:func:`record_trajectories`) with ``x^L`` through the model's final norm,
    the paper's convention: the decoder's own ``last_hidden_state``, without a second forward pass."""
    return np.concatenate([traj[:-1], _final_norm_of(model, traj[-1]).cpu().numpy()[None]])


def logit_entropy(model, traj):
    """Entropy (nats) of the next-token distribution each state gives through the model's own final
    norm and output head, the logit lens (paper Fig. 26, last row); the last raw state's is the
    model's own prediction.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    traj : (L + 1, T, d) array_like
        Raw trajectories (:func:`record_trajectories` without the final norm).

    Returns
    -------
    (L + 1, T) ndarray
        In ``[0, ln V]``.
    """
    head = model.get_output_embeddings()
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)  # as the model's forward applies it
    dtype = next(model.parameters()).dtype
    out = np.empty(np.shape(traj)[:2])
    with torch.no_grad():
        for depth, states in enumerate(traj):  # one depth at a time: T x V logits, not (L + 1) T V
            logits = head(_final_norm_of(model, states).to(dtype)).float()
            if cap:
                logits = cap * torch.tanh(logits / cap)
            logp = torch.log_softmax(logits, dim=-1)
            out[depth] = -(logp.exp() * logp).sum(-1).cpu().numpy()
    return out


PCA_FITS = ("last", "all")  # the paper's (A.2.1: the last layer's states X^L), or every state


def trajectory_pca(traj, *, n_components=2, fit="last"):
    """Project every state of a prompt on the top principal components of a set of its states.

    Parameters
    ----------
    traj : (n, T, d) array_like
        One prompt's trajectories (depth, token, width).
    fit : {"last", "all"}
        The states the PCA is fit on, centred by their mean: the last layer's ``T`` states
        (``X^L``, the paper's choice, appendix A.2.1) or all ``n * T``.

    Returns
    -------
    coords : (n, T, n_components) ndarray
        Every state, centred by the fit states' mean, on the components.
    explained : (n_components,) ndarray
        Fraction of the fit states' variance each component explains (NaN when they have none,
        e.g. a one-token prompt fit on ``X^L``).
    """
    if fit not in PCA_FITS:
        raise ValueError(f"`fit` must be one of {PCA_FITS}, got {fit!r}")
    traj = as_trajectories(traj)
    if traj.ndim != 3:
        raise ValueError(f"`traj` must be (n_states, T, d), got shape {traj.shape}")
    X = traj.reshape(-1, traj.shape[-1])
    F = traj[-1] if fit == "last" else X
    mean = F.mean(axis=0)
    _, s, Vt = np.linalg.svd(F - mean, full_matrices=False)
    Vt = np.vstack([Vt, np.zeros((max(0, n_components - len(Vt)), Vt.shape[1]))])[:n_components]
    coords = ((X - mean) @ Vt.T).reshape(*traj.shape[:2], n_components)
    s = np.concatenate([s, np.zeros(max(0, n_components - len(s)))])
    total = (s**2).sum()
    explained = s[:n_components] ** 2 / total if total > 0 else np.full(n_components, np.nan)
    return coords, explained
