import math

import numpy as np
import pytest
import torch
from scipy.special import gamma
from tiny_families import tiny_model

from crosslayer.continuity.measure import (
    PROJECTIONS,
    checkpoint_continuity,
    ov_composite,
    stack_continuity,
    weighted_alignment,
)
from crosslayer.continuity.statistics import (
    adjacent_cosines,
    checkpoint_summary,
    expected_abs_cosine,
    principal_pca,
    random_evr_baseline,
    sign_aligned,
)


def _stack(seed, L=6, shape=(12, 8), decay=0.6):
    """L random matrices with well-separated singular values (so the singular vectors are pinned)."""
    rng = np.random.default_rng(seed)
    r = min(shape)
    out = []
    for _ in range(L):
        U, _ = np.linalg.qr(rng.standard_normal((shape[0], r)))
        V, _ = np.linalg.qr(rng.standard_normal((shape[1], r)))
        out.append(torch.tensor(U @ np.diag(decay ** np.arange(r)) @ V.T, dtype=torch.float32))
    return out


def _run(mats, **kw):
    return checkpoint_continuity(lambda layer: {"q": mats[layer]}, len(mats), projections=("q",), **kw)


def _table(result, **kw):
    return checkpoint_summary(result, projections=PROJECTIONS, **kw)[0]


def _reference(mats):
    """C_u, C_v and WA_u, WA_v from numpy float64 SVDs, by the definitions."""
    svd = [np.linalg.svd(m.double().numpy(), full_matrices=False) for m in mats]
    cu = np.mean([abs(a[0][:, 0] @ b[0][:, 0]) for a, b in zip(svd, svd[1:])])
    cv = np.mean([abs(a[2][0] @ b[2][0]) for a, b in zip(svd, svd[1:])])
    wa = lambda x, y, s: np.sum(s**2 / np.sum(s**2) * np.abs(np.sum(x * y, axis=0)))  # noqa: E731
    wau = np.mean([wa(a[0], b[0], a[1]) for a, b in zip(svd, svd[1:])])
    wav = np.mean([wa(a[2].T, b[2].T, a[1]) for a, b in zip(svd, svd[1:])])
    return cu, cv, wau, wav


def test_expected_abs_cosine_closed_forms():
    assert expected_abs_cosine(2) == pytest.approx(2 / math.pi, rel=1e-14)
    assert expected_abs_cosine(3) == pytest.approx(0.5, rel=1e-14)
    assert expected_abs_cosine(10) == pytest.approx(gamma(5) / (math.sqrt(math.pi) * gamma(5.5)), rel=1e-13)
    for n in (128, 4096, 14336):  # the paper's sqrt(2 / (pi n)) is the large-n limit
        assert expected_abs_cosine(n) / math.sqrt(2 / (math.pi * n)) - 1 == pytest.approx(1 / (4 * n), rel=0.01)
    with pytest.raises(ValueError, match="n"):
        expected_abs_cosine(1)


def test_expected_abs_cosine_monte_carlo():
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((40000, 20)) for _ in range(2))
    cos = np.abs(np.sum(a * b, 1)) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert abs(cos.mean() - expected_abs_cosine(20)) < 4 * cos.std() / math.sqrt(len(cos))


def test_identical_layers_have_continuity_one():
    mats = _stack(0, L=1) * 5
    result = _run(mats)
    table = _table(result, draws=20).set_index("projection")
    for key in ("u1", "v1", "wa_u", "wa_v"):
        assert table.loc["q", key] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("seed", range(2))
def test_matches_float64_reference(seed):
    mats = _stack(seed)
    table = _table(_run(mats), draws=20).set_index("projection")
    cu, cv, wau, wav = _reference(mats)
    np.testing.assert_allclose(table.loc["q", ["u1", "v1", "wa_u", "wa_v"]].astype(float), [cu, cv, wau, wav],
                               rtol=1e-5)
    svd = [np.linalg.svd(m.double().numpy(), full_matrices=False) for m in mats]  # the second singular pair
    cu2 = np.mean([abs(a[0][:, 1] @ b[0][:, 1]) for a, b in zip(svd, svd[1:])])
    cv2 = np.mean([abs(a[2][1] @ b[2][1]) for a, b in zip(svd, svd[1:])])
    np.testing.assert_allclose(table.loc["q", ["u2", "v2"]].astype(float), [cu2, cv2], rtol=1e-5)


def test_random_layers_at_the_baseline():
    L, n_out, n_in = 200, 24, 16
    rng = np.random.default_rng(1)
    mats = [torch.tensor(rng.standard_normal((n_out, n_in)), dtype=torch.float32) for _ in range(L)]
    table = _table(_run(mats), draws=20).set_index("projection")
    for key, n in (("u1", n_out), ("v1", n_in)):
        mean = expected_abs_cosine(n)
        sd = math.sqrt(1 / n - mean**2)  # E cos^2 = 1/n
        assert abs(table.loc["q", key] - mean) < 4 * sd / math.sqrt(L - 1)
        assert table.loc["q", f"baseline_{key[0]}"] == pytest.approx(mean)


def test_invariant_to_signs_and_common_rotations():
    mats = _stack(2)
    rng = np.random.default_rng(0)
    Qo, _ = np.linalg.qr(rng.standard_normal((12, 12)))
    Qi, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    rotated = [torch.tensor(Qo, dtype=torch.float32) @ m @ torch.tensor(Qi.T, dtype=torch.float32) for m in mats]
    flipped = [m * (-1) ** i for i, m in enumerate(mats)]  # flips u1 or v1 of every other layer
    keys = ["u1", "v1", "wa_u", "wa_v", "erank", "evr_u", "evr_v"]
    base = _table(_run(mats), draws=20).set_index("projection").loc["q", keys].astype(float)
    for other in (rotated, flipped):
        got = _table(_run(other), draws=20).set_index("projection").loc["q", keys].astype(float)
        np.testing.assert_allclose(got, base, rtol=1e-5, atol=1e-6)


def test_weighted_alignment_of_rank_one_is_continuity():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((6, 10)), rng.standard_normal((6, 7))
    mats = [torch.tensor(3.0 * np.outer(x, y), dtype=torch.float32) for x, y in zip(a, b)]
    result = _run(mats)
    np.testing.assert_allclose(result["q.wa_u"], adjacent_cosines(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result["q.wa_v"], adjacent_cosines(b), rtol=1e-5, atol=1e-6)
    assert weighted_alignment(np.eye(3), np.eye(3), [1.0, 0.0, 0.0]) == 1.0
    with pytest.raises(ValueError, match="bases"):
        weighted_alignment(np.eye(3), np.eye(3)[:, :2], [1.0, 1.0, 1.0])


def test_effective_rank_extremes():
    rng = np.random.default_rng(5)
    one = [torch.tensor(np.outer(*rng.standard_normal((2, 8))), dtype=torch.float32) for _ in range(4)]
    eye = [torch.eye(8) for _ in range(4)]
    for power in (1, 2):
        assert _table(_run(one), erank_power=power, draws=5)["erank"][0] == pytest.approx(1.0, abs=1e-5)
        assert _table(_run(eye), erank_power=power, draws=5)["erank"][0] == pytest.approx(8.0)


def test_sign_alignment_and_pca():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((9, 30))
    signs = rng.choice([-1.0, 1.0], size=(9, 1))
    aligned = sign_aligned(X * signs)
    assert np.all(np.sum(aligned[1:] * aligned[:-1], 1) >= 0)
    np.testing.assert_allclose(np.abs(aligned), np.abs(X / np.linalg.norm(X, axis=1, keepdims=True)))
    # against numpy's SVD of the centred data
    coords, evr = principal_pca(X * signs, n_components=3)
    Y = aligned - aligned.mean(0)
    _, s, Vt = np.linalg.svd(Y, full_matrices=False)
    np.testing.assert_allclose(evr, s[:3] ** 2 / np.sum(s**2), rtol=1e-10)
    np.testing.assert_allclose(np.abs(coords), np.abs(Y @ Vt[:3].T), rtol=1e-8, atol=1e-10)


def test_pca_of_low_dimensional_vectors():
    rng = np.random.default_rng(7)
    a, b, c = np.linalg.qr(rng.standard_normal((40, 3)))[0].T
    two = np.array([a, a + b, a, a + b, a])  # two directions: the centred points lie on a line
    assert principal_pca(two, n_components=1)[1][0] == pytest.approx(1.0)
    circle = np.array([np.cos(t) * a + np.sin(t) * b for t in np.linspace(0, 1.5, 8)])
    assert principal_pca(circle, n_components=2)[1].sum() == pytest.approx(1.0)
    sphere = rng.standard_normal((10, 3)) @ np.array([a, b, c])
    assert principal_pca(sphere, n_components=3)[1].sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_components"):
        principal_pca(two, n_components=5)


def test_random_evr_baseline():
    # far more dimensions than vectors: each of the L - 1 centred directions holds ~1/(L-1) of the variance
    mean, sd = random_evr_baseline(10, 2000, n_components=3, draws=200, seed=0)
    assert 3 / 9 < mean < 3 / 9 + 0.03 and 0 < sd < 0.02
    assert random_evr_baseline(10, 2000, draws=20, seed=1) == random_evr_baseline(10, 2000, draws=20, seed=1)


def test_ov_composite_is_the_one_token_attention():
    model = tiny_model("llama")  # 4 query heads reading 2 value heads
    attn = model.model.layers[0].self_attn
    x = torch.randn(1, 1, model.config.hidden_size)
    position_ids = torch.zeros(1, 1, dtype=torch.long)
    with torch.no_grad():
        cos, sin = model.model.rotary_emb(x, position_ids=position_ids)
        live = attn(x, attention_mask=None, position_embeddings=(cos, sin))[0][0, 0]
        ov = ov_composite(attn.o_proj.weight, attn.v_proj.weight, n_heads=4, n_kv_heads=2)
    torch.testing.assert_close(ov @ x[0, 0], live, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="heads"):
        ov_composite(attn.o_proj.weight, attn.v_proj.weight, n_heads=4, n_kv_heads=3)


def test_absent_projection_is_reported_not_zero():
    mats = _stack(8)
    result = checkpoint_continuity(lambda layer: {"q": mats[layer], "up": mats[layer]}, len(mats),
                                   projections=("q", "gate", "up"))
    assert not any(key.startswith("gate.") for key in result)
    table = _table(result, draws=5).set_index("projection")
    assert list(table.index) == list(PROJECTIONS)
    assert not table.loc["gate", "present"] and np.isnan(table.loc["gate", "u1"])
    assert table.loc["up", "present"] and table.loc["up", "u1"] > 0
    _, arrays = checkpoint_summary(result, projections=PROJECTIONS, draws=5)
    assert arrays["up.pca_v"].shape == (6, 3) and arrays["up.cos_u"].shape == (5,) and "gate.cos_u" not in arrays
    with pytest.raises(ValueError, match="unknown projection"):
        checkpoint_continuity(lambda layer: {}, 2, projections=("qk",))


@pytest.mark.parametrize("family", ["gpt_neox", "llama", "olmo2", "bloom", "gpt2"])
def test_every_family_from_its_saved_checkpoint(family, tmp_path):
    from crosslayer.continuity.measure import continuity_checkpoint
    from crosslayer.models.weights import open_checkpoint

    tiny_model(family).save_pretrained(tmp_path)
    manifest = {"path": str(tmp_path), "model": family, "revision": None, "step": 0}
    result = continuity_checkpoint(manifest)
    gated = family in ("llama", "olmo2")
    assert ("gate.u1" in result) == gated and "ov.u1" in result and result["n_layers"] == 3
    with open_checkpoint(tmp_path) as reader:  # against numpy's float64 SVD of the adapter's matrices
        g = reader.geometry
        w = [reader.projections(layer) for layer in range(g.n_layers)]
    for name in ("q", "down"):
        svd = [np.linalg.svd(x[name].double().numpy(), full_matrices=False) for x in w]
        np.testing.assert_allclose(result[f"{name}.s"], [s for _, s, _ in svd], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.abs(np.sum(result[f"{name}.v1"] * np.array([vt[0] for *_, vt in svd]), 1)), 1,
                                   atol=1e-5)
    ov = [ov_composite(x["o"], x["v"], n_heads=g.n_heads, n_kv_heads=g.n_kv_heads).double().numpy() for x in w]
    np.testing.assert_allclose(result["ov.s"], [np.linalg.svd(m, compute_uv=False) for m in ov], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_equals_cpu():
    mats = _stack(9, L=5, shape=(40, 24))
    keys = ["u1", "v1", "wa_u", "wa_v", "erank"]
    cpu = _table(_run(mats), draws=5).set_index("projection").loc["q", keys].astype(float)
    gpu = _table(_run(mats, device="cuda"), draws=5).set_index("projection").loc["q", keys].astype(float)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5)
    stack = torch.stack(mats)
    for key, value in stack_continuity(stack.cuda()).items():
        assert value == pytest.approx(stack_continuity(stack)[key], rel=1e-5)
