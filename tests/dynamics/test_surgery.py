"""Schur surgery (crosslayer.dynamics.surgery): the Schur parts and their recomposition, the dose
response and its two controls against explicit products, torch against numpy, the long-form table
and the progress reporting of a sweep."""

import numpy as np
import pytest
import torch
from layer_stacks import random_layers
from progress_recorder import small_jacobians
from scipy.optimize import linear_sum_assignment

from crosslayer.dynamics import spectra
from crosslayer.linalg import effective_rank as er
from crosslayer.dynamics import surgery as schur
from crosslayer.dynamics.surgery import schur_dose_responses


def assert_same_eigenvalues(a, b, atol=1e-9):
    """Equal as multisets: optimal matching, robust to rounding in the sort order."""
    a, b = np.asarray(a), np.asarray(b)
    rows, cols = linear_sum_assignment(np.abs(a[:, None] - b[None, :]))
    assert np.abs(a[rows] - b[cols]).max() < atol


def is_normal(M, atol=1e-10):
    return np.allclose(M @ M.conj().T, M.conj().T @ M, atol=atol)


# --------------------------------------------------------------------------- Schur surgery


def nonnormal_layer(d=8, seed=12):
    return random_layers(1, d, seed=seed, scale=2.0)[0]  # complex eigenvalues, non-normal


@pytest.mark.parametrize("mode", schur.SCHUR_MODES)
def test_schur_alpha_one_reproduces_and_alpha_zero_normal(mode):
    J = nonnormal_layer()
    Q, D, N = schur.schur_parts(J, mode=mode)
    np.testing.assert_allclose(schur.schur_recompose(Q, D, N, 1.0, mode=mode), J, atol=1e-12)
    J0 = schur.schur_recompose(Q, D, N, 0.0, mode=mode)
    assert is_normal(J0)
    assert spectra.henrici_departure(J0) == pytest.approx(0.0, abs=1e-6)
    lam = np.linalg.eigvals(J)
    assert_same_eigenvalues(np.linalg.eigvals(J0), lam, atol=1e-10)
    # dose scales the Henrici numerator linearly
    J_half = schur.schur_recompose(Q, D, N, 0.5, mode=mode)
    num = lambda M: spectra.henrici_departure(M) * np.linalg.norm(M)  # noqa: E731
    assert num(J_half) == pytest.approx(0.5 * num(J), rel=1e-6)


def test_schur_control_a_keeps_norm_and_eigenvalues():
    J = nonnormal_layer()
    Q, D, N = schur.schur_parts(J)
    R = schur.random_strict_upper(N, 3)
    assert np.allclose(np.tril(R), 0)
    assert np.linalg.norm(R) == pytest.approx(np.linalg.norm(N))
    JA = schur.schur_recompose(Q, D, R, 1.0)
    assert_same_eigenvalues(np.linalg.eigvals(JA), D, atol=1e-9)
    assert spectra.henrici_departure(JA) == pytest.approx(spectra.henrici_departure(J), rel=1e-6)


def test_schur_control_b_keeps_spectrum_singular_values_and_henrici():
    J = nonnormal_layer()
    Q, D, N = schur.schur_parts(J)
    W = schur.haar_unitary(8, 4)
    np.testing.assert_allclose(W @ W.conj().T, np.eye(8), atol=1e-12)
    JB = schur.schur_recompose(W, D, N, 1.0)
    assert_same_eigenvalues(np.linalg.eigvals(JB), D, atol=1e-9)
    sv = lambda M: np.linalg.svd(M, compute_uv=False)  # noqa: E731
    np.testing.assert_allclose(sv(JB), sv(J), atol=1e-10)
    assert spectra.henrici_departure(JB) == pytest.approx(spectra.henrici_departure(J), rel=1e-6)
    assert not np.allclose(JB, J)


@pytest.mark.parametrize("mode", ["J", "J - I"])
def test_schur_dose_response_in_torch_equals_numpy(monkeypatch, mode):
    # wide models run the running products in torch; the same numbers as NumPy's to rounding (at
    # full rank: a truncation between tied singular values, e.g. |lambda| of a conjugate pair at
    # alpha = 0, may keep either direction)
    Js = random_layers(4, 10, seed=8)
    numpy_result = schur.schur_dose_response(Js, mode=mode, draws=2, seed=3)
    monkeypatch.setattr(schur, "TORCH_MIN_WIDTH", 1)
    calls = {"svd": [], "svdvals": []}
    for name in calls:
        monkeypatch.setattr(torch.linalg, name, lambda *a, f=getattr(torch.linalg, name), c=calls[name], **k:
                            c.append(1) or f(*a, **k))
    torch_result = schur.schur_dose_response(Js, mode=mode, draws=2, seed=3)
    # the last layer's d x d SVDs start every product (the dose's also start control B: doses x (1 + draws));
    # every earlier layer takes one r x d svdvals per product: layers x doses x (dose + 2 controls x draws)
    assert len(calls["svd"]) == 6 * (1 + 2) and len(calls["svdvals"]) == 3 * 6 * (1 + 2 * 2)
    for key in ("dose", "dose_log_frobenius", "control_a", "control_b", "control_a_log_frobenius",
                "control_b_log_frobenius"):
        np.testing.assert_allclose(torch_result[key], numpy_result[key], rtol=1e-12, err_msg=key)


@pytest.mark.parametrize("width", [10, 300])  # NumPy and torch running products
def test_both_modes_in_one_sweep_equal_separate_calls_and_draw_haar_once(monkeypatch, width):
    Js = random_layers(3, width, seed=4)
    kw = dict(alphas=(0.0, 0.5, 1.0), draws=2, seed=7, rank=min(8, width))
    separate = {mode: schur.schur_dose_response(Js, mode=mode, **kw) for mode in schur.SCHUR_MODES}
    draws, haar = [], schur.haar_unitary
    monkeypatch.setattr(schur, "haar_unitary", lambda *a: draws.append(1) or haar(*a))
    joint = schur.schur_dose_responses(Js, modes=schur.SCHUR_MODES, **kw)
    assert len(draws) == 3 * 2  # layers x draws, not x modes
    assert list(joint) == list(schur.SCHUR_MODES)
    for mode in schur.SCHUR_MODES:
        for key in ("dose", "dose_log_frobenius", "control_a", "control_b", "control_a_log_frobenius",
                    "control_b_log_frobenius"):
            np.testing.assert_array_equal(joint[mode][key], separate[mode][key], err_msg=f"{mode} {key}")
    with pytest.raises(ValueError, match="`modes` must be distinct"):
        schur.schur_dose_responses(Js, modes=("J", "J"))


def test_schur_dose_response_at_torch_width_runs_without_torch_imported_first():
    # the torch path imports torch itself (a library caller need not, unlike the workflow script)
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, numpy as np; from crosslayer.dynamics import surgery as S; w = S.TORCH_MIN_WIDTH; "
            "J = np.eye(w) + 0.1 * np.random.default_rng(0).standard_normal((2, w, w)); "
            "assert 'torch' not in sys.modules; out = S.schur_dose_response(J, alphas=(0.5,), draws=1); "
            "assert np.isfinite(out['dose']).all() and 'torch' in sys.modules")
    workflow = Path(schur.__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=workflow, env={**os.environ, "PYTHONPATH": str(workflow)})


def test_schur_dose_response_shapes_reproducible_and_alpha_one_matches():
    Js = random_layers(4, 6, seed=13, scale=1.5)
    kw = dict(alphas=(0.0, 1.0, 1.5), rank=6, draws=2, seed=5)
    a, b = schur.schur_dose_response(Js, **kw), schur.schur_dose_response(Js, **kw)
    for key in ("dose", "control_a", "control_b"):
        np.testing.assert_array_equal(a[key], b[key])
    assert a["dose"].shape == (3, 4) and a["control_a"].shape == (2, 3, 4) == a["control_b"].shape
    # alpha = 1 is the trained stack
    np.testing.assert_allclose(a["dose"][1], er.cumulative_effective_rank(Js, rank=6)[0], rtol=1e-8)
    # controls at alpha = 0: control A equals the dose (R is scaled away); control B does not
    np.testing.assert_allclose(a["control_a"][:, 0], np.broadcast_to(a["dose"][0], (2, 4)), rtol=1e-10)
    # alpha = 0 recomposes normal layers with the same spectrum: the single-layer effective rank
    # is that of |eigenvalues|
    lam = np.abs(np.linalg.eigvals(Js[-1]))
    assert a["dose"][0, -1] == pytest.approx(er.effective_rank(lam), rel=1e-8)
    c = schur.schur_dose_response(Js, **{**kw, "seed": 6})
    assert not np.allclose(c["control_b"], a["control_b"])


@pytest.mark.parametrize("mode", schur.SCHUR_MODES)
@pytest.mark.parametrize("d, rank", [(5, 3), (260, 40)])  # NumPy and torch running products
def test_schur_dose_response_equals_explicit_recomposition(mode, d, rank):
    # the running products never recompose a layer (bases applied lazily, no re-orthogonalization);
    # the reference recomposes every layer and composes them by truncated SVDs
    L, seed = 3, 2
    Js = random_layers(L, d, seed=16, scale=1.5)
    alphas = (0.0, 0.5, 1.5)
    out = schur.schur_dose_response(Js, alphas=alphas, mode=mode, rank=rank, draws=2, seed=seed)
    parts = [schur.schur_parts(J, mode=mode) for J in Js]
    for i, alpha in enumerate(alphas):
        stack = [schur.schur_recompose(Q, D, N, alpha, mode=mode) for Q, D, N in parts]
        erank, log_fro = er.cumulative_effective_rank(stack, rank=rank)
        np.testing.assert_allclose(out["dose"][i], erank, rtol=1e-8)
        np.testing.assert_allclose(out["dose_log_frobenius"][i], log_fro, rtol=1e-8)
        for j in range(2):
            stack_a, stack_b = [], []
            for layer, (Q, D, N) in enumerate(parts):
                rng = np.random.default_rng([seed, j, layer])
                R, W = schur.random_strict_upper(N, rng), schur.haar_unitary(d, rng)
                stack_a.append(schur.schur_recompose(Q, D, R, alpha, mode=mode))
                stack_b.append(schur.schur_recompose(W, D, N, alpha, mode=mode))
            for key, stack in (("control_a", stack_a), ("control_b", stack_b)):
                expected, expected_log_fro = er.cumulative_effective_rank(stack, rank=rank)
                np.testing.assert_allclose(out[key][j, i], expected, rtol=1e-8)
                np.testing.assert_allclose(out[f"{key}_log_frobenius"][j, i], expected_log_fro, rtol=1e-8)


@pytest.mark.parametrize("mode", schur.SCHUR_MODES)
def test_schur_log_frobenius_is_that_of_the_explicit_product_at_full_rank(mode):
    # Fig. 5's amplification: log ||J_{L-1} ... J_l||_F of the recomposed layers, by NumPy products
    L, d, seed = 4, 6, 3
    Js = random_layers(L, d, seed=21, scale=1.5)
    alphas = (0.0, 1.0, 1.5)
    out = schur.schur_dose_response(Js, alphas=alphas, mode=mode, rank=d, draws=2, seed=seed)
    parts = [schur.schur_parts(J, mode=mode) for J in Js]

    def log_fro_from(stack):
        logs, P = np.empty(L), np.eye(d)
        for layer in range(L - 1, -1, -1):
            P = P @ stack[layer]
            logs[layer] = np.log(np.linalg.norm(P))
        return logs

    for i, alpha in enumerate(alphas):
        dose = [schur.schur_recompose(Q, D, N, alpha, mode=mode) for Q, D, N in parts]
        np.testing.assert_allclose(out["dose_log_frobenius"][i], log_fro_from(dose), rtol=1e-9, atol=1e-12)
        for j in range(2):
            rngs = [np.random.default_rng([seed, j, layer]) for layer in range(L)]
            draws = [(schur.random_strict_upper(N, rng), schur.haar_unitary(d, rng)) for (_, _, N), rng in
                     zip(parts, rngs)]
            stack_a = [schur.schur_recompose(Q, D, R, alpha, mode=mode) for (Q, D, _), (R, _) in zip(parts, draws)]
            stack_b = [schur.schur_recompose(W, D, N, alpha, mode=mode) for (_, D, N), (_, W) in zip(parts, draws)]
            np.testing.assert_allclose(out["control_a_log_frobenius"][j, i], log_fro_from(stack_a), rtol=1e-9,
                                       atol=1e-12)
            np.testing.assert_allclose(out["control_b_log_frobenius"][j, i], log_fro_from(stack_b), rtol=1e-9,
                                       atol=1e-12)
    # alpha = 1 is the trained stack, whose products are real
    np.testing.assert_allclose(out["dose_log_frobenius"][1], log_fro_from(list(Js)), rtol=1e-9)


def test_schur_dose_is_complex_for_real_input_and_real_part_would_break_it():
    """Why the complex Schur form is kept complex (see schur_dose_response Notes)."""
    J = nonnormal_layer()
    lam = np.linalg.eigvals(J)
    assert np.any(np.abs(lam.imag) > 1e-3)
    J0 = schur.schur_recompose(*schur.schur_parts(J), 0.0)
    assert np.abs(J0.imag).max() > 1e-3  # genuinely complex at alpha = 0
    assert spectra.henrici_departure(J0.real) > 1e-3 or not np.allclose(
        np.sort(np.abs(np.linalg.eigvals(J0.real))), np.sort(np.abs(lam)), atol=1e-6
    )


def test_schur_mode_residual_runs_and_alpha_one_matches():
    Js = random_layers(3, 5, seed=14, scale=1.5)
    out = schur.schur_dose_response(Js, alphas=(1.0,), mode="J - I", rank=5, draws=1)
    np.testing.assert_allclose(out["dose"][0], er.cumulative_effective_rank(Js, rank=5)[0], rtol=1e-8)


def test_dose_response_table_is_the_result_in_long_form():
    result = schur.schur_dose_response(random_layers(3, 4, seed=3), alphas=(0.0, 1.0), draws=2, rank=4)
    table = schur.dose_response_table(result)
    assert len(table) == (1 + 2 + 2) * 2 * 3
    row = table.query("construction == 'control_b' and draw == 1 and alpha == 0 and start_layer == 2")
    assert row["effective_rank"].item() == result["control_b"][1, 0, 2]
    dose = table.query("construction == 'dose' and alpha == 1").sort_values("start_layer")
    np.testing.assert_array_equal(dose["effective_rank"], result["dose"][1])
    np.testing.assert_array_equal(dose["log_frobenius"], result["dose_log_frobenius"][1])
    assert row["log_frobenius"].item() == result["control_b_log_frobenius"][1, 0, 2]


def test_schur_sweep_reports_every_layer_last_first_and_same_numbers():
    Js, seen = small_jacobians(), []

    def progress(layers):
        layers = list(layers)
        seen.extend(layers)
        return layers

    kwargs = dict(modes=("J",), alphas=[0.0, 1.0], rank=4, draws=2, seed=1)
    plain = schur_dose_responses(Js, **kwargs)
    wrapped = schur_dose_responses(Js, **kwargs, progress=progress)
    assert seen == [2, 1, 0]
    for key, value in plain["J"].items():
        np.testing.assert_array_equal(wrapped["J"][key], value)


# --------------------------------------------------------------------------- on a device, forms ahead

SURGERY_KEYS = ("dose", "dose_log_frobenius", "control_a", "control_b", "control_a_log_frobenius",
                "control_b_log_frobenius")


def test_haar_unitary_on_a_device_is_scipys_draw():
    # the same Gaussian draws from the same generator state, QR and phase fix in torch
    for d in (1, 2, 17):
        ref = schur.haar_unitary(d, np.random.default_rng(5))
        got = schur.haar_unitary(d, np.random.default_rng(5), device="cpu")
        assert isinstance(got, torch.Tensor) and got.dtype == torch.complex128
        np.testing.assert_allclose(got.numpy(), ref, atol=1e-12)


@pytest.mark.parametrize("width", [10, 300])
def test_surgery_on_a_device_equals_the_host_path(width):
    # device="cpu" takes the device path (torch arrays, triangles and Haar QR in torch) on the CPU
    Js = random_layers(3, width, seed=6)
    kw = dict(modes=schur.SCHUR_MODES, alphas=(0.0, 0.5, 1.5), draws=2, seed=2, rank=min(8, width))
    host = schur.schur_dose_responses(Js, **kw)
    device = schur.schur_dose_responses(Js, **kw, device="cpu")
    for mode in schur.SCHUR_MODES:
        for key in SURGERY_KEYS:
            np.testing.assert_allclose(device[mode][key], host[mode][key], rtol=1e-9, atol=1e-9,
                                       err_msg=f"{mode} {key}")


def test_schur_forms_computed_ahead_in_worker_processes_equal_in_process_ones():
    Js = random_layers(4, 12, seed=9)
    kw = dict(modes=schur.SCHUR_MODES, alphas=(0.0, 1.0), draws=1, seed=4, rank=6)
    plain = schur.schur_dose_responses(Js, **kw)
    ahead = schur.schur_dose_responses(Js, **kw, workers=2, threads=2)
    for mode in schur.SCHUR_MODES:
        for key in SURGERY_KEYS:
            np.testing.assert_allclose(ahead[mode][key], plain[mode][key], rtol=1e-12, err_msg=f"{mode} {key}")
    forms = list(schur._schur_forms(Js, ("J",), 3, 3))
    assert [layer for layer, _ in forms] == [3, 2, 1, 0]  # last first, whatever finishes first


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_surgery_on_cuda_equals_the_host_path():
    Js = random_layers(3, 300, seed=6)
    kw = dict(modes=schur.SCHUR_MODES, alphas=(0.0, 0.5, 1.5), draws=2, seed=2, rank=8)
    host = schur.schur_dose_responses(Js, **kw)
    cuda = schur.schur_dose_responses(Js, **kw, device="cuda", workers=2, threads=4)
    for mode in schur.SCHUR_MODES:
        for key in SURGERY_KEYS:
            np.testing.assert_allclose(cuda[mode][key], host[mode][key], rtol=1e-9, atol=1e-9, err_msg=f"{mode} {key}")


def test_fold_bottleneck_composes_each_fold_trained_and_normal_by_explicit_products():
    # each fold alone: alpha 1 the composed stack itself, alpha 0 the normal parts recomposed and
    # composed by truncated SVDs; no rows without folds
    folds = np.stack([random_layers(3, 6, seed=seed, scale=1.5) for seed in (21, 22)])
    table = schur.fold_bottleneck(folds, rank=4, seed=0)
    assert list(table.columns) == ["fold", "alpha", "start_layer", "effective_rank", "log_frobenius"]
    assert len(table) == 2 * 2 * 3
    for fold, Js in enumerate(folds):
        rows = table[table["fold"] == fold].set_index(["alpha", "start_layer"])["effective_rank"]
        trained, _ = er.cumulative_effective_rank(Js, rank=4)
        normal, _ = er.cumulative_effective_rank([schur.schur_recompose(Q, D, N, 0.0) for Q, D, N in
                                                  map(schur.schur_parts, Js)], rank=4)
        np.testing.assert_allclose(rows.loc[1.0].to_numpy(), trained, rtol=1e-8)
        np.testing.assert_allclose(rows.loc[0.0].to_numpy(), normal, rtol=1e-8)
    assert schur.fold_bottleneck(np.empty((0, 3, 6, 6))).empty
