"""Paper 000's alignment of one checkpoint (crosslayer.alignment.measure): shared top subspaces
against direct SVDs; the ``mlp_alignment`` job's contract (AlignmentSettings, measure_checkpoint and
the errors it names the checkpoint in)."""

import dataclasses
import re

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group
from tiny_checkpoints import save_checkpoint

from crosslayer.alignment.measure import AlignmentSettings, measure_checkpoint, mlp_alignment, mlp_product
from crosslayer.errors import CheckpointError
from crosslayer.linalg.subspace import subspace_overlap, top_singular_subspaces
from crosslayer.models.weights import open_checkpoint


def test_mlp_product_shape_check():
    with pytest.raises(ValueError, match="up"):
        mlp_product(torch.ones(8, 4), torch.ones(8, 4))
    up, down = torch.randn(8, 4), torch.randn(4, 8)
    assert torch.allclose(mlp_product(up, down), down @ up)


def layers_sharing_top_subspace(d, k, L, seed):
    """L layers whose MLP products share the same top-k left subspace but nothing else."""
    rng = np.random.default_rng(seed)
    shared = ortho_group.rvs(d, random_state=rng)[:, :k]
    layers = []
    for _ in range(L):
        rest = np.linalg.qr(rng.standard_normal((d, d)) - shared @ (shared.T @ rng.standard_normal((d, d))))[0]
        U = np.hstack([shared, np.linalg.qr((np.eye(d) - shared @ shared.T) @ rest)[0][:, : d - k]])
        V = ortho_group.rvs(d, random_state=rng)
        s = np.concatenate([np.linspace(8, 4, k), np.linspace(1, 0.1, d - k)])
        up = torch.as_tensor(V.T, dtype=torch.float32)  # (d_ff = d, d)
        down = torch.as_tensor(U * s, dtype=torch.float32)  # (d, d_ff)
        layers.append((up, down))
    return layers


def test_mlp_alignment_recovers_shared_subspace_and_matches_direct_svd():
    d, k, L = 40, 4, 3
    layers = layers_sharing_top_subspace(d, k, L, seed=0)
    result = mlp_alignment(lambda l: layers[l], L, AlignmentSettings(k=k))
    assert result["left"].shape == (L, d, k) and result["singular_values"].shape == (L, k + 1)
    assert np.allclose(result["overlap_left"], 1.0, atol=1e-5)  # same top-k output space
    assert np.all(result["overlap_right"][np.triu_indices(L, 1)] < 0.8)  # random input spaces
    assert np.allclose(np.diag(result["overlap_right"]), 1.0, atol=1e-5)
    up, down = layers[1]
    U, s, V = top_singular_subspaces((down @ up).double().numpy(), k, method="full")
    assert subspace_overlap(result["left"][1], U) > 0.9999 and subspace_overlap(result["right"][1], V) > 0.9999
    # the cross overlap pairs layer i's write space with layer j's read space
    assert result["overlap_cross"][0, 2] == pytest.approx(subspace_overlap(result["left"][0], result["right"][2]), abs=1e-6)
    assert not result["float64_recomputed"].any()


def test_mlp_alignment_recomputes_in_float64_when_gap_is_small():
    d = 12
    s = np.array([5.0, 4.0, 3.0, 3.0] + [1.0] * (d - 4))  # s_3 == s_4: no gap after k = 3
    up = torch.eye(d)
    down = torch.as_tensor(np.diag(s), dtype=torch.float32)
    result = mlp_alignment(lambda l: (up, down), 2, AlignmentSettings(k=3, gap_tol=1e-3))
    assert result["float64_recomputed"].all()
    assert result["relative_gap"] == pytest.approx([0.0, 0.0], abs=1e-6)


def test_mlp_alignment_full_and_arpack_agree():
    layers = layers_sharing_top_subspace(30, 3, 2, seed=5)
    a = mlp_alignment(lambda l: layers[l], 2, AlignmentSettings(k=3, svd_method="arpack"))
    f = mlp_alignment(lambda l: layers[l], 2, AlignmentSettings(k=3, svd_method="full"))
    for key in ("overlap_left", "overlap_right", "overlap_cross", "singular_values"):
        assert np.allclose(a[key], f[key], atol=1e-5), key


@pytest.mark.parametrize("d_ff", [2, 16])
def test_k_beyond_the_numerical_rank_is_refused_by_layer(d_ff):
    # d_ff = 2 < k: the product has rank 2. d_ff = 16 but up has rank 2: the same, hidden.
    rng = np.random.default_rng(0)
    d, k = 16, 3
    up = torch.as_tensor(rng.standard_normal((d_ff, 2)) @ rng.standard_normal((2, d)), dtype=torch.float32)
    down = torch.as_tensor(rng.standard_normal((d, d_ff)), dtype=torch.float32)
    good = layers_sharing_top_subspace(d, k, 1, seed=1)[0]
    layers = [good, (up, down)]
    for method in ("arpack", "full"):
        with pytest.raises(ValueError, match=r"layer 1: W_down @ W_up has numerical rank 2 < k = 3 .*alignment\.k"):
            mlp_alignment(lambda l: layers[l], 2, AlignmentSettings(k=k, svd_method=method))
    assert mlp_alignment(lambda l: layers[l], 2, AlignmentSettings(k=2))["singular_values"].shape == (2, 3)


# --------------------------------------------------------------------------- the job's contract


@pytest.mark.parametrize("field, value", [("k", 0), ("k", 2.5), ("k", True), ("svd_method", "randomized"),
                                          ("gap_tol", -1e-3), ("gap_tol", "0.1")])
def test_settings_refuse_a_bad_value_naming_its_key(field, value):
    with pytest.raises(ValueError, match=rf"^alignment\.{field} must be"):
        AlignmentSettings(**{field: value})


def test_settings_are_frozen_and_default_to_the_paper():
    settings = AlignmentSettings()
    assert (settings.k, settings.svd_method, settings.gap_tol) == (10, "arpack", 1e-3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.k = 3


def test_measure_checkpoint_is_mlp_alignment_of_the_saved_weights(tmp_path):
    manifest = save_checkpoint("llama", tmp_path)
    settings = AlignmentSettings(k=3, svd_method="full")
    result = measure_checkpoint(manifest, settings)
    with open_checkpoint(tmp_path) as reader:
        direct = mlp_alignment(reader.mlp, reader.geometry.n_layers, settings)
    assert list(result) == [*direct, "d_model", "k", "step"]
    assert all(np.array_equal(result[key], direct[key]) for key in direct)
    assert (result["d_model"], result["k"], result["step"]) == (32, 3, 7)


def test_a_k_beyond_the_rank_bound_names_the_checkpoint(tmp_path):
    manifest = save_checkpoint("llama", tmp_path, tokenizer=False)
    with pytest.raises(CheckpointError, match=rf"^model 'm' revision 'step7' file '{re.escape(str(tmp_path))}': "
                                              r"alignment\.k = 32 must be below d_model = 32"):
        measure_checkpoint(manifest, AlignmentSettings(k=32))


def test_a_refused_layer_names_the_checkpoint(tmp_path):
    def zero_up(model):
        with torch.no_grad():
            model.model.layers[1].mlp.up_proj.weight.zero_()

    manifest = save_checkpoint("llama", tmp_path, tokenizer=False, edit=zero_up)
    with pytest.raises(CheckpointError, match=rf"^model 'm' revision 'step7' file '{re.escape(str(tmp_path))}': "
                                              r"layer 1: W_down @ W_up has numerical rank 0 < k = 3") as caught:
        measure_checkpoint(manifest, AlignmentSettings(k=3, svd_method="full"))
    assert isinstance(caught.value.__cause__, ValueError)
