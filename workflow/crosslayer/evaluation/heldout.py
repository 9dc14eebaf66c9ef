"""Held-out next-token loss of a checkpoint: a performance measure every model has, without benchmarks.

The text set is prepared once per run (rule ``prepare_heldout``) as JSON lines of documents, from one
of two sources:

* ``corpus``: the text of the embedded default's corpus tokens that training holds out
  (:func:`crosslayer.data.corpus.heldout_texts`), so no self-trained model has seen it;
* ``dataset``: a Hugging Face dataset split (the suites: WikiText-2 test).

Each checkpoint's job joins the documents with blank lines, tokenizes them with the checkpoint's own
tokenizer (no special tokens) and cuts the ids into non-overlapping windows of ``context + 1``
tokens, ``context`` capped at the model's own limit; the model reads each window's first ``context``
tokens and is scored on its last ``context`` (the first token of a window is context only, as in
training's ``eval_loss``). The mean loss is per scored token (nats); bits per byte divide the same
total by ``ln 2`` and the UTF-8 bytes of the scored tokens' text, so models with different
tokenizers compare.

Memory: the loss never holds a whole batch's logits. The model's body gives the final hidden states
of a batch, and the head (the unembedding and any soft-capping or scaling the config names) turns
them into logits a chunk of positions at a time, :func:`positions_per_chunk` of them so that a
chunk's float32 logits and cross-entropy's log-softmax of them stay within :data:`LOGITS_MB`,
whatever the vocabulary and the batch size. A model whose own logits that head does not reproduce
(a family that transforms them otherwise) is scored from its full logits one window at a time.
"""

import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from crosslayer.coupling.checkpoint import context_length
from crosslayer.errors import naming_checkpoint
from crosslayer.evaluation.tables import HELDOUT_COLUMNS
from crosslayer.models.loading import load_model
from crosslayer.models.weights import checkpoint_adapter
from crosslayer.settings import require_int

__all__ = ["LOGITS_MB", "HeldoutSettings", "heldout_windows", "positions_per_chunk", "heldout_loss",
           "skipped_row", "measure_checkpoint"]

log = logging.getLogger(__name__)

#: MiB the held-out loss gives one chunk's logits (float32, and cross-entropy's log-softmax of them):
#: 256 MiB is 128 positions of a 262,144-token vocabulary, 671 of a 50,000-token one.
LOGITS_MB = 256

#: Tokens of the first window on which the head's logits are checked against the model's own.
PROBE_TOKENS = 16


@dataclass(frozen=True)
class HeldoutSettings:
    """What a checkpoint's held-out loss depends on (``evaluation.heldout``)."""

    context: int = 1024
    max_windows: int | None = None
    batch_size: int = 8

    def __post_init__(self):
        require_int("evaluation.heldout.context", self.context, minimum=2)
        if self.max_windows is not None:
            require_int("evaluation.heldout.max_windows", self.max_windows, minimum=1)
        require_int("evaluation.heldout.batch_size", self.batch_size, minimum=1)


def heldout_windows(tokenizer, texts, *, context, max_windows=None):
    """The texts as non-overlapping windows of ``context + 1`` token ids.

    Returns
    -------
    windows : torch.LongTensor
        ``(n, context + 1)``, in text order; the tokens after the last whole window are dropped.
    n_bytes : int or None
        UTF-8 bytes of the text of the scored tokens (each window's last `context`), from the fast
        tokenizer's offsets; None for a tokenizer without offsets.

    Raises
    ------
    ValueError
        The text makes no whole window.
    """
    text = "\n\n".join(texts)
    fast = getattr(tokenizer, "is_fast", False)
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=fast, return_attention_mask=False,
                         verbose=False)  # one long text: no "longer than the maximum" warning, windows cut it
    ids = encoding["input_ids"]
    width = context + 1
    n = len(ids) // width if max_windows is None else min(len(ids) // width, max_windows)
    if n == 0:
        raise ValueError(f"the held-out text is {len(ids)} tokens, fewer than one window of {width} "
                         "(evaluation.heldout.context + 1): use a longer text set or a shorter context")
    windows = torch.tensor(ids[: n * width], dtype=torch.long).view(n, width)
    if not fast:
        return windows, None
    offsets = encoding["offset_mapping"]
    # Per window, the text from its second token's start to its last token's end: what the scores predict.
    n_bytes = sum(len(text[offsets[w * width + 1][0]: offsets[w * width + width - 1][1]].encode("utf-8"))
                  for w in range(n))
    return windows, n_bytes


def positions_per_chunk(vocab_size, *, logits_mb=LOGITS_MB, head_bytes=4):
    """Positions whose logits one chunk holds: each position costs ``vocab_size`` float32 logits
    and as many of their log-softmax, plus the head's own output where it is no float32
    (`head_bytes` a logit: 2 for bfloat16); at least 1."""
    per_position = vocab_size * (8 + (0 if head_bytes == 4 else head_bytes))
    return max(1, logits_mb * 2**20 // per_position)


def _final_hidden(body, input_ids):
    return body(input_ids=input_ids, use_cache=False).last_hidden_state


def _heads(model):
    """The ways the model may turn final hidden states into logits: the unembedding followed by the
    scaling and soft-capping its config names, then the bare unembedding (a model class may not
    apply what its config names, e.g. transformers 5's Gemma 3 with vision leaves the text
    config's soft-capping out)."""
    unembed = model.get_output_embeddings()
    text = model.config.get_text_config()
    scale, scaling = getattr(text, "logit_scale", None), getattr(text, "logits_scaling", None)
    cap = getattr(text, "final_logit_softcapping", None)

    def named(hidden):
        logits = unembed(hidden)
        if scale is not None:  # Cohere
            logits = logits * scale
        if scaling is not None:  # Granite
            logits = logits / scaling
        if cap is not None:  # Gemma 2 and 3
            logits = torch.tanh(logits / cap) * cap
        return logits

    return [named, unembed] if (scale, scaling, cap) != (None, None, None) else [unembed]


def _logit_head(model, probe):
    """The head that gives the model's own logits on `probe` (``(1, n)`` ids) from its body's final
    hidden states, or None: no body/unembedding pair, or none of :func:`_heads` reproduces them."""
    body, unembed = model.base_model, model.get_output_embeddings()
    if body is model or unembed is None:
        return None
    try:
        hidden = _final_hidden(body, probe)
    except (TypeError, ValueError, AttributeError):  # a body that takes no plain ids, or returns no states
        return None
    own = model(input_ids=probe).logits
    # The same modules on the same ids: a match is exact but for rounding; a transform the head
    # misses (a multiplier, a cap) differs far more
    tolerance = 16 * torch.finfo(own.dtype).eps * (1 + float(own.abs().max()))
    for head in _heads(model):
        logits = head(hidden)
        if logits.shape == own.shape and float((logits - own).abs().max()) <= tolerance:
            return head
    return None


def _chunked_total(model, head, windows, *, batch_size, logits_mb):
    """Summed next-token loss: the body's hidden states per batch, the head's logits per chunk."""
    body = model.base_model
    total, step = 0.0, None  # a Python float: the chunks' float32 sums add in float64
    for start in range(0, len(windows), batch_size):
        batch = windows[start: start + batch_size]
        hidden = _final_hidden(body, batch[:, :-1]).flatten(0, 1)
        targets = batch[:, 1:].flatten()
        if step is None:  # sized on one position's logits: their width and dtype
            one = head(hidden[:1])
            step = positions_per_chunk(one.shape[-1], logits_mb=logits_mb, head_bytes=one.element_size())
        for first in range(0, len(targets), step):
            logits = head(hidden[first: first + step]).float()
            total += F.cross_entropy(logits, targets[first: first + step], reduction="sum").item()
            del logits  # before the next chunk's: two chunks at once would double the bound
    return total


def _window_total(model, windows):
    """Summed next-token loss from the model's full logits, one window at a time."""
    total = 0.0
    for window in windows:
        logits = model(input_ids=window[None, :-1]).logits[0].float()
        total += F.cross_entropy(logits, window[1:], reduction="sum").item()
        del logits
    return total


@torch.no_grad()
def heldout_loss(model, windows, *, batch_size, n_bytes=None, logits_mb=LOGITS_MB):
    """One row of :data:`~crosslayer.evaluation.tables.HELDOUT_COLUMNS` for `model` on `windows`
    (moved to the model's device).

    Parameters
    ----------
    model : transformers causal LM
    windows : torch.LongTensor
        ``(n, context + 1)`` token ids (:func:`heldout_windows`).
    batch_size : int
        Windows per pass of the model's body: speed, and the body's activations (hidden states,
        attention), not the logits.
    n_bytes : int, optional
        UTF-8 bytes of the scored text, for bits per byte (NaN without).
    logits_mb : int
        The most MiB of logits held at once (:func:`positions_per_chunk`). A model whose logits
        the head does not reproduce holds one window's instead: ``context x vocab x 8`` bytes.
    """
    device = next(model.parameters()).device
    windows = windows.to(device)
    was_training = model.training
    model.eval()
    try:
        probe = windows[:1, :-1][:, :PROBE_TOKENS]
        head = _logit_head(model, probe)
        if head is None:
            vocab = model.config.get_text_config().vocab_size
            log.warning("%s: its logits are not the unembedding of its final hidden states (nor their known "
                        "scaling or soft-capping), so the held-out loss is computed from its full logits one "
                        "window at a time, about %.0f MiB of logits, not %d MiB in chunks",
                        type(model).__name__, (windows.shape[1] - 1) * vocab * 8 / 2**20, logits_mb)
            total = _window_total(model, windows)
        else:
            total = _chunked_total(model, head, windows, batch_size=batch_size, logits_mb=logits_mb)
    finally:
        model.train(was_training)
    n_tokens = windows[:, 1:].numel()
    loss = total / n_tokens
    bits = loss * n_tokens / math.log(2) / n_bytes if n_bytes else math.nan
    return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": bits, "n_tokens": n_tokens,
            "n_bytes": n_bytes or 0, "n_windows": len(windows), "context": windows.shape[1] - 1, "skipped": ""}


def skipped_row(reason):
    """The held-out row of a checkpoint that is not measured: NaN, zeros and `reason` in ``skipped``."""
    return {**dict.fromkeys(HELDOUT_COLUMNS[:3], math.nan), **dict.fromkeys(HELDOUT_COLUMNS[3:7], 0),
            "skipped": reason}


def measure_checkpoint(manifest, settings: HeldoutSettings, *, texts, device="cpu"):
    """The held-out row of the checkpoint a verified manifest describes, on the documents `texts`;
    for a model that is no causal decoder (BERT), :func:`skipped_row` saying so: it predicts no
    next token."""
    adapter = checkpoint_adapter(manifest["path"], model=manifest["model"], revision=manifest.get("revision"))
    if not adapter.causal:
        return skipped_row(f"an encoder (model_type {adapter.model_type}): it predicts no next token")
    with naming_checkpoint(manifest):
        model, tokenizer = load_model(manifest, device=device)
        if tokenizer is None:
            raise ValueError("the checkpoint has no tokenizer to encode the held-out text with")
        limit = context_length(model.config)
        context = settings.context if limit is None else min(settings.context, limit)
        windows, n_bytes = heldout_windows(tokenizer, texts, context=context, max_windows=settings.max_windows)
        return heldout_loss(model, windows, batch_size=settings.batch_size, n_bytes=n_bytes)
