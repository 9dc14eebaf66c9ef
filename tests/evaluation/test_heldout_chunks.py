"""Held-out loss in chunks of positions: the same loss as the full logits, within the logits bound
whatever the batch size, and the one-window fallback for a head it cannot reproduce."""

import logging

import pytest
import torch
import transformers as T

from crosslayer.evaluation.heldout import PROBE_TOKENS, heldout_loss, positions_per_chunk
from crosslayer.models.train import evaluate_loss
from tiny_families import D, HEADS, VOCAB, tiny_model

SMALL = dict(hidden_size=D, num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=2,
             intermediate_size=64, vocab_size=VOCAB)

#: Families whose logits are more than the unembedding of the final states, and which ones the
#: head reproduces (the rest fall back to one window at a time)
EXTRA = {
    # Cohere multiplies the logits by logit_scale
    "cohere": lambda: T.CohereConfig(**SMALL, logit_scale=0.5, bos_token_id=0, eos_token_id=1, pad_token_id=2),
    # Granite divides them by logits_scaling
    "granite": lambda: T.GraniteConfig(**SMALL, logits_scaling=4.0),
    # Falcon-H1 multiplies them by lm_head_multiplier, which the head does not know: the fallback
    "falcon_h1": lambda: T.FalconH1Config(**SMALL, head_dim=8, mamba_d_ssm=32, mamba_n_heads=4, mamba_d_head=8,
                                          mamba_d_state=8, mamba_n_groups=1, mamba_chunk_size=8,
                                          lm_head_multiplier=0.5),
}


def model_of(family):
    if family not in EXTRA:
        return tiny_model(family)
    torch.manual_seed(0)
    config = EXTRA[family]()
    config._attn_implementation = "eager"
    return T.AutoModelForCausalLM.from_config(config).eval()


def full_loss(model, windows):
    """Mean next-token cross-entropy of the whole batch's logits at once, summed in float64."""
    with torch.no_grad():
        logits = model(input_ids=windows[:, :-1]).logits.double()
    return float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()))


WINDOWS = torch.randint(3, 100, (5, 13), generator=torch.Generator().manual_seed(1))
FALLBACK = "full logits one window at a time"


# gpt2, phi: a bias or a LayerNorm head; gemma2, gemma3_text: final soft-capping; gemma3: the same
# text config, but transformers 5's vision-language class does not cap (the bare head matches);
# cohere, granite: a scale; gemma4: per-layer inputs
@pytest.mark.parametrize("family", ["llama", "gpt_neox", "gpt2", "phi", "bloom", "mpt", "falcon", "gemma2",
                                    "gemma3_text", "gemma3", "gemma4_text", "cohere", "granite"])
def test_chunks_give_the_loss_of_the_full_logits_without_falling_back(family, caplog):
    model = model_of(family)
    expected = full_loss(model, WINDOWS)
    with caplog.at_level(logging.WARNING):
        # 0 MiB: one position a chunk, the most chunk edges; 1 MiB: every position in one chunk
        for logits_mb in (0, 1):
            row = heldout_loss(model, WINDOWS, batch_size=2, logits_mb=logits_mb)
            assert row["loss"] == pytest.approx(expected, rel=1e-6)
    assert row["loss"] == pytest.approx(evaluate_loss(model, WINDOWS, batch_size=5), rel=1e-6)
    assert FALLBACK not in caplog.text


def test_a_head_it_cannot_reproduce_falls_back_to_one_window_at_a_time(caplog):
    model = model_of("falcon_h1")
    with caplog.at_level(logging.WARNING):
        row = heldout_loss(model, WINDOWS, batch_size=5, logits_mb=0)
    assert FALLBACK in caplog.text and "FalconH1ForCausalLM" in caplog.text
    assert row["loss"] == pytest.approx(full_loss(model, WINDOWS), rel=1e-6)
    with torch.no_grad():  # and the bare unembedding's loss is another number
        hidden = model.base_model(input_ids=WINDOWS[:, :-1], use_cache=False).last_hidden_state
        wrong = torch.nn.functional.cross_entropy(model.lm_head(hidden).flatten(0, 1), WINDOWS[:, 1:].flatten())
    assert abs(float(wrong) - row["loss"]) > 1e-3


def test_no_logits_wider_than_a_chunk_whatever_the_batch_size():
    model = tiny_model("llama")
    widest = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, i, out: widest.append(out.numel()))
    try:
        for batch_size in (1, 5):
            widest.clear()
            heldout_loss(model, WINDOWS, batch_size=batch_size, logits_mb=0)
            # one position's logits at a time, but for the check of the head on the first window's
            # first tokens (the model's own logits and the head's)
            assert sum(n > VOCAB for n in widest) == 2 and max(widest) <= PROBE_TOKENS * VOCAB
    finally:
        hook.remove()


def test_positions_per_chunk_keep_two_float32_copies_within_the_bound():
    assert positions_per_chunk(262_144, logits_mb=256) == 128  # 128 x 262,144 x 8 bytes = 256 MiB
    assert positions_per_chunk(50_000, logits_mb=256) == 671
    assert positions_per_chunk(262_144, logits_mb=256, head_bytes=2) == 102  # bfloat16 logits beside them
    assert positions_per_chunk(262_144, logits_mb=0) == 1
