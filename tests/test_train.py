"""Tiny offline language-model training and its Hugging Face checkpoints."""

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from crosslayer.data import corpus
from crosslayer.models.train import ARCHS, TrainConfig, build_model, lr_at, mlp_weight_names, train_model

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

    fresh = build_model(arch, vocab_size=VOCAB, seed=0, **TINY).state_dict()
    loaded = AutoModelForCausalLM.from_pretrained(runs[arch][0] / "step0").state_dict()
    assert loaded.keys() == fresh.keys()
    for name, tensor in loaded.items():
        assert torch.equal(tensor, fresh[name]), name
    # The analyses read MLP weights straight from the file, under these names.
    saved = load_file(runs[arch][0] / "step0" / "model.safetensors")
    trained = load_file(runs[arch][0] / "step6" / "model.safetensors")
    for layer in range(TINY["n_layers"]):
        up, down = mlp_weight_names(arch, layer)
        assert torch.equal(saved[up], fresh[up]) and torch.equal(saved[down], fresh[down])
        assert trained[up].shape == (64, 32) and trained[down].shape == (32, 64)
        assert not torch.equal(trained[up], saved[up])


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
    third = load_file(tmp_path / "other" / "step6" / "model.safetensors")
    assert not torch.equal(first[mlp_weight_names(arch, 0)[0]], third[mlp_weight_names(arch, 0)[0]])
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
