"""Tiny offline language-model training (crosslayer.models.train) and its Hugging Face checkpoints,
with paper 003's transformer ablations: MLP activation, no residual connections, no norms."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from crosslayer.continuity.measure import ContinuitySettings, measure_checkpoint
from crosslayer.data import corpus
from crosslayer.errors import CheckpointError
from crosslayer.models.adapters import adapter_for
from crosslayer.models.loading import ABLATION_KEY, load_model
from crosslayer.models.train import (
    ARCHS,
    HIDDEN_ACT,
    TrainConfig,
    build_model,
    lr_at,
    train_model,
    training_outcome,
)
from crosslayer.models.weights import open_checkpoint

TINY = dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, context=16)
RUN = dict(
    TINY, batch_size=4, lr=1e-3, weight_decay=0.1, warmup_steps=2, save_steps=[0, 3, 6],
    seed=0, threads=1, log_every=1, progress=False,
)
VOCAB = 512


def train(data, out_dir, *, threads=1, progress=False, **settings):
    """One run on the shared corpus: the settings (RUN's and the test's) make the TrainConfig."""
    return train_model(data["tokens"], data["tok_dir"], out_dir, TrainConfig(**settings), threads=threads,
                       progress=progress)


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """A small slice of the real corpus, its tokenizer and token ids."""
    root = tmp_path_factory.mktemp("train_data")
    corpus.extract_wikipedia_text(root / "wiki.txt", max_chars=300_000)
    tok_dir = corpus.train_tokenizer(root / "wiki.txt", root / "tokenizer", vocab_size=VOCAB)
    corpus.encode_corpus(root / "wiki.txt", tok_dir, root / "tokens.npy")
    return {"tokens": root / "tokens.npy", "tok_dir": tok_dir}


@pytest.fixture(scope="session")
def runs(data, tmp_path_factory):
    """One tiny run per architecture: arch -> (out_dir, loss log)."""
    out = {}
    for arch in ARCHS:
        out_dir = tmp_path_factory.mktemp(f"run_{arch}")
        log = train(data, out_dir, arch=arch, **RUN)
        out[arch] = (out_dir, log)
    return out


@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoints_and_log_are_written(runs, arch):
    out_dir, log = runs[arch]
    for step in (0, 3, 6):
        step_dir = out_dir / f"step{step}"
        for name in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"):
            assert (step_dir / name).is_file(), step_dir / name
    assert sorted(p.name for p in out_dir.iterdir() if p.name.startswith("step")) == [
        "step0", "step3", "step6",
    ]
    on_disk = pd.read_csv(out_dir / "loss.tsv", sep="\t")
    assert list(on_disk.columns) == ["step", "loss", "lr", "tokens_seen", "eval_loss"]
    assert on_disk.step.tolist() == list(range(7)) == log.step.tolist()
    assert np.isfinite(on_disk.loss).all()
    assert on_disk.dropna(subset=["eval_loss"]).step.tolist() == [0, 3, 6]
    assert on_disk.tokens_seen.tolist() == [s * 4 * 16 for s in range(7)]
    # An untrained model predicts roughly uniformly over the vocabulary.
    assert abs(log.eval_loss.iloc[0] - np.log(VOCAB)) < 0.2


@pytest.mark.parametrize(
    "arch, parallel, act", [("gpt_neox", True, "gelu"), ("llama", None, "silu")]
)
def test_checkpoint_loads_with_auto_classes(runs, data, arch, parallel, act):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    step_dir = runs[arch][0] / "step6"
    model = AutoModelForCausalLM.from_pretrained(step_dir)
    config = model.config
    assert config.model_type == arch
    assert config.hidden_act == act
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size) == (32, 2, 64)
    assert config.vocab_size == VOCAB
    if arch == "gpt_neox":
        assert config.use_parallel_residual is parallel
    else:
        assert config.num_key_value_heads == config.num_attention_heads == 2
        assert type(model.model.norm).__name__ == "LlamaRMSNorm"
    assert next(model.parameters()).dtype == torch.float32
    tok = AutoTokenizer.from_pretrained(step_dir)
    original = AutoTokenizer.from_pretrained(data["tok_dir"])
    assert tok.get_vocab() == original.get_vocab()
    assert config.eos_token_id == tok.eos_token_id
    ids = tok("The history of", return_tensors="pt").input_ids
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], VOCAB)


@pytest.mark.parametrize("arch", ARCHS)
def test_step0_is_the_seeded_initialisation(runs, arch):
    from transformers import AutoModelForCausalLM

    model = build_model(arch, vocab_size=VOCAB, seed=0, **TINY)
    fresh = model.state_dict()
    loaded = AutoModelForCausalLM.from_pretrained(runs[arch][0] / "step0").state_dict()
    assert loaded.keys() == fresh.keys()
    for name, tensor in loaded.items():
        assert torch.equal(tensor, fresh[name]), name
    # The analyses read MLP weights straight from the file, where the family adapter finds them.
    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    with open_checkpoint(runs[arch][0] / "step0") as saved, open_checkpoint(runs[arch][0] / "step6") as trained:
        for layer in range(TINY["n_layers"]):
            parts = adapter.block_parts(blocks[layer])
            up, down = saved.mlp(layer)
            assert torch.equal(up, parts.w_up) and torch.equal(down, parts.w_down)
            trained_up, trained_down = trained.mlp(layer)
            assert trained_up.shape == (64, 32) and trained_down.shape == (32, 64)
            assert not torch.equal(trained_up, up)


@pytest.mark.parametrize("arch", ARCHS)
def test_same_seed_same_weights(runs, data, tmp_path, arch):
    log = train(data, tmp_path / "again", arch=arch, **RUN)
    pd.testing.assert_frame_equal(log, runs[arch][1])
    assert (tmp_path / "again/loss.tsv").read_bytes() == (runs[arch][0] / "loss.tsv").read_bytes()
    first = load_file(runs[arch][0] / "step6" / "model.safetensors")
    second = load_file(tmp_path / "again" / "step6" / "model.safetensors")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)

    other = train(data, tmp_path / "other", arch=arch, **{**RUN, "seed": 1, "save_steps": [6]})
    with open_checkpoint(runs[arch][0] / "step6") as one, open_checkpoint(tmp_path / "other" / "step6") as two:
        assert not torch.equal(one.mlp(0)[0], two.mlp(0)[0])
    assert not (tmp_path / "other" / "step0").exists() and len(other) == 7


@pytest.mark.parametrize("arch", ARCHS)
def test_loss_decreases(data, tmp_path, arch):
    run = {**RUN, "context": 32, "batch_size": 8, "lr": 3e-3, "warmup_steps": 5,
           "save_steps": [0, 40], "log_every": 10}
    log = train(data, tmp_path, arch=arch, **run)
    evals = log.dropna(subset=["eval_loss"]).set_index("step").eval_loss
    assert evals[40] < evals[0] - 0.5
    assert log.loss.iloc[-1] < log.loss.iloc[0] - 0.5


def test_lr_schedule():
    kw = dict(lr=1.0, warmup_steps=10, max_steps=110)
    assert lr_at(0, **kw) == pytest.approx(0.1)
    assert lr_at(9, **kw) == pytest.approx(1.0)
    assert lr_at(60, **kw) == pytest.approx(0.55)
    assert lr_at(110, **kw) == pytest.approx(0.1)
    rates = [lr_at(s, **kw) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))


def test_unknown_arch(data, tmp_path):
    with pytest.raises(ValueError, match=r"unknown arch 'gpt2'; supported: gpt_neox, llama"):
        build_model("gpt2", vocab_size=VOCAB, seed=0, **TINY)
    with pytest.raises(ValueError, match=r"unknown arch 'gpt2'"):
        train(data, tmp_path, **{**RUN, "arch": "gpt2"})


def test_bad_sizes_and_save_steps(data, tmp_path):
    with pytest.raises(ValueError, match="not divisible by n_heads"):
        build_model("llama", vocab_size=VOCAB, seed=0, **{**TINY, "n_heads": 3})
    with pytest.raises(ValueError, match="save_steps"):
        train(data, tmp_path, arch="llama",
                    **{**RUN, "save_steps": []})
    with pytest.raises(ValueError, match="save_steps"):
        train(data, tmp_path, arch="llama",
                    **{**RUN, "save_steps": [-1, 5]})


def test_nan_loss_names_arch_and_step(data, tmp_path):
    with pytest.raises(FloatingPointError, match=r"gpt_neox: training loss is (nan|inf) at step 1\b"):
        train(data, tmp_path, arch="gpt_neox",
                    **{**RUN, "lr": 1e30})


HAND_ACT = {"silu": F.silu, "relu": torch.relu, "gelu": F.gelu, "none": lambda x: x}


def _rms(x, weight, eps=1e-5):
    return weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _hand_logits(model, token, *, activation, residual, norm):
    """Logits of a one-token sequence, written out from the weights: with one position the
    attention is W_o W_v of the normed input (softmax over one key is 1, RoPE leaves V alone)."""
    sd = {k: v.double() for k, v in model.state_dict().items()}
    act = HAND_ACT[activation]

    def n(x, key):
        return _rms(x, sd[key]) if norm else x

    x = sd["model.embed_tokens.weight"][token]
    for layer in range(model.config.num_hidden_layers):
        p = f"model.layers.{layer}."
        a = sd[p + "self_attn.o_proj.weight"] @ (sd[p + "self_attn.v_proj.weight"] @ n(x, p + "input_layernorm.weight"))
        h = x + a if residual else a
        g = n(h, p + "post_attention_layernorm.weight")
        m = sd[p + "mlp.down_proj.weight"] @ (act(sd[p + "mlp.gate_proj.weight"] @ g) * (sd[p + "mlp.up_proj.weight"] @ g))
        x = h + m if residual else m
    return sd["lm_head.weight"] @ n(x, "model.norm.weight")


ABLATIONS = [dict(activation=a, residual=True, norm=True) for a in HIDDEN_ACT] + [
    dict(activation="silu", residual=r, norm=nm) for r, nm in itertools.product([True, False], repeat=2) if not (r and nm)
]


@pytest.mark.parametrize("ablation", ABLATIONS, ids=lambda a: "-".join(f"{k}={v}" for k, v in a.items()))
def test_live_model_matches_the_hand_written_forward(ablation):
    model = build_model("llama", vocab_size=VOCAB, seed=1, **TINY, **ablation).eval()
    assert model.config.hidden_act == HIDDEN_ACT[ablation["activation"]]
    with torch.no_grad():
        live = model(input_ids=torch.tensor([[7]])).logits[0, 0].double()
    expected = _hand_logits(model, 7, **ablation)
    torch.testing.assert_close(live, expected, rtol=1e-5, atol=1e-5)
    if ablation["norm"]:  # the switch matters: the standard model with these weights computes something else
        if ablation != dict(activation="silu", residual=True, norm=True):
            assert (live - _hand_logits(model, 7, activation="silu", residual=True, norm=True)).abs().max() > 1e-3
    else:
        assert not [name for name in model.state_dict() if "norm" in name]


def test_ablated_models_are_marked_in_their_config():
    for ablation in ABLATIONS:
        config = build_model("llama", vocab_size=VOCAB, seed=0, **TINY, **ablation).config
        marked = getattr(config, ABLATION_KEY, None)
        if ablation["residual"] and ablation["norm"]:
            assert marked is None
        else:
            assert marked == {"residual": ablation["residual"], "norm": ablation["norm"]}


def test_ablations_need_llama_and_known_activations():
    with pytest.raises(ValueError, match="arch 'llama' only"):
        build_model("gpt_neox", vocab_size=VOCAB, seed=0, **TINY, residual=False)
    with pytest.raises(ValueError, match="unknown activation 'tanh'; supported: silu, relu, gelu, none"):
        build_model("llama", vocab_size=VOCAB, seed=0, **TINY, activation="tanh")


def _train(data, out_dir, **kw):  # noqa: F811
    return train(data, out_dir, arch="llama", **{**RUN, "save_steps": [0, 3], **kw})


def test_a_no_residual_checkpoint_is_refused_as_a_model_but_read_as_weights(data, tmp_path):  # noqa: F811
    _train(data, tmp_path, residual=False)
    step = tmp_path / "step3"
    assert json.loads((step / "config.json").read_text())[ABLATION_KEY] == {"residual": False, "norm": True}
    manifest = {"path": str(step), "model": "nores", "revision": "step3", "step": 3}
    with pytest.raises(CheckpointError, match=r"trained without residual \(crosslayer_ablation.*only weight analyses"):
        load_model(manifest)
    result = measure_checkpoint(manifest, ContinuitySettings(("q", "gate", "down", "ov")))
    assert result["down.u1"].shape == (TINY["n_layers"], TINY["d_model"])


def test_a_no_norm_checkpoint_holds_no_norm_weights_and_is_refused(data, tmp_path):  # noqa: F811
    _train(data, tmp_path, norm=False)
    from safetensors.torch import load_file

    names = load_file(tmp_path / "step3" / "model.safetensors")
    assert not [name for name in names if "norm" in name]
    with pytest.raises(CheckpointError, match="trained without norm"):
        load_model({"path": str(tmp_path / "step3"), "model": "nonorm", "revision": "step3"})


def test_an_activation_ablation_is_a_standard_checkpoint(data, tmp_path):  # noqa: F811
    _train(data, tmp_path, activation="none")
    model, _ = load_model({"path": str(tmp_path / "step3"), "model": "none", "revision": "step3"})
    assert model.config.hidden_act == "linear"
    expected = _hand_logits(model, 11, activation="none", residual=True, norm=True)
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=torch.tensor([[11]])).logits[0, 0].double(), expected,
                                   rtol=1e-5, atol=1e-5)


def test_divergence_ends_the_run_when_asked(data, tmp_path):  # noqa: F811
    log = _train(data, tmp_path, lr=1e30, save_steps=[0, 3, 6], stop_on_divergence=True)
    assert not torch.isfinite(torch.tensor(log.loss.iloc[-1]))
    assert torch.isfinite(torch.tensor(log.loss.iloc[:-1].to_numpy())).all()
    diverged_at = int(log.step.iloc[-1])
    assert 0 < diverged_at <= 6
    saved = sorted(int(p.name[4:]) for p in tmp_path.glob("step*"))
    assert saved and max(saved) <= diverged_at
    assert (tmp_path / "loss.tsv").is_file()
    outcome = training_outcome(log, steps=6)
    assert outcome == {"steps": 6, "diverged_step": diverged_at, "eval_loss": None, "perplexity": None}


def test_outcome_of_a_finished_run_is_its_last_held_out_loss(data, tmp_path):  # noqa: F811
    log = _train(data, tmp_path)
    outcome = training_outcome(log, steps=3)
    assert outcome["diverged_step"] is None and outcome["eval_loss"] == log.eval_loss.iloc[-1]
    assert outcome["perplexity"] == pytest.approx(np.exp(outcome["eval_loss"]))
    with pytest.raises(ValueError, match="ends at step 3, not at the run's 5 steps"):
        training_outcome(log, steps=5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_training_on_cuda_follows_the_cpu_run(data, tmp_path):  # noqa: F811
    cpu = _train(data, tmp_path / "cpu", activation="relu")
    cuda = _train(data, tmp_path / "cuda", activation="relu", device="cuda")
    np.testing.assert_allclose(cuda.loss, cpu.loss, rtol=1e-3)  # same init and batches; float32 kernels differ
    assert json.loads((tmp_path / "cuda/train_args.json").read_text())["device"] == "cuda"


def test_cuda_without_a_gpu_says_so(data, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="train.device is 'cuda' but torch .* set train.device: cpu"):
        _train(data, tmp_path, device="cuda")
