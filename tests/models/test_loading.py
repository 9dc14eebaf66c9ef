"""Strict loading of a checkpoint as a live model, and the same judgement at registration from the
weight files' headers alone (check_tensors, a model built on the meta device): a checkpoint that
lacks a tensor, holds one the model does not have, or has one of another shape is refused by name
for every family, while transformers' documented exceptions (tied LM heads, legacy buffers) still
load. check_tensors is tested against transformers' own loading report, tensor by tensor."""

import contextlib
import json
from unittest import mock

import numpy as np
import pytest
import torch
import transformers as T
from safetensors.torch import load_file, save_file
from tiny_families import CONFIGS, GEMMA4, D, tiny_model

from crosslayer.errors import CheckpointError
from crosslayer.models import loading
from crosslayer.models.loading import check_tensors, load_model

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


def loads(path):
    load_model(manifest(path), tokenizer=False)


def placed():
    """GPU jobs load with a device_map (transformers places the weights through accelerate): the same
    path, placed on the CPU, as no GPU is here."""
    return mock.patch.object(loading, "_device_map", lambda device: "cpu")


def loads_placed(path):
    with placed():
        loads(path)


def registers(path):
    check_tensors(path, model="m", revision="step7")


REFUSERS = pytest.mark.parametrize("refuse", [loads, loads_placed, registers],
                                   ids=["load_model", "load_model_device_map", "check_tensors"])


def test_only_a_non_cpu_device_gets_a_device_map():
    assert loading._device_map("cpu") is None and loading._device_map(torch.device("cpu")) is None
    assert loading._device_map("cuda") == "cuda" and loading._device_map("cuda:1") == "cuda:1"


@pytest.mark.parametrize("device_map", [False, True], ids=["plain", "device_map"])
@pytest.mark.parametrize("family", FAMILIES)
def test_an_intact_checkpoint_loads_exactly(tmp_path, family, device_map):
    live = save(family, tmp_path)
    with placed() if device_map else contextlib.nullcontext():
        model, tokenizer = load_model(manifest(tmp_path))
    assert tokenizer is None  # no tokenizer files saved
    ours, theirs = model.state_dict(), live.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


@REFUSERS
@pytest.mark.parametrize("family", FAMILIES)
def test_a_missing_tensor_is_refused_by_name(tmp_path, family, refuse):
    dropped = FAMILIES[family]
    save(family, tmp_path, edit=lambda t: t.pop(dropped))
    with pytest.raises(CheckpointError) as caught:
        refuse(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"model 'm' revision 'step7' file '{tmp_path / 'model.safetensors'}'")
    reported = REPORTED.get(family, dropped)
    assert f"'{reported}'" in message and "missing" in message


@REFUSERS
@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_an_unexpected_tensor_is_refused_by_name(tmp_path, family, refuse):
    save(family, tmp_path, edit=lambda t: t.update(extra=torch.zeros(3)))
    with pytest.raises(CheckpointError, match=r"1 tensor\(s\) in the checkpoint but not in the model .*: 'extra'"):
        refuse(tmp_path)


@REFUSERS
def test_a_tensor_of_another_shape_is_refused(tmp_path, refuse):
    key = FAMILIES["gpt_neox"]
    save("gpt_neox", tmp_path, edit=lambda t: t.update({key: torch.zeros(D, D + 1)}))
    shapes = rf"of another shape .*'{key}' \(32, 33\) vs \(32, 32\)"
    with pytest.raises(CheckpointError, match=r"model 'm' revision 'step7'.*" + shapes):
        refuse(tmp_path)


@pytest.mark.parametrize("family", [*CONFIGS, *GEMMA4])
def test_check_tensors_judges_as_transformers_loading_does(tmp_path, family):
    # An independent judge: transformers' own loading report on the live model. The intact checkpoint
    # passes both; each dropped tensor (the first, the last and four drawn at random) fails both or
    # neither (a tied head or an ignorable buffer may go).
    save(family, tmp_path)
    registers(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    keys = sorted(tensors)
    rng = np.random.default_rng(sum(map(ord, family)))
    for key in {keys[0], keys[-1], *rng.choice(keys, size=min(4, len(keys)), replace=False)}:
        save_file({k: v for k, v in tensors.items() if k != key}, tmp_path / "model.safetensors",
                  metadata={"format": "pt"})
        verdicts = []
        for judge in (loads, registers):
            try:
                judge(tmp_path)
                verdicts.append("accepted")
            except CheckpointError:
                verdicts.append("refused")
        assert verdicts[0] == verdicts[1], \
            f"{family} without {key}: load_model {verdicts[0]}, check_tensors {verdicts[1]}"


def test_check_tensors_reads_shards_and_pickles_and_names_a_tensor_its_shard_lacks(tmp_path):
    model = save("llama", tmp_path / "one")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    index = json.loads((tmp_path / "sharded/model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    registers(tmp_path / "sharded")
    index["weight_map"]["model.layers.9.mlp.up_proj.weight"] = sorted(index["weight_map"].values())[0]
    (tmp_path / "sharded/model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"'model.layers.9.mlp.up_proj.weight' is listed in "
                                              r"model.safetensors.index.json but not stored in model-00001"):
        registers(tmp_path / "sharded")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((tmp_path / "one/config.json").read_text())
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    torch.save(state, pickled / "pytorch_model.bin")
    registers(pickled)
    state.pop("model.norm.weight")
    torch.save(state, pickled / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model.bin'.* missing .*: 'model.norm.weight'"):
        registers(pickled)


def test_check_tensors_takes_the_no_norm_control_and_an_encoder_with_its_heads(tmp_path):
    from crosslayer.models.train import build_model

    sizes = dict(vocab_size=64, d_model=D, n_layers=2, n_heads=4, d_ff=64, context=16, seed=0)
    build_model("llama", **sizes, norm=False).save_pretrained(tmp_path / "nonorm")
    registers(tmp_path / "nonorm")  # built as trained: its norms are identities, stored nowhere
    build_model("llama", **sizes).save_pretrained(tmp_path / "llama")
    tensors = load_file(tmp_path / "llama/model.safetensors")
    save_file({k: v for k, v in tensors.items() if "norm" not in k}, tmp_path / "llama/model.safetensors",
              metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"5 tensor\(s\) missing .*'model.layers.0.input_layernorm.weight'"):
        registers(tmp_path / "llama")  # the same tensors, but its config says it has norms
    T.BertForMaskedLM(T.BertConfig(hidden_size=D, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                   vocab_size=101)).save_pretrained(tmp_path / "bert")
    registers(tmp_path / "bert")  # prefix bert., MLM head: the weight analyses read the encoder
    tensors = load_file(tmp_path / "bert/model.safetensors")
    tensors.pop("bert.encoder.layer.1.output.LayerNorm.weight")
    save_file(tensors, tmp_path / "bert/model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"missing .*: 'bert.encoder.layer.1.output.LayerNorm.weight'"):
        registers(tmp_path / "bert")


def test_legacy_buffers_and_tied_heads_still_load(tmp_path):
    # Old Pythia files carry attention.bias / masked_bias / rotary inv_freq buffers, which
    # GPT-NeoX declares ignorable; the tied Llama head above is not stored at all.
    def add_buffers(t):
        t["gpt_neox.layers.0.attention.bias"] = torch.ones(1, 1, 8, 8, dtype=torch.bool)
        t["gpt_neox.layers.0.attention.masked_bias"] = torch.tensor(-1e9)
        t["gpt_neox.layers.0.attention.rotary_emb.inv_freq"] = torch.ones(4)

    save("gpt_neox", tmp_path / "neox", edit=add_buffers)
    load_model(manifest(tmp_path / "neox"))
    registers(tmp_path / "neox")
    save("llama", tmp_path / "llama")
    assert "lm_head.weight" not in load_file(tmp_path / "llama/model.safetensors")
    registers(tmp_path / "llama")
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
