import math

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group, pearsonr
from tiny_families import VOCAB, tiny_model

from crosslayer.alignment.measure import checkpoint_alignment, gated_alignment, mean_gate, mlp_product
from crosslayer.alignment.tables import (
    adjacent_overlap,
    cascade_statistics,
    first_peak_step,
    overlap_at_distance,
    table1_metrics,
)
from crosslayer.linalg.subspace import subspace_overlap, top_singular_subspaces
from crosslayer.models.adapters import adapter_for
from crosslayer.models.residual import record_residual_stream


def distance_decay(L):
    """overlap[i, j] = 1 / (1 + |i - j|): every distance has a known value."""
    i = np.arange(L)
    return 1.0 / (1.0 + np.abs(i[:, None] - i[None, :]))


def test_table1_on_constructed_matrix():
    row = table1_metrics(distance_decay(7), threshold=0.3, distances=(1, 3, 5))
    # pairs at distance 1 (0.5, 6 pairs) and 2 (0.333, 5 pairs) exceed 0.3; 21 pairs in all
    assert row == {
        "pairs_above": 11,
        "n_pairs": 21,
        "fraction_above": pytest.approx(11 / 21),
        "mean_d1": pytest.approx(0.5),
        "mean_d3": pytest.approx(0.25),
        "mean_d5": pytest.approx(1 / 6),
    }


def test_table1_uses_only_upper_triangle_and_strict_threshold():
    O = np.full((4, 4), 0.15)
    O[3, 0] = 0.9  # lower triangle ignored
    row = table1_metrics(O, threshold=0.15, distances=(1, 5))
    assert row["pairs_above"] == 0 and row["n_pairs"] == 6
    assert math.isnan(row["mean_d5"])  # no pair 5 layers apart in a 4-layer model


def test_overlap_at_distance_and_adjacent():
    O = distance_decay(5)
    assert np.allclose(adjacent_overlap(O), [0.5] * 4)
    assert overlap_at_distance(O, 4).tolist() == [0.2]
    assert overlap_at_distance(O, 9).size == 0
    with pytest.raises(ValueError, match="square"):
        overlap_at_distance(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="distance"):
        overlap_at_distance(O, 0)


@pytest.mark.parametrize(
    "values, min_height, expected",
    [
        ([0.1, 0.3, 0.2, 0.5], -math.inf, 10),  # first local maximum, not the global one
        ([0.1, 0.2, 0.3, 0.4], -math.inf, 1000),  # still rising: the last step
        ([0.5, 0.4, 0.3, 0.2], -math.inf, 0),  # falling from the start
        ([0.1, 0.3, 0.2, 0.5], 0.4, 1000),  # the small early bump is under min_height
        ([0.1, 0.1, 0.1, 0.1], 0.2, math.nan),
        ([0.1, 0.3, 0.3, 0.2], -math.inf, 100),  # plateau: the peak is where it starts to fall
    ],
)
def test_first_peak_step(values, min_height, expected):
    got = first_peak_step([0, 10, 100, 1000], values, min_height=min_height)
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_first_peak_rejects_unsorted_steps():
    with pytest.raises(ValueError, match="increasing"):
        first_peak_step([0, 5, 3], [1, 2, 3])


def test_cascade_statistics_planted_backward_cascade():
    steps = [0, 100, 500, 2000]
    adjacent = np.array(  # boundaries 0..4; the final one (4) peaks first, then 3 and 2, then 1 and 0
        [
            [0.2, 0.2, 0.3, 0.6],
            [0.2, 0.2, 0.4, 0.6],
            [0.2, 0.3, 0.6, 0.5],
            [0.2, 0.4, 0.7, 0.5],
            [0.2, 0.8, 0.7, 0.7],
        ]
    )
    per_boundary, fit = cascade_statistics(steps, adjacent, reference_step=500, min_height=0.25)
    assert per_boundary["first_peak_step"].tolist() == [2000, 2000, 500, 500, 100]
    assert per_boundary["distance_from_final"].tolist() == [4, 3, 2, 1, 0]
    assert per_boundary["overlap_at_reference"].tolist() == [0.3, 0.4, 0.6, 0.7, 0.7]
    r, p = pearsonr([4, 3, 2, 1, 0], [0.3, 0.4, 0.6, 0.7, 0.7])
    assert fit == {"reference_step": 500, "n_boundaries": 5, "pearson_r": pytest.approx(r), "pearson_p": pytest.approx(p)}
    assert r < -0.9  # weaker with distance from the final boundary


def test_cascade_statistics_exact_linear_trend_and_errors():
    steps = [0, 1]
    adjacent = np.column_stack([np.zeros(4), [0.1, 0.2, 0.3, 0.4]])
    _, fit = cascade_statistics(steps, adjacent, reference_step=1)
    assert fit["pearson_r"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="reference_step"):
        cascade_statistics(steps, adjacent, reference_step=7)
    _, flat = cascade_statistics(steps, np.zeros((4, 2)), reference_step=1)
    assert math.isnan(flat["pearson_r"])


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


def test_checkpoint_alignment_recovers_shared_subspace_and_matches_direct_svd():
    d, k, L = 40, 4, 3
    layers = layers_sharing_top_subspace(d, k, L, seed=0)
    result = checkpoint_alignment(lambda l: layers[l], L, k=k)
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


def test_checkpoint_alignment_recomputes_in_float64_when_gap_is_small():
    d = 12
    s = np.array([5.0, 4.0, 3.0, 3.0] + [1.0] * (d - 4))  # s_3 == s_4: no gap after k = 3
    up = torch.eye(d)
    down = torch.as_tensor(np.diag(s), dtype=torch.float32)
    result = checkpoint_alignment(lambda l: (up, down), 2, k=3, gap_tol=1e-3)
    assert result["float64_recomputed"].all()
    assert result["relative_gap"] == pytest.approx([0.0, 0.0], abs=1e-6)


def test_checkpoint_alignment_full_and_arpack_agree():
    layers = layers_sharing_top_subspace(30, 3, 2, seed=5)
    a = checkpoint_alignment(lambda l: layers[l], 2, k=3, method="arpack")
    f = checkpoint_alignment(lambda l: layers[l], 2, k=3, method="full")
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
            checkpoint_alignment(lambda l: layers[l], 2, k=k, method=method)
    assert checkpoint_alignment(lambda l: layers[l], 2, k=2)["singular_values"].shape == (2, 3)


def test_table1_distances_beyond_the_depth_are_refused():
    from crosslayer.alignment.tables import summarize_model

    overlap = np.stack([distance_decay(4)] * 2)
    data = {f"overlap_{s}": overlap for s in ("left", "right", "cross")}
    data.update(steps=np.array([0, 1]), d_model=16, k=2, singular_values=np.ones((2, 4, 3)))
    with pytest.raises(ValueError, match=r"alignment\.distances: \[4, 5\] must be below the model's 4 layers"):
        summarize_model(data, reference_step=1, distances=(1, 4, 5), baseline_draws=10)
    assert len(summarize_model(data, reference_step=1, distances=(1, 3), baseline_draws=10)["table1"]) == 6


# --------------------------------------------------------------------------- gate-conditioned product

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
    result = gated_alignment(model, acts, k=4, method="full")
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
