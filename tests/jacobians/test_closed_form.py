"""Closed-form single-token block Jacobians against autograd of the real transformers blocks."""

import pytest
import torch

from crosslayer.jacobians import autograd
from crosslayer.jacobians import closed_form as jacobian
from crosslayer.jacobians.autograd import block_jacobians_autograd, single_token_block_fn
from crosslayer.jacobians.closed_form import block_jacobians, iter_block_jacobians, mean_jacobian
from crosslayer.models.adapters import adapter_for

transformers = pytest.importorskip("transformers")
from tiny_families import CONFIGS  # noqa: E402

D = 64


def _config(family):
    """A tiny config of one family: (model_type, config); odd shapes on purpose."""
    common = dict(vocab_size=37, num_hidden_layers=2)
    if family in ("gpt_neox", "gpt_neox_sequential"):
        return transformers.GPTNeoXConfig(
            **common, hidden_size=D, num_attention_heads=4, intermediate_size=4 * D, hidden_act="gelu",
            use_parallel_residual=family == "gpt_neox", rotary_pct=0.25, attention_bias=True)
    if family == "llama":
        return transformers.LlamaConfig(
            **common, hidden_size=D, num_attention_heads=8, num_key_value_heads=2, intermediate_size=172,
            hidden_act="silu", rms_norm_eps=1e-5)
    if family == "llama_bias":
        return transformers.LlamaConfig(
            **common, hidden_size=D, num_attention_heads=4, num_key_value_heads=4, intermediate_size=96,
            hidden_act="silu", attention_bias=True, mlp_bias=True)
    if family == "olmo2":
        return transformers.Olmo2Config(
            **common, hidden_size=D, num_attention_heads=4, num_key_value_heads=2, intermediate_size=150,
            hidden_act="silu", rms_norm_eps=1e-6, pad_token_id=1,
            bos_token_id=None, eos_token_id=None)
    if family == "olmo3":  # both layer types; YaRN (attention scaling != 1) on the full-attention layer
        return transformers.Olmo3Config(
            **common, hidden_size=D, num_attention_heads=4, num_key_value_heads=2, intermediate_size=150,
            hidden_act="silu", rms_norm_eps=1e-6, pad_token_id=1, bos_token_id=None, eos_token_id=None,
            layer_types=["sliding_attention", "full_attention"], sliding_window=4,
            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                             "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 8.0,
                                                "original_max_position_embeddings": 256}})
    if family == "bloom":
        return transformers.BloomConfig(vocab_size=37, n_layer=2, hidden_size=D, n_head=4)
    if family.startswith("gpt2"):  # "gpt2_relu" etc.: other activations through the same block
        activation = "gelu_new" if family == "gpt2" else family.split("_", 1)[1]
        return transformers.GPT2Config(vocab_size=37, n_layer=2, n_embd=D, n_head=4, n_positions=16,
                                       activation_function=activation, bos_token_id=None, eos_token_id=None)
    return CONFIGS[family]()  # the other families at the shared tiny size (d = 32)


FAMILIES = ["gpt_neox", "gpt_neox_sequential", "llama", "llama_bias", "olmo2", "olmo3", "bloom", "gpt2",
            "gpt2_relu", "gpt2_gelu", "gpt2_gelu_pytorch_tanh", "gpt2_silu", "mistral", "qwen2", "qwen3", "phi3",
            "phi", "exaone4", "gemma", "gemma2", "gemma3_text", "gemma3", "gpt_neo", "mpt", "falcon", "falcon_multi_query",
            "falcon_sequential"]
PARALLEL = {"gpt_neox", "phi", "falcon", "falcon_multi_query"}
# attention module of a block, where it is not ``self_attn``
ATTENTION = {"gpt_neox": "attention", "gpt_neox_sequential": "attention", "bloom": "self_attention",
             "falcon": "self_attention", "falcon_multi_query": "self_attention",
             "falcon_sequential": "self_attention", "gpt_neo": "attn", "mpt": "attn"}


def _model(family, seed=0):
    torch.manual_seed(seed)
    config = _config(family)
    config._attn_implementation = "eager"
    model = transformers.AutoModel.from_config(config).to(torch.float32).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():  # nothing trivially identity or zero
            if "norm" in name or name.split(".")[-2].startswith("ln"):  # Gemma's 1 + w: away from 1 too
                p.copy_(1.0 + 0.3 * torch.randn_like(p) if name.endswith("weight") else 0.2 * torch.randn_like(p))
            elif p.ndim == 1:
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
    return model


@pytest.fixture(scope="module", params=FAMILIES)
def family_model(request):
    return request.param, _model(request.param)


def _width(model):
    return model.config.get_text_config().hidden_size


def _rel(a, b):
    return float(torch.linalg.norm((a - b).flatten()) / torch.linalg.norm(b.flatten()))


@pytest.mark.parametrize("factored", [None, True, False], ids=["auto", "factored", "dense"])
def test_closed_form_equals_autograd_of_the_real_block(family_model, factored, monkeypatch):
    """Both forms of the attention Jacobian (factored through the value width, or dense)."""
    family, model = family_model
    if factored is not None:
        monkeypatch.setattr(jacobian, "_factored", lambda p: factored)
    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    assert len(blocks) in (2, 3)  # every layer type of the tiny configs
    d = _width(model)
    torch.manual_seed(1)
    x = 2.0 * torch.randn(3, d) + 0.5
    for layer, block in enumerate(blocks):
        parts = adapter.block_parts(block)
        assert parts.parallel == (family in PARALLEL)
        J = block_jacobians(parts, x, layer=layer)
        ref = block_jacobians_autograd(single_token_block_fn(block, model), x)
        assert J.shape == ref.shape == (3, d, d) and J.dtype == torch.float32
        assert _rel(J, ref) <= 1e-5, (family, layer, _rel(J, ref))
        assert _rel(J - torch.eye(d), ref - torch.eye(d)) <= 1e-5, (family, layer)  # residual part too


def test_one_token_attention_is_w_o_w_v_after_the_norm(family_model):
    """The claim the closed form rests on: over one key, attention(n) = W_o (W_v n + b_v) + b_o,
    checked on the attention module's own input and output in the model's forward of one token."""
    family, model = family_model
    adapter = adapter_for(model)
    block = adapter.blocks(model)[1]
    parts = adapter.block_parts(block)
    attention = getattr(block, ATTENTION.get(family, "attn" if family.startswith("gpt2") else "self_attn"))
    seen = {}

    def record_input(module, args, kwargs):
        seen["n"] = (args[0] if args else kwargs["hidden_states"]).reshape(-1)
        seen["residual"] = args[1] if len(args) > 1 else kwargs.get("residual")  # BLOOM adds it inside

    def record_output(module, args, kwargs, out):
        seen["out"] = (out[0] if isinstance(out, tuple) else out).reshape(-1)

    handles = [attention.register_forward_pre_hook(record_input, with_kwargs=True),
               attention.register_forward_hook(record_output, with_kwargs=True)]
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([[5]]))
    finally:
        for handle in handles:
            handle.remove()
    got = seen["out"] - (0 if family != "bloom" else seen["residual"].reshape(-1))
    rep = parts.n_heads // parts.n_kv_heads
    d = _width(model)
    w_v = parts.w_v.view(parts.n_kv_heads, parts.head_dim, d).repeat_interleave(rep, 0).reshape(-1, d)
    b_v = torch.zeros(w_v.shape[0]) if parts.b_v is None else (
        parts.b_v.view(parts.n_kv_heads, parts.head_dim).repeat_interleave(rep, 0).reshape(-1))
    want = parts.w_o @ (w_v @ seen["n"] + b_v) + (0 if parts.b_o is None else parts.b_o)
    assert _rel(got, want) <= 1e-5


def test_single_token_forward_is_the_models_own_call(family_model):
    """The autograd reference reruns each block as the model's forward on one token calls it."""
    family, model = family_model
    blocks = adapter_for(model).blocks(model)
    seen = {}
    handles = [b.register_forward_hook(lambda m, args, kwargs, out, i=i: seen.__setitem__(
        i, ((args[0] if args else kwargs["hidden_states"]).reshape(-1), (out[0] if isinstance(out, tuple) else out)
            .reshape(-1))), with_kwargs=True) for i, b in enumerate(blocks)]
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([[7]]))
    finally:
        for handle in handles:
            handle.remove()
    for i, block in enumerate(blocks):
        x, out = seen[i]
        with torch.no_grad():
            torch.testing.assert_close(single_token_block_fn(block, model)(x), out, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", ["llama", "gpt_neox_sequential"])
def test_batched_chunked_and_mean(family):
    model = _model(family, seed=3)
    adapter = adapter_for(model)
    parts = adapter.block_parts(adapter.blocks(model)[1])
    torch.manual_seed(4)
    x = torch.randn(7, D)
    J = block_jacobians(parts, x)
    single = torch.cat([block_jacobians(parts, x[i : i + 1]) for i in range(7)])
    assert torch.allclose(J, single, rtol=1e-5, atol=1e-6)
    for chunk_bytes in (1, 3 * 4 * (4 * D * D + D * parts.d_ff + 4 * parts.d_ff)):  # 1 and 3 samples a chunk
        starts = [s for s, _ in iter_block_jacobians(parts, x, chunk_bytes=chunk_bytes)]
        assert starts == (list(range(7)) if chunk_bytes == 1 else [0, 3, 6])
        assert torch.allclose(block_jacobians(parts, x, chunk_bytes=chunk_bytes), J, rtol=1e-5, atol=1e-6)
    mean = mean_jacobian(parts, x, chunk_bytes=1)
    assert mean.dtype == torch.float64 and mean.shape == (D, D)
    assert torch.allclose(mean, single.double().mean(0), rtol=1e-12, atol=1e-14)  # same samples, float64 sum
    assert torch.allclose(mean_jacobian(parts, x), J.double().mean(0), rtol=1e-12, atol=1e-14)


def test_autograd_methods_agree():
    model = _model("llama", seed=5)
    adapter = adapter_for(model)
    block = adapter.blocks(model)[0]
    fn = single_token_block_fn(block, model)
    x = torch.randn(2, D)
    ref = block_jacobians_autograd(fn, x)
    for method in ("vectorized", "jacrev"):
        assert _rel(block_jacobians_autograd(fn, x, method=method), ref) <= 1e-6
    with pytest.raises(ValueError, match="unknown method"):
        block_jacobians_autograd(fn, x, method="nope")


def test_autograd_chunks_halve_when_the_gpu_runs_out_of_memory(monkeypatch, caplog):
    """A chunk that raises torch.OutOfMemoryError (simulated: no GPU here) is retried in halves;
    every sample still comes out once, in order, equal to the one-shot result."""
    model = _model("llama", seed=5)
    fn = single_token_block_fn(adapter_for(model).blocks(model)[0], model)
    x = torch.randn(7, D)
    real, sizes = autograd.block_jacobians_autograd, []

    def limited(block_fn, xs, **kw):
        sizes.append(len(xs))
        if len(xs) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(block_fn, xs, **kw)

    monkeypatch.setattr(autograd, "block_jacobians_autograd", limited)
    with caplog.at_level("WARNING"):
        chunks = list(autograd.iter_block_jacobians_autograd(fn, x, method="jacrev", layer=3))
    assert [start for start, _ in chunks] == list(range(7)) and sizes[:3] == [7, 3, 1]
    assert _rel(torch.cat([J for _, J in chunks]), real(fn, x, method="jacrev")) <= 1e-6
    assert "layer 3: out of GPU memory; retrying with 3 samples per chunk" in caplog.text
    monkeypatch.setattr(autograd, "block_jacobians_autograd",
                        lambda *a, **k: (_ for _ in ()).throw(torch.OutOfMemoryError("always")))
    with pytest.raises(torch.OutOfMemoryError):  # one sample that does not fit: the job fails, loudly
        list(autograd.iter_block_jacobians_autograd(fn, x[:1], method="jacrev"))


@pytest.mark.parametrize("family", ["gpt_neox", "llama"])  # LayerNorm (two rank-one terms), RMSNorm (one)
@pytest.mark.parametrize("limit", [0, 10**6])  # the pre-norm applied inside the MLP GEMM, or after it
def test_mlp_pre_norm_inside_or_after_the_gemm_matches_autograd(monkeypatch, family, limit):
    monkeypatch.setattr(jacobian, "_RANK_ROWS_PER_D_FF", limit)
    model = _model(family, seed=11)
    adapter = adapter_for(model)
    block = adapter.blocks(model)[0]
    x = torch.randn(5, D)
    ref = block_jacobians_autograd(single_token_block_fn(block, model), x)
    assert _rel(jacobian.block_jacobians(adapter.block_parts(block), x), ref) <= 1e-5


def test_closed_form_chunks_halve_when_the_gpu_runs_out_of_memory(monkeypatch, caplog):
    model = _model("llama", seed=5)
    adapter = adapter_for(model)
    parts = adapter.block_parts(adapter.blocks(model)[0])
    x = torch.randn(7, D)
    expected = jacobian.block_jacobians(parts, x)
    real = jacobian._chunk_jacobians

    def limited(p, xs, out=None):
        if len(xs) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(p, xs, out)

    monkeypatch.setattr(jacobian, "_chunk_jacobians", limited)
    with caplog.at_level("WARNING"):
        chunks = list(jacobian.iter_block_jacobians(parts, x, layer=2))
        into_one = jacobian.block_jacobians(parts, x)  # chunks written into one preallocated tensor
    assert [start for start, _ in chunks] == list(range(7))
    # batched products round by batch shape: equal to float32 rounding, not bit for bit
    assert _rel(torch.cat([J for _, J in chunks]), expected) <= 1e-6 and _rel(into_one, expected) <= 1e-6
    assert "layer 2: out of GPU memory; retrying with 3 samples per chunk" in caplog.text


def test_non_finite_input_and_jacobian_name_layer_and_sample():
    model = _model("gpt2", seed=6)
    adapter = adapter_for(model)
    parts = adapter.block_parts(adapter.blocks(model)[0])
    x = torch.randn(5, D)
    x[3, 7] = float("nan")
    with pytest.raises(ValueError, match=r"layer 4, sample 3"):
        block_jacobians(parts, x, layer=4)
    with pytest.raises(ValueError, match=r"layer 2, sample 3"):
        mean_jacobian(parts, x, layer=2)
    with pytest.raises(ValueError, match=r"shape \(B, 64\)"):
        block_jacobians(parts, torch.randn(5, D + 1))
    model = _model("olmo2", seed=6)  # no input norm: a huge finite input overflows inside the block
    adapter = adapter_for(model)
    parts = adapter.block_parts(adapter.blocks(model)[0])
    x = torch.randn(5, D)
    x[3] *= 1e25
    with pytest.raises(ValueError, match=r"non-finite Jacobian .*layer 1, sample 3"):
        block_jacobians(parts, x, layer=1, chunk_bytes=1)
    with pytest.raises(ValueError, match=r"non-finite Jacobian .*layer 1, sample 3"):
        block_jacobians(parts, x, layer=1)  # one chunk of 5


def test_bert_is_refused_by_name():
    config = transformers.BertConfig(vocab_size=37, hidden_size=D, num_hidden_layers=1, num_attention_heads=4,
                                     intermediate_size=4 * D)
    model = transformers.AutoModel.from_config(config)
    adapter = adapter_for(model)
    with pytest.raises(NotImplementedError, match="bert"):
        adapter.block_parts(adapter.blocks(model)[0])
    with pytest.raises(NotImplementedError, match="unsupported model_type 't5'"):
        adapter_for(transformers.T5Config())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_input_computes_on_cuda_and_matches_cpu():
    model = _model("llama", seed=7)
    adapter = adapter_for(model)
    parts = adapter.block_parts(adapter.blocks(model)[0])  # CPU parts, moved by the closed form
    x = torch.randn(4, D)
    J = block_jacobians(parts, x.cuda())
    assert J.device.type == "cuda"
    assert _rel(J.cpu(), block_jacobians(parts, x)) <= 1e-5
    assert mean_jacobian(parts, x.cuda()).device.type == "cuda"


@pytest.mark.parametrize("n_heads, n_kv_heads", [(4, 4), (4, 2), (6, 1)])
def test_grouped_w_o_times_w_v_is_the_sum_over_query_heads(n_heads, n_kv_heads):
    # query head h reads value head h // (n_heads // n_kv_heads): W_ov = sum_h W_o[:, h] W_v[value head of h]
    g, head_dim, d = torch.Generator().manual_seed(0), 3, 10
    w_o = torch.randn(d, n_heads * head_dim, generator=g, dtype=torch.float64)
    w_v = torch.randn(n_kv_heads * head_dim, d, generator=g, dtype=torch.float64)
    group = n_heads // n_kv_heads
    per_head = sum(w_o[:, h * head_dim:(h + 1) * head_dim] @ w_v[h // group * head_dim:(h // group + 1) * head_dim]
                   for h in range(n_heads))
    grouped = jacobian.grouped_w_o(w_o, n_heads=n_heads, n_kv_heads=n_kv_heads)
    assert grouped.shape == (d, n_kv_heads * head_dim)
    torch.testing.assert_close(grouped @ w_v, per_head)
    with pytest.raises(ValueError, match=r"does not split into 4 query heads over 3 key/value heads"):
        jacobian.grouped_w_o(torch.zeros(d, 12), n_heads=4, n_kv_heads=3)
