"""Record the residual stream before attention and before the MLP of every block.

For a model with ``L`` blocks, each sample gives ``2 L`` snapshots of the residual
stream at its last token (paper 004):

* snapshot ``2 l``: the input ``x`` of block ``l`` (residual before attention), taken
  with a forward pre-hook on the block module itself (never ``output_hidden_states``,
  whose last entry is after the final norm);
* snapshot ``2 l + 1``: the residual entering the MLP sub-layer of block ``l``,
  ``h = x + attention branch`` for sequential blocks and ``x`` itself for parallel ones;
  the family adapter names the submodule whose input it is
  (:meth:`~crosslayer.models.adapters.base.FamilyAdapter.pre_mlp_residual_module`).

Samples of different lengths are run in batches with right-padding and an attention
mask (causal attention never lets a real token see the padding to its right, and
position ids count from 0 for every row); only each sample's last *real* token is kept.

Example
-------
>>> samples = select_samples(token_ids, min_tokens=64, max_tokens=256, n=1000)  # doctest: +SKIP
>>> rec = record_residual_stream(model, samples, batch_size=8)  # doctest: +SKIP
>>> rec["acts"].shape  # (1000, 2 * n_layers, d_model)  # doctest: +SKIP
"""

from collections.abc import Callable, Sequence

import numpy as np
import torch

from crosslayer.models.adapters import adapter_for
from crosslayer.models.snapshots import SNAPSHOT_KINDS, snapshot_name

__all__ = ["SNAPSHOT_KINDS", "record_residual_stream", "select_sample_indices", "select_samples", "snapshot_name"]

def _as_ids(sample) -> torch.Tensor:
    """One sample as a 1-D int64 CPU tensor."""
    t = torch.as_tensor(np.asarray(sample) if not isinstance(sample, torch.Tensor) else sample)
    if t.ndim != 1:
        raise ValueError(f"each sample must be a 1-D sequence of token ids, got shape {tuple(t.shape)}")
    return t.to(torch.long).cpu()


def select_samples(token_ids: Sequence, *, min_tokens: int, max_tokens: int, n: int) -> list:
    """The first ``n`` samples, in dataset order, with at least ``min_tokens`` tokens,
    each truncated to its first ``max_tokens`` tokens.

    Parameters
    ----------
    token_ids : sequence of 1-D int sequences
        Tokenised samples (lists, numpy arrays or 1-D tensors), in dataset order.
    min_tokens, max_tokens : int
        ``1 <= min_tokens <= max_tokens``.
    n : int
        How many samples to return, ``>= 1``.

    Returns
    -------
    list
        ``n`` samples, each ``sample[:max_tokens]`` (same type as the input sample),
        lengths in ``[min_tokens, max_tokens]``.

    Raises
    ------
    ValueError
        Bad arguments, or fewer than ``n`` samples have ``>= min_tokens`` tokens (the
        message names ``min_tokens`` and how many qualified).
    """
    return [token_ids[i][:max_tokens] for i in select_sample_indices(
        token_ids, min_tokens=min_tokens, max_tokens=max_tokens, n=n)]


def select_sample_indices(token_ids, *, min_tokens, max_tokens, n):
    """Indices (in dataset order) of the samples :func:`select_samples` returns; same checks.

    `token_ids` may be any iterable (e.g. a generator tokenising texts on demand): it is
    consumed only up to the n-th qualifying sample.
    """
    if not 1 <= min_tokens <= max_tokens:
        raise ValueError(f"need 1 <= min_tokens <= max_tokens, got min_tokens={min_tokens}, "
                         f"max_tokens={max_tokens}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    chosen, seen = [], 0
    for seen, sample in enumerate(token_ids, start=1):
        if len(sample) >= min_tokens:
            chosen.append(seen - 1)
            if len(chosen) == n:
                return chosen
    raise ValueError(f"only {len(chosen)} of {seen} samples have >= min_tokens={min_tokens} "
                     f"tokens; {n} requested")


def _first_tensor(args, kwargs):
    """The hidden-states input of a hooked module call (positional or keyword)."""
    if args:
        return args[0]
    for key in ("hidden_states", "input", "x"):
        if key in kwargs:
            return kwargs[key]
    raise RuntimeError(f"cannot find the hidden states among keyword arguments {sorted(kwargs)}")


def record_residual_stream(
    model,
    token_ids: Sequence,
    *,
    batch_size: int = 8,
    device=None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Residual stream before attention and before the MLP of every block, at the last
    token of each sample.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder of a family supported by :func:`crosslayer.models.adapters.adapter_for`
        (bare or with an LM head; only the base model is run). It is put in eval mode
        for the call and its previous mode restored afterwards.
    token_ids : sequence of 1-D int sequences
        ``N`` samples (lists, numpy arrays or 1-D tensors), lengths may differ, each
        ``>= 1``.
    batch_size : int
        Samples per forward pass. Samples are grouped by length (to limit padding),
        right-padded, and masked; results come back in input order.
    device : torch.device or str, optional
        Where to run; default the device of the model's parameters. The model is not
        moved, so it must already be there.
    progress : callable, optional
        Called as ``progress(n_done, N)`` after each batch.

    Returns
    -------
    dict
        ``acts``: float32 numpy ``(N, 2 L, d_model)``; ``acts[i, 2 l]`` is the input of
        block ``l`` and ``acts[i, 2 l + 1]`` the residual entering its MLP, at the last
        real token of sample ``i``. ``n_tokens``: int64 numpy ``(N,)``, sample lengths.
        ``token_inputs`` (only for a family with a token-dependent block argument, Gemma 4's
        per-layer input): float32 ``(N, L, width)``, that argument of block ``l`` at the same token.

    Raises
    ------
    ValueError
        Empty input, an empty or non-1-D sample, ``batch_size < 1``, or a non-finite
        activation (the message names the layer, pre-attention/pre-MLP, and the sample
        index).
    NotImplementedError
        The model family (or block variant) has no pre-MLP residual stream here.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    samples = [_as_ids(s) for s in token_ids]
    if not samples:
        raise ValueError("no samples given")
    lengths = np.array([len(s) for s in samples], dtype=np.int64)
    if (lengths == 0).any():
        raise ValueError(f"sample {int(np.flatnonzero(lengths == 0)[0])} is empty")

    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    mlp_inputs = [adapter.pre_mlp_residual_module(b) for b in blocks]
    n_layers = len(blocks)
    if device is None:
        device = next(model.parameters()).device
    base = getattr(model, "base_model", model)
    d_model = adapter.geometry.d_model
    # a family without an adapter (generic path) has no known pre-MLP module: those snapshots stay NaN
    acts = np.full((len(samples), 2 * n_layers, d_model), np.nan, dtype=np.float32)
    recorded = np.zeros(2 * n_layers, dtype=bool)
    # Gemma 4's per-layer inputs: a block argument that depends on the token, kept per sample so
    # that each sample's Jacobian is taken with its own
    token_width = adapter.token_input_width
    token_inputs = np.full((len(samples), n_layers, token_width), np.nan, dtype=np.float32) if token_width else None

    # the current batch: "last" (B,) positions of the last real tokens, and device buffers the hooks
    # fill ("acts" (B, 2L, d), "tokens" (B, L, width)): one copy to the host per batch, not one per hook
    state, kept = {}, {"acts": acts} | ({"tokens": token_inputs} if token_inputs is not None else {})

    def at_last(t):  # (B, T, w) -> float32 (B, w) at each sample's last real token, on the device
        return t[torch.arange(t.shape[0], device=t.device), state["last"]].detach().to(torch.float32)

    def recorder(snapshot):
        def hook(module, args, kwargs):
            state["acts"][:, snapshot] = at_last(_first_tensor(args, kwargs))
            if token_inputs is not None and snapshot % 2 == 0:
                state["tokens"][:, snapshot // 2] = at_last(adapter.token_input(args, kwargs))
        return hook

    order = np.argsort(lengths, kind="stable")  # similar lengths together: less padding
    was_training = model.training
    handles = []
    try:
        for layer, (block, mlp_input) in enumerate(zip(blocks, mlp_inputs)):
            handles.append(block.register_forward_pre_hook(recorder(2 * layer), with_kwargs=True))
            recorded[2 * layer] = True
            if mlp_input is not None:
                handles.append(mlp_input.register_forward_pre_hook(recorder(2 * layer + 1), with_kwargs=True))
                recorded[2 * layer + 1] = True
        model.eval()
        with torch.no_grad():
            for start in range(0, len(samples), batch_size):
                rows = order[start : start + batch_size]
                width = int(lengths[rows].max())
                ids = torch.zeros(len(rows), width, dtype=torch.long)
                mask = torch.zeros(len(rows), width, dtype=torch.long)
                for j, row in enumerate(rows):
                    ids[j, : lengths[row]] = samples[row]
                    mask[j, : lengths[row]] = 1
                state["last"] = torch.as_tensor(lengths[rows] - 1, device=device)
                state |= {name: torch.full((len(rows), *a.shape[1:]), torch.nan, device=device)
                          for name, a in kept.items()}
                base(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
                for name, array in kept.items():
                    array[rows] = state[name].cpu().numpy()
                if progress is not None:
                    progress(min(start + batch_size, len(samples)), len(samples))
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)

    finite = np.isfinite(acts).all(axis=2) | ~recorded
    if not finite.all():
        sample, snapshot = (int(v) for v in np.argwhere(~finite)[0])
        raise ValueError(f"non-finite activation at {snapshot_name(snapshot)} (snapshot {snapshot}) "
                         f"of sample {sample}; {int((~finite).sum())} (sample, snapshot) pair(s) affected")
    if token_inputs is not None and not np.isfinite(token_inputs).all():
        raise ValueError("non-finite per-layer (token) input of a block")
    return {"acts": acts, "n_tokens": lengths, **({"token_inputs": token_inputs} if token_width else {})}
