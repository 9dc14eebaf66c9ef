"""Paper 004's per-checkpoint dynamics (crosslayer.dynamics.checkpoint): the mean Jacobian and the
per-sample statistics against autograd of the real blocks; the ``block_jacobians`` job's contract
(JacobianSettings, sample_token_ids, measure_checkpoint and the errors it names the checkpoint or the
samples file in)."""

import dataclasses
import re

import numpy as np
import pytest
import torch
from tiny_checkpoints import save_checkpoint, text
from transformers import LlamaConfig, LlamaForCausalLM

from crosslayer.data.samples import write_samples
from crosslayer.dynamics.checkpoint import (
    STAT_NAMES,
    JacobianSettings,
    block_jacobian_stats,
    measure_checkpoint,
    sample_token_ids,
)
from crosslayer.errors import CheckpointError
from crosslayer.jacobians.autograd import block_jacobians_autograd, single_token_block_fn
from crosslayer.linalg.conditioning import CONDITION_METHOD
from crosslayer.models.loading import load_model
from crosslayer.models.residual import record_residual_stream


@pytest.fixture(scope="module")
def model_and_acts():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=64, vocab_size=101)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))  # norm gains away from 1
    token_ids = [torch.randint(0, 101, (n,)).tolist() for n in (3, 5, 7, 4, 6)]
    return model, record_residual_stream(model, token_ids)["acts"]


STATS = [name + suffix for name in STAT_NAMES for suffix in ("", "_res")]


def test_mean_and_per_sample_stats_match_autograd_of_the_real_blocks(model_and_acts):
    model, acts = model_and_acts
    result = block_jacobian_stats(model, acts, chunk_bytes=1)  # one sample per chunk
    N, d = acts.shape[0], acts.shape[2]
    assert result["mean"].shape == (2, d, d)
    for layer, block in enumerate(model.model.layers):
        x = torch.from_numpy(acts[:, 2 * layer])
        J = block_jacobians_autograd(single_token_block_fn(block, model), x).double().numpy()
        assert np.allclose(result["mean"][layer], J.mean(axis=0), rtol=1e-4, atol=1e-5)
        s = np.linalg.svd(J, compute_uv=False)
        s_res = np.linalg.svd(J - np.eye(d), compute_uv=False)
        for suffix, sv in (("", s), ("_res", s_res)):
            assert np.allclose(result["frobenius" + suffix][layer], np.sqrt((sv**2).sum(1)), rtol=1e-4)
            pr = (sv**2).sum(1) ** 2 / (sv**4).sum(1)
            assert np.allclose(result["participation_ratio" + suffix][layer], pr, rtol=1e-4)
            assert np.allclose(result["condition_number" + suffix][layer], sv[:, 0] / sv[:, -1], rtol=1e-3)
    for name in STAT_NAMES:
        assert result[name].shape == (2, N)
    # how each condition number was computed is recorded: here (kappa ~1e1-1e3 at d = 32) the
    # eigenvalues of J^T J for J, and inverse iteration or the SVD for J - I
    for suffix in ("", "_res"):
        path = result["condition_path" + suffix]
        assert path.shape == (2, N) and path.dtype == np.int8 and set(np.unique(path)) <= {0, 1, 2}
    assert str(result["condition_method"]) == CONDITION_METHOD and CONDITION_METHOD.startswith("float64: s_max from")


def test_chunking_does_not_change_results(model_and_acts):
    model, acts = model_and_acts
    one, many = (block_jacobian_stats(model, acts, chunk_bytes=b) for b in (1, 1 << 30))
    # float32 GEMMs of other batch sizes round differently (by ~eps of the largest entry), and a
    # condition number amplifies that by itself (~1e3 here)
    eps = np.finfo(np.float32).eps
    for key in ("mean", *STATS):
        atol = 10 * eps * np.abs(many[key]).max()
        rtol = 1e-4 if key.startswith("condition") else 10 * eps
        assert np.allclose(one[key], many[key], rtol=rtol, atol=atol), key


def test_rejects_activations_of_another_model(model_and_acts):
    model, acts = model_and_acts
    with pytest.raises(ValueError, match=r"\(N, 2L = 4, d\)"):
        block_jacobian_stats(model, acts[:, :2])


def test_autograd_reference_path_agrees_with_the_closed_form(model_and_acts):
    model, acts = model_and_acts
    ours = block_jacobian_stats(model, acts)
    ref = block_jacobian_stats(model, acts, JacobianSettings(method="functional"), chunk_bytes=1)
    for key in ("mean", *STATS):
        rtol = 1e-3 if key.startswith("condition") else 1e-4
        assert np.allclose(ours[key], ref[key], rtol=rtol, atol=1e-5), key


def test_per_sample_stats_get_the_tensor_chunk_not_a_host_copy(model_and_acts, monkeypatch):
    import crosslayer.dynamics.checkpoint as dynamics

    seen = []
    real = dynamics.per_sample_stats_pair

    def spy(J, **kwargs):
        seen.append((type(J), kwargs))
        return real(J, **kwargs)

    monkeypatch.setattr(dynamics, "per_sample_stats_pair", spy)
    model, acts = model_and_acts
    dynamics.block_jacobian_stats(model, acts, JacobianSettings(per_sample_dtype="float32", condition_number=False))
    assert seen and all(kind is torch.Tensor for kind, _ in seen)
    assert all(kw["dtype"] == "float32" and kw["condition"] is False for _, kw in seen)


def test_condition_false_leaves_the_condition_numbers_out(model_and_acts):
    model, acts = model_and_acts
    full = block_jacobian_stats(model, acts)
    lean = block_jacobian_stats(model, acts, JacobianSettings(condition_number=False))
    assert set(full) - set(lean) == {"condition_number", "condition_number_res", "condition_path",
                                     "condition_path_res", "condition_method"}
    for key in lean:
        assert np.array_equal(lean[key], full[key]), key


def test_float32_spectra_within_rounding_of_float64(model_and_acts):
    model, acts = model_and_acts
    f64 = block_jacobian_stats(model, acts)
    f32 = block_jacobian_stats(model, acts, JacobianSettings(per_sample_dtype=torch.float32))
    # the a-priori float32 bounds of tests/linalg/test_conditioning.py (d eps for norms and 4 d eps for the
    # participation ratio; d eps kappa for a condition number), with d = 32 here
    d, eps = acts.shape[2], np.finfo(np.float32).eps
    assert np.array_equal(f32["mean"], f64["mean"])
    for key in STATS:
        rtol = d * eps * (f64[key] if key.startswith("condition") else 4)
        assert np.all(np.abs(f32[key] / f64[key] - 1) <= rtol), key


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("spectra_dtype", ["float64", "float32"])
def test_cuda_jacobians_and_spectra_match_cpu(model_and_acts, spectra_dtype):
    import copy

    model, acts = model_and_acts
    cpu = block_jacobian_stats(model, acts)
    cuda = block_jacobian_stats(copy.deepcopy(model).cuda(), acts, JacobianSettings(per_sample_dtype=spectra_dtype))
    for key in ("mean", *STATS):  # float32 Jacobians from other GEMM kernels: condition numbers amplify by kappa
        rtol = 1e-3 if key.startswith("condition") else 1e-4
        assert np.allclose(cuda[key], cpu[key], rtol=rtol, atol=1e-5), key


# --------------------------------------------------------------------------- the job's contract


@pytest.mark.parametrize("field, value, key", [
    ("n_samples", 0, "dynamics.n_samples"), ("min_tokens", 1.5, "dynamics.min_tokens"),
    ("max_tokens", True, "dynamics.max_tokens"), ("min_tokens", 200, "dynamics.max_tokens"),
    ("method", "autograd", "dynamics.jacobian_method"), ("per_sample_dtype", "float16", "dynamics.per_sample_dtype"),
    ("condition_number", 1, "dynamics.condition_number"), ("folds", 1, "dynamics.folds"), ("folds", 33, "dynamics.folds"),
    ("folds", -1, "dynamics.folds"),
])
def test_settings_refuse_a_bad_value_naming_its_key(field, value, key):
    with pytest.raises(ValueError, match=rf"^{re.escape(key)} "):
        JacobianSettings(**{field: value})


def test_settings_keep_a_torch_dtype_by_its_name():
    assert JacobianSettings(per_sample_dtype=torch.float32).per_sample_dtype == "float32"
    with pytest.raises(dataclasses.FrozenInstanceError):
        JacobianSettings().method = "jacrev"


def test_sample_token_ids_takes_the_first_long_enough_texts_cut_and_tokenizes_no_further():
    seen = []

    def tokenizer(t):
        seen.append(t)
        return {"input_ids": t.split()}

    texts = [text(2), text(6), text(3), text(9), text(5), text(7)]
    picked, token_ids = sample_token_ids(tokenizer, texts, JacobianSettings(n_samples=3, min_tokens=3, max_tokens=4))
    assert picked == [1, 2, 3] and [len(ids) for ids in token_ids] == [4, 3, 4] and seen == texts[:4]


def test_measure_checkpoint_records_then_takes_the_jacobians_there(tmp_path):
    manifest = save_checkpoint("llama", tmp_path / "ckpt")
    write_samples([text(3), text(6, start=10), text(8, start=30), text(2), text(7, start=50)], tmp_path / "s.jsonl")
    settings = JacobianSettings(n_samples=3, min_tokens=4, max_tokens=6, condition_number=False)
    activations, jacobians = measure_checkpoint(manifest, settings, samples=tmp_path / "s.jsonl")
    model, _ = load_model(manifest)
    recorded = record_residual_stream(model, [list(range(10, 16)), list(range(30, 36)), list(range(50, 56))])
    assert list(activations) == [*recorded, "sample_ids"] and activations["sample_ids"].tolist() == [1, 2, 4]
    np.testing.assert_array_equal(activations["acts"], recorded["acts"])
    direct = block_jacobian_stats(model, recorded["acts"], settings)
    assert list(jacobians) == list(direct) and "condition_number" not in jacobians
    for key in direct:
        np.testing.assert_array_equal(jacobians[key], direct[key], err_msg=key)


def test_too_few_long_texts_name_the_samples_file(tmp_path):
    manifest = save_checkpoint("gpt_neox", tmp_path / "ckpt")
    write_samples([text(3), text(2)], tmp_path / "short.jsonl")
    with pytest.raises(CheckpointError, match=r"^model 'm' revision 'step7' file '.*short\.jsonl': only 0 of 2 "
                                              r"samples have >= min_tokens=4"):
        measure_checkpoint(manifest, JacobianSettings(n_samples=2, min_tokens=4, max_tokens=6),
                           samples=tmp_path / "short.jsonl")


def test_a_checkpoint_without_tokenizer_is_refused_before_the_samples_are_read(tmp_path):
    # transformers 5 would build an empty tokenizer and the error would blame the samples
    manifest = save_checkpoint("gpt_neox", tmp_path / "ckpt", tokenizer=False)
    with pytest.raises(CheckpointError, match=rf"^model 'm' revision 'step7' file '{re.escape(manifest['path'])}': "
                                              r"no tokenizer in the checkpoint \(none of .*tokenizer\.json"):
        measure_checkpoint(manifest, samples=tmp_path / "no_samples.jsonl")


def test_fold_means_are_the_mean_jacobians_of_each_folds_samples(model_and_acts):
    """Fold k holds samples k, k + K, ...: its mean is the whole computation run on those samples
    alone, and the folds' means weighted by their sizes give the whole sample's mean."""
    model, acts = model_and_acts
    result = block_jacobian_stats(model, acts, JacobianSettings(folds=2), chunk_bytes=1)
    assert result["fold_means"].shape == (2, 2, *result["mean"].shape[1:])
    assert result["fold_sizes"].tolist() == [3, 2]
    for k in range(2):
        alone = block_jacobian_stats(model, acts[k::2], JacobianSettings())["mean"]
        np.testing.assert_allclose(result["fold_means"][k], alone, rtol=1e-5, atol=1e-6)
    pooled = np.tensordot(result["fold_sizes"], result["fold_means"].astype(np.float64), axes=1) / len(acts)
    np.testing.assert_allclose(pooled, result["mean"], rtol=1e-5, atol=1e-6)
    assert "fold_means" not in block_jacobian_stats(model, acts, JacobianSettings())  # folds 0: none kept
    with pytest.raises(ValueError, match="2 samples per fold"):
        block_jacobian_stats(model, acts, JacobianSettings(folds=3))
