"""Per-checkpoint residual-stream dynamics (paper 004): one pass over every layer's per-sample
single-token Jacobians gives both the mean Jacobian (float64 accumulation) and the per-sample
distributions, so no layer's Jacobians are ever held beyond one chunk."""

import logging

import numpy as np
import torch

from crosslayer.data.samples import read_samples
from crosslayer.errors import CheckpointError
from crosslayer.jacobians.autograd import AUTOGRAD_METHODS, iter_block_jacobians_autograd, single_token_block_fn
from crosslayer.jacobians.closed_form import DEFAULT_CHUNK_BYTES, iter_block_jacobians
from crosslayer.linalg.conditioning import (
    CONDITION_METHOD,
    CONDITION_PATHS,
    PER_SAMPLE_DTYPES,
    PER_SAMPLE_STATS,
    per_sample_stats_pair,
    warn_unreliable_conditions,
)
from crosslayer.models.adapters import adapter_for
from crosslayer.models.loading import TOKENIZER_FILES, load_model
from crosslayer.models.residual import record_residual_stream, select_sample_indices

__all__ = ["JACOBIAN_METHODS", "STAT_NAMES", "checkpoint_jacobian_stats", "checkpoint_activations"]

STAT_NAMES = PER_SAMPLE_STATS
# "closed_form" (ours) or an autograd path of the real block ("functional" is the paper's method)
JACOBIAN_METHODS = ("closed_form", *AUTOGRAD_METHODS)

log = logging.getLogger(__name__)


def checkpoint_jacobian_stats(model, acts, *, method="closed_form", chunk_bytes=DEFAULT_CHUNK_BYTES, device=None,
                              progress=None, spectra_dtype="float64", condition=True, token_inputs=None):
    """Mean Jacobian and per-sample statistics of every block of a loaded model.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any family the adapters support for Jacobians.
    acts : (N, 2L, d) array_like
        Residual stream from :func:`crosslayer.models.residual.record_residual_stream`; snapshot
        ``2l`` (the block-l input) is where block l's Jacobian is taken.
    method : {"closed_form", "functional", "vectorized", "jacrev"}
        Our batched closed form, or autograd of the real block (:func:`block_jacobians_autograd`;
        "functional" is the paper's method) as the reference.
    chunk_bytes : int
        Working memory of one chunk of per-sample Jacobians.
    device : str or torch.device, optional
        Where the Jacobians are computed (default: the model's device).
    progress : callable, optional
        Wraps the layer iterator (e.g. ``tqdm``).
    spectra_dtype : {"float64", "float32"} or torch.float64 / torch.float32, default "float64"
        Precision of the per-sample statistics, computed with torch on `device` from each chunk
        of Jacobians, J and J - I together (no host copy; see
        :func:`crosslayer.linalg.conditioning.per_sample_stats_pair`). float32 is
        much faster on GPUs; its condition numbers are accurate only while ``kappa << 1e7``.
    condition : bool, default=True
        Compute the per-sample condition numbers (the only SVD); False leaves them out.
    token_inputs : (N, L, width) array_like, optional
        Each sample's token-dependent block arguments, as recorded beside `acts` (``token_inputs``
        of :func:`~crosslayer.models.residual.record_residual_stream`); required for a family that has
        them (Gemma 4's per-layer inputs).

    Returns
    -------
    result : dict of ndarray
        ``mean`` (L, d, d) float32 mean Jacobian (summed in float64); for each name in
        :data:`STAT_NAMES` (without ``condition_number`` when not `condition`), ``<name>`` and
        ``<name>_res`` (L, N): the statistic of ``J`` and of ``J - I`` per layer and sample; with
        `condition`, also ``condition_path`` and ``condition_path_res`` (L, N) int8, how each
        condition number was computed (:data:`crosslayer.linalg.conditioning.CONDITION_PATHS`), and
        ``condition_method``, the rule (:data:`crosslayer.linalg.conditioning.CONDITION_METHOD`).
    """
    if method not in JACOBIAN_METHODS:
        raise ValueError(f"unknown Jacobian method {method!r}; choose one of {JACOBIAN_METHODS}")
    if str(spectra_dtype).removeprefix("torch.") not in PER_SAMPLE_DTYPES:
        raise ValueError(f"unknown spectra dtype {spectra_dtype!r}; choose one of {PER_SAMPLE_DTYPES}")
    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    if method == "closed_form" and not adapter.closed_form:
        log.warning("%s has no adapter with a closed form: Jacobians by autograd of the real blocks (torch.func, "
                    "exact, slower)", adapter.model_type)
        method = "jacrev"
    acts = np.asarray(acts, dtype=np.float32)
    if acts.ndim != 3 or acts.shape[1] != 2 * len(blocks):
        raise ValueError(f"`acts` must be (N, 2L = {2 * len(blocks)}, d), got shape {acts.shape}")
    N, _, d = acts.shape
    width = adapter.token_input_width
    if width:
        if token_inputs is None or np.shape(token_inputs) != (N, len(blocks), width):
            raise ValueError(f"{adapter.model_type} blocks take a per-sample (token) input: need `token_inputs` "
                             f"(N, L, {width}) recorded with the activations (re-run the job that wrote them), got "
                             f"{None if token_inputs is None else np.shape(token_inputs)}")
        token_inputs = np.asarray(token_inputs, dtype=np.float32)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    L = len(blocks)
    result = {"mean": np.empty((L, d, d), dtype=np.float32)}
    for name in STAT_NAMES if condition else [n for n in STAT_NAMES if n != "condition_number"]:
        result[name] = np.empty((L, N))
        result[f"{name}_res"] = np.empty((L, N))
    if condition:
        result |= {"condition_path": np.empty((L, N), np.int8), "condition_path_res": np.empty((L, N), np.int8),
                   "condition_method": np.asarray(CONDITION_METHOD)}
    # a backward sweep of d cotangents holds about d x (2 d_ff) per matrix it crosses (gate, up, their
    # product; Gemma 4's double-wide MLPs twice that): a rough bound, and chunks halve on GPU OOM
    autograd_bytes = 4 * d * (d + 8 * adapter.geometry.d_ff)
    layers = range(L)
    for layer in progress(layers) if progress else layers:
        x = torch.from_numpy(acts[:, 2 * layer]).to(device)
        if method == "closed_form":
            chunks = iter_block_jacobians(adapter.block_parts(blocks[layer]), x, chunk_bytes=chunk_bytes, layer=layer)
        else:
            extra = adapter.jacobian_inputs(layer, acts, token_inputs)
            extra = None if extra is None else torch.from_numpy(extra).to(device)
            chunks = iter_block_jacobians_autograd(single_token_block_fn(blocks[layer], model), x, method=method,
                                                   chunk_bytes=chunk_bytes, layer=layer, extra=extra,
                                                   bytes_per_sample=autograd_bytes)
        total = torch.zeros(d, d, dtype=torch.float64, device=device)
        for start, J in chunks:
            total += J.sum(dim=0, dtype=torch.float64)
            stop = start + J.shape[0]
            # J and J - I together; the chunk stays where it was computed (e.g. CUDA), only (B,) results come back
            for name, values in per_sample_stats_pair(J, condition=condition, dtype=spectra_dtype).items():
                result[name][layer, start:stop] = values
        result["mean"][layer] = (total / N).cpu().numpy()
        if condition:
            for suffix, what in (("", "J"), ("_res", "J - I")):
                warn_unreliable_conditions(result["condition_number" + suffix][layer], spectra_dtype,
                                           f"layer {layer} ({what})")
                counts = np.bincount(result["condition_path" + suffix][layer], minlength=len(CONDITION_PATHS))
                log.info("layer %d (%s): condition numbers by %s", layer, what,
                         ", ".join(f"{name} {n}" for name, n in zip(CONDITION_PATHS, counts)))
    return result


def checkpoint_activations(manifest, samples_path, *, n_samples, min_tokens, max_tokens, device="cpu", batch_size=8,
                           loaded=None):
    """Residual stream (last token, before attention and before the MLP of every block) of the
    first `n_samples` texts of a samples file (:mod:`crosslayer.data.samples`) with at least
    `min_tokens` tokens, truncated to `max_tokens`, in file order.

    `loaded` is ``load_model(manifest, device=device)``'s ``(model, tokenizer)`` when the caller
    has it already (the Jacobian job uses the same model next); else the checkpoint is loaded here.

    Returns
    -------
    result : dict of ndarray
        ``acts`` (N, 2L, d) float32, ``n_tokens`` (N,), ``sample_ids`` (N,) the texts' ids.
    """
    context = {"model": manifest["model"], "revision": manifest.get("revision")}
    model, tokenizer = loaded or load_model(manifest, device=device)
    if tokenizer is None:
        raise CheckpointError(
            f"no tokenizer in the checkpoint (none of {', '.join(TOKENIZER_FILES)}): save it beside the weights "
            "(tokenizer.save_pretrained) for a local checkpoint", **context, file=manifest["path"])
    ids, texts = read_samples(samples_path)
    token_ids = []  # tokenised on demand: a dataset's texts only up to the n-th long-enough one

    def tokenized():
        for text in texts:
            token_ids.append(tokenizer(text)["input_ids"])
            yield token_ids[-1]

    try:
        picked = select_sample_indices(tokenized(), min_tokens=min_tokens, max_tokens=max_tokens, n=n_samples)
    except ValueError as err:
        raise CheckpointError(str(err), **context, file=str(samples_path)) from err
    samples = [token_ids[i][:max_tokens] for i in picked]
    try:
        recorded = record_residual_stream(model, samples, batch_size=batch_size, device=device)
    except ValueError as err:  # non-finite activation: name the checkpoint too
        raise CheckpointError(str(err), **context, file=manifest["path"]) from err
    return {**recorded, "sample_ids": np.asarray([ids[i] for i in picked])}
