"""Autograd references of the single-token block Jacobians: the real transformers block run on one
token and differentiated by ``torch.autograd.functional.jacobian`` (the paper's method), the same with
``vectorize=True``, or ``torch.func.jacrev`` with ``vmap``. The tests and the benchmarks hold the closed
form (:mod:`crosslayer.jacobians.closed_form`) against these.
"""

import torch

from crosslayer.jacobians.closed_form import DEFAULT_CHUNK_BYTES, run_in_chunks
from crosslayer.models.adapters import adapter_for

__all__ = ["block_jacobians_autograd", "iter_block_jacobians_autograd", "single_token_block_fn"]

AUTOGRAD_METHODS = ("functional", "vectorized", "jacrev")  # see block_jacobians_autograd


# --------------------------------------------------------------------------- autograd references


def single_token_block_fn(block, model):
    """``f(x) -> out`` running the real transformers ``block`` of ``model`` on one token.

    Parameters
    ----------
    block : torch.nn.Module
        One decoder block of ``model`` (``adapter_for(model).blocks(model)[l]``).
    model : transformers.PreTrainedModel
        Its model (for the rotary embedding / ALiBi it computes before the blocks).

    Returns
    -------
    callable
        ``f(x, extra=None)`` with ``x`` of shape ``(d,)``: the block's output hidden state
        ``(d,)`` for the input ``x`` as a one-token sequence at position 0 (batch 1, no cache, no
        mask); ``extra`` holds the sample's own further inputs where the family has them
        (:meth:`~crosslayer.models.adapters.base.FamilyAdapter.jacobian_inputs`: Gemma 4's per-layer inputs).
    """
    forward = adapter_for(model).single_token_forward(model, block)

    def f(x, extra=None):
        return forward(x.reshape(1, 1, -1), extra).reshape(-1)

    return f


def block_jacobians_autograd(block_fn, x, *, method="functional", extra=None):
    """Reference Jacobians by automatic differentiation of the real block.

    Parameters
    ----------
    block_fn : callable
        ``(d,) -> (d,)``, e.g. from :func:`single_token_block_fn`.
    x : torch.Tensor
        ``(B, d)`` inputs.
    method : {"functional", "vectorized", "jacrev"}
        ``"functional"``: ``torch.autograd.functional.jacobian`` per sample, default options
        (the paper's method, one backward pass per output coordinate); ``"vectorized"``: the
        same with ``vectorize=True``; ``"jacrev"``: ``torch.func.jacrev`` vmapped over the
        samples (not for blocks with an old-style ``autograd.Function``, e.g. BLOOM's GELU:
        torch.func raises a RuntimeError there; use the other two).
    extra : torch.Tensor, optional
        ``(B, width)`` per-sample further inputs, passed as ``block_fn``'s second argument
        (:meth:`~crosslayer.models.adapters.base.FamilyAdapter.jacobian_inputs`).

    Returns
    -------
    torch.Tensor
        ``(B, d, d)``, dtype of ``x``.
    """
    if method not in AUTOGRAD_METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {AUTOGRAD_METHODS}")
    if method == "jacrev":
        args = (x,) if extra is None else (x, extra)
        return torch.func.vmap(torch.func.jacrev(block_fn))(*args).detach()
    per_sample = [None] * len(x) if extra is None else extra
    return torch.stack([torch.autograd.functional.jacobian(lambda v, e=e: block_fn(v) if e is None else block_fn(v, e),
                                                           xi, vectorize=method == "vectorized")
                        for xi, e in zip(x, per_sample)])


def iter_block_jacobians_autograd(block_fn, x, *, method="functional", chunk_bytes=DEFAULT_CHUNK_BYTES, layer=None,
                                  extra=None, bytes_per_sample=None):
    """Reference Jacobians (:func:`block_jacobians_autograd`) chunk by chunk, with the same
    chunking by memory budget and the same non-finite check as :func:`iter_block_jacobians`.

    ``bytes_per_sample`` (default ``4 d^2``, the Jacobian alone) sizes the chunks; the backward
    sweeps of "jacrev" hold far more per sample. A chunk that runs out of GPU memory is retried in
    halves (logged), down to one sample.

    Yields
    ------
    start : int
    J : torch.Tensor
        ``(b, d, d)`` Jacobians of samples ``start .. start + b - 1``.
    """
    d = x.shape[1]

    def compute(start, stop):
        part = None if extra is None else extra[start:stop]
        return block_jacobians_autograd(block_fn, x[start:stop], method=method, extra=part).detach()

    yield from run_in_chunks(x.shape[0], int(chunk_bytes // (bytes_per_sample or 4 * d * d)), compute, layer)
