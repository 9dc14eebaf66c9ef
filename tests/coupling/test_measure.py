"""Paper 002's mis-coupling (crosslayer.coupling.measure): hand-computed cases, the depthwise and
token-wise couplings against independent float64 computations, and bad input."""

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group

from crosslayer.coupling.measure import (
    METRICS,
    coupling_matrices,
    depthwise_miscoupling,
    miscoupling,
    tokenwise_miscoupling,
)
from crosslayer.coupling.tables import layer_profile
from crosslayer.linalg.topk import Basis, top_singular


def test_hand_computed_cases():
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert miscoupling(A) == pytest.approx(np.sqrt(13 / 30))
    s = np.array([2.0, 1.0])  # | |A| - diag(s) | = [[-1, 2], [3, 3]] -> sqrt(23)
    assert miscoupling(A, metric="released_l2", s=s) == pytest.approx(np.sqrt(23) / np.sqrt(5))
    assert miscoupling(A, metric="released_trace", s=s) == pytest.approx(np.sqrt(23) / 3)
    assert miscoupling(-A, metric="released_l2", s=s) == pytest.approx(np.sqrt(23) / np.sqrt(5))  # |A|
    assert miscoupling(np.diag([3.0, -1.0])) == 0.0
    assert np.isnan(miscoupling(np.zeros((2, 2))))


@pytest.mark.parametrize("seed", range(3))
def test_jacobians_sharing_singular_vectors_are_perfectly_coupled(seed):
    rng = np.random.default_rng(seed)
    d, K = 12, 5
    U, V = ortho_group.rvs(d, random_state=rng), ortho_group.rvs(d, random_state=rng)
    s1, s2 = np.sort(rng.uniform(0.1, 3, d))[::-1], np.sort(rng.uniform(0.1, 3, d))[::-1]
    J1, J2 = (torch.as_tensor(U @ np.diag(s) @ V.T, dtype=torch.float64) for s in (s1, s2))
    A = coupling_matrices(J1, [top_singular(J2, K)]).numpy()[0]
    for metric in METRICS:
        assert miscoupling(A, metric=metric, s=s1[:K]) == pytest.approx(0.0, abs=1e-12)
    J3 = torch.as_tensor(ortho_group.rvs(d, random_state=rng) @ np.diag(s1) @ V.T)  # other left vectors
    assert miscoupling(coupling_matrices(J3, [top_singular(J2, K)]).numpy()[0]) > 0.3


@pytest.mark.parametrize("seed", range(3))
def test_paper_metric_lies_in_the_unit_interval_and_ignores_singular_vector_signs(seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((50, 4, 4))
    m = miscoupling(A)
    assert ((m >= 0) & (m <= 1)).all()
    flips = np.diag(rng.choice([-1.0, 1.0], 4))  # the sign freedom of each singular pair
    assert np.allclose(miscoupling(flips @ A @ flips), m)


def test_depthwise_matches_an_independent_float64_computation():
    rng = np.random.default_rng(7)
    d, L, Ks = 16, 4, (2, 5)
    J = [torch.as_tensor(rng.standard_normal((d, d)), dtype=torch.float32) for _ in range(L)]
    calls = []
    result = depthwise_miscoupling(lambda l: calls.append(l) or J[l], L, Ks)
    assert calls == [*range(L), *range(L)]  # two passes, one Jacobian at a time
    M = result["miscoupling"]
    assert M.shape == (len(METRICS), len(Ks), L, L)
    assert np.allclose(np.diagonal(M, axis1=-2, axis2=-1), 0, atol=1e-5)
    svd = [np.linalg.svd(j.double().numpy()) for j in J]
    for j, K in enumerate(Ks):
        for l in range(L):
            for lp in range(L):
                Up, sp, Vhp = svd[lp]
                A = Up[:, :K].T @ J[l].double().numpy() @ Vhp[:K].T
                expected = [miscoupling(A), miscoupling(A, metric="released_l2", s=svd[l][1][:K]),
                            miscoupling(A, metric="released_trace", s=svd[l][1][:K])]
                assert np.allclose(M[:, j, l, lp], expected, atol=1e-5)
    assert np.allclose(result["singular_values"], np.stack([s[1][:5] for s in svd]), rtol=1e-5)
    assert result["abs_coupling"].shape == (L, L, 5, 5) and (result["abs_coupling"] >= 0).all()
    calls.clear()  # Jacobians that fit in hold_bytes are computed once, with the same result
    held = depthwise_miscoupling(lambda l: calls.append(l) or J[l], L, Ks, hold_bytes=L * d * d * 4)
    assert calls == list(range(L)) and np.array_equal(held["miscoupling"], M)


def test_layer_profile_and_bad_input():
    M = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 4.0], [5.0, 6.0, 0.0]])
    assert np.allclose(layer_profile(M), [(1 + 2 + 3 + 5) / 4, (3 + 4 + 1 + 6) / 4, (5 + 6 + 2 + 4) / 4])
    with pytest.raises(ValueError, match="2 layers"):
        layer_profile(np.zeros((1, 1)))
    with pytest.raises(ValueError, match="needs `s`"):
        miscoupling(np.eye(2), metric="released_l2")
    with pytest.raises(ValueError, match="unknown metric"):
        miscoupling(np.eye(2), metric="frobenius", s=np.ones(2))
    with pytest.raises(ValueError, match=r"K = 9 must lie in \[1, d = 4\]"):
        top_singular(torch.eye(4), 9)
    assert isinstance(top_singular(torch.eye(3), 2), Basis)


def _brute_force_tokenwise(J, Jb, T, K):
    """Every token-wise coupling by direct float64 SVDs: J[t1, t2] projected on Jb's bases."""
    svd = {key: np.linalg.svd(Jb[key]) for key in Jb}

    def m(key, basis_key, metric):
        U, _, Vh = svd[basis_key]
        A = U[:, :K].T @ J[key] @ Vh[:K].T
        return miscoupling(A, metric=metric, s=np.linalg.svd(J[key], compute_uv=False)[:K])

    out = {"self": np.full((len(METRICS), T, T), np.nan), "fixed_input": np.full((len(METRICS), T, T, T), np.nan),
           "fixed_output": np.full((len(METRICS), T, T, T), np.nan)}
    for i, metric in enumerate(METRICS):
        for t in range(T):
            for u in range(T):
                out["self"][i, t, u] = m((t, t), (u, u), metric)
        for t1 in range(T):
            for t2 in range(t1, T):
                for u in range(t1, T):
                    out["fixed_input"][i, t1, t2, u] = m((t1, t2), (t1, u), metric)
                for u in range(t2 + 1):
                    out["fixed_output"][i, t2, t1, u] = m((t1, t2), (u, t2), metric)
    return out


@pytest.mark.parametrize("same_layer", [False, True])
def test_tokenwise_matches_brute_force_svds(same_layer):
    rng = np.random.default_rng(3)
    d, T, Ks = 10, 4, (2, 4)
    pairs = [(t1, t2) for t2 in range(T) for t1 in range(t2 + 1)]
    J = {key: rng.standard_normal((d, d)) for key in pairs}
    Jb = J if same_layer else {key: rng.standard_normal((d, d)) for key in pairs}
    calls = []

    def sweep_of(source, name):
        def sweep():
            calls.append(name)
            for t2 in range(T):
                yield t2, torch.as_tensor(np.stack([source[t1, t2] for t1 in range(t2 + 1)]), dtype=torch.float64)
        return sweep

    sweep = sweep_of(J, "l")
    result = tokenwise_miscoupling(sweep, sweep if same_layer else sweep_of(Jb, "l'"), T, Ks, figure_K=2)
    assert calls == ["l", "l"] if same_layer else calls == ["l'", "l"]  # bases first, then the projections
    for j, K in enumerate(Ks):
        expected = _brute_force_tokenwise(J, Jb, T, K)
        for name in ("self", "fixed_input", "fixed_output"):
            assert np.allclose(result[name][:, j], expected[name], atol=1e-10, equal_nan=True), (name, K)
    if same_layer:  # a Jacobian on its own basis is diagonal
        assert np.allclose(np.diagonal(result["self"], axis1=-2, axis2=-1), 0, atol=1e-10)
    assert np.isnan(result["fixed_input"][:, :, 2, 1]).all()  # t1 = 2 > t2 = 1 does not exist
    U, _, Vh = np.linalg.svd(Jb[0, T - 1])
    assert np.allclose(result["abs_fixed_output"][1, 0], np.abs(U[:, :2].T @ J[1, T - 1] @ Vh[:2].T), atol=1e-6)
    calls.clear()  # held: one sweep when the prompt's Jacobians fit
    held = tokenwise_miscoupling(sweep, sweep, T, Ks, hold_bytes=1 << 20)
    assert calls == ["l"]
    if same_layer:
        assert np.allclose(held["self"], result["self"], equal_nan=True)


def test_tokenwise_refuses_a_sweep_of_the_wrong_length():
    def sweep():
        yield 0, torch.eye(3)[None]

    with pytest.raises(ValueError, match="expected n_tokens = 2"):
        tokenwise_miscoupling(sweep, sweep, 2, (2,))
