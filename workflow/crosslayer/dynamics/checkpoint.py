"""Per-checkpoint residual-stream dynamics (paper 004): the ``block_jacobians`` job
(:func:`measure_checkpoint`) loads a checkpoint once, records the residual stream of the chosen
samples (:func:`sample_token_ids`, then :func:`~crosslayer.models.residual.record_residual_stream`),
and takes every block's per-sample single-token Jacobians there (:func:`block_jacobian_stats`). One
pass over a layer's Jacobians gives both the mean Jacobian (float64 accumulation) and the per-sample
distributions, so no layer's Jacobians are ever held beyond one chunk."""

import logging
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from crosslayer.data.samples import read_samples
from crosslayer.errors import CheckpointError, naming_checkpoint
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
from crosslayer.settings import require_bool, require_choice, require_int

__all__ = ["JACOBIAN_METHODS", "STAT_NAMES", "JacobianSettings", "block_jacobian_stats", "measure_checkpoint",
           "sample_token_ids"]

STAT_NAMES = PER_SAMPLE_STATS
# "closed_form" (ours) or an autograd path of the real block ("functional" is the paper's method)
JACOBIAN_METHODS = ("closed_form", *AUTOGRAD_METHODS)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JacobianSettings:
    """What the dynamics of one checkpoint depend on (the config's ``dynamics`` block; the params of the
    ``block_jacobians`` rule): where the Jacobians are taken and how they are summarised.

    Attributes
    ----------
    n_samples : int, default=64
        Texts whose last token's residual stream is recorded: the first ones of the samples file
        with at least `min_tokens` tokens, in file order.
    min_tokens, max_tokens : int, default=32, 128
        Texts shorter than `min_tokens` are skipped, longer ones cut to `max_tokens`.
    method : {"closed_form", "functional", "vectorized", "jacrev"}, default="closed_form"
        ``dynamics.jacobian_method``: our batched closed form, or autograd of the real block
        ("functional" is the paper's method) as the reference.
    per_sample_dtype : {"float64", "float32"}, default="float64"
        Precision of the per-sample statistics (a torch dtype is kept by its name); float32 is
        slower with condition numbers (it keeps the full SVD), its condition numbers accurate only
        while ``kappa << 1e7``.
    condition_number : bool, default=True
        Compute the per-sample condition numbers (the only SVD); False leaves them out.
    folds : int, default=0
        Disjoint sample folds (sample i in fold ``i % folds``) whose mean Jacobians are kept
        beside the whole sample's: independent replicates of every quantity composed from the
        mean Jacobians (the cumulative bottleneck's units); 0 keeps none. The config's default is 4.

    Raises
    ------
    ValueError
        A field of the wrong type or out of its range, naming its config key.
    """

    n_samples: int = 64
    min_tokens: int = 32
    max_tokens: int = 128
    method: str = "closed_form"
    per_sample_dtype: str = "float64"
    condition_number: bool = True
    folds: int = 0

    def __post_init__(self):
        require_int("dynamics.n_samples", self.n_samples, minimum=1)
        require_int("dynamics.min_tokens", self.min_tokens, minimum=1)
        require_int("dynamics.max_tokens", self.max_tokens, minimum=self.min_tokens)
        require_choice("dynamics.jacobian_method", self.method, JACOBIAN_METHODS)
        dtype = str(self.per_sample_dtype).removeprefix("torch.")  # torch.float32 -> "float32"
        require_choice("dynamics.per_sample_dtype", dtype, PER_SAMPLE_DTYPES)
        require_bool("dynamics.condition_number", self.condition_number)
        require_int("dynamics.folds", self.folds, minimum=0)
        if self.folds == 1 or self.folds > self.n_samples // 2:
            raise ValueError(f"dynamics.folds must be 0 (none) or from 2 to half of dynamics.n_samples "
                             f"({self.n_samples // 2}), so that every fold holds 2 samples or more; got {self.folds}")
        object.__setattr__(self, "per_sample_dtype", dtype)


def block_jacobian_stats(model, acts, settings=JacobianSettings(), *, chunk_bytes=DEFAULT_CHUNK_BYTES, device=None,
                         progress=None, token_inputs=None):
    """Mean Jacobian and per-sample statistics of every block of a loaded model.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any family the adapters support for Jacobians.
    acts : (N, 2L, d) array_like
        Residual stream from :func:`crosslayer.models.residual.record_residual_stream`; snapshot
        ``2l`` (the block-l input) is where block l's Jacobian is taken.
    settings : JacobianSettings
        Its `method`, `per_sample_dtype` and `condition_number` (the sample fields chose `acts`).
        The per-sample statistics are computed with torch on `device` from each chunk of
        Jacobians, J and J - I together (no host copy; see
        :func:`crosslayer.linalg.conditioning.per_sample_stats_pair`).
    chunk_bytes : int
        Working memory of one chunk of per-sample Jacobians.
    device : str or torch.device, optional
        Where the Jacobians are computed (default: the model's device).
    progress : callable, optional
        Wraps the layer iterator (e.g. ``tqdm``).
    token_inputs : (N, L, width) array_like, optional
        Each sample's token-dependent block arguments, as recorded beside `acts` (``token_inputs``
        of :func:`~crosslayer.models.residual.record_residual_stream`); required for a family that has
        them (Gemma 4's per-layer inputs).

    Returns
    -------
    result : dict of ndarray
        ``mean`` (L, d, d) float32 mean Jacobian (summed in float64); for each name in
        :data:`STAT_NAMES` (without ``condition_number`` when not `settings.condition_number`),
        ``<name>`` and ``<name>_res`` (L, N): the statistic of ``J`` and of ``J - I`` per layer and
        sample; with condition numbers, also ``condition_path`` and ``condition_path_res`` (L, N)
        int8, how each was computed (:data:`crosslayer.linalg.conditioning.CONDITION_PATHS`), and
        ``condition_method``, the rule (:data:`crosslayer.linalg.conditioning.CONDITION_METHOD`);
        with `settings.folds` K > 0, ``fold_means`` (K, L, d, d) float32, the mean Jacobian of the
        samples ``i % K == k`` (summed in float64 apart from ``mean``, which keeps its own sum), and
        ``fold_sizes`` (K,).

    Raises
    ------
    ValueError
        `acts` or `token_inputs` does not match the model, or a Jacobian is not finite (naming the
        layer and sample).
    """
    method, spectra_dtype, condition = settings.method, settings.per_sample_dtype, settings.condition_number
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
    K = settings.folds
    if K:
        if K > N // 2:
            raise ValueError(f"dynamics.folds = {K} needs 2 samples per fold, and there are {N}")
        fold_of = torch.arange(N, device=device) % K
        result |= {"fold_means": np.empty((K, L, d, d), dtype=np.float32),
                   "fold_sizes": np.bincount(np.arange(N) % K, minlength=K)}
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
        fold_totals = torch.zeros(K, d, d, dtype=torch.float64, device=device)
        for start, J in chunks:
            total += J.sum(dim=0, dtype=torch.float64)
            for k, fold_total in enumerate(fold_totals):
                fold_total += J[fold_of[start:start + J.shape[0]] == k].sum(dim=0, dtype=torch.float64)
            stop = start + J.shape[0]
            # J and J - I together; the chunk stays where it was computed (e.g. CUDA), only (B,) results come back
            for name, values in per_sample_stats_pair(J, condition=condition, dtype=spectra_dtype).items():
                result[name][layer, start:stop] = values
        result["mean"][layer] = (total / N).cpu().numpy()
        if K:
            sizes = torch.from_numpy(result["fold_sizes"]).to(device=device, dtype=torch.float64)
            result["fold_means"][:, layer] = (fold_totals / sizes[:, None, None]).cpu().numpy()
        if condition:
            for suffix, what in (("", "J"), ("_res", "J - I")):
                warn_unreliable_conditions(result["condition_number" + suffix][layer], spectra_dtype,
                                           f"layer {layer} ({what})")
                counts = np.bincount(result["condition_path" + suffix][layer], minlength=len(CONDITION_PATHS))
                log.info("layer %d (%s): condition numbers by %s", layer, what,
                         ", ".join(f"{name} {n}" for name, n in zip(CONDITION_PATHS, counts)))
    return result


def sample_token_ids(tokenizer, texts, settings=JacobianSettings()):
    """The token ids the activations are recorded at: the first ``settings.n_samples`` texts with at
    least ``settings.min_tokens`` tokens, cut to ``settings.max_tokens``, in order; texts are
    tokenized only up to the last one chosen.

    Parameters
    ----------
    tokenizer : callable
        ``tokenizer(text)["input_ids"]`` (a transformers tokenizer).
    texts : sequence of str
    settings : JacobianSettings

    Returns
    -------
    picked : list of int
        Indices of the chosen texts.
    token_ids : list of lists of int

    Raises
    ------
    ValueError
        Too few texts are long enough.
    """
    token_ids = []

    def tokenized():
        for text in texts:
            token_ids.append(tokenizer(text)["input_ids"])
            yield token_ids[-1]

    picked = select_sample_indices(tokenized(), min_tokens=settings.min_tokens, max_tokens=settings.max_tokens,
                                   n=settings.n_samples)
    return picked, [token_ids[i][: settings.max_tokens] for i in picked]


def measure_checkpoint(manifest, settings=JacobianSettings(), *, samples, device="cpu",
                       chunk_bytes=DEFAULT_CHUNK_BYTES):
    """The ``block_jacobians`` job: from one load of the checkpoint a manifest describes (minutes at
    8B scale), its residual stream at the chosen texts of a samples file, then
    :func:`block_jacobian_stats` there.

    Parameters
    ----------
    manifest : dict
        As :func:`crosslayer.models.checkpoints.verified_manifest` returns it (``path``, ``model``,
        ``revision``).
    settings : JacobianSettings
    samples : str or path-like
        A samples file of :mod:`crosslayer.data.samples`.
    device : str, default="cpu"
        Where the model is loaded, the activations recorded and the Jacobians computed.
    chunk_bytes : int
        As :func:`block_jacobian_stats` (speed only).

    Returns
    -------
    activations : dict of ndarray
        ``acts`` (N, 2L, d) float32 (the residual stream at the last token, before attention and
        before the MLP of every block), ``n_tokens`` (N,), ``token_inputs`` where the family has
        them, and ``sample_ids`` (N,) the texts' ids.
    jacobians : dict of ndarray
        :func:`block_jacobian_stats` at ``activations["acts"]``.

    Raises
    ------
    CheckpointError
        The checkpoint cannot be loaded or has no tokenizer, too few texts are long enough (naming
        the samples file), or an activation or Jacobian is not finite (naming layer and sample); the
        message names the model and revision.
    """
    model, tokenizer = load_model(manifest, device=device)
    with naming_checkpoint(manifest):
        if tokenizer is None:
            raise CheckpointError(f"no tokenizer in the checkpoint (none of {', '.join(TOKENIZER_FILES)}): save it "
                                  "beside the weights (tokenizer.save_pretrained) for a local checkpoint")
    with naming_checkpoint(manifest, file=samples):
        ids, texts = read_samples(samples)
        picked, token_ids = sample_token_ids(tokenizer, texts, settings)
    with naming_checkpoint(manifest):
        activations = {**record_residual_stream(model, token_ids, device=device),
                       "sample_ids": np.asarray([ids[i] for i in picked])}
        jacobians = block_jacobian_stats(model, activations["acts"], settings, chunk_bytes=chunk_bytes,
                                         progress=lambda layers: tqdm(layers, desc="layers", unit="layer"),
                                         token_inputs=activations.get("token_inputs"))
    return activations, jacobians
