"""Extreme singular values by block Krylov iterations (crosslayer.linalg.krylov) and the batched
condition-number route built on them (the GPU's), taken here on the CPU, against NumPy."""

import numpy as np
import pytest
import torch
from layer_stacks import conditioned, random_layers
from scipy.stats import ortho_group

from crosslayer.linalg import conditioning as cond
from crosslayer.linalg import krylov


def _hermitian(lam, rng, complex_=False, ones_kernel=False):
    d = lam.size
    X = rng.standard_normal((d, d)) + (1j * rng.standard_normal((d, d)) if complex_ else 0)
    if ones_kernel:  # first column along 1 (LayerNorm Jacobians' kernel)
        X[:, 0] = 1.0
    U = np.linalg.qr(X)[0]
    return (U * lam) @ U.conj().T


@pytest.mark.parametrize("complex_", [False, True])
def test_top_eigenvalue_equals_the_full_spectrum(complex_):
    # a clustered top (0.998), a kernel along the ones vector, widths below, at and past two blocks
    rng = np.random.default_rng(0)
    cases = [(np.r_[0.0, np.linspace(0.2, 0.998, 198), 1.0], True), (np.linspace(0.1, 1.0, 5), False),
             (np.linspace(0.1, 1.0, 31), False), (np.r_[np.linspace(0.0, 0.5, 60), 0.9, 1.0], False)]
    for lam, ones_kernel in cases:
        G = torch.from_numpy(7.0 * _hermitian(lam, rng, complex_, ones_kernel))[None].repeat(2, 1, 1)
        top, converged = krylov.gram_top(G)
        assert converged.all() and top.dtype == torch.float64
        np.testing.assert_allclose(top.numpy(), 7.0, rtol=1e-10)


def test_unconverged_operators_are_reported_not_guessed():
    # one restart cycle of one block product cannot resolve a top cluster within 1e-4 to 1e-10
    rng = np.random.default_rng(1)
    G = torch.from_numpy(_hermitian(np.r_[np.linspace(0.1, 0.9999, 99), 1.0], rng))[None]
    top, converged = krylov.gram_top(G, steps=1, cycles=1)
    assert not converged.any() and top[0] <= 1.0 + 1e-12  # a Rayleigh quotient never exceeds the top
    top, converged = krylov.gram_top(G)
    assert converged.all() and top[0] == pytest.approx(1.0, rel=1e-10)


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("kappa", [3.0, 1e3, 1e6])
def test_inverse_top_gives_the_smallest_singular_value(kappa, complex_):
    J = conditioned(3, 64, kappa, seed=2)
    if complex_:
        J = J + 1j * conditioned(3, 64, kappa, seed=3)
    s = np.linalg.svd(J, compute_uv=False)
    top, converged = krylov.inverse_top(torch.from_numpy(J))
    assert converged.all()
    np.testing.assert_allclose(top.rsqrt().numpy(), s[:, -1], rtol=1e-9)


def test_singular_matrices_are_not_converged():
    J = torch.from_numpy(np.stack([np.diag([1.0, 1.0, 0.0]), np.zeros((3, 3)), np.eye(3)]))
    _, converged = krylov.inverse_top(J)
    assert converged.tolist() == [False, False, True]


@pytest.fixture
def batched_on_cpu(monkeypatch):
    """The batched route, which a GPU takes, on the CPU."""
    monkeypatch.setattr(cond, "BATCHED_DEVICES", ("cpu",))


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("kappa", [3.0, 100.0, 1e4, 1e6])
def test_batched_condition_numbers_equal_the_svd(kappa, residual, complex_, batched_on_cpu):
    d = 64
    M = conditioned(5, d, kappa, seed=21)
    if complex_:  # U diag(s) V^H with complex unitary factors: the same singular values
        phases = np.exp(2j * np.pi * np.random.default_rng(22).random((5, d)))
        M = M * phases[:, None, :]
    J = M + np.eye(d) if residual else M
    ref = cond.per_sample_stats(J, residual=residual)["condition_number"]
    got = cond.per_sample_stats(torch.from_numpy(J), residual=residual, chunk=2)
    np.testing.assert_allclose(got["condition_number"], ref, rtol=1e-8)
    assert (got["condition_path"] == cond.CONDITION_PATHS.index("krylov")).all()


def test_batched_pair_equals_two_calls_of_the_per_matrix_route(batched_on_cpu, monkeypatch):
    # J and J - I at once on the batched route (J - I's Gram matrix derived from J's) against the
    # per-matrix route: near-identity, ill-conditioned J - I, complex, a tiny J - I, a singular J
    d, rng = 40, np.random.default_rng(31)
    J = np.concatenate([random_layers(3, d, seed=30), conditioned(2, d, 1e5, seed=32) + np.eye(d),
                        np.eye(d) + 1e-4 * rng.standard_normal((1, d, d)),
                        np.diag(np.r_[2 * np.ones(d - 1), 0.0])[None]])
    cplx = random_layers(2, d, seed=33) + 0.1j * rng.standard_normal((2, d, d)) / np.sqrt(d)
    for stack in (J, cplx):
        got = cond.per_sample_stats_pair(torch.from_numpy(stack), chunk=3)
        monkeypatch.setattr(cond, "BATCHED_DEVICES", ())
        expected = cond.per_sample_stats_pair(torch.from_numpy(stack), chunk=3)
        monkeypatch.setattr(cond, "BATCHED_DEVICES", ("cpu",))
        for name, values in expected.items():
            if not name.startswith("condition_path"):
                rtol = 1e-8 if name.startswith("condition") else 1e-12
                np.testing.assert_allclose(got[name], values, rtol=rtol, err_msg=name)
        paths = [cond.CONDITION_PATHS[i] for i in got["condition_path"]]
        # the singular J has no inverse: the per-matrix route decides (the SVD: inf)
        assert paths == ["krylov"] * (len(stack) - 1) + (["svd"] if stack is J else ["krylov"])
    assert np.isinf(expected["condition_number"][:-1]).sum() == 0 and paths[-1] == "krylov"
    J_stats = cond.per_sample_stats_pair(torch.from_numpy(J), chunk=3)
    assert np.isinf(J_stats["condition_number"][-1]) and np.isfinite(J_stats["condition_number_res"]).all()


def test_batched_route_hands_unconverged_matrices_to_the_per_matrix_route(batched_on_cpu, monkeypatch):
    J = conditioned(4, 48, 1e4, seed=5)
    inverse_top = krylov.inverse_top

    def second_fails(block):
        top, converged = inverse_top(block)
        converged[1] = False
        return top, converged
    monkeypatch.setattr(krylov, "inverse_top", second_fails)
    got = cond.per_sample_stats(torch.from_numpy(J), chunk=4)
    np.testing.assert_allclose(got["condition_number"], cond.condition_number(J), rtol=1e-8)
    assert [cond.CONDITION_PATHS[i] for i in got["condition_path"]] == [
        "krylov", "inverse_iteration", "krylov", "krylov"]


def test_clustered_smallest_singular_values_on_the_batched_route(batched_on_cpu):
    # 20 smallest singular values within 1e-3 of each other, wider than the block
    d = 48
    rng = np.random.default_rng(22)
    s = np.concatenate([np.geomspace(10.0, 1.0, d - 20), 1e-5 * (1 + 1e-3 * np.arange(20))])
    J = ortho_group.rvs(d, random_state=rng) * s @ ortho_group.rvs(d, random_state=rng)
    got = cond.per_sample_stats(torch.from_numpy(J))
    assert got["condition_number"][0] == pytest.approx(10.0 / 1e-5, rel=1e-8)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("residual", [False, True])
def test_batched_route_on_cuda_equals_the_svd(residual):
    d = 256
    M = conditioned(4, d, 1e6, seed=7) + (1j * conditioned(4, d, 1e6, seed=8) if residual else 0)
    J = M + np.eye(d) if residual else M
    ref = cond.per_sample_stats(J, residual=residual)["condition_number"]
    got = cond.per_sample_stats(torch.from_numpy(J).cuda(), residual=residual, chunk=4)
    np.testing.assert_allclose(got["condition_number"], ref, rtol=1e-8)
    assert (got["condition_path"] == cond.CONDITION_PATHS.index("krylov")).all()
