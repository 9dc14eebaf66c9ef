"""Gemma 4 against its live modules: per-layer projections (wider global heads, keys read as values,
KV-shared layers without keys and values, double-wide MLPs), the recorded residual stream and
per-layer inputs against recomputations, and per-sample Jacobians equal to autograd of the model's
own forward on one token (not of a recorded block call)."""

import numpy as np
import pytest
import torch
import transformers as T
from tiny_families import GEMMA4, GEMMA4_TEXT, VOCAB, tiny_model

from crosslayer.dynamics.checkpoint import JacobianSettings, block_jacobian_stats
from crosslayer.errors import CheckpointError
from crosslayer.models.adapters import adapter_for
from crosslayer.models.residual import record_residual_stream
from crosslayer.models.weights import checkpoint_adapter, open_checkpoint


def _language_model(model):
    return model.model.language_model if hasattr(model.model, "language_model") else model.model


@pytest.fixture(scope="module", params=list(GEMMA4))
def model(request):
    model = tiny_model(request.param)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
        for layer, block in enumerate(adapter_for(model).blocks(model)):
            block.layer_scalar.fill_(0.5 + 0.2 * layer)  # a buffer, saved with the weights
    return model


@pytest.fixture(scope="module")
def recorded(model):
    g = torch.Generator().manual_seed(1)
    # one-token samples first: their single-token Jacobians are the model's own
    samples = [torch.randint(3, VOCAB, (n,), generator=g) for n in (1, 1, 1, 6, 3, 9)]
    return samples, record_residual_stream(model, samples, batch_size=2)


def test_projections_match_the_live_modules_layer_by_layer(model, tmp_path):
    model.save_pretrained(tmp_path)
    blocks = adapter_for(model).blocks(model)
    modes = ["reuse" if block.self_attn.is_kv_shared_layer else None for block in blocks]  # the live modules'
    seen = set()
    with open_checkpoint(tmp_path) as reader:
        for layer, block in enumerate(blocks):
            w, attn, mlp = reader.projections(layer), block.self_attn, block.mlp
            for name, module in (("q", attn.q_proj), ("o", attn.o_proj), ("gate", mlp.gate_proj),
                                 ("up", mlp.up_proj), ("down", mlp.down_proj)):
                torch.testing.assert_close(w[name], module.weight, rtol=0, atol=0)
            if modes[layer] == "reuse":  # reads an earlier layer's keys and values
                assert "k" not in w and "v" not in w
                seen.add("shared")
            else:
                torch.testing.assert_close(w["k"], attn.k_proj.weight, rtol=0, atol=0)
                value = attn.v_proj if attn.v_proj is not None else attn.k_proj
                seen |= {"k_is_v"} if attn.v_proj is None else set()
                torch.testing.assert_close(w["v"], value.weight, rtol=0, atol=0)
            seen |= {w["up"].shape[0], w["q"].shape[0]}
        up, down = reader.mlp(3)
        assert up.shape == (128, 32) and down.shape == (32, 128)  # double-wide on a KV-shared layer
    assert {"shared", 64, 128}.issubset(seen)  # both MLP widths, narrow and wide heads (4 x 8, 4 x 16)
    assert ("k_is_v" in seen) == (model.config.model_type == "gemma4_text")


def test_residual_stream_and_per_layer_inputs_match_recomputations(model, recorded):
    samples, rec = recorded
    acts, token_inputs = rec["acts"], rec["token_inputs"]
    blocks = adapter_for(model).blocks(model)
    lm = _language_model(model)
    assert token_inputs.shape == (len(samples), len(blocks), GEMMA4_TEXT["hidden_size_per_layer_input"])
    for i, ids in enumerate(samples):
        outputs = {}
        hooks = [b.register_forward_hook(lambda m, a, out, layer=layer: outputs.__setitem__(layer, out[0, -1]))
                 for layer, b in enumerate(blocks)]
        with torch.no_grad():
            out = lm(input_ids=ids[None], output_hidden_states=True, use_cache=False)
            embeds = lm.embed_tokens(ids[None])
            ple = lm.project_per_layer_inputs(embeds, lm.get_per_layer_inputs(ids[None], embeds))[0, -1]
        for hook in hooks:
            hook.remove()
        for layer, block in enumerate(blocks):
            x = torch.from_numpy(acts[i, 2 * layer])
            torch.testing.assert_close(x, out.hidden_states[layer][0, -1], rtol=1e-4, atol=1e-4)
            t = torch.from_numpy(token_inputs[i, layer])
            torch.testing.assert_close(t, ple[layer], rtol=1e-4, atol=1e-4)
            # the rest of the block from the recorded pre-MLP residual h and per-layer input t
            h = torch.from_numpy(acts[i, 2 * layer + 1])
            with torch.no_grad():
                h = h + block.post_feedforward_layernorm(block.mlp(block.pre_feedforward_layernorm(h)))
                gate = block.act_fn(block.per_layer_input_gate(h)) * t
                y = (h + block.post_per_layer_input_norm(block.per_layer_projection(gate))) * block.layer_scalar
            torch.testing.assert_close(y, outputs[layer], rtol=1e-4, atol=1e-4)


def _model_jacobian(model, ids, layer, x):
    """d block_layer / d its input, through the model's own forward on the one-token sequence `ids`."""
    block = adapter_for(model).blocks(model)[layer]
    lm, out = _language_model(model), {}

    def f(v):
        swap = block.register_forward_pre_hook(lambda m, args, kw: ((v.reshape(1, 1, -1), *args[1:]), kw),
                                               with_kwargs=True)
        keep = block.register_forward_hook(lambda m, a, o: out.__setitem__("y", o))
        try:
            lm(input_ids=ids[None], use_cache=False)
        finally:
            swap.remove()
            keep.remove()
        return out["y"].reshape(-1)

    return torch.autograd.functional.jacobian(f, x)


@pytest.mark.parametrize("method", ["jacrev", "functional"])
def test_jacobians_equal_autograd_of_the_models_own_forward(model, recorded, method, caplog):
    samples, rec = recorded
    result = block_jacobian_stats(model, rec["acts"], JacobianSettings(method=method), token_inputs=rec["token_inputs"])
    one_token = [i for i, ids in enumerate(samples) if len(ids) == 1]
    for layer in range(len(adapter_for(model).blocks(model))):
        for i in one_token:
            J = _model_jacobian(model, samples[i], layer, torch.from_numpy(rec["acts"][i, 2 * layer]))
            np.testing.assert_allclose(result["frobenius"][layer, i], torch.linalg.norm(J).item(), rtol=1e-5)
            eye = torch.eye(J.shape[0])
            np.testing.assert_allclose(result["frobenius_res"][layer, i], torch.linalg.norm(J - eye).item(),
                                       rtol=1e-5)


def test_methods_agree_on_every_sample_and_the_per_layer_inputs_matter(model, recorded):
    """jacrev (vmapped over samples) equals the per-sample loop on multi-token samples too, and a
    sample's own per-layer inputs change its Jacobians (so they are not silently ignored)."""
    _, rec = recorded
    acts, token_inputs = rec["acts"], rec["token_inputs"]
    jacrev, functional = JacobianSettings(method="jacrev"), JacobianSettings(method="functional")
    a = block_jacobian_stats(model, acts, jacrev, token_inputs=token_inputs)
    b = block_jacobian_stats(model, acts, functional, token_inputs=token_inputs)
    np.testing.assert_allclose(a["mean"], b["mean"], rtol=1e-4, atol=1e-5)
    for name in ("frobenius", "participation_ratio"):  # condition numbers reach 1e5: float32 noise there
        np.testing.assert_allclose(a[name], b[name], rtol=1e-4)
    other = block_jacobian_stats(model, acts, jacrev, token_inputs=token_inputs[::-1].copy())
    assert not np.allclose(other["frobenius"], a["frobenius"], rtol=1e-3)
    with pytest.raises(ValueError, match="token_inputs.*re-run the job that wrote them"):
        block_jacobian_stats(model, acts)


def test_analyses_and_refusals(tmp_path):
    from crosslayer.stages import supported_stages

    adapter = adapter_for(GEMMA4["gemma4"]())
    assert supported_stages(adapter.capabilities) == (("alignment", "dynamics", "embedding_noise", "topology"),
                                                      {"continuity": ["uniform_layers"], "coupling": ["own_attention"]})
    assert "change shape across layers" in adapter.limits
    assert not adapter.closed_form and adapter.token_input_width == 8
    moe = T.Gemma4TextConfig(**{**GEMMA4_TEXT, "num_kv_shared_layers": 0}, enable_moe_block=True, num_experts=4,
                             top_k_experts=2, moe_intermediate_size=16)
    with pytest.raises(NotImplementedError, match="enable_moe_block"):
        adapter_for(moe)
    moe.save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="mixture-of-experts"):
        checkpoint_adapter(tmp_path, model="g4moe", revision="main")
    with pytest.raises(NotImplementedError, match="gemma3n_text.*per-layer inputs"):
        adapter_for(T.Gemma3nTextConfig())


def test_families_without_per_layer_inputs_record_none():
    samples = [torch.arange(3, 3 + n) for n in (4, 7, 2)]  # batches padded to different lengths
    assert set(record_residual_stream(tiny_model("llama"), samples, batch_size=2)) == {"acts", "n_tokens"}
