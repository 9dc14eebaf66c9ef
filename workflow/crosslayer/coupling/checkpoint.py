"""Per-checkpoint block coupling and trajectory regularity (paper 002): one model, one prompt
set, every measurement of the stage in one pass, streamed by layer and by output token
(:func:`measure_checkpoint`, the ``block_coupling`` job; in memory :func:`block_coupling`).

Per prompt: the depth-wise mis-coupling matrices at the configured token (default the last;
by causality the prompt is cut after that token, so its context is exactly the tokens before),
the trajectories' line-shape score and expodistance, the Gram matrix of their unit steps and
the norm of the residual stream per depth (from which the windowed statistics of any width follow,
in the summary tables), each in both conventions for the last state: after the final norm (the
paper's, unsuffixed) and before it (``_raw``). On the first few prompts: token-wise
coupling of configured layer pairs over their first tokens, and the 2-D PCA of the trajectories.
"""

from dataclasses import dataclass, replace

import numpy as np
from tqdm import tqdm

from crosslayer.config import check_max_tokens
from crosslayer.coupling.measure import METRICS, depthwise_miscoupling, tokenwise_miscoupling
from crosslayer.coupling.regularity import expodistance, line_shape_score, pack_symmetric, unit_step_gram, unit_steps
from crosslayer.coupling.trajectories import (
    PCA_FITS,
    logit_entropy,
    record_trajectories,
    trajectory_pca,
    with_final_norm,
)
from crosslayer.data.prompts import prompt_token_ids, read_prompts
from crosslayer.errors import CheckpointError, naming_checkpoint
from crosslayer.jacobians.multi_token import DEFAULT_CHUNK_BYTES, last_token_jacobians, token_jacobians
from crosslayer.models.adapters import adapter_for
from crosslayer.models.loading import load_model
from crosslayer.settings import is_int, require_bool, require_choice, require_int

__all__ = ["CouplingSettings", "block_coupling", "check_prompts", "context_length", "measure_checkpoint"]


@dataclass(frozen=True)
class CouplingSettings:
    """What the coupling of one checkpoint depends on (the config's ``coupling`` block; the params of
    the ``block_coupling`` rule). Sequences are kept as tuples; `Ks` sorted, without repeats.

    Attributes
    ----------
    Ks : sequence of int, default=(10, 30, 50)
        Subspace sizes of the coupling matrices (each <= d_model).
    token : int, default=-1
        Depth-wise token, a Python index into each prompt (``coupling.depthwise_token``).
    layer_pairs : sequence of (l, l'), default=()
        Token-wise layer pairs (``coupling.token_wise.layer_pairs``).
    token_wise_prompts, token_wise_tokens : int, default=0, 16
        Token-wise coupling on the first `token_wise_tokens` tokens of the first
        `token_wise_prompts` prompts (``coupling.token_wise.prompts``, ``.tokens``); 0 prompts: none.
    pca_prompts : int, default=1
        Prompts whose 2-D trajectory PCA is kept.
    pca_fit : {"last", "all"}, default="last"
        The states each PCA is fit on (:func:`~crosslayer.coupling.trajectories.trajectory_pca`).
    final_norm : bool, default=True
        The last block's Jacobians end with the final norm (the paper's eq. 7), and the PCA is of
        the trajectories in that convention.
    metrics : sequence of str, default=METRICS
        :data:`crosslayer.coupling.measure.METRICS`, in the order of the results' metric axis.
    max_tokens : int or None, default=None
        Prompts are cut to this many tokens (``coupling.prompts.max_tokens``; None: whole).
    example_prompt : str or None, default=None
        A text whose ``|A|`` of every layer pair is measured beside the prompt set (the paper's
        Fig. 3; ``coupling.example_prompt``); None: none.

    Raises
    ------
    ValueError
        A field of the wrong type or out of its range, naming its config key.
    """

    Ks: tuple = (10, 30, 50)
    token: int = -1
    layer_pairs: tuple = ()
    token_wise_prompts: int = 0
    token_wise_tokens: int = 16
    pca_prompts: int = 1
    pca_fit: str = "last"
    final_norm: bool = True
    metrics: tuple = METRICS
    max_tokens: int | None = None
    example_prompt: str | None = None

    def __post_init__(self):
        Ks = tuple(self.Ks)
        if not Ks or not all(is_int(k) and k >= 1 for k in Ks):
            raise ValueError(f"coupling.Ks must be integers >= 1, at least one, got {list(Ks)}")
        pairs = tuple(tuple(pair) for pair in self.layer_pairs)
        if not all(len(pair) == 2 and all(is_int(layer) and layer >= 0 for layer in pair) for pair in pairs):
            raise ValueError(f"coupling.token_wise.layer_pairs must be [l, l'] pairs of layers >= 0, got "
                             f"{[list(pair) for pair in pairs]}")
        require_int("coupling.depthwise_token", self.token)
        require_int("coupling.token_wise.prompts", self.token_wise_prompts, minimum=0)
        require_int("coupling.token_wise.tokens", self.token_wise_tokens, minimum=1)
        require_int("coupling.pca_prompts", self.pca_prompts, minimum=0)
        if self.max_tokens is not None:
            require_int("coupling.prompts.max_tokens", self.max_tokens, minimum=1)
        require_choice("coupling.pca_fit", self.pca_fit, PCA_FITS)
        require_bool("coupling.final_norm", self.final_norm)
        metrics = (self.metrics,) if isinstance(self.metrics, str) else tuple(self.metrics)
        if not metrics or not set(metrics) <= set(METRICS):
            raise ValueError(f"coupling metrics must be among {METRICS}, got {list(metrics)}")
        if self.example_prompt is not None and not (isinstance(self.example_prompt, str) and self.example_prompt):
            raise ValueError(f"coupling.example_prompt must be a non-empty string or None, got {self.example_prompt!r}")
        object.__setattr__(self, "Ks", tuple(sorted(set(int(k) for k in Ks))))
        object.__setattr__(self, "layer_pairs", pairs)
        object.__setattr__(self, "metrics", metrics)


def context_length(config):
    """The longest sequence a model config allows, or None when it sets no limit."""
    config = config.get_text_config()  # a vision-language model's decoder (Gemma 3)
    for key in ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len"):
        if isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def check_prompts(prompt_ids, token_ids, *, context, token=-1, token_wise_prompts=0, token_wise_tokens=0):
    """Refuse, before any Jacobian, prompts the measurements cannot use; the message names the
    prompt and the key to change.

    Parameters
    ----------
    prompt_ids : sequence of str
    token_ids : sequence of sequences of int
    context : int or None
        The model's context length.
    token : int
        Depth-wise token (a Python index; -1 the last).
    token_wise_prompts, token_wise_tokens : int
        The first `token_wise_prompts` prompts need at least `token_wise_tokens` tokens.
    """
    for i, (pid, ids) in enumerate(zip(prompt_ids, token_ids)):
        n = len(ids)
        if n == 0:
            raise ValueError(f"prompt {pid!r} has no tokens; remove it from the prompt set")
        if context is not None and n > context:
            raise ValueError(f"prompt {pid!r} has {n} tokens, longer than the model's context of {context}; "
                             "shorten it or set coupling.prompts.max_tokens to truncate prompts")
        if not -n <= token < n:
            raise ValueError(f"prompt {pid!r} has {n} tokens, too few for coupling.depthwise_token = {token}")
        if i < token_wise_prompts and n < token_wise_tokens:
            raise ValueError(f"prompt {pid!r} has {n} tokens, fewer than coupling.token_wise.tokens = "
                             f"{token_wise_tokens} (token-wise coupling uses the first "
                             f"{token_wise_prompts} prompt(s)); lengthen it or lower token_wise.tokens")


def block_coupling(model, token_ids, settings=CouplingSettings(), *, prompt_ids=None, abs_prompts=None,
                   chunk_bytes=DEFAULT_CHUNK_BYTES, hold_bytes=0, progress=None):
    """Every coupling and regularity measurement of one loaded model on a prompt set.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Eval mode, eager attention recommended (see :func:`last_token_jacobians`).
    token_ids : sequence of P sequences of int
        Checked with :func:`check_prompts`.
    settings : CouplingSettings
        Its `max_tokens` and `example_prompt` are :func:`measure_checkpoint`'s: not used here.
    prompt_ids : sequence of P str, optional
        Named in errors (default: the prompts' indices).
    abs_prompts : sequence of P bool, optional
        The prompts averaged into ``abs_coupling`` (default all; the workflow keeps one variant
        apart from another).
    chunk_bytes, hold_bytes : int
        Working memory of one batch of cotangents; Jacobians held instead of recomputed.
    progress : callable, optional
        Wraps the prompt iterator.

    Returns
    -------
    result : dict of ndarray
        ``depthwise`` (P, n_metrics, n_K, L, L), ``singular_values`` (P, L, max K),
        ``abs_coupling`` (L, L, min K, min K) mean ``|A|`` over the `abs_prompts`; per token of every
        prompt (N tokens in all): ``token_prompt`` (N,), ``lss``, ``ed`` (N,), ``norms`` (L + 1, N)
        with ``x^L`` after the final norm, ``lss_raw``, ``ed_raw``, ``norm_last_raw`` (N,) with
        ``x^L`` before it; ``step_gram`` (N, (L + 1)(L + 2) / 2) float32, the packed
        (:func:`~crosslayer.coupling.regularity.pack_symmetric`) Gram matrix of the token's
        unit steps: the L steps to ``x^L`` after the final norm, then the last step to the raw
        ``x^L``; ``step_lengths`` (L + 1, N) float64, ``||x^l - x^{l-1}||`` of the same steps;
        ``logit_entropy`` (L + 1, N), the logit lens of every state;
        ``pca`` (pca_prompts, L + 1, T_max, 2) NaN-padded and ``pca_explained`` (pca_prompts, 2);
        token-wise, stacked over prompts and layer pairs
        ``tw_self`` (n_pairs, P_tw, n_metrics, n_K, T, T), ``tw_fixed_input`` and
        ``tw_fixed_output`` (n_pairs, P_tw, n_metrics, n_K, T, T, T), and the first prompt's
        ``tw_abs_self``, ``tw_abs_fixed_input``, ``tw_abs_fixed_output`` (n_pairs, T, T, k, k).

    Raises
    ------
    ValueError
        A K beyond d_model, a layer pair beyond the depth, no prompt in `abs_prompts`, or a
        non-finite Jacobian or state (naming the prompt, layer and tokens).
    """
    Ks, metrics, token, final_norm = list(settings.Ks), settings.metrics, settings.token, settings.final_norm
    layer_pairs, token_wise_prompts = settings.layer_pairs, settings.token_wise_prompts
    wrap = progress or (lambda it: it)
    n_layers, d = len(adapter_for(model).blocks(model)), model.get_input_embeddings().embedding_dim
    if Ks[-1] > d:  # known sizes are checked with the config; hub models' here, before compute
        raise ValueError(f"coupling.Ks: {Ks} must not exceed d_model = {d}")
    if token_wise_prompts and any(not 0 <= layer < n_layers for pair in layer_pairs for layer in pair):
        raise ValueError(f"coupling.token_wise.layer_pairs: {[list(p) for p in layer_pairs]} must be layers below "
                         f"{n_layers}")
    depthwise, singular, abs_sum, token_prompt, pca, explained = [], [], 0.0, [], [], []
    stats = {name: [] for name in ("lss", "ed", "norms", "lss_raw", "ed_raw", "norm_last_raw", "step_lengths",
                                   "logit_entropy")}
    grams = []
    prompt_ids = list(range(len(token_ids))) if prompt_ids is None else list(prompt_ids)
    abs_prompts = np.ones(len(token_ids), bool) if abs_prompts is None else np.asarray(abs_prompts, bool)
    if not abs_prompts.any():
        raise ValueError("abs_prompts selects no prompt to average |A| over")
    for p, ids in enumerate(wrap(token_ids)):
        ids = list(ids)
        try:
            result = depthwise_miscoupling(_jacobian_fn(model, ids[: (token % len(ids)) + 1], n_layers * d * d * 4,
                                                        final_norm, chunk_bytes, hold_bytes), n_layers, Ks,
                                           metrics=metrics)
            raw = record_trajectories(model, ids)  # (L + 1, T, d), x^L before the final norm
            normed = with_final_norm(model, raw)
        except ValueError as err:  # a non-finite Jacobian or state names layer and tokens; add the prompt
            raise ValueError(f"prompt {prompt_ids[p]!r}: {err}") from err
        depthwise.append(result["miscoupling"].astype(np.float32))
        singular.append(result["singular_values"].astype(np.float32))
        if abs_prompts[p]:
            abs_sum = abs_sum + result["abs_coupling"][..., : Ks[0], : Ks[0]]
        token_prompt.append(np.full(len(ids), p))
        for suffix, traj in (("", normed), ("_raw", raw)):
            stats["lss" + suffix].append(line_shape_score(traj))
            stats["ed" + suffix].append(expodistance(traj))
        # the L steps to x^L after the final norm, then the raw last step: both conventions' windows
        units = np.concatenate([unit_steps(normed), unit_steps(raw[-2:])])  # (L + 1, T, d)
        grams.append(pack_symmetric(unit_step_gram(units)).astype(np.float32))  # (T, (L + 1)(L + 2) / 2)
        # float64: the windowed expodistance is computed from these alone (log-ratios of norms)
        stats["norms"].append(np.linalg.norm(normed.astype(np.float64), axis=-1))
        stats["norm_last_raw"].append(np.linalg.norm(raw[-1].astype(np.float64), axis=-1))
        # the windowed equidistance's step lengths: the L steps to x^L after the final norm, then the raw last one
        steps64 = [np.diff(normed.astype(np.float64), axis=0), np.diff(raw[-2:].astype(np.float64), axis=0)]
        stats["step_lengths"].append(np.linalg.norm(np.concatenate(steps64), axis=-1))  # (L + 1, T)
        stats["logit_entropy"].append(logit_entropy(model, raw))
        if p < settings.pca_prompts:
            coords, ratio = trajectory_pca(normed if final_norm else raw, fit=settings.pca_fit)
            pca.append(coords)
            explained.append(ratio)
    T_max = max((c.shape[1] for c in pca), default=0)
    out = {
        "depthwise": np.stack(depthwise),
        "singular_values": np.stack(singular),
        "abs_coupling": (abs_sum / abs_prompts.sum()).astype(np.float32),
        "token_prompt": np.concatenate(token_prompt),
        **{name: np.concatenate(values, axis=-1) for name, values in stats.items()},
        "step_gram": np.concatenate(grams),
        "pca": np.stack([np.pad(c, ((0, 0), (0, T_max - c.shape[1]), (0, 0)), constant_values=np.nan)
                         for c in pca]) if pca else np.zeros((0, 0, 0, 2)),
        "pca_explained": np.array(explained).reshape(-1, 2),
    }
    if layer_pairs and token_wise_prompts:
        out.update(_token_wise(model, token_ids[:token_wise_prompts], prompt_ids, layer_pairs,
                               settings.token_wise_tokens, Ks, metrics, final_norm, chunk_bytes, hold_bytes))
    return out


def measure_checkpoint(manifest, settings=CouplingSettings(), *, prompts, device="cpu", chunk_bytes=DEFAULT_CHUNK_BYTES,
                       hold_bytes=0):
    """The ``block_coupling`` job: :func:`block_coupling` of the checkpoint a manifest describes on a
    prompt file, and the ``|A|`` of its example prompt.

    The prompts are tokenized with the checkpoint's tokenizer, cut to ``settings.max_tokens`` and
    checked (:func:`check_prompts`) before any Jacobian; ``abs_coupling`` averages the plain variants.

    Parameters
    ----------
    manifest : dict
        As :func:`crosslayer.models.checkpoints.verified_manifest` returns it (``path``, ``model``,
        ``revision``).
    settings : CouplingSettings
    prompts : str or path-like
        A prompt file of :func:`crosslayer.data.prompts.read_prompts`.
    device : str, default="cpu"
    chunk_bytes, hold_bytes : int
        As :func:`block_coupling` (speed only).

    Returns
    -------
    result : dict of ndarray
        The arrays of :func:`block_coupling`; ``example_abs_coupling`` (L, L, min K, min K) and
        ``example_prompt`` (with `settings.example_prompt`), ``example_pca`` and
        ``example_pca_explained`` (its Fig. 12 trajectories, when ``pca_prompts`` > 0); per prompt ``prompt_ids``, ``variants``,
        ``sources``, ``n_tokens``; ``Ks``, ``metrics``, ``layer_pairs`` (n_pairs, 2; none without
        token-wise prompts), ``n_params``, ``n_layers``, ``d_model``.

    Raises
    ------
    CheckpointError
        The checkpoint cannot be loaded or has no tokenizer, a prompt or setting does not fit the
        model, or a Jacobian is not finite; the message names the model, revision and checkpoint.
    """
    loaded, tokenizer = load_model(manifest, device=device)
    with naming_checkpoint(manifest):
        if tokenizer is None:
            raise CheckpointError("no tokenizer in the checkpoint; the coupling stage tokenizes its prompts")
        loaded.set_attn_implementation("eager")  # autograd batches eager attention; fused kernels fall back to a loop
        rows = read_prompts(prompts)
        prompt_ids = [row["id"] for row in rows]
        token_ids = prompt_token_ids(tokenizer, rows, settings.max_tokens)
        context = context_length(loaded.config)
        # a hub model's context is known only here (a local or trained model's was checked before any job)
        check_max_tokens(settings.max_tokens, context, model=manifest["model"])
        check_prompts(prompt_ids, token_ids, context=context, token=settings.token,
                      token_wise_prompts=settings.token_wise_prompts, token_wise_tokens=settings.token_wise_tokens)
        memory = {"chunk_bytes": chunk_bytes, "hold_bytes": hold_bytes}
        result = block_coupling(loaded, token_ids, settings, prompt_ids=prompt_ids,
                                abs_prompts=[row["variant"] == "plain" for row in rows],
                                progress=lambda it: tqdm(it, desc="prompts", unit="prompt"), **memory)
        if settings.example_prompt is not None:  # the paper's Fig. 3: |A| of every layer pair on one prompt
            example = tokenizer(settings.example_prompt)["input_ids"][: settings.max_tokens]
            # and Fig. 12: its trajectories on their top two PCs, when the run keeps any PCA
            alone = replace(settings, token=-1, layer_pairs=(), token_wise_prompts=0,
                            pca_prompts=min(settings.pca_prompts, 1))
            example = block_coupling(loaded, [example], alone, prompt_ids=["coupling.example_prompt"], **memory)
            result["example_abs_coupling"] = example["abs_coupling"]
            if settings.pca_prompts:
                result["example_pca"], result["example_pca_explained"] = example["pca"], example["pca_explained"]
            result["example_prompt"] = np.array(settings.example_prompt)
    return result | {
        "prompt_ids": np.array(prompt_ids),
        "variants": np.array([row["variant"] for row in rows]),
        "sources": np.array([row["source"] for row in rows]),
        "n_tokens": np.array([len(ids) for ids in token_ids]),
        "Ks": np.array(settings.Ks),
        "metrics": np.array(settings.metrics),
        "layer_pairs": np.array(settings.layer_pairs if settings.token_wise_prompts else [], dtype=int).reshape(-1, 2),
        "n_params": sum(p.numel() for p in loaded.parameters()),
        "n_layers": result["depthwise"].shape[-1],
        "d_model": loaded.get_input_embeddings().embedding_dim,
    }


def _jacobian_fn(model, ids, nbytes, final_norm, chunk_bytes, hold_bytes):
    """``layer -> J^l_{TT}`` of a prompt cut after its depth-wise token (causal: J_tt depends on
    tokens <= t only): all layers in one pass when their `nbytes` fit in `hold_bytes`, else one
    layer per call (each call reruns the prompt's forward pass)."""
    if nbytes <= hold_bytes:
        return dict(last_token_jacobians(model, ids, final_norm=final_norm, chunk_bytes=chunk_bytes)).__getitem__
    return lambda layer: next(last_token_jacobians(model, ids, layers=[layer], final_norm=final_norm,
                                                   chunk_bytes=chunk_bytes))[1]


def _token_wise(model, token_ids, prompt_ids, layer_pairs, n_tokens, Ks, metrics, final_norm, chunk_bytes, hold_bytes):
    per_pair = []
    for l, lp in layer_pairs:
        per_prompt = []
        for pid, ids in zip(prompt_ids, token_ids):
            ids = list(ids)[:n_tokens]

            def sweep(layer, ids=ids):
                return lambda: token_jacobians(model, ids, layer, final_norm=final_norm, chunk_bytes=chunk_bytes)

            source = sweep(l)
            try:
                per_prompt.append(tokenwise_miscoupling(source, source if l == lp else sweep(lp), n_tokens, Ks,
                                                        metrics=metrics, hold_bytes=hold_bytes))
            except ValueError as err:
                raise ValueError(f"prompt {pid!r}, token-wise layers ({l}, {lp}): {err}") from err
        per_pair.append(per_prompt)
    out = {f"tw_{name}": np.stack([np.stack([r[name] for r in rows]) for rows in per_pair]).astype(np.float32)
           for name in ("self", "fixed_input", "fixed_output")}
    out.update({f"tw_{name}": np.stack([rows[0][name] for rows in per_pair])
                for name in ("abs_self", "abs_fixed_input", "abs_fixed_output")})
    return out
