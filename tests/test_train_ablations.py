"""Paper 003's transformer ablations: MLP activation, no residual connections, no norms."""

import itertools
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_train import RUN, TINY, VOCAB, data, train  # noqa: F401  (the shared corpus fixture)

from crosslayer.continuity.measure import continuity_checkpoint
from crosslayer.errors import CheckpointError
from crosslayer.models.loading import ABLATION_KEY, load_model
from crosslayer.models.train import HIDDEN_ACT, build_model, training_outcome

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
    result = continuity_checkpoint(manifest, projections=("q", "gate", "down", "ov"))
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
