"""Saved tiny checkpoints for the per-checkpoint jobs' tests: a :mod:`tiny_families` model written with
``save_pretrained``, optionally with a word-level tokenizer, and the manifest that describes it."""

from tiny_families import VOCAB, tiny_model

#: The tokenizer's words: ``w1 w2 ...`` tokenize to ids 1, 2, ... (0 is unknown).
WORDS = ["[UNK]", *(f"w{i}" for i in range(1, VOCAB))]


def text(n, start=1):
    """A text of `n` tokens."""
    return " ".join(WORDS[start + i] for i in range(n))


def save_checkpoint(family, path, *, tokenizer=True, edit=None):
    """Save ``tiny_model(family)`` (after ``edit(model)``) to `path`; return its manifest (model 'm',
    revision 'step7')."""
    import transformers as T
    from tokenizers import Tokenizer, models, pre_tokenizers

    model = tiny_model(family)
    if edit is not None:
        edit(model)
    model.save_pretrained(path)
    if tokenizer:
        backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        T.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(path)
    return {"path": str(path), "model": "m", "revision": "step7", "step": 7}
