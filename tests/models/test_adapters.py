"""The adapter's matrices must reproduce each family's live transformers modules."""

import json
import shutil

import pytest
import torch
import transformers as T
from safetensors.torch import load_file, save_file
from tiny_families import HEADS, LAYERS, D, tiny_model

from crosslayer.errors import CheckpointError
from crosslayer.models.adapters import SUPPORTED_MODEL_TYPES, adapter_for
from crosslayer.models.adapters.base import Geometry
from crosslayer.models.weights import WeightReader, open_checkpoint


def _heads_view(t):
    """(1, n_heads, seq, head_dim) -> (seq, n_heads * head_dim): canonical column order."""
    return t.transpose(1, 2).reshape(t.shape[2], -1)


def _neox_qkv(attn, x):
    # Same split as GPTNeoXAttention.forward in transformers 5.
    qkv = attn.query_key_value(x[None]).view(1, x.shape[0], -1, 3 * attn.head_size).transpose(1, 2)
    return [_heads_view(t) for t in qkv.chunk(3, dim=-1)]


def _bloom_qkv(attn, x):
    # BloomAttention's own splitter: (batch, seq, n_heads * 3 * head_dim) -> q, k, v.
    return [_heads_view(t) for t in attn._reshape(attn.query_key_value(x[None]))]


def _gpt2_qkv(attn, x):
    return list(attn.c_attn(x).split(attn.split_size, dim=-1))


def _separate_qkv(q, k, v):
    return lambda x: [q(x), k(x), v(x)]


# Live modules of one block: "qkv" -> x -> [q, k, v] in canonical column order, else name -> module.
def _neox_live(layer):
    a, m = layer.attention, layer.mlp
    return {"qkv": lambda x: _neox_qkv(a, x), "o": a.dense, "up": m.dense_h_to_4h, "down": m.dense_4h_to_h}


def _llama_live(layer):
    a, m = layer.self_attn, layer.mlp
    return {"qkv": _separate_qkv(a.q_proj, a.k_proj, a.v_proj), "o": a.o_proj,
            "gate": m.gate_proj, "up": m.up_proj, "down": m.down_proj}


def _bloom_live(layer):
    a, m = layer.self_attention, layer.mlp
    return {"qkv": lambda x: _bloom_qkv(a, x), "o": a.dense, "up": m.dense_h_to_4h, "down": m.dense_4h_to_h}


def _gpt2_live(layer):
    a, m = layer.attn, layer.mlp
    return {"qkv": lambda x: _gpt2_qkv(a, x), "o": a.c_proj, "up": m.c_fc, "down": m.c_proj}


def _phi3_live(layer):
    # Phi3Attention / Phi3MLP's own splits: q, k, v by rows of qkv_proj; chunk(2) gives gate, up.
    a, m = layer.self_attn, layer.mlp
    q = a.config.num_attention_heads * a.head_dim
    kv = a.num_key_value_heads * a.head_dim

    def qkv(x):
        y = a.qkv_proj(x)
        return [y[..., :q], y[..., q : q + kv], y[..., q + kv :]]

    return {"qkv": qkv, "o": a.o_proj, "gate": lambda x: m.gate_up_proj(x).chunk(2, -1)[0],
            "up": lambda x: m.gate_up_proj(x).chunk(2, -1)[1], "down": m.down_proj}


def _phi_live(layer):
    a, m = layer.self_attn, layer.mlp
    return {"qkv": _separate_qkv(a.q_proj, a.k_proj, a.v_proj), "o": a.dense, "up": m.fc1, "down": m.fc2}


def _gpt_neo_live(layer):
    a, m = layer.attn.attention, layer.mlp
    return {"qkv": _separate_qkv(a.q_proj, a.k_proj, a.v_proj), "o": a.out_proj, "up": m.c_fc, "down": m.c_proj}


def _mpt_live(layer):
    a, m = layer.attn, layer.ffn
    return {"qkv": lambda x: list(a.Wqkv(x).chunk(3, dim=-1)), "o": a.out_proj, "up": m.up_proj, "down": m.down_proj}


def _falcon_live(layer):
    # FalconAttention._split_heads gives (batch, seq, heads, head_dim); under GQA it broadcasts each
    # key/value head over its queries, so keep the first of each group (canonical: n_kv heads).
    a, m = layer.self_attention, layer.mlp

    def qkv(x):
        q, k, v = a._split_heads(a.query_key_value(x[None]))
        group = a.num_heads // a.num_kv_heads if a.new_decoder_architecture else 1
        k, v = (t[:, :, ::group] if a.new_decoder_architecture else t for t in (k, v))
        return [t[0].flatten(1) for t in (q, k, v)]

    return {"qkv": qkv, "o": a.dense, "up": m.dense_h_to_4h, "down": m.dense_4h_to_h}


def _bert_live(layer):
    a = layer.attention
    return {"qkv": _separate_qkv(a.self.query, a.self.key, a.self.value), "o": a.output.dense,
            "up": layer.intermediate.dense, "down": layer.output.dense}


# family -> (model builder, block accessor, live modules, expected Geometry fields beyond the shared ones)
FAMILIES = {
    "gpt_neox": (
        lambda: tiny_model("gpt_neox"),
        lambda m, i: m.gpt_neox.layers[i], _neox_live,
        dict(d_ff=64, n_kv_heads=4, gated_mlp=False, parallel_attn_mlp=True, mlp_activation="gelu"),
    ),
    "llama": (
        lambda: tiny_model("llama"),
        lambda m, i: m.model.layers[i], _llama_live,
        dict(d_ff=64, n_kv_heads=2, gated_mlp=True, parallel_attn_mlp=False, mlp_activation="silu"),
    ),
    "olmo2": (
        lambda: tiny_model("olmo2"),
        lambda m, i: m.model.layers[i], _llama_live,
        dict(d_ff=64, n_kv_heads=2, gated_mlp=True, parallel_attn_mlp=False, mlp_activation="silu"),
    ),
    "olmo3": (
        lambda: tiny_model("olmo3"),
        lambda m, i: m.model.layers[i], _llama_live,
        dict(d_ff=64, n_kv_heads=2, gated_mlp=True, parallel_attn_mlp=False, mlp_activation="silu"),
    ),
    "bloom": (
        lambda: tiny_model("bloom"),
        lambda m, i: m.transformer.h[i], _bloom_live,
        dict(d_ff=4 * D, n_kv_heads=4, gated_mlp=False, parallel_attn_mlp=False, mlp_activation="gelu_new"),
    ),
    "gpt2": (
        lambda: tiny_model("gpt2"),
        lambda m, i: m.transformer.h[i], _gpt2_live,
        dict(d_ff=4 * D, n_kv_heads=4, gated_mlp=False, parallel_attn_mlp=False, mlp_activation="gelu_new"),
    ),
    **{family: (lambda family=family: tiny_model(family), lambda m, i: adapter_for(m).blocks(m)[i], live,
                dict(d_ff=d_ff, n_kv_heads=n_kv, gated_mlp=gated, parallel_attn_mlp=parallel, mlp_activation=act,
                     **extra))
       for family, live, d_ff, n_kv, gated, parallel, act, extra in (
           ("mistral", _llama_live, 64, 2, True, False, "silu", {}),
           ("qwen2", _llama_live, 64, 2, True, False, "silu", {}),
           ("qwen3", _llama_live, 64, 2, True, False, "silu", dict(head_dim=16)),
           ("phi3", _phi3_live, 64, 2, True, False, "silu", {}),
           ("exaone4", _llama_live, 64, 2, True, False, "silu", {}),
           ("gemma", _llama_live, 64, 2, True, False, "gelu_pytorch_tanh", dict(head_dim=8)),
           ("gemma2", _llama_live, 64, 2, True, False, "gelu_pytorch_tanh", dict(head_dim=8)),
           ("gemma3_text", _llama_live, 64, 2, True, False, "gelu_pytorch_tanh", dict(head_dim=8)),
           ("gemma3", _llama_live, 64, 2, True, False, "gelu_pytorch_tanh", dict(head_dim=8)),
           ("phi", _phi_live, 64, 4, False, True, "gelu_new", {}),
           ("gpt_neo", _gpt_neo_live, 4 * D, 4, False, False, "gelu_new", {}),
           ("mpt", _mpt_live, 4 * D, 4, False, False, "gelu", {}),
           ("falcon", _falcon_live, 4 * D, 2, False, True, "gelu", {}),
           ("falcon_multi_query", _falcon_live, 4 * D, 1, False, True, "gelu", dict(model_type="falcon")),
           ("falcon_sequential", _falcon_live, 4 * D, 4, False, False, "gelu", dict(model_type="falcon")))},
    # A head model, so its keys carry an extra "bert." prefix.
    "bert": (
        lambda: T.BertForMaskedLM(T.BertConfig(
            hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=64,
            vocab_size=101)),
        lambda m, i: m.bert.encoder.layer[i], _bert_live,
        dict(d_ff=64, n_kv_heads=4, gated_mlp=False, parallel_attn_mlp=False, mlp_activation="gelu"),
    ),
}


def _build(family, seed=0):
    torch.manual_seed(seed)
    model = FAMILIES[family][0]().eval()
    with torch.no_grad():  # default init zeroes biases; randomise so bias handling is tested
        for p in model.parameters():
            p.normal_(0, 0.5)
    return model


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """family -> (live model, checkpoint directory), built once per module."""
    cache = {}

    def get(family):
        if family not in cache:
            path = tmp_path_factory.mktemp(family)
            model = _build(family)
            model.save_pretrained(path)
            cache[family] = model, path
        return cache[family]

    return get


def _copy_with(src, dst, state):
    """A checkpoint with ``state`` as its single safetensors file and src's config."""
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    save_file(state, str(dst / "model.safetensors"))
    return dst


def _all_projections(path, **kw):
    with open_checkpoint(path, **kw) as r:
        return [r.projections(i) for i in range(r.geometry.n_layers)]


def _assert_same(a, b):
    assert [sorted(x) for x in a] == [sorted(x) for x in b]
    for x, y in zip(a, b):
        for name in x:
            torch.testing.assert_close(x[name], y[name], rtol=0, atol=0)


def test_supported_types_cover_the_families():
    gemma4 = {"gemma4_text", "gemma4"}  # layers of several shapes: tests/models/adapters/test_gemma4.py
    assert set(SUPPORTED_MODEL_TYPES) == {FAMILIES[f][3].get("model_type", f) for f in FAMILIES} | gemma4


@pytest.mark.parametrize("family", FAMILIES)
def test_matches_live_modules(family, saved):
    model, path = saved(family)
    _, layer_of, live_of, _ = FAMILIES[family]
    torch.manual_seed(1)
    with open_checkpoint(path) as reader, torch.no_grad():
        g = reader.geometry
        inputs = {"d": torch.randn(5, g.d_model), "attn": torch.randn(5, g.n_heads * g.head_dim),
                  "ff": torch.randn(5, g.d_ff)}
        for i in range(g.n_layers):
            w = reader.projections(i)
            assert set(w) == ({"q", "k", "v", "o", "up", "down"} | ({"gate"} if g.gated_mlp else set()))
            live = live_of(layer_of(model, i))
            # x @ W.T + b, with b the live output at x = 0 (its bias, split the same way).
            qkv_x, qkv_0 = live["qkv"](inputs["d"]), live["qkv"](torch.zeros(1, g.d_model))
            for name, y, b in zip("qkv", qkv_x, qkv_0):
                assert w[name].dtype == torch.float32 and w[name].is_contiguous()
                torch.testing.assert_close(inputs["d"] @ w[name].T + b, y, rtol=1e-5, atol=1e-4)
            for name, x in (("o", "attn"), ("gate", "d"), ("up", "d"), ("down", "ff")):
                if name in live:
                    x = inputs[x]
                    b = live[name](torch.zeros(1, x.shape[1]))
                    torch.testing.assert_close(x @ w[name].T + b, live[name](x), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_geometry(family, saved):
    _, path = saved(family)
    expected = FAMILIES[family][3]
    with open_checkpoint(path) as reader:
        g = reader.geometry
        assert g == Geometry(**{"model_type": family, "n_layers": LAYERS, "d_model": D, "n_heads": HEADS,
                                "head_dim": D // HEADS, **expected})
        w = reader.projections(0)
        assert w["q"].shape == (g.n_heads * g.head_dim, g.d_model)
        assert w["k"].shape == w["v"].shape == (g.n_kv_heads * g.head_dim, g.d_model)
        assert w["o"].shape == (g.d_model, g.n_heads * g.head_dim)
        up, down = reader.mlp(1)
        assert up.shape == (g.d_ff, g.d_model) and down.shape == (g.d_model, g.d_ff)


def test_gpt_neox_sequential_residual(tmp_path):
    T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
        hidden_size=D, num_hidden_layers=1, num_attention_heads=HEADS, intermediate_size=64,
        vocab_size=101, use_parallel_residual=False)).save_pretrained(tmp_path)
    with open_checkpoint(tmp_path) as reader:
        assert reader.geometry.parallel_attn_mlp is False


@pytest.mark.parametrize("family,prefix", [("gpt2", "transformer."), ("bloom", "transformer.")])
def test_prefix_discovered_when_stripped(family, prefix, saved, tmp_path):
    # The original gpt2 and bigscience/bloom-* hub files store "h.0.attn..." without "transformer.".
    _, path = saved(family)
    state = load_file(str(path / "model.safetensors"))
    stripped = {k.removeprefix(prefix): v for k, v in state.items()}
    assert stripped.keys() != state.keys()
    _assert_same(_all_projections(_copy_with(path, tmp_path / "stripped", stripped)), _all_projections(path))


def test_sharded_safetensors(saved, tmp_path):
    model, path = saved("llama")
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
    _assert_same(_all_projections(tmp_path), _all_projections(path))


@pytest.mark.parametrize("sharded", [False, True])
def test_pytorch_bin_fallback(sharded, saved, tmp_path):
    # transformers 5 ignores safe_serialization=False, so write the .bin files by hand.
    model, path = saved("gpt_neox")
    shutil.copy(path / "config.json", tmp_path / "config.json")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    if sharded:
        keys = sorted(state)
        shards = {"pytorch_model-00001-of-00002.bin": keys[::2],
                  "pytorch_model-00002-of-00002.bin": keys[1::2]}
        for name, ks in shards.items():
            torch.save({k: state[k] for k in ks}, tmp_path / name)
        weight_map = {k: name for name, ks in shards.items() for k in ks}
        (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    else:
        torch.save(state, tmp_path / "pytorch_model.bin")
    _assert_same(_all_projections(tmp_path), _all_projections(path))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_converted_to_float32(dtype, tmp_path):
    model = _build("llama").to(dtype)
    model.save_pretrained(tmp_path)
    with open_checkpoint(tmp_path) as reader:
        w = reader.projections(1, names=("k", "gate"))
    assert all(t.dtype == torch.float32 for t in w.values())
    torch.testing.assert_close(w["k"], model.model.layers[1].self_attn.k_proj.weight.float(), rtol=0, atol=0)


def test_only_requested_tensors_are_loaded(saved, monkeypatch):
    _, path = saved("gpt_neox")
    with open_checkpoint(path) as reader:
        loads = []
        get = reader._store.get
        monkeypatch.setattr(reader._store, "get", lambda key: loads.append(key) or get(key))
        w = reader.projections(1, names=("q", "k", "v", "gate"))
    assert set(w) == {"q", "k", "v"}  # no gate for a non-gated MLP
    assert loads == ["gpt_neox.layers.1.attention.query_key_value.weight"]  # fused tensor read once


def test_bad_arguments(saved):
    _, path = saved("llama")
    with open_checkpoint(path) as reader:
        with pytest.raises(IndexError):
            reader.projections(LAYERS)
        with pytest.raises(ValueError, match="wq"):
            reader.projections(0, names=("wq",))
    with WeightReader(path) as reader:
        assert "llama" in repr(reader)


# --------------------------------------------------------------------------- errors


def _edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


@pytest.fixture
def neox_copy(saved, tmp_path):
    _, path = saved("gpt_neox")
    return _copy_with(path, tmp_path / "copy", load_file(str(path / "model.safetensors")))


def test_unsupported_model_type(neox_copy):
    _edit_config(neox_copy, model_type="not_a_model")
    with pytest.raises(CheckpointError, match=r"'not_a_model'.*gpt_neox, llama, olmo2, olmo3, bloom, gpt2, .*falcon, bert"):
        open_checkpoint(neox_copy)


def test_missing_config_and_weights(neox_copy):
    (neox_copy / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weight files"):
        open_checkpoint(neox_copy)
    (neox_copy / "config.json").unlink()
    with pytest.raises(CheckpointError, match="config.json missing"):
        open_checkpoint(neox_copy)


def test_missing_tensor(saved, tmp_path):
    _, path = saved("gpt_neox")
    state = load_file(str(path / "model.safetensors"))
    del state["gpt_neox.layers.1.mlp.dense_4h_to_h.weight"]
    with open_checkpoint(_copy_with(path, tmp_path / "c", state)) as reader:
        reader.projections(1, names=("q", "up"))  # the rest of the layer still reads
        with pytest.raises(CheckpointError, match=r"file 'model.safetensors': tensor "
                           r"'gpt_neox.layers.1.mlp.dense_4h_to_h.weight' not found"):
            reader.mlp(1)


def test_missing_tensor_in_sharded_index(saved, tmp_path):
    model, _ = saved("llama")
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    del index["weight_map"]["model.layers.0.mlp.gate_proj.weight"]
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with open_checkpoint(tmp_path) as reader:
        with pytest.raises(CheckpointError, match=r"model.safetensors.index.json.*mlp.gate_proj"):
            reader.projections(0, names=("gate",))


def test_unexpected_shape(neox_copy):
    _edit_config(neox_copy, intermediate_size=65)
    with open_checkpoint(neox_copy) as reader:
        with pytest.raises(CheckpointError,
                           match=r"dense_h_to_4h.weight' has shape \(64, 32\), expected \(65, 32\)"):
            reader.mlp(0)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weight(value, saved, tmp_path):
    _, path = saved("gpt2")
    state = load_file(str(path / "model.safetensors"))
    state["transformer.h.1.attn.c_attn.weight"][3, 2 * D + 5] = value  # a column of v
    with open_checkpoint(_copy_with(path, tmp_path / "c", state)) as reader:
        reader.projections(1, names=("q", "k"))  # unaffected slices still read
        with pytest.raises(CheckpointError, match=r"layer 1 projection 'v' \(tensor "
                           r"'transformer.h.1.attn.c_attn.weight'\) has 1 non-finite"):
            reader.projections(1)


def test_model_and_revision_in_messages(neox_copy):
    _edit_config(neox_copy, model_type="not_a_model")
    where = r"^model 'pythia-tiny' revision 'step8'"
    with pytest.raises(CheckpointError, match=where + r" file 'config.json': unsupported") as e:
        open_checkpoint(neox_copy, model="pythia-tiny", revision="step8")
    assert (e.value.model, e.value.revision) == ("pythia-tiny", "step8")
    _edit_config(neox_copy, model_type="gpt_neox")
    (neox_copy / "model.safetensors").rename(neox_copy / "other.safetensors")
    with pytest.raises(CheckpointError, match=where + r": no weight files"):
        open_checkpoint(neox_copy, model="pythia-tiny", revision="step8")
