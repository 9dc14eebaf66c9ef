"""Strict loading of a checkpoint as a live model: a checkpoint that lacks a tensor, holds one the
model does not have, or has one of another shape is refused by name for every family, while
transformers' documented exceptions (tied LM heads, legacy buffers) still load."""

import pytest
import torch
import transformers as T
from safetensors.torch import load_file, save_file

from crosslayer.errors import CheckpointError
from crosslayer.models import load_model
from tiny_families import D, tiny_model

T.logging.set_verbosity_error()

# family -> a tensor of layer 1 that drops out
FAMILIES = {
    "gpt_neox": "gpt_neox.layers.1.attention.dense.weight",
    "llama": "model.layers.1.input_layernorm.weight",  # with a tied LM head
    "olmo2": "model.layers.1.self_attn.k_norm.weight",
    "bloom": "transformer.h.1.mlp.dense_4h_to_h.bias",
    "gpt2": "transformer.h.1.ln_1.weight",
    "mistral": "model.layers.1.mlp.up_proj.weight",
    "qwen2": "model.layers.1.self_attn.v_proj.bias",
    "qwen3": "model.layers.1.self_attn.q_norm.weight",
    "phi3": "model.layers.1.mlp.gate_up_proj.weight",
    "phi": "model.layers.1.input_layernorm.bias",
    "exaone4": "model.layers.1.post_feedforward_layernorm.weight",
    "gemma": "model.layers.1.post_attention_layernorm.weight",
    "gemma2": "model.layers.1.post_feedforward_layernorm.weight",
    "gemma3_text": "model.layers.1.pre_feedforward_layernorm.weight",
    "gemma3": "language_model.model.layers.1.post_attention_layernorm.weight",  # the released key layout
    "gpt_neo": "transformer.h.1.attn.attention.out_proj.bias",
    "mpt": "transformer.blocks.1.norm_2.weight",
    "falcon": "transformer.h.1.ln_mlp.weight",
    "gemma4_text": "model.layers.1.layer_scalar",  # a buffer: transformers would leave it at 1
    "gemma4": "model.language_model.layers.1.per_layer_projection.weight",
}

# the model's own name of a tensor stored under another (transformers maps Gemma 3's released layout)
REPORTED = {"gemma3": "model.language_model.layers.1.post_attention_layernorm.weight"}


def save(family, path, edit=None):
    """Save a seeded tiny model of `family` to `path`, then let `edit(tensors)` change its weights."""
    model = tiny_model(family, eager=False)
    model.save_pretrained(path)
    if edit is not None:
        tensors = load_file(path / "model.safetensors")
        edit(tensors)
        save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    return model


def manifest(path):
    return {"model": "m", "revision": "step7", "path": str(path)}


@pytest.mark.parametrize("family", FAMILIES)
def test_an_intact_checkpoint_loads_exactly(tmp_path, family):
    live = save(family, tmp_path)
    model, tokenizer = load_model(manifest(tmp_path))
    assert tokenizer is None  # no tokenizer files saved
    ours, theirs = model.state_dict(), live.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_a_checkpoint_without_tokenizer_files_is_refused_before_the_samples_are_read(tmp_path):
    # transformers 5 would build an empty tokenizer and the error would blame the samples
    from crosslayer.dynamics import checkpoint_activations

    save("gpt_neox", tmp_path)
    with pytest.raises(CheckpointError, match=r"model 'm' revision 'step7' file .*: no tokenizer in the checkpoint "
                                              r"\(none of .*tokenizer.json.*save_pretrained"):
        checkpoint_activations(manifest(tmp_path), tmp_path / "no_samples.jsonl", n_samples=1, min_tokens=1,
                               max_tokens=4)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_missing_tensor_is_refused_by_name(tmp_path, family):
    dropped = FAMILIES[family]
    save(family, tmp_path, edit=lambda t: t.pop(dropped))
    with pytest.raises(CheckpointError) as caught:
        load_model(manifest(tmp_path))
    message = str(caught.value)
    assert message.startswith(f"model 'm' revision 'step7' file '{tmp_path / 'model.safetensors'}'")
    reported = REPORTED.get(family, dropped)
    assert f"'{reported}'" in message and "missing" in message


@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_an_unexpected_tensor_is_refused_by_name(tmp_path, family):
    save(family, tmp_path, edit=lambda t: t.update(extra=torch.zeros(3)))
    with pytest.raises(CheckpointError, match=r"1 tensor\(s\) in the checkpoint but not in the model .*: 'extra'"):
        load_model(manifest(tmp_path))


def test_a_tensor_of_another_shape_is_refused(tmp_path):
    key = FAMILIES["gpt_neox"]
    save("gpt_neox", tmp_path, edit=lambda t: t.update({key: torch.zeros(D, D + 1)}))
    shapes = rf"of another shape .*'{key}' \(32, 33\) vs \(32, 32\)"
    with pytest.raises(CheckpointError, match=r"model 'm' revision 'step7'.*" + shapes):
        load_model(manifest(tmp_path))


def test_legacy_buffers_and_tied_heads_still_load(tmp_path):
    # Old Pythia files carry attention.bias / masked_bias / rotary inv_freq buffers, which
    # GPT-NeoX declares ignorable; the tied Llama head above is not stored at all.
    def add_buffers(t):
        t["gpt_neox.layers.0.attention.bias"] = torch.ones(1, 1, 8, 8, dtype=torch.bool)
        t["gpt_neox.layers.0.attention.masked_bias"] = torch.tensor(-1e9)
        t["gpt_neox.layers.0.attention.rotary_emb.inv_freq"] = torch.ones(4)

    save("gpt_neox", tmp_path / "neox", edit=add_buffers)
    load_model(manifest(tmp_path / "neox"))
    save("llama", tmp_path / "llama")
    assert "lm_head.weight" not in load_file(tmp_path / "llama/model.safetensors")
    model, _ = load_model(manifest(tmp_path / "llama"))
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_tokenizer_loaded_when_present_and_its_absence_reported(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    save("gpt_neox", tmp_path)
    assert load_model(manifest(tmp_path))[1] is None
    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    T.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(tmp_path)
    _, tokenizer = load_model(manifest(tmp_path))
    assert tokenizer("a b")["input_ids"] == [1, 2]
    assert load_model(manifest(tmp_path), tokenizer=False)[1] is None


def test_an_encoder_is_refused_for_activation_stages_naming_the_key(tmp_path):
    T.BertForMaskedLM(T.BertConfig(hidden_size=D, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                   vocab_size=101)).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match=r"model 'm' revision 'step7' .*bert has no causal residual stream: "
                                              r".*set models.m.analyses: \[alignment, continuity\]"):
        load_model(manifest(tmp_path))
