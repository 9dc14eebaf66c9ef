"""Gate-conditioned alignment (crosslayer.alignment.gated): the mean gate and the gate-conditioned MLP
product against the live MLP; the ``gated_alignment`` job's contract (measure_gated_checkpoint and the
errors it names the checkpoint in)."""

import re

import numpy as np
import pytest
import torch
from tiny_checkpoints import save_checkpoint
from tiny_families import VOCAB, tiny_model

from crosslayer.alignment.gated import gated_alignment, mean_gate, measure_gated_checkpoint
from crosslayer.alignment.measure import AlignmentSettings
from crosslayer.errors import CheckpointError
from crosslayer.linalg.subspace import subspace_overlap, top_singular_subspaces
from crosslayer.models.adapters import adapter_for
from crosslayer.models.loading import load_model
from crosslayer.models.residual import record_residual_stream

GATE_FN = {"llama": "act_fn", "olmo2": "act_fn", "gemma": "act_fn", "gemma3_text": "act_fn", "qwen3": "act_fn",
           "phi3": "activation_fn", "gemma4_text": "act_fn", "gemma4": "act_fn"}  # Gemma 4: MLPs of two widths


@pytest.mark.parametrize("family", list(GATE_FN))
def test_mean_gate_and_gated_product_match_the_live_mlp(family):
    """mean_gate from the recorded residual stream equals the mean of the live MLP's own gate
    activation (hooked at the last token of each sample), and the gate-conditioned product is
    the mean over samples of W_down diag(g_i) W_up."""
    torch.manual_seed(0)
    model = tiny_model(family)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    g = torch.Generator().manual_seed(1)
    samples = [torch.randint(1, VOCAB, (n,), generator=g) for n in (5, 9, 3, 7)]
    acts = record_residual_stream(model, samples, batch_size=2)["acts"]
    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    live = {}
    for layer, block in enumerate(blocks):
        getattr(block.mlp, GATE_FN[family]).register_forward_hook(
            lambda m, a, out, layer=layer: live.setdefault(layer, []).append(out[0, -1].double()))
    with torch.no_grad():
        for ids in samples:
            model(input_ids=ids[None])
    result = gated_alignment(model, acts, AlignmentSettings(k=4, svd_method="full"))
    for layer, block in enumerate(blocks):
        want = torch.stack(live[layer])  # (N, d_ff)
        parts = adapter.gate_parts(block)
        got = mean_gate(parts, torch.from_numpy(acts[:, 2 * layer + 1]))
        torch.testing.assert_close(got, want.mean(0), rtol=1e-5, atol=1e-6)
        width = want.shape[1]
        np.testing.assert_allclose(result["mean_gate"][layer, :width], want.mean(0).numpy(), rtol=1e-5, atol=1e-6)
        assert np.isnan(result["mean_gate"][layer, width:]).all()  # padding of narrower MLPs
        product = torch.stack([parts.w_down.double() @ (gi[:, None] * parts.w_up.double()) for gi in want]).mean(0)
        U, s, V = top_singular_subspaces(product.numpy(), 4, method="full")
        np.testing.assert_allclose(result["singular_values"][layer], s, rtol=1e-4)
        assert subspace_overlap(result["left"][layer], U) > 1 - 1e-5
        assert subspace_overlap(result["right"][layer], V) > 1 - 1e-5


def test_gated_alignment_refuses_an_mlp_without_a_gate():
    with pytest.raises(ValueError, match="gpt2: the MLP has no gate"):
        gated_alignment(tiny_model("gpt2"), np.zeros((2, 6, 32)))


# --------------------------------------------------------------------------- the job's contract


def test_measure_gated_checkpoint_is_gated_alignment_at_the_recorded_stream(tmp_path):
    manifest = save_checkpoint("llama", tmp_path / "ckpt", tokenizer=False)
    model, _ = load_model(manifest, tokenizer=False)
    acts = record_residual_stream(model, [[1, 2, 3, 4], [5, 6, 7], [8, 9, 10, 11, 12]])["acts"]
    np.savez(tmp_path / "activations.npz", acts=acts)
    settings = AlignmentSettings(k=3, svd_method="full")
    result = measure_gated_checkpoint(manifest, settings, activations=tmp_path / "activations.npz")
    direct = gated_alignment(model, acts, settings)
    assert list(result) == [*direct, "gated", "step", "k"]
    assert all(np.array_equal(result[key], direct[key], equal_nan=True) for key in direct)
    assert result["gated"] and (result["step"], result["k"]) == (7, 3)


def test_a_family_without_a_gate_is_measured_as_none(tmp_path):
    manifest = save_checkpoint("gpt_neox", tmp_path, tokenizer=False)
    assert measure_gated_checkpoint(manifest, activations=tmp_path / "never_read.npz") == {"gated": False, "step": 7}


def test_activations_of_another_model_name_the_checkpoint(tmp_path):
    manifest = save_checkpoint("llama", tmp_path / "ckpt", tokenizer=False)
    np.savez(tmp_path / "activations.npz", acts=np.zeros((2, 4, 32), np.float32))  # 2 layers' worth, not 3
    with pytest.raises(CheckpointError, match=rf"^model 'm' revision 'step7' file '{re.escape(manifest['path'])}': "
                                              r"`acts` must be \(N, 2L = 6, d\)"):
        measure_gated_checkpoint(manifest, AlignmentSettings(k=3), activations=tmp_path / "activations.npz")
