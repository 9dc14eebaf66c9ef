"""Per-checkpoint residual-stream dynamics (paper 004): one pass over every layer's per-sample
single-token Jacobians gives both the mean Jacobian (float64 accumulation) and the per-sample
distributions, so no layer's Jacobians are ever held beyond one chunk."""

import numpy as np
import torch

from crosslayer.adapters import adapter_for
from crosslayer.jacobian import DEFAULT_CHUNK_BYTES, iter_block_jacobians
from crosslayer.spectra import per_sample_stats

__all__ = ["STAT_NAMES", "checkpoint_jacobian_stats", "checkpoint_activations", "load_model"]

STAT_NAMES = ("frobenius", "participation_ratio", "condition_number")


def checkpoint_jacobian_stats(model, acts, *, chunk_bytes=DEFAULT_CHUNK_BYTES, device=None, progress=None):
    """Mean Jacobian and per-sample statistics of every block of a loaded model.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any family the adapters support for Jacobians.
    acts : (N, 2L, d) array_like
        Residual stream from :func:`crosslayer.activations.record_residual_stream`; snapshot
        ``2l`` (the block-l input) is where block l's Jacobian is taken.
    chunk_bytes : int
        Working memory of one chunk of per-sample Jacobians.
    device : str or torch.device, optional
        Where the Jacobians are computed (default: the model's device).
    progress : callable, optional
        Wraps the layer iterator (e.g. ``tqdm``).

    Returns
    -------
    result : dict of ndarray
        ``mean`` (L, d, d) float32 mean Jacobian (summed in float64); for each name in
        :data:`STAT_NAMES`, ``<name>`` and ``<name>_res`` (L, N): the statistic of ``J`` and
        of ``J - I`` per layer and sample.
    """
    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    acts = np.asarray(acts, dtype=np.float32)
    if acts.ndim != 3 or acts.shape[1] != 2 * len(blocks):
        raise ValueError(f"`acts` must be (N, 2L = {2 * len(blocks)}, d), got shape {acts.shape}")
    N, _, d = acts.shape
    device = torch.device(device) if device is not None else next(model.parameters()).device
    L = len(blocks)
    result = {"mean": np.empty((L, d, d), dtype=np.float32)}
    for name in STAT_NAMES:
        result[name] = np.empty((L, N))
        result[f"{name}_res"] = np.empty((L, N))
    layers = range(L)
    for layer in progress(layers) if progress else layers:
        parts = adapter.block_parts(blocks[layer])
        x = torch.from_numpy(acts[:, 2 * layer]).to(device)
        total = torch.zeros(d, d, dtype=torch.float64, device=device)
        for start, J in iter_block_jacobians(parts, x, chunk_bytes=chunk_bytes, layer=layer):
            total += J.sum(dim=0, dtype=torch.float64)
            stop = start + J.shape[0]
            for suffix, residual in (("", False), ("_res", True)):
                for name, values in per_sample_stats(J, residual=residual).items():
                    result[name + suffix][layer, start:stop] = values
        result["mean"][layer] = (total / N).cpu().numpy()
    return result


def load_model(manifest, *, device="cpu"):
    """The checkpoint a manifest describes, as a float32 transformers model in eval mode, and
    its tokenizer (None when the checkpoint ships none)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from crosslayer.errors import CheckpointError

    path, context = manifest["path"], {"model": manifest["model"], "revision": manifest.get("revision")}
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, trust_remote_code=False)
    except Exception as err:  # unsupported or broken checkpoint: say which
        raise CheckpointError(f"cannot load the model: {err}", **context, file=path) from err
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception:  # noqa: BLE001 - weights-only checkpoints have no tokenizer
        tokenizer = None
    return model.to(device).eval(), tokenizer


def checkpoint_activations(manifest, text_path, *, n_samples, min_tokens, max_tokens, device="cpu", batch_size=8):
    """Residual stream (last token, before attention and before the MLP of every block) of the
    first `n_samples` paragraphs (lines, like WikiText's) of a corpus text file with at least
    `min_tokens` tokens, truncated to `max_tokens`, in file order.

    Returns
    -------
    result : dict of ndarray
        ``acts`` (N, 2L, d) float32, ``n_tokens`` (N,), ``sample_ids`` (N,) paragraph indices.
    """
    from crosslayer.activations import record_residual_stream, select_sample_indices
    from crosslayer.corpus import read_articles
    from crosslayer.errors import CheckpointError

    model, tokenizer = load_model(manifest, device=device)
    if tokenizer is None:
        raise CheckpointError("no tokenizer in the checkpoint", model=manifest["model"],
                              revision=manifest.get("revision"), file=manifest["path"])
    paragraphs = [line for article in read_articles(text_path) for line in article.splitlines() if line.strip()]
    token_ids = [tokenizer(paragraph)["input_ids"] for paragraph in paragraphs]
    try:
        ids = select_sample_indices(token_ids, min_tokens=min_tokens, max_tokens=max_tokens, n=n_samples)
    except ValueError as err:
        raise CheckpointError(str(err), model=manifest["model"], revision=manifest.get("revision"),
                              file=str(text_path)) from err
    samples = [token_ids[i][:max_tokens] for i in ids]
    recorded = record_residual_stream(model, samples, batch_size=batch_size, device=device)
    return {**recorded, "sample_ids": np.asarray(ids)}
