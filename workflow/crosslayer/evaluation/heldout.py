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
"""

import math
from dataclasses import dataclass

import torch

from crosslayer.coupling.checkpoint import context_length
from crosslayer.errors import naming_checkpoint
from crosslayer.evaluation.tables import HELDOUT_COLUMNS
from crosslayer.models.loading import load_model
from crosslayer.models.train import evaluate_loss
from crosslayer.models.weights import checkpoint_adapter
from crosslayer.settings import require_int

__all__ = ["HeldoutSettings", "heldout_windows", "heldout_loss", "measure_checkpoint"]


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


def heldout_loss(model, windows, *, batch_size, n_bytes=None):
    """One row of :data:`~crosslayer.evaluation.tables.HELDOUT_COLUMNS` for `model` on `windows`
    (moved to the model's device)."""
    device = next(model.parameters()).device
    loss = evaluate_loss(model, windows.to(device), batch_size=batch_size)
    n_tokens = windows[:, 1:].numel()
    bits = loss * n_tokens / math.log(2) / n_bytes if n_bytes else math.nan
    return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": bits, "n_tokens": n_tokens,
            "n_bytes": n_bytes or 0, "n_windows": len(windows), "context": windows.shape[1] - 1}


def measure_checkpoint(manifest, settings: HeldoutSettings, *, texts, device="cpu"):
    """The held-out row of the checkpoint a verified manifest describes, on the documents `texts`;
    for a model that is no causal decoder (BERT), NaN and zeros: it predicts no next token."""
    if not checkpoint_adapter(manifest["path"], model=manifest["model"], revision=manifest.get("revision")).causal:
        return {**dict.fromkeys(HELDOUT_COLUMNS[:3], math.nan), **dict.fromkeys(HELDOUT_COLUMNS[3:], 0)}
    with naming_checkpoint(manifest):
        model, tokenizer = load_model(manifest, device=device)
        if tokenizer is None:
            raise ValueError("the checkpoint has no tokenizer to encode the held-out text with")
        limit = context_length(model.config)
        context = settings.context if limit is None else min(settings.context, limit)
        windows, n_bytes = heldout_windows(tokenizer, texts, context=context, max_windows=settings.max_windows)
        return heldout_loss(model, windows, batch_size=settings.batch_size, n_bytes=n_bytes)
