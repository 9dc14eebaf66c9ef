"""The generic path: a causal decoder family transformers knows but no adapter describes
(StableLM here) runs the activation, Jacobian and weight analyses exactly, slower."""

import json
import logging

import numpy as np
import pytest
import torch
import transformers as T
from tiny_families import LAYERS, VOCAB, D, tiny_model

from crosslayer.dynamics.checkpoint import JacobianSettings, block_jacobian_stats
from crosslayer.errors import CheckpointError
from crosslayer.models.adapters import adapter_for
from crosslayer.models.adapters.generic import GenericAdapter
from crosslayer.models.residual import record_residual_stream
from crosslayer.models.weights import checkpoint_adapter, open_checkpoint


@pytest.fixture(scope="module")
def model():
    model = tiny_model("stablelm")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model


def block_jacobian_in_the_model(model, layer, x):
    """d block_l(x) / dx with x the block's input in the model's own forward of a one-token
    sequence (the input swapped in by a pre-hook): no recorded call, no adapter."""
    block = model.model.layers[layer]
    state = {}

    def put(module, args, kwargs):
        if args:
            return (state["v"][None, None], *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": state["v"][None, None]}

    def read(module, args, output):
        state["out"] = (output[0] if isinstance(output, tuple) else output)[0, 0]

    def f(v):
        state["v"] = v
        model.model(input_ids=torch.tensor([[3]]), use_cache=False)
        return state["out"]

    handles = [block.register_forward_pre_hook(put, with_kwargs=True), block.register_forward_hook(read)]
    try:
        return torch.autograd.functional.jacobian(f, x)
    finally:
        for h in handles:
            h.remove()


def test_blocks_are_found_from_the_model(model):
    adapter = adapter_for(model)
    assert isinstance(adapter, GenericAdapter) and adapter.model_type == "stablelm"
    assert adapter.blocks(model) == list(model.model.layers) and not adapter.closed_form
    assert "pre_mlp_stream" not in adapter.capabilities  # so no topology stage (crosslayer/stages.py)


def test_residual_stream_records_block_inputs_and_leaves_the_unknown_pre_mlp_snapshots_nan(model):
    g = torch.Generator().manual_seed(0)
    samples = [torch.randint(1, VOCAB, (n,), generator=g) for n in (4, 7, 2)]
    acts = record_residual_stream(model, samples, batch_size=2)["acts"]
    assert acts.shape == (3, 2 * LAYERS, D)
    assert np.isnan(acts[:, 1::2]).all()
    with torch.no_grad():
        for i, ids in enumerate(samples):
            hidden = model.model(input_ids=ids[None], output_hidden_states=True).hidden_states
            for layer in range(LAYERS):
                np.testing.assert_allclose(acts[i, 2 * layer], hidden[layer][0, -1].numpy(), rtol=1e-5, atol=1e-5)


def test_jacobians_by_autograd_of_the_real_block_announced_in_the_log(model, caplog):
    torch.manual_seed(1)
    acts = np.full((3, 2 * LAYERS, D), np.nan, dtype=np.float32)
    acts[:, 0::2] = np.random.default_rng(2).normal(size=(3, LAYERS, D))
    with caplog.at_level(logging.WARNING):
        result = block_jacobian_stats(model, acts, JacobianSettings(method="closed_form"))
    assert "autograd of the real blocks" in caplog.text
    for layer in range(LAYERS):
        reference = torch.stack([block_jacobian_in_the_model(model, layer, torch.from_numpy(acts[i, 2 * layer]))
                                 for i in range(3)])
        np.testing.assert_allclose(result["mean"][layer], reference.mean(0).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(result["frobenius"][layer], torch.linalg.norm(reference, dim=(1, 2)).numpy(),
                                   rtol=1e-5)


def test_weights_under_the_standard_names_are_read_and_the_others_reported_absent(model, tmp_path, caplog):
    model.save_pretrained(tmp_path / "stablelm")
    assert checkpoint_adapter(tmp_path / "stablelm").model_type == "stablelm"
    with open_checkpoint(tmp_path / "stablelm") as reader:
        w = reader.projections(1)
    layer = model.model.layers[1]
    live = {"q": layer.self_attn.q_proj, "k": layer.self_attn.k_proj, "v": layer.self_attn.v_proj,
            "o": layer.self_attn.o_proj, "gate": layer.mlp.gate_proj, "up": layer.mlp.up_proj,
            "down": layer.mlp.down_proj}
    assert set(w) == set(live)
    for name, module in live.items():
        torch.testing.assert_close(w[name], module.weight.detach(), rtol=0, atol=0)

    # GPT-J: a causal decoder under other names (attn.q_proj, mlp.fc_in): runs, but its weights
    # are not guessed at
    gptj = T.GPTJForCausalLM(T.GPTJConfig(n_embd=D, n_layer=2, n_head=4, vocab_size=VOCAB, rotary_dim=4))
    assert isinstance(adapter_for(gptj), GenericAdapter) and len(adapter_for(gptj).blocks(gptj)) == 2
    gptj.save_pretrained(tmp_path / "gptj")
    with pytest.raises(CheckpointError, match=r"gptj has no adapter here, and its layers hold no tensor under the "
                                              r"standard projection names"):
        open_checkpoint(tmp_path / "gptj", model="g")


def test_projections_without_a_standard_name_are_reported_absent(tmp_path, caplog):
    # Starcoder2: standard attention names, its MLP as c_fc / c_proj
    config = T.Starcoder2Config(hidden_size=D, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                intermediate_size=64, vocab_size=VOCAB, bos_token_id=0, eos_token_id=1)
    T.Starcoder2ForCausalLM(config).save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING), open_checkpoint(tmp_path) as reader:
        assert set(reader.projections(0)) == {"q", "k", "v", "o"}
        with pytest.raises(CheckpointError, match="no MLP up and down projection"):
            reader.mlp(0)  # the alignment stage's read: refused by name, not a KeyError
    assert "starcoder2 (no adapter): no tensors under the standard names for gate, up, down" in caplog.text


def test_a_family_whose_blocks_read_token_dependent_inputs_is_refused_not_run_generically():
    # Gemma 3n's per-layer inputs depend on the token (and AltUp/Laurel have no adapter), so a block
    # rerun with another token's recorded arguments would be a wrong Jacobian that looks right.
    # (Gemma 4 records them per sample: tests/models/adapters/test_gemma4.py.)
    from transformers import AutoConfig

    config = AutoConfig.for_model("gemma3n_text")
    with pytest.raises(NotImplementedError, match=r"gemma3n_text: .*per-layer inputs"):
        adapter_for(config)


def test_custom_code_checkpoints_are_refused_naming_the_remote_code(tmp_path):
    # A hub repo whose architecture lives in its own Python files: never executed here.
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "acme_lm", "auto_map": {"AutoConfig": "configuration_acme.AcmeConfig",
                                              "AutoModelForCausalLM": "modeling_acme.AcmeForCausalLM"}}))
    with pytest.raises(CheckpointError, match=r"model 'acme' revision 'main' file 'config.json'.*custom code "
                                              r"\(auto_map: \['AutoConfig', 'AutoModelForCausalLM'\]\).*trust_remote_code"):
        checkpoint_adapter(tmp_path, model="acme", revision="main")


def test_a_gguf_only_directory_says_how_to_convert(tmp_path):
    tiny_model("llama").config.save_pretrained(tmp_path / "with_config")  # config.json, GGUF weights
    (tmp_path / "bare").mkdir()
    for directory in ("with_config", "bare"):
        (tmp_path / directory / "tinyllama-Q4_K_M.gguf").write_bytes(b"GGUF")  # never read: named only
    with pytest.raises(CheckpointError, match=r"config.json missing.*GGUF \(tinyllama-Q4_K_M.gguf\).*"
                                              r"gguf_file='tinyllama-Q4_K_M.gguf'.*save_pretrained"):
        open_checkpoint(tmp_path / "bare", model="tl", revision="main")
    with pytest.raises(CheckpointError, match=r"no weight files found.*GGUF.*dequantized"):
        open_checkpoint(tmp_path / "with_config", model="tl", revision="main")
