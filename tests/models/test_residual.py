"""Residual-stream snapshots must match independent recomputations for every family."""

import numpy as np
import pytest
import torch
import transformers as T
from tiny_families import HEADS, LAYERS, VOCAB, D, tiny_model

from crosslayer.models.adapters import adapter_for
from crosslayer.models.residual import record_residual_stream, select_samples

TOL = dict(rtol=1e-4, atol=1e-4)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


# family -> (builder, attention module of a block,
#            h(block, x, attn_out): residual entering the MLP from the real submodules,
#            y(block, x, h, attn_out): block output recomputed from h)
FAMILIES = {
    "gpt_neox_parallel": (
        lambda: tiny_model("gpt_neox"),
        lambda b: b.attention,
        lambda b, x, a: x,
        lambda b, x, h, a: x + a + b.mlp(b.post_attention_layernorm(h)),
    ),
    "gpt_neox_sequential": (
        lambda: tiny_model("gpt_neox_sequential"),
        lambda b: b.attention,
        lambda b, x, a: x + a,
        lambda b, x, h, a: h + b.mlp(b.post_attention_layernorm(h)),
    ),
    "llama": (
        lambda: tiny_model("llama"),
        lambda b: b.self_attn,
        lambda b, x, a: x + a,
        lambda b, x, h, a: h + b.mlp(b.post_attention_layernorm(h)),
    ),
    "olmo2": (
        lambda: tiny_model("olmo2"),
        lambda b: b.self_attn,
        lambda b, x, a: x + b.post_attention_layernorm(a),
        lambda b, x, h, a: h + b.post_feedforward_layernorm(b.mlp(h)),
    ),
    "bloom": (
        lambda: tiny_model("bloom"),
        lambda b: b.self_attention,
        lambda b, x, a: a,  # BloomAttention adds the residual itself (dropout_add)
        lambda b, x, h, a: b.mlp(b.post_attention_layernorm(h), h),  # BloomMLP adds its residual too
    ),
    "gpt2": (
        lambda: tiny_model("gpt2"),
        lambda b: b.attn,
        lambda b, x, a: x + a,
        lambda b, x, h, a: h + b.mlp(b.ln_2(h)),
    ),
}
_LLAMA = (lambda b: b.self_attn, lambda b, x, a: x + a, lambda b, x, h, a: h + b.mlp(b.post_attention_layernorm(h)))
_OLMO2 = (lambda b: b.self_attn, lambda b, x, a: x + b.post_attention_layernorm(a),
          lambda b, x, h, a: h + b.post_feedforward_layernorm(b.mlp(h)))
_GEMMA3 = (lambda b: b.self_attn, lambda b, x, a: x + b.post_attention_layernorm(a),
           lambda b, x, h, a: h + b.post_feedforward_layernorm(b.mlp(b.pre_feedforward_layernorm(h))))
for _family, _parts in {
    "mistral": _LLAMA, "qwen2": _LLAMA, "qwen3": _LLAMA, "phi3": _LLAMA, "exaone4": _OLMO2,
    "gemma": _LLAMA, "gemma2": _GEMMA3, "gemma3_text": _GEMMA3, "gemma3": _GEMMA3,
    "phi": (lambda b: b.self_attn, lambda b, x, a: x, lambda b, x, h, a: x + a + b.mlp(b.input_layernorm(x))),
    "gpt_neo": (lambda b: b.attn, lambda b, x, a: x + a, lambda b, x, h, a: h + b.mlp(b.ln_2(h))),
    "mpt": (lambda b: b.attn, lambda b, x, a: x + a, lambda b, x, h, a: b.ffn(b.norm_2(h), h)),  # MptMLP adds h
    "falcon": (lambda b: b.self_attention, lambda b, x, a: x, lambda b, x, h, a: x + a + b.mlp(b.ln_mlp(x))),
    "falcon_multi_query": (lambda b: b.self_attention, lambda b, x, a: x,
                           lambda b, x, h, a: x + a + b.mlp(b.input_layernorm(x))),
    "falcon_sequential": (lambda b: b.self_attention, lambda b, x, a: x + a,
                          lambda b, x, h, a: h + b.mlp(b.post_attention_layernorm(h))),
}.items():
    FAMILIES[_family] = (lambda family=_family: tiny_model(family), *_parts)

LENGTHS = [7, 3, 12, 1, 9, 5, 12]


def _model(family, seed=0):
    torch.manual_seed(seed)
    model = FAMILIES[family][0]()
    with torch.no_grad():  # random norms and biases too, so that no part is an identity
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def _samples(seed=1, lengths=LENGTHS):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, VOCAB, (n,), generator=g) for n in lengths]


def _reference(model, family, ids):
    """One sample alone: block inputs from output_hidden_states, attention outputs and
    block outputs from the test's own forward hooks, all at the last token."""
    _, attention, _, _ = FAMILIES[family]
    blocks = adapter_for(model).blocks(model)
    attn_out, block_out, handles = {}, {}, []
    for i, b in enumerate(blocks):
        handles.append(attention(b).register_forward_hook(
            lambda m, a, o, i=i: attn_out.__setitem__(i, _first(o)[0, -1])))
        handles.append(b.register_forward_hook(
            lambda m, a, o, i=i: block_out.__setitem__(i, _first(o)[0, -1])))
    try:
        with torch.no_grad():
            hidden = model(ids[None], output_hidden_states=True).hidden_states
    finally:
        for h in handles:
            h.remove()
    x = [hidden[layer][0, -1] for layer in range(len(blocks))]  # hidden_states[l] = input of block l < L
    return x, attn_out, block_out


@pytest.mark.parametrize("family", list(FAMILIES))
def test_snapshots_match_manual_recomputation(family):
    model = _model(family)
    _, _, pre_mlp, output = FAMILIES[family]
    blocks = adapter_for(model).blocks(model)
    samples = _samples()
    rec = record_residual_stream(model, samples, batch_size=3)
    acts = torch.from_numpy(rec["acts"])
    assert rec["acts"].dtype == np.float32 and acts.shape == (len(samples), 2 * LAYERS, D)
    np.testing.assert_array_equal(rec["n_tokens"], LENGTHS)
    with torch.no_grad():
        for i, ids in enumerate(samples):
            x, attn_out, block_out = _reference(model, family, ids)
            for layer, b in enumerate(blocks):
                torch.testing.assert_close(acts[i, 2 * layer], x[layer], **TOL)
                h = acts[i, 2 * layer + 1]
                torch.testing.assert_close(h, pre_mlp(b, x[layer], attn_out[layer]), **TOL)
                torch.testing.assert_close(output(b, x[layer], h, attn_out[layer]), block_out[layer], **TOL)
                if layer + 1 < LAYERS:  # next block's input is this block's output
                    torch.testing.assert_close(acts[i, 2 * layer + 2], block_out[layer], **TOL)
    if family in ("gpt_neox_parallel", "phi", "falcon", "falcon_multi_query"):  # the MLP reads the block input
        np.testing.assert_array_equal(rec["acts"][:, 1::2], rec["acts"][:, 0::2])
    else:
        assert not np.allclose(rec["acts"][:, 1::2], rec["acts"][:, 0::2])
    for b in blocks:  # hooks gone afterwards
        assert not b._forward_pre_hooks
        assert not any(m._forward_pre_hooks for m in b.modules())


@pytest.mark.parametrize("family", ["gpt_neox_parallel", "llama", "olmo2", "bloom", "gpt2"])
def test_padded_batches_equal_samples_run_alone(family):
    model = _model(family, seed=2)
    samples = _samples(seed=3)
    batched = record_residual_stream(model, samples, batch_size=len(samples))["acts"]
    alone = np.stack([record_residual_stream(model, [s], batch_size=1)["acts"][0] for s in samples])
    np.testing.assert_allclose(batched, alone, **TOL)


def test_input_types_order_progress_and_mode_restored():
    model = _model("llama")
    model.train()
    samples = _samples(lengths=[4, 2, 6])
    calls = []
    rec = record_residual_stream(model, [s.tolist() for s in samples], batch_size=2,
                                 progress=lambda done, total: calls.append((done, total)))
    as_np = record_residual_stream(model, [s.numpy() for s in samples], batch_size=2, device="cpu")
    np.testing.assert_array_equal(rec["acts"], as_np["acts"])
    reversed_rec = record_residual_stream(model, samples[::-1], batch_size=2)
    np.testing.assert_allclose(reversed_rec["acts"][::-1], rec["acts"], **TOL)
    assert calls == [(2, 3), (3, 3)]
    assert model.training  # mode restored


def test_non_finite_activation_names_snapshot_and_sample():
    model = _model("gpt2")
    with torch.no_grad():
        model.transformer.wte.weight[7] = float("nan")
    samples = [torch.tensor([3, 4, 5]), torch.tensor([1, 2]), torch.tensor([9, 8, 6, 7]), torch.tensor([5])]
    with pytest.raises(ValueError, match=r"layer 0 pre-attention .*sample 2"):
        record_residual_stream(model, samples, batch_size=2)
    for b in model.transformer.h:
        assert not any(m._forward_pre_hooks for m in b.modules())


def test_hooks_removed_after_error_inside_forward():
    model = _model("gpt_neox_sequential")
    blocks = adapter_for(model).blocks(model)

    def boom(*_):
        raise RuntimeError("boom")

    handle = blocks[1].register_forward_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            record_residual_stream(model, _samples())
    finally:
        handle.remove()
    for b in blocks:
        assert not any(m._forward_pre_hooks for m in b.modules())


def test_bad_inputs():
    model = _model("gpt2")
    with pytest.raises(ValueError, match="no samples"):
        record_residual_stream(model, [])
    with pytest.raises(ValueError, match="sample 1 is empty"):
        record_residual_stream(model, [[1, 2], []])
    with pytest.raises(ValueError, match="batch_size"):
        record_residual_stream(model, [[1, 2]], batch_size=0)


def test_select_samples_filters_truncates_and_keeps_order():
    data = [[1] * 3, [2] * 10, [3] * 5, [4] * 2, [5] * 6, [6] * 8]
    assert select_samples(data, min_tokens=5, max_tokens=6, n=3) == [[2] * 6, [3] * 5, [5] * 6]
    assert select_samples(data, min_tokens=1, max_tokens=100, n=2) == [[1] * 3, [2] * 10]
    tensors = [torch.arange(n) for n in (4, 9)]
    out = select_samples(tensors, min_tokens=4, max_tokens=4, n=2)
    assert [t.tolist() for t in out] == [[0, 1, 2, 3], [0, 1, 2, 3]]


def test_select_samples_too_few():
    data = [[1] * 3, [2] * 10, [3] * 5]
    with pytest.raises(ValueError, match=r"only 2 of 3 samples have >= min_tokens=5"):
        select_samples(data, min_tokens=5, max_tokens=8, n=3)
    with pytest.raises(ValueError, match="min_tokens"):
        select_samples(data, min_tokens=5, max_tokens=4, n=1)
    with pytest.raises(ValueError, match="n must be"):
        select_samples(data, min_tokens=1, max_tokens=4, n=0)


def test_unsupported_family_variant():
    model = T.BloomForCausalLM(T.BloomConfig(hidden_size=D, n_layer=1, n_head=HEADS, vocab_size=VOCAB,
                                             apply_residual_connection_post_layernorm=True))
    with pytest.raises(NotImplementedError, match="apply_residual_connection_post_layernorm"):
        record_residual_stream(model, [[1, 2, 3]])
