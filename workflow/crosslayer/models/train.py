"""Train tiny causal language models offline and save Hugging Face checkpoints.

The embedded default suite needs real training trajectories without the Hugging Face
hub: :func:`train_model` trains a GPT-NeoX-style (GELU MLP, parallel attention/MLP) or
Llama-style (SwiGLU MLP, sequential blocks, RMSNorm) model on a token array from
:mod:`crosslayer.data.corpus` and writes ``out_dir/step{N}/`` checkpoints (``model.safetensors``,
``config.json`` and the tokenizer) that ``AutoModelForCausalLM.from_pretrained`` loads,
step 0 being the initialisation.

Paper 003's transformer ablations are Llama models built here with the gate activation
switched (SiLU, ReLU, GELU, none), or without residual connections or RMSNorms; a run may be
asked to stop at a non-finite loss and report it (:func:`training_outcome`) instead of failing.

The loop is deliberately plain (nanoGPT-like): random contiguous windows, AdamW with
weight decay on matrices only, linear warmup then cosine decay to 10 %, gradient
clipping at 1, float32 throughout. Runs are deterministic: the same arguments give
bit-identical checkpoints on the same machine and thread count.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from crosslayer.data.corpus import EVAL_FRACTION
from crosslayer.devices import check_device
from crosslayer.malloc import retain_freed_memory
from crosslayer.models.loading import ABLATION_KEY, check_tensors, drop_norms

__all__ = [
    "TrainConfig",
    "HIDDEN_ACT",
    "ARCHS",
    "build_model",
    "evaluate_loss",
    "lr_at",
    "train_model",
    "training_outcome",
]

ARCHS = ("gpt_neox", "llama")
"""Architectures :func:`build_model` knows."""

HIDDEN_ACT = {"silu": "silu", "relu": "relu", "gelu": "gelu", "none": "linear"}
"""Llama MLP activations of paper 003's ablations -> transformers ``hidden_act`` (none = identity)."""

LOSS_COLUMNS = ["step", "loss", "lr", "tokens_seen", "eval_loss"]  # no wall time: same config, same bytes


def _check_arch(arch):
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; supported: {', '.join(ARCHS)}")


def build_model(
    arch: str,
    *,
    vocab_size: int,
    d_model: int,
    n_layers: int,
    n_heads: int,
    d_ff: int,
    context: int,
    seed: int,
    n_kv_heads: int | None = None,
    bos_token_id: int | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    activation: str = "silu",
    residual: bool = True,
    norm: bool = True,
):
    """Build a freshly initialised causal LM.

    Parameters
    ----------
    arch : {"gpt_neox", "llama"}
        ``"gpt_neox"``: ``GPTNeoXConfig`` with GELU MLP, parallel attention/MLP
        (``use_parallel_residual=True``), LayerNorm and the default partial rotary
        embedding (as in Pythia). ``"llama"``: ``LlamaConfig`` with SwiGLU MLP
        (``hidden_act="silu"``), sequential blocks and RMSNorm.
    vocab_size, d_model, n_layers, n_heads, d_ff, context : int
        Sizes; ``d_model`` must be divisible by ``n_heads``.
    seed : int
        ``torch.manual_seed(seed)`` is called right before construction, so the
        initial weights depend on nothing else.
    n_kv_heads : int, optional
        Llama key/value heads (grouped-query attention); defaults to ``n_heads``.
    bos_token_id, eos_token_id, pad_token_id : int, optional
        Recorded in the config (generation uses them). A ``pad_token_id`` also makes
        that embedding row start at zero.
    activation : {"silu", "relu", "gelu", "none"}
        Llama only: the activation of the gate branch (paper 003's ablations; none = identity,
        leaving the bilinear gate x up product).
    residual, norm : bool
        Llama only: False drops every block's two residual connections (each sublayer's output
        replaces the stream) or every RMSNorm (blocks' and final), paper 003's failure controls.
        Such a model is marked with :data:`crosslayer.models.loading.ABLATION_KEY` in its config.

    Returns
    -------
    transformers.PreTrainedModel
        ``GPTNeoXForCausalLM`` or ``LlamaForCausalLM`` in float32, training mode.

    Raises
    ------
    ValueError
        For an unknown ``arch`` or inconsistent sizes.
    """
    from transformers import AutoModelForCausalLM, GPTNeoXConfig, LlamaConfig

    _check_arch(arch)
    if arch != "llama" and (activation != "silu" or not residual or not norm):
        raise ValueError("activation, residual and norm ablations are built for arch 'llama' only")
    if activation not in HIDDEN_ACT:
        raise ValueError(f"unknown activation {activation!r}; supported: {', '.join(HIDDEN_ACT)}")
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    shared = dict(
        vocab_size=vocab_size,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        intermediate_size=d_ff,
        max_position_embeddings=context,
        tie_word_embeddings=False,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )
    if arch == "gpt_neox":
        config = GPTNeoXConfig(hidden_act="gelu", use_parallel_residual=True, **shared)
    else:
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
        config = LlamaConfig(num_key_value_heads=n_kv_heads, hidden_act=HIDDEN_ACT[activation],
                             rms_norm_eps=1e-5, **shared)
        if not residual or not norm:
            setattr(config, ABLATION_KEY, {"residual": residual, "norm": norm})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    if not norm:
        drop_norms(model)  # as crosslayer.models.loading.check_tensors builds the same config
    for layer in model.model.layers if arch == "llama" and not residual else ():
        layer.forward = types.MethodType(_block_without_residual, layer)
    model.train()
    return model


def _block_without_residual(layer, hidden_states, **kwargs):
    """A Llama decoder layer's forward with both residual connections removed (paper 003's NoRes).
    Its keywords (mask, positions, the key/value cache under whichever name this transformers
    gives it) pass on to the attention as the layer's own forward passes them."""
    hidden_states, _ = layer.self_attn(hidden_states=layer.input_layernorm(hidden_states), **kwargs)
    return layer.mlp(layer.post_attention_layernorm(hidden_states))


def lr_at(step: int, *, lr: float, warmup_steps: int, max_steps: int, min_ratio: float = 0.1):
    """Learning rate of update ``step`` (0-based): linear warmup, then cosine to ``min_ratio * lr``."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if max_steps <= warmup_steps:
        return lr
    progress = min(1.0, (step - warmup_steps) / (max_steps - warmup_steps))
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def evaluate_loss(model, windows: torch.Tensor, *, batch_size: int) -> float:
    """Mean next-token cross-entropy over fixed ``(n, context + 1)`` token windows."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(windows), batch_size):
        batch = windows[start : start + batch_size]
        logits = model(input_ids=batch[:, :-1]).logits
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="sum")
        total += loss.item()
        count += batch[:, 1:].numel()
    model.train(was_training)
    return total / count


def _save_checkpoint(model, tokenizer, step_dir: Path):
    # Write next to the target and rename, so a killed run never leaves a
    # half-written step directory that looks complete.
    from transformers.utils import logging as hf_logging

    tmp = step_dir.with_name(step_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    # A "Writing model shards" bar per checkpoint would drown the training bar in the log.
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(tmp)  # transformers 5 always writes model.safetensors
        tokenizer.save_pretrained(tmp)
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()
    if not (tmp / "model.safetensors").is_file():
        raise RuntimeError(f"save_pretrained wrote no model.safetensors into {tmp}")
    check_tensors(tmp, revision=step_dir.name)  # as registration checks a checkpoint from elsewhere
    shutil.rmtree(step_dir, ignore_errors=True)
    os.replace(tmp, step_dir)


@dataclass(frozen=True)
class TrainConfig:
    """The settings of one training run (the workflow's ``train`` block, a model's overrides, or an
    ablation's), checked when made.

    Attributes
    ----------
    arch, d_model, n_layers, n_heads, d_ff, context, n_kv_heads, activation, residual, norm
        The model, see :func:`build_model`.
    batch_size : int
        Windows of ``context + 1`` tokens per update.
    lr, weight_decay, warmup_steps : float, float, int
        AdamW peak learning rate, decoupled weight decay (matrices only) and linear
        warmup length; after warmup the rate decays by a cosine to 10 % of ``lr`` at
        ``max(save_steps)``, the number of updates.
    save_steps : list of int
        Updates after which to save; 0 saves the initialisation.
    seed : int
        Seeds the initialisation and the window sampler.
    log_every : int
        Log the training loss every this many updates (and at every save step).
    grad_clip : float
        Clip the global gradient norm to this (``0`` disables).
    eval_windows : int
        Number of fixed non-overlapping held-out windows for ``eval_loss``.
    device : {"cpu", "cuda"}
        Where the model trains (float32); the batch sampler stays on the CPU, so the token
        stream is the same on both.
    stop_on_divergence : bool
        A non-finite training loss ends the run (its row is the log's last, no later checkpoint
        is saved) instead of raising: a failure control whose divergence is the result.
    """

    arch: str
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    context: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup_steps: int
    save_steps: tuple
    seed: int
    log_every: int = 10
    grad_clip: float = 1.0
    eval_windows: int = 64
    n_kv_heads: int | None = None
    activation: str = "silu"
    residual: bool = True
    norm: bool = True
    stop_on_divergence: bool = False
    device: str = "cpu"

    def __post_init__(self):
        _check_arch(self.arch)
        saves = sorted(set(int(s) for s in self.save_steps))
        if not saves or saves[0] < 0:
            raise ValueError(f"save_steps must be a non-empty list of steps >= 0, got {self.save_steps}")
        object.__setattr__(self, "save_steps", tuple(saves))  # sorted, distinct


def train_model(tokens_path, tokenizer_dir, out_dir, config: TrainConfig, *, threads: int,
                progress: bool = True) -> pd.DataFrame:
    """Train a tiny causal LM and save checkpoints at the given steps.

    Parameters
    ----------
    tokens_path : path-like
        1-D ``.npy`` token ids from :func:`crosslayer.data.corpus.encode_corpus`. The last
        5 % are held out for ``eval_loss``; training windows come from the rest.
    tokenizer_dir : path-like
        Tokenizer folder; copied into every checkpoint, and its length sets the
        vocabulary size.
    out_dir : path-like
        Receives ``step{N}/`` for every N in ``save_steps``, ``loss.tsv`` and
        ``train_args.json``.
    config : TrainConfig
        The run's settings.
    threads : int
        ``torch.set_num_threads``; use 1 per process when several run side by side,
        oversubscribed cores make training several times slower.
    progress : bool
        Show a tqdm progress bar on stderr.

    Returns
    -------
    pandas.DataFrame
        The loss log, also written to ``out_dir/loss.tsv``: ``step`` (updates applied
        so far), ``loss`` (training loss of the batch at that step, before its
        update), ``lr`` (rate used for that update), ``tokens_seen`` (training tokens
        consumed before that step) and ``eval_loss`` (held-out loss, only at save steps,
        else NaN). The wall time goes to the log (and the job's benchmark file), not here.

    Raises
    ------
    ValueError
        For too few tokens, or tokens of another tokenizer.
    FloatingPointError
        If the training loss becomes NaN or infinite (names arch and step), unless
        ``config.stop_on_divergence``.
    """
    from transformers import AutoTokenizer

    c = config
    check_device(c.device, "train.device")  # top-level, a model's or the ablations' own
    torch.set_num_threads(threads)
    retain_freed_memory()  # 15-40% faster steps on 2 cores
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, trust_remote_code=False, local_files_only=True)
    train_tokens, eval_tokens = _split_tokens(tokens_path, tokenizer_dir, len(tokenizer), c.context)
    n_windows = min(c.eval_windows, len(eval_tokens) // (c.context + 1))
    eval_batch = eval_tokens[: n_windows * (c.context + 1)].view(n_windows, c.context + 1).to(c.device)
    model = build_model(
        c.arch, vocab_size=len(tokenizer), d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads, d_ff=c.d_ff,
        context=c.context, seed=c.seed, n_kv_heads=c.n_kv_heads, activation=c.activation, residual=c.residual,
        norm=c.norm,
        # No pad_token_id: it would zero that embedding row, and training never pads.
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    ).to(c.device)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "train_args.json").write_text(json.dumps(dict(
        arch=c.arch, d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads, n_kv_heads=c.n_kv_heads, d_ff=c.d_ff,
        context=c.context, vocab_size=len(tokenizer), activation=c.activation, residual=c.residual, norm=c.norm,
        device=c.device, batch_size=c.batch_size, lr=c.lr, weight_decay=c.weight_decay,
        warmup_steps=c.warmup_steps, save_steps=list(c.save_steps), seed=c.seed, threads=threads,
        grad_clip=c.grad_clip, eval_windows=n_windows, n_train_tokens=len(train_tokens),
        n_eval_tokens=len(eval_tokens),
    ), indent=2) + "\n")
    rows, step = _train_loop(model, tokenizer, c, train_tokens, eval_batch, out_dir, progress)
    logging.getLogger(__name__).info("%s: %d steps in %.1f s", c.arch, step, time.perf_counter() - started)
    log = pd.DataFrame(rows, columns=LOSS_COLUMNS)
    log.to_csv(out_dir / "loss.tsv", sep="\t", index=False, float_format="%.6g")
    return log


def _split_tokens(tokens_path, tokenizer_dir, vocab_size, context):
    """The training tokens and the held-out tail (``EVAL_FRACTION``), checked against the tokenizer."""
    tokens = torch.from_numpy(np.load(tokens_path).astype(np.int64))
    n_eval = max(context + 1, int(len(tokens) * EVAL_FRACTION))
    train_tokens, eval_tokens = tokens[:-n_eval], tokens[-n_eval:]
    if len(train_tokens) < context + 2:
        raise ValueError(
            f"{tokens_path} holds {len(tokens)} tokens, too few for context={context} "
            f"after holding out {n_eval} for evaluation"
        )
    if int(tokens.max()) >= vocab_size:
        raise ValueError(
            f"{tokens_path} holds token id {int(tokens.max())} >= vocabulary size "
            f"{vocab_size} of {tokenizer_dir}: were they encoded with another tokenizer?"
        )
    return train_tokens, eval_tokens


def _train_loop(model, tokenizer, c: TrainConfig, train_tokens, eval_batch, out_dir, progress):
    """Updates 0 .. max(save_steps), saving and evaluating at the save steps; (log rows, last step)."""
    # nanoGPT convention: decay matrices (incl. embeddings), not biases or norm gains.
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": c.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=c.lr, betas=(0.9, 0.95), eps=1e-8)
    generator = torch.Generator().manual_seed(c.seed)
    offsets = torch.arange(c.context + 1)
    max_steps = c.save_steps[-1]
    rows = []
    bar = tqdm(
        total=max_steps, desc=f"train {c.arch}", file=sys.stderr, disable=not progress,
        mininterval=5.0,  # the bar goes to a log file: a line every few seconds is plenty
    )
    for step in range(max_steps + 1):
        eval_loss = math.nan
        if step in c.save_steps:
            eval_loss = evaluate_loss(model, eval_batch, batch_size=c.batch_size)
            _save_checkpoint(model, tokenizer, out_dir / f"step{step}")

        # Random contiguous windows; the seeded generator makes the stream reproducible.
        starts = torch.randint(len(train_tokens) - c.context, (c.batch_size,), generator=generator)
        batch = train_tokens[starts[:, None] + offsets].to(c.device)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        step_lr = lr_at(step, lr=c.lr, warmup_steps=c.warmup_steps, max_steps=max_steps)

        final = step == max_steps
        with torch.set_grad_enabled(not final):  # the last step only measures the loss
            logits = model(input_ids=inputs).logits
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        diverged = not torch.isfinite(loss)
        if diverged and not c.stop_on_divergence:
            raise FloatingPointError(
                f"{c.arch}: training loss is {loss.item()} at step {step} (lr={step_lr:.3g}); "
                "try a lower lr or more warmup_steps"
            )
        if step % c.log_every == 0 or step in c.save_steps or diverged:
            rows.append(
                dict(
                    step=step, loss=loss.item(), lr=step_lr if not final else math.nan,
                    tokens_seen=step * c.batch_size * c.context, eval_loss=eval_loss,
                )
            )
        if final or diverged:
            break

        loss.backward()
        if c.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip)
        for group in optimizer.param_groups:
            group["lr"] = step_lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    bar.close()
    return rows, step


def training_outcome(log: pd.DataFrame, *, steps: int) -> dict:
    """How a run of ``steps`` updates ended, from its :func:`train_model` log.

    Returns
    -------
    dict
        ``steps``; ``diverged_step``: the step whose training loss was not finite (None when the
        run finished); ``eval_loss`` and ``perplexity`` (its exp) on the held-out windows after
        the last update, None for a diverged run.
    """
    last = log.iloc[-1]
    if not math.isfinite(last["loss"]):
        return {"steps": steps, "diverged_step": int(last["step"]), "eval_loss": None, "perplexity": None}
    if int(last["step"]) != steps:
        raise ValueError(f"the log ends at step {int(last['step'])}, not at the run's {steps} steps")
    eval_loss = float(last["eval_loss"])
    return {"steps": steps, "diverged_step": None, "eval_loss": eval_loss, "perplexity": math.exp(eval_loss)}
