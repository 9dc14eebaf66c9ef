"""Paper 003's continuity (crosslayer.continuity.measure) against float64 references: invariances,
absent projections, every family from its saved checkpoint, and the stacked and streaming paths; the
``projection_continuity`` job's contract (ContinuitySettings, measure_checkpoint and the errors it names
the checkpoint in)."""

import dataclasses
import json
import math
import re

import numpy as np
import pytest
import torch
from tiny_checkpoints import save_checkpoint
from tiny_families import tiny_model

from crosslayer.continuity.measure import (
    PROJECTIONS,
    ContinuitySettings,
    measure_checkpoint,
    measure_run,
    ov_composite,
    projection_continuity,
    stack_continuity,
    weighted_alignment,
)
from crosslayer.continuity.statistics import adjacent_cosines, checkpoint_summary, expected_abs_cosine
from crosslayer.errors import CheckpointError
from crosslayer.models.weights import open_checkpoint


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
    return projection_continuity(lambda layer: {"q": mats[layer]}, len(mats), ContinuitySettings(("q",)), **kw)


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
    result = projection_continuity(lambda layer: {"q": mats[layer], "up": mats[layer]}, len(mats),
                                   ContinuitySettings(("q", "gate", "up")))
    assert not any(key.startswith("gate.") for key in result)
    table = _table(result, draws=5).set_index("projection")
    assert list(table.index) == list(PROJECTIONS)
    assert not table.loc["gate", "present"] and np.isnan(table.loc["gate", "u1"])
    assert table.loc["up", "present"] and table.loc["up", "u1"] > 0
    _, arrays = checkpoint_summary(result, projections=PROJECTIONS, draws=5)
    assert arrays["up.pca_v"].shape == (6, 3) and arrays["up.cos_u"].shape == (5,) and "gate.cos_u" not in arrays


@pytest.mark.parametrize("family", ["gpt_neox", "llama", "olmo2", "bloom", "gpt2"])
def test_every_family_from_its_saved_checkpoint(family, tmp_path):
    tiny_model(family).save_pretrained(tmp_path)
    manifest = {"path": str(tmp_path), "model": family, "revision": None, "step": 0}
    result = measure_checkpoint(manifest)
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


def test_stack_continuity_matches_the_streaming_path():
    stack = torch.randn(6, 12, 9, generator=torch.Generator().manual_seed(1))
    batched = stack_continuity(stack)
    streamed = projection_continuity(lambda layer: {"q": stack[layer]}, 6, ContinuitySettings(("q",)))
    table = checkpoint_summary(streamed, projections=PROJECTIONS, draws=5)[0].set_index("projection").loc["q"]
    for key in ("u1", "v1", "wa_u", "wa_v", "erank"):
        assert batched[key] == pytest.approx(float(table[key]), rel=1e-5)
    assert math.isnan(stack_continuity(torch.zeros(3, 4, 4))["u1"])
    assert math.isnan(stack_continuity(torch.full((3, 4, 4), float("nan")))["wa_v"])


def test_second_pair_continuity_matches_numpy():
    stack = torch.randn(5, 10, 7, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    U, _, Vh = np.linalg.svd(stack.numpy(), full_matrices=False)
    stats = stack_continuity(stack)
    for key, vectors in (("u2", U[:, :, 1]), ("v2", Vh[:, 1])):
        expected = np.mean([abs(a @ b) for a, b in zip(vectors, vectors[1:])])
        assert stats[key] == pytest.approx(expected, rel=1e-5), key
    rank_one = torch.einsum("li,lj->lij", torch.randn(4, 6), torch.randn(4, 5))
    stats = stack_continuity(rank_one)
    assert np.isfinite(stats["u1"]) and math.isnan(stats["u2"]) and math.isnan(stats["v2"])


# --------------------------------------------------------------------------- the job's contract


@pytest.mark.parametrize("projections", [(), ("qk",), ("q", "q"), ["o", "ov", "x"]])
def test_settings_refuse_unknown_repeated_or_no_projections(projections):
    with pytest.raises(ValueError, match=r"^continuity\.projections must be distinct names among"):
        ContinuitySettings(projections=projections)


def test_settings_keep_the_projections_as_a_tuple_in_order():
    assert ContinuitySettings().projections == PROJECTIONS
    assert ContinuitySettings(projections=["ov", "q"]).projections == ("ov", "q")
    assert ContinuitySettings(projections="up").projections == ("up",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ContinuitySettings().projections = ("q",)


def test_measure_checkpoint_is_projection_continuity_of_the_saved_weights(tmp_path):
    manifest = save_checkpoint("llama", tmp_path, tokenizer=False)
    settings = ContinuitySettings(projections=("down", "q"))
    result = measure_checkpoint(manifest, settings)
    with open_checkpoint(tmp_path) as reader:
        direct = projection_continuity(lambda layer: reader.projections(layer, names=("q", "down")), 3, settings)
    assert list(result) == [*direct, "step", "n_layers"] and next(iter(direct)) == "down.u1"
    assert all(np.array_equal(result[key], direct[key], equal_nan=True) for key in direct)


def test_one_layer_names_the_checkpoint(tmp_path):
    def first_layer_only(model):
        model.model.layers = model.model.layers[:1]
        model.config.num_hidden_layers = 1

    manifest = save_checkpoint("llama", tmp_path, tokenizer=False, edit=first_layer_only)
    with pytest.raises(CheckpointError, match=rf"^model 'm' revision 'step7' file '{re.escape(str(tmp_path))}': "
                                              r"continuity needs at least 2 layers, the checkpoint has 1"):
        measure_checkpoint(manifest)


def test_a_non_finite_svd_names_the_checkpoint(tmp_path, monkeypatch):
    manifest = save_checkpoint("gpt_neox", tmp_path, tokenizer=False)
    svd = torch.linalg.svd
    monkeypatch.setattr(torch.linalg, "svd", lambda W, **kw: [x * np.nan if x.ndim == 1 else x for x in svd(W, **kw)])
    with pytest.raises(CheckpointError, match=rf"^model 'm' revision 'step7' file '{re.escape(str(tmp_path))}': "
                                              r"layer 0 projection 'q': SVD is not finite"):
        measure_checkpoint(manifest)


def _run_dir(path, steps, outcome):
    """A training run's directory as train_model leaves it: a checkpoint per step, outcome.json."""
    path.mkdir()
    for step in steps:
        save_checkpoint("llama", path / f"step{step}", tokenizer=False)
    (path / "outcome.json").write_text(json.dumps(outcome))
    return path


SUMMARY = {"projections": PROJECTIONS, "n_components": 2, "draws": 5}


def test_measure_run_measures_every_saved_checkpoint(tmp_path):
    run = _run_dir(tmp_path / "run", [0, 3], {"steps": 3, "diverged_step": None})
    settings = ContinuitySettings(("q", "ov"))
    arrays, table = measure_run(run, settings, model="abl", save_steps=[0, 3], summary=SUMMARY)
    last = measure_checkpoint({"path": str(run / "step3"), "model": "abl", "revision": "step3", "step": 3}, settings)
    expected_table, expected_arrays = checkpoint_summary(last, **SUMMARY)
    assert list(arrays) == [*last, *expected_arrays]
    assert all(np.array_equal(arrays[key], value, equal_nan=True) for key, value in {**last, **expected_arrays}.items())
    assert table.step.tolist() == [0] * len(PROJECTIONS) + [3] * len(PROJECTIONS)
    assert table[table.step == 3].present.tolist() == [name in ("q", "ov") for name in PROJECTIONS]


def test_measure_run_of_a_diverged_run_reports_its_last_step_absent(tmp_path):
    run = _run_dir(tmp_path / "run", [0], {"steps": 6, "diverged_step": 4})
    arrays, table = measure_run(run, model="abl", save_steps=[0, 3, 6], summary=SUMMARY)
    assert arrays == {} and sorted(set(table.step)) == [0, 6] and not table[table.step == 6].present.any()
    with pytest.raises(ValueError, match=r"holds none of the checkpoints of steps \[3\]"):
        measure_run(_run_dir(tmp_path / "empty", [], {"steps": 3, "diverged_step": None}), model="abl",
                    save_steps=[3], summary=SUMMARY)


def test_measure_run_names_the_checkpoint_it_refuses(tmp_path):
    run = _run_dir(tmp_path / "run", [0], {"steps": 0, "diverged_step": None})
    (run / "step0" / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"^model 'abl' revision 'step0'.*no weight files found"):
        measure_run(run, model="abl", save_steps=[0], summary=SUMMARY)
