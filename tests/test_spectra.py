import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.optimize import linear_sum_assignment
from scipy.stats import ortho_group

from crosslayer.dynamics import regimes as R
from crosslayer.dynamics import spectra
from crosslayer.linalg import arrays, schur
from crosslayer.linalg import conditioning as cond
from crosslayer.linalg import effective_rank as er
from crosslayer.linalg.subspace import random_overlap_baseline

# relative tolerances per input dtype (statistics are computed in float64 from the cast input)
RTOL = {np.float32: 1e-5, np.float64: 1e-10}
DTYPES = [np.float32, np.float64]


def rotation(theta):
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


def random_layers(L, d, seed=0, scale=0.3):
    return np.eye(d) + scale * np.random.default_rng(seed).standard_normal((L, d, d)) / np.sqrt(d)


def psd(d, seed=0):
    Q = ortho_group.rvs(d, random_state=seed)
    return Q @ np.diag(np.linspace(3.0, 0.5, d)) @ Q.T  # distinct eigenvalues: gap after every k


def assert_same_eigenvalues(a, b, atol=1e-9):
    """Equal as multisets: optimal matching, robust to rounding in the sort order."""
    a, b = np.asarray(a), np.asarray(b)
    rows, cols = linear_sum_assignment(np.abs(a[:, None] - b[None, :]))
    assert np.abs(a[rows] - b[cols]).max() < atol


def is_normal(M, atol=1e-10):
    return np.allclose(M @ M.conj().T, M.conj().T @ M, atol=atol)


# --------------------------------------------------------------------------- per-sample


@pytest.mark.parametrize("seed", range(4))
def test_effective_rank_is_scipys_entropy_exponentiated(seed):
    # exp(scipy.stats.entropy(s^power)), bit for bit, zeros included
    from scipy.stats import entropy

    rng = np.random.default_rng(seed)
    s = np.abs(rng.standard_cauchy(int(rng.integers(1, 300))))
    s[rng.random(s.size) < 0.3] = 0.0
    s[0] = max(s[0], 1e-3)
    for power in (1, 2):
        assert er.effective_rank(s, power=power) == float(np.exp(entropy(s**power)))
    assert math.isnan(er.effective_rank(np.zeros(3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_sample_stats_match_numpy_svd(dtype):
    J = random_layers(7, 12, seed=1).astype(dtype)
    stats = cond.per_sample_stats(J, chunk=3)
    s = np.linalg.svd(J.astype(np.float64), compute_uv=False)
    rtol = RTOL[dtype]
    np.testing.assert_allclose(stats["condition_number"], s[:, 0] / s[:, -1], rtol=rtol * 10)
    np.testing.assert_allclose(stats["participation_ratio"], (s**2).sum(1) ** 2 / (s**4).sum(1), rtol=rtol)
    np.testing.assert_allclose(stats["frobenius"], np.sqrt((s**2).sum(1)), rtol=rtol)
    assert all(v.shape == (7,) for v in stats.values())


@pytest.mark.parametrize("seed", range(3))
def test_participation_ratio_without_svd_equals_svd(seed):
    rng = np.random.default_rng(seed)
    J = rng.standard_normal((5, 20, 20)) * rng.random((5, 1, 20))  # varied spectra
    s = np.linalg.svd(J, compute_uv=False)
    np.testing.assert_allclose(cond.participation_ratio(J), (s**2).sum(1) ** 2 / (s**4).sum(1), rtol=1e-12)


def test_participation_ratio_known_cases():
    d = 6
    assert cond.participation_ratio(np.eye(d))[0] == pytest.approx(d)
    assert cond.participation_ratio(2.5 * ortho_group.rvs(d, random_state=0))[0] == pytest.approx(d)
    assert cond.participation_ratio(np.outer(np.arange(1, 7), np.ones(6)))[0] == pytest.approx(1.0)
    assert cond.participation_ratio(np.diag([1.0, 1.0, 0.0]))[0] == pytest.approx(2.0)


def test_residual_option_uses_j_minus_identity():
    J = random_layers(4, 9, seed=2)
    R = J - np.eye(9)
    for name in ("frobenius", "participation_ratio", "condition_number"):
        np.testing.assert_allclose(
            cond.per_sample_stats(J, residual=True)[name], cond.per_sample_stats(R)[name], rtol=1e-12
        )


def test_condition_number_known_and_singular():
    assert cond.condition_number(np.diag([4.0, 2.0, 0.5]))[0] == pytest.approx(8.0)
    assert cond.condition_number(np.diag([1.0, 0.0]))[0] == np.inf


def test_torch_input_and_single_matrix():
    J = random_layers(3, 5, seed=3)
    stats_t = cond.per_sample_stats(torch.from_numpy(J.astype(np.float32)))
    stats_n = cond.per_sample_stats(J)
    for name in stats_n:
        np.testing.assert_allclose(stats_t[name], stats_n[name], rtol=1e-4)
    assert cond.frobenius_norm(J[0]).shape == (1,)
    assert isinstance(spectra.henrici_departure(torch.from_numpy(J[0])), float)


# --------------------------------------------------------------------------- per-sample, torch path

EPS32 = float(np.finfo(np.float32).eps)
PER_SAMPLE_FUNCTIONS = {"frobenius": cond.frobenius_norm, "participation_ratio": cond.participation_ratio,
                        "condition_number": cond.condition_number}


def conditioned(B, d, kappa, seed=0):
    """(B, d, d) float64 U diag(s) V^T with singular values log-spaced from kappa down to 1."""
    rng = np.random.default_rng(seed)
    s = np.geomspace(kappa, 1.0, d)
    return np.stack([ortho_group.rvs(d, random_state=rng) * s @ ortho_group.rvs(d, random_state=rng)
                     for _ in range(B)])


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("input_dtype", DTYPES)
def test_torch_float64_path_equals_numpy_path(input_dtype, residual):
    J = random_layers(7, 12, seed=4).astype(input_dtype)
    numpy_stats = cond.per_sample_stats(J, residual=residual, chunk=3)
    torch_stats = cond.per_sample_stats(torch.from_numpy(J), residual=residual, chunk=3)  # default float64
    assert torch_stats.keys() == numpy_stats.keys() | {"condition_path"}  # how each kappa was computed
    for name in numpy_stats:
        values = torch_stats[name]
        assert values.dtype == np.float64 and values.shape == (7,)
        np.testing.assert_allclose(values, numpy_stats[name], rtol=1e-10, err_msg=name)
        # the single-statistic functions take the same path
        single = PER_SAMPLE_FUNCTIONS[name](torch.from_numpy(J), residual=residual, dtype=torch.float64)
        np.testing.assert_allclose(single, numpy_stats[name], rtol=1e-10, err_msg=name)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("kappa", [None, 1e3])
def test_torch_float32_path_within_rounding_bounds(kappa, residual):
    # Tolerances are the a-priori float32 error bounds (eps = 2^-23), not fitted to this data:
    # * Frobenius: the cast rounds each entry by <= eps/2 relative and a length-d sum of squares
    #   adds <= ~d eps/2 (row norms; the rows are then summed in float64): rtol d eps.
    # * participation ratio ||J||_F^4 / ||J^T J||_F^2: every Gram entry is a length-d float32 dot
    #   product (<= ~d eps/2 relative to |row| |col|), and the ratio combines four Frobenius and
    #   two Gram-norm factors: rtol 4 d eps.
    # * condition number: a backward-stable SVD gets every singular value to within
    #   ~p(d) eps s_max, so s_min, and with it kappa, is off by ~p(d) eps kappa relative; rtol
    #   d eps kappa (here up to ~1e-3 for kappa = 1e3, and it grows with kappa: float32
    #   condition numbers mean nothing once kappa approaches 1 / eps ~ 1e7).
    d = 24
    J = random_layers(6, d, seed=5) if kappa is None else np.eye(d) * residual + conditioned(6, d, kappa, seed=5)
    ref = cond.per_sample_stats(J, residual=residual)
    got = cond.per_sample_stats(torch.from_numpy(J), residual=residual, dtype="float32", chunk=4)
    np.testing.assert_allclose(got["frobenius"], ref["frobenius"], rtol=d * EPS32)
    np.testing.assert_allclose(got["participation_ratio"], ref["participation_ratio"], rtol=4 * d * EPS32)
    kappa_ref = ref["condition_number"]
    assert np.all(np.abs(got["condition_number"] / kappa_ref - 1) <= d * EPS32 * kappa_ref)
    if kappa is not None:
        assert kappa_ref == pytest.approx(kappa, rel=1e-9)  # the test matrices have the kappa asked for
    assert all(got[name].dtype == np.float64 for name in cond.PER_SAMPLE_STATS) and got["condition_path"].dtype == np.int8
    assert (got["condition_path"] == cond.CONDITION_PATHS.index("svd")).all()  # float32 shortcuts are not accurate enough


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("kappa, path", [(3.0, "gram"), (100.0, "gram"), (1e4, "inverse_iteration"),
                                         (1e6, "inverse_iteration")])
def test_condition_numbers_without_an_svd_equal_the_svd(kappa, path, residual):
    # kappa of the operator the statistic sees (J, or J - I when residual); NumPy's path is the full SVD
    d = 64
    M = conditioned(5, d, kappa, seed=21)
    J = M + np.eye(d) if residual else M
    ref = cond.per_sample_stats(J, residual=residual)["condition_number"]
    assert ref == pytest.approx(np.full(5, kappa), rel=1e-9)
    got = cond.per_sample_stats(torch.from_numpy(J), residual=residual, chunk=2)
    np.testing.assert_allclose(got["condition_number"], ref, rtol=1e-8)  # the Gram route's bound; the others ~eps kappa
    assert [cond.CONDITION_PATHS[i] for i in got["condition_path"]] == [path] * 5


def _pair_cases():
    d, rng = 40, np.random.default_rng(31)
    near = random_layers(6, d, seed=30)  # J - I of norm ~0.3: the derived Gram matrix
    ill = conditioned(4, d, 1e5, seed=32) + np.eye(d)  # J - I with kappa 1e5: inverse iteration
    tiny = np.eye(d) + 1e-4 * rng.standard_normal((3, d, d))  # ||J - I|| << ||J|| + 1: J - I's own product
    zero = 1e-3 * rng.standard_normal((2, d, d))  # J ~ 0, J - I ~ -I: no cancellation, derived
    big = 1e20 * random_layers(2, d, seed=33)  # c = 1 / scale tiny: exact in the shared scale
    cplx = near[:2] + 0.1j * rng.standard_normal((2, d, d)) / np.sqrt(d)
    return {"near": (near, 0), "ill": (ill, 0), "tiny": (tiny, 3), "zero": (zero, 0), "big": (big, 0),
            "complex": (cplx, 0)}


@pytest.mark.parametrize("case", ["near", "ill", "tiny", "zero", "big", "complex"])
def test_stats_of_j_and_j_minus_i_at_once_equal_two_calls(case, monkeypatch):
    J, own = _pair_cases()[case]
    J = torch.from_numpy(J)
    expected = cond.per_sample_stats(J, chunk=4) | {
        f"{name}_res": values for name, values in cond.per_sample_stats(J, residual=True, chunk=4).items()}
    grams, gram = [], cond._gram
    monkeypatch.setattr(cond, "_gram", lambda block: grams.append(block.shape[0]) or gram(block))
    got = cond.per_sample_stats_pair(J, chunk=4)
    assert list(got) == list(expected)
    for name, values in expected.items():
        rtol = 0 if name.startswith("condition_path") else (1e-8 if name.startswith("condition") else 1e-12)
        np.testing.assert_allclose(got[name], values, rtol=rtol, err_msg=name)
    # one d^3 Gram product per J, plus one per sample whose J - I is too small for the derived one
    assert sum(grams) == len(J) + own


def test_stats_pair_derived_gram_keeps_the_participation_ratio_exact_to_the_loss_bound():
    # the guard's edge: a J - I just above and just below the accepted loss, against NumPy (float64)
    d = 30
    base = np.random.default_rng(34).standard_normal((2, d, d)) / np.sqrt(d)
    for eps in (0.05, 0.5):
        J = np.eye(d) + eps * base
        got = cond.per_sample_stats_pair(torch.from_numpy(J))
        np.testing.assert_allclose(got["participation_ratio_res"], cond.participation_ratio(J, residual=True), rtol=1e-11)
        np.testing.assert_allclose(got["condition_number_res"], cond.condition_number(J, residual=True), rtol=1e-8)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_stats_pair_on_numpy_and_float32_is_two_calls(dtype):
    J = random_layers(3, 12, seed=35)
    data = torch.from_numpy(J) if dtype == "float32" else J
    got = cond.per_sample_stats_pair(data, dtype=dtype, condition=False)
    plain, res = cond.per_sample_stats(data, dtype=dtype, condition=False), cond.per_sample_stats(
        data, residual=True, dtype=dtype, condition=False)
    assert list(got) == ["frobenius", "participation_ratio", "frobenius_res", "participation_ratio_res"]
    for name, values in (plain | {f"{k}_res": v for k, v in res.items()}).items():
        np.testing.assert_array_equal(got[name], values)


@pytest.mark.parametrize("complex_", [False, True])
def test_gram_extremes_equal_the_ends_of_the_full_spectrum(complex_, monkeypatch):
    # the CPU route (tridiagonal reduction + bisection for two eigenvalues), taken here at every
    # width, against NumPy's full eigvalsh: sizes 1-3, a wide spread, a singular Gram matrix, an
    # exact double end eigenvalue
    monkeypatch.setattr(cond, "_REDUCTION_WIDTHS", (1, 10**9))
    rng = np.random.default_rng(0)
    grams = []
    for d in (1, 2, 3, 64):
        X = rng.standard_normal((d, d)) + (1j * rng.standard_normal((d, d)) if complex_ else 0)
        grams.append(X.conj().T @ X)
    Q = np.linalg.qr(rng.standard_normal((64, 64)))[0]
    grams.append(Q @ np.diag(np.logspace(3, -9, 64)) @ Q.T)  # kappa 1e12
    grams.append(Q @ np.diag(np.r_[0.0, np.linspace(1, 2, 62), 2.0]) @ Q.T)  # singular, top twice
    for G in grams:
        t = torch.from_numpy(np.ascontiguousarray(G, dtype=np.complex128 if complex_ else np.float64))[None]
        ends = cond._gram_extremes(t).numpy()[0]
        lam = np.linalg.eigvalsh(G)
        np.testing.assert_allclose(ends, lam[[0, -1]], rtol=0, atol=1e-13 * lam[-1])
    assert cond._gram_extremes(torch.zeros(3, 4, 4, dtype=torch.float64)).abs().max() == 0


@pytest.mark.parametrize("complex_", [False, True])
def test_gram_top_by_lanczos_equals_the_full_spectrum(complex_, monkeypatch):
    # ARPACK, taken here from d = 32: a clustered top (s_2 / s_1 = 0.999), a kernel holding the
    # ones vector (as LayerNorm Jacobians do), and a matrix below that width (eigenvalues instead)
    monkeypatch.setattr(cond, "_TOP_MIN_WIDTH", 32)
    rng = np.random.default_rng(1)
    for d, top_gap, ones_kernel in ((64, 0.999, False), (200, 0.5, True), (20, 0.9, False)):
        U = np.linalg.qr(rng.standard_normal((d, d)) + (1j * rng.standard_normal((d, d)) if complex_ else 0))[0]
        if ones_kernel:  # first column along 1, eigenvalue 0
            U = np.linalg.qr(np.column_stack([np.ones(d), U[:, 1:]]))[0]
        lam = np.r_[0.0 if ones_kernel else 0.5, np.linspace(0.5, top_gap, d - 2), 1.0] * 7.0
        G = torch.from_numpy((U * lam) @ U.conj().T)
        assert cond._gram_top(G) == pytest.approx(7.0, rel=1e-11)


def test_condition_route_skips_the_reduction_once_inverse_iteration_has_served(monkeypatch):
    # ill-conditioned matrices (J - I of a layer): the first goes Gram route -> inverse iteration;
    # the rest try inverse iteration first and need only s_max (Lanczos), never the reduction. A
    # well-conditioned matrix in between makes the order fall back (inverse iteration does not
    # converge on its clustered bottom), and the last one's clustered small values reach the SVD.
    d = 64
    rng = np.random.default_rng(41)
    ill = conditioned(4, d, 1e6, seed=42)
    well = conditioned(1, d, 3.0, seed=43)
    s = np.concatenate([np.geomspace(10.0, 1.0, d - 20), 1e-5 * (1 + 1e-3 * np.arange(20))])
    clustered = ortho_group.rvs(d, random_state=rng) * s @ ortho_group.rvs(d, random_state=rng)
    J = np.concatenate([ill[:2], well, ill[2:], clustered[None]])
    monkeypatch.setattr(cond, "_TOP_MIN_WIDTH", 32)  # s_max by Lanczos at this width too, as from d = 512
    reductions, extremes = [], cond._gram_extremes
    monkeypatch.setattr(cond, "_gram_extremes", lambda g: reductions.append(g.shape[0]) or extremes(g))
    for chunk in (1, 3, 16):
        reductions.clear()
        got = cond.per_sample_stats(torch.from_numpy(J), chunk=chunk)
        np.testing.assert_allclose(got["condition_number"], cond.condition_number(J), rtol=1e-8)
        names = [cond.CONDITION_PATHS[i] for i in got["condition_path"]]
        assert names == ["inverse_iteration", "inverse_iteration", "gram", "inverse_iteration",
                         "inverse_iteration", "svd"]
        # reductions: the first matrix, the well-conditioned one (after inverse iteration failed
        # on it), the one after it (its predecessor took the Gram route), the clustered one
        assert sum(reductions) == 4


def test_clustered_smallest_singular_values_fall_back_to_the_svd():
    # 20 smallest singular values within 1e-3 of each other, a cluster wider than the iterated block
    d = 48
    rng = np.random.default_rng(22)
    s = np.concatenate([np.geomspace(10.0, 1.0, d - 20), 1e-5 * (1 + 1e-3 * np.arange(20))])
    J = ortho_group.rvs(d, random_state=rng) * s @ ortho_group.rvs(d, random_state=rng)
    got = cond.per_sample_stats(torch.from_numpy(J))
    assert cond.CONDITION_PATHS[got["condition_path"][0]] == "svd"
    assert got["condition_number"][0] == pytest.approx(10.0 / 1e-5, rel=1e-8)


def test_inverse_iteration_gets_a_tiny_isolated_singular_value_the_gram_route_would_lose():
    # kappa = 1e12: s_min^2 / s_max^2 = 1e-24 is far below the Gram matrix's rounding (~1e-16)
    d = 32
    rng = np.random.default_rng(23)
    s = np.concatenate([np.geomspace(1.0, 0.1, d - 1), [1e-12]])
    J = ortho_group.rvs(d, random_state=rng) * s @ ortho_group.rvs(d, random_state=rng)
    got = cond.per_sample_stats(torch.from_numpy(J))
    assert cond.CONDITION_PATHS[got["condition_path"][0]] == "inverse_iteration"
    ref = cond.condition_number(J)[0]  # NumPy SVD: itself accurate to ~eps kappa ~ 1e-4 here
    assert got["condition_number"][0] == pytest.approx(ref, rel=1e-3) and ref == pytest.approx(1e12, rel=1e-3)


@pytest.mark.parametrize("factor", [1e20, 1e-30, 3e38])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_path_is_exact_for_entries_that_would_overflow_or_underflow_float32(factor, dtype):
    # ||J||_F^2 of entries ~1e20 or ~1e-30 leaves float32's range; each matrix is scaled by a power
    # of two first, so the statistics are those of the unscaled matrix (NumPy, float64)
    J = random_layers(3, 12, seed=9)
    J = (J / np.abs(J).max() * factor).astype(np.float32) if factor == 3e38 else (J * factor).astype(np.float32)
    expected = cond.per_sample_stats(J.astype(np.float64))
    got = cond.per_sample_stats(torch.from_numpy(J), dtype=dtype)
    for name in expected:
        assert np.isfinite(got[name]).all(), name
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5 if dtype == "float32" else 1e-12, err_msg=name)


def test_unreliable_condition_numbers_are_inf_or_large_and_warned_about(caplog):
    singular = np.diag([1.0, 1.0, 0.0])[None]
    kappa = cond.per_sample_stats(torch.from_numpy(singular), dtype="float64")["condition_number"]
    assert np.isinf(kappa).all()  # not NaN
    with caplog.at_level("WARNING"):
        assert cond.warn_unreliable_conditions(kappa, "float64", "layer 3 (J - I)") == 1
        assert cond.warn_unreliable_conditions(np.array([2.0, 1e8]), "float32", "layer 1 (J)") == 1
        assert cond.warn_unreliable_conditions(np.array([2.0, 1e8]), "float64", "layer 1 (J)") == 0
    assert "layer 3 (J - I): 1 of 1 condition numbers are inf" in caplog.text
    assert "layer 1 (J): 1 of 2 condition numbers are inf or beyond float32 precision" in caplog.text
    assert "per_sample_dtype: float64" in caplog.text


def test_torch_residual_subtracts_identity_on_device_without_touching_the_input():
    J = random_layers(5, 10, seed=6)
    for dtype, tdtype in (("float64", torch.float64), ("float32", torch.float32)):
        # input already in the compute dtype: the cast does not copy, so the path must
        J_t = torch.from_numpy(J).to(tdtype)
        before = J_t.clone()
        res = cond.per_sample_stats(J_t, residual=True, dtype=dtype)
        plain = cond.per_sample_stats(J_t - torch.eye(10, dtype=tdtype), dtype=dtype)  # same rounding
        for name in res:
            np.testing.assert_allclose(res[name], plain[name], rtol=1e-12, err_msg=name)
        assert torch.equal(J_t, before)


def test_torch_input_never_goes_through_numpy(monkeypatch):
    """The Jacobians stay on their device: no host conversion of the (B, d, d) tensor."""

    def refuse(x):
        raise AssertionError("a tensor was converted to NumPy")

    monkeypatch.setattr(arrays, "to_numpy", refuse)
    J = torch.from_numpy(random_layers(3, 6, seed=7))
    for residual in (False, True):
        assert cond.per_sample_stats(J, residual=residual)["condition_number"].shape == (3,)
        for fn in PER_SAMPLE_FUNCTIONS.values():
            assert fn(J, residual=residual).shape == (3,)
    with pytest.raises(AssertionError, match="converted to NumPy"):
        cond.per_sample_stats(J.numpy())  # the NumPy path does go through it


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_torch_path_is_chunk_independent(dtype):
    J = torch.from_numpy(random_layers(10, 16, seed=8)).float()
    results = [cond.per_sample_stats(J, residual=True, chunk=c, dtype=dtype) for c in (1, 3, 10, 64)]
    rtol = 1e-13 if dtype == "float64" else 10 * EPS32  # batched float32 GEMMs may round differently
    for other in results[1:]:
        for name in results[0]:
            np.testing.assert_allclose(other[name], results[0][name], rtol=rtol, err_msg=name)


def test_torch_path_single_matrix_complex_grad_and_degenerate_cases():
    J = random_layers(1, 7, seed=9)[0]
    stats = cond.per_sample_stats(torch.from_numpy(J).requires_grad_(True))  # detached, no error
    assert all(v.shape == (1,) for v in stats.values())
    Jc = J + 0.5j * random_layers(1, 7, seed=10)[0]
    got = cond.per_sample_stats(torch.from_numpy(Jc), residual=True)
    for name, values in cond.per_sample_stats(Jc, residual=True).items():
        np.testing.assert_allclose(got[name], values, rtol=1e-10, err_msg=name)
    assert cond.condition_number(torch.diag(torch.tensor([4.0, 2.0, 0.5], dtype=torch.float64)))[0] == pytest.approx(8)
    assert cond.condition_number(torch.diag(torch.tensor([1.0, 0.0], dtype=torch.float64)))[0] == np.inf
    assert np.isnan(cond.participation_ratio(torch.zeros(2, 3, 3))).all()
    assert cond.participation_ratio(torch.eye(5), dtype="float32")[0] == pytest.approx(5)


def test_condition_false_skips_the_svd_and_the_key():
    J = random_layers(4, 8, seed=11)
    for x in (J, torch.from_numpy(J)):
        stats = cond.per_sample_stats(x, condition=False)
        assert set(stats) == {"frobenius", "participation_ratio"}


def test_dtype_and_chunk_are_checked():
    J = random_layers(2, 4, seed=12)
    for x in (J, torch.from_numpy(J)):
        with pytest.raises(ValueError, match="`dtype` must be one of"):
            cond.per_sample_stats(x, dtype="float16")
        with pytest.raises(ValueError, match="`dtype` must be one of"):
            cond.condition_number(x, dtype=torch.bfloat16)
        with pytest.raises(ValueError, match="`chunk` must be >= 1"):
            cond.per_sample_stats(x, chunk=0)
    with pytest.raises(ValueError, match=r"square matrices, got shape \(2, 4, 3\)"):
        cond.per_sample_stats(torch.zeros(2, 4, 3))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_torch_path_on_cuda_matches_numpy(dtype):
    J = random_layers(9, 32, seed=13).astype(np.float32)
    J_cuda = torch.from_numpy(J).cuda()
    for residual in (False, True):
        ref = cond.per_sample_stats(J, residual=residual)
        got = cond.per_sample_stats(J_cuda, residual=residual, dtype=dtype, chunk=4)
        kappa = ref["condition_number"]
        for name in ref:  # float32 bounds as in test_torch_float32_path_within_rounding_bounds
            rtol = 1e-10 if dtype == "float64" else 4 * 32 * EPS32 * (kappa if name == "condition_number" else 1)
            assert np.all(np.abs(got[name] / ref[name] - 1) <= rtol), (name, residual)
    assert torch.equal(J_cuda.cpu(), torch.from_numpy(J))  # residual did not write into the input


# --------------------------------------------------------------------------- eigen statistics


def test_rotation_only_matrix_is_all_complex_pairs():
    J = np.zeros((6, 6))
    for i, theta in enumerate([0.3, 1.0, 2.0]):
        J[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = rotation(theta)
    stats = spectra.eigen_stats(0.9 * J)
    assert stats["frac_complex"] == 1.0
    assert stats["spectral_radius"] == pytest.approx(0.9)
    assert stats["frac_expanding"] == 0.0
    assert spectra.eigen_stats(1.1 * J)["frac_expanding"] == 1.0


def test_one_rotation_block_gives_one_pair():
    J = np.diag([2.0, 0.5, 1.5, 0.7, 0.2])
    J[:2, :2] = 1.2 * rotation(0.5)
    stats = spectra.eigen_stats(J)
    assert stats["frac_complex"] == pytest.approx(2 / 5)
    assert np.sum(np.abs(stats["eigenvalues"].imag) > 0) == 2


def test_frac_complex_tolerance_is_relative():
    J = np.diag([100.0, 100.0, 3.0])
    J[:2, :2] = 100 * rotation(1e-9)  # |Im| = 1e-7 = 1e-9 * max|lambda| < 1e-6 relative
    assert spectra.eigen_stats(J)["frac_complex"] == 0.0
    assert spectra.eigen_stats(J, tol=1e-12)["frac_complex"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_expanding_fraction_diagonal(dtype):
    J = np.diag([2.0, 0.5, 3.0, 0.9, 1.1, 0.1]).astype(dtype)
    stats = spectra.eigen_stats(J)
    assert stats["frac_expanding"] == pytest.approx(3 / 6)
    assert stats["spectral_radius"] == pytest.approx(3.0)
    assert stats["frac_complex"] == 0.0
    # J - I = diag(1, -0.5, 2, -0.1, 0.1, -0.9): only |2| > 1
    assert spectra.eigen_stats(J, residual=True)["frac_expanding"] == pytest.approx(1 / 6)


def test_henrici_zero_for_normal_and_known_jordan():
    assert spectra.henrici_departure(psd(8)) == pytest.approx(0.0, abs=1e-6)
    assert spectra.henrici_departure(ortho_group.rvs(8, random_state=1)) == pytest.approx(0.0, abs=1e-6)
    assert spectra.henrici_departure(rotation(0.7)) == pytest.approx(0.0, abs=1e-6)
    # [[1, 1], [0, 1]]: ||J||_F^2 = 3, sum |lambda|^2 = 2 -> sqrt(1/3)
    assert spectra.henrici_departure(np.array([[1.0, 1.0], [0.0, 1.0]])) == pytest.approx(math.sqrt(1 / 3))
    # nilpotent: every bit of mass is non-normal
    assert spectra.henrici_departure(np.array([[0.0, 5.0], [0.0, 0.0]])) == pytest.approx(1.0)


def test_henrici_equals_schur_ratio():
    J = random_layers(1, 10, seed=4, scale=2.0)[0]
    _, _, N = schur.schur_parts(J)
    assert spectra.henrici_departure(J) == pytest.approx(np.linalg.norm(N) / np.linalg.norm(J), rel=1e-8)


def test_residual_norm_ratio():
    d = 16
    assert spectra.residual_norm_ratio(np.eye(d)) == 0.0
    assert spectra.residual_norm_ratio(3 * np.eye(d)) == pytest.approx(2.0)
    J = random_layers(1, d, seed=5)[0]
    assert spectra.residual_norm_ratio(J) == pytest.approx(np.linalg.norm(J - np.eye(d)) / math.sqrt(d))


# --------------------------------------------------------------------------- alignment


@pytest.mark.parametrize("method", ["arpack", "full"])
def test_self_alignment_symmetric_is_one(method):
    assert spectra.self_alignment(psd(20), k=5, method=method) == pytest.approx(1.0, abs=1e-8)
    # symmetric indefinite: left and right vectors agree up to sign
    Q = ortho_group.rvs(20, random_state=3)
    sym = Q @ np.diag(np.linspace(-3, 2.5, 20)) @ Q.T
    assert spectra.self_alignment(sym, k=5, method=method) == pytest.approx(1.0, abs=1e-8)


def test_self_alignment_of_shift_is_zero():
    # cyclic shift e_i -> e_{i+1} scaled: right vectors e_i, left vectors e_{i+1}
    d, k = 10, 3
    J = np.roll(np.eye(d), 1, axis=0) @ np.diag(np.linspace(5, 1, d))
    # top-3 right: e0, e1, e2 ; top-3 left: e1, e2, e3 -> cosines 1, 1, 0
    assert spectra.self_alignment(J, k=k, method="full") == pytest.approx(2 / 3)


def test_forward_alignment_on_constructed_layers():
    d, k = 12, 2
    P = ortho_group.rvs(d, random_state=7)
    diag = np.diag(np.linspace(4, 1, d))
    # layer 0 maps its top inputs onto P[:, :k]; layer 1 reads its top inputs from P[:, :k]
    J0 = P @ diag @ np.eye(d)
    J1 = np.eye(d) @ diag @ P.T
    # layer 1 outputs along e_0, e_1; layer 2 reads its top inputs from e_2, e_3 (orthogonal)
    J2 = diag @ np.roll(np.eye(d), k, axis=0).T
    prof = spectra.alignment_profile([J0, J1, J2], k=k, method="full", draws=200)
    assert prof["forward"].shape == (2,)
    assert prof["forward"][0] == pytest.approx(1.0, abs=1e-10)
    assert prof["forward"][1] == pytest.approx(0.0, abs=1e-10)
    assert prof["self"].shape == (3,)


def test_alignment_profile_residual_and_baseline():
    Js = random_layers(3, 16, seed=8)
    prof = spectra.alignment_profile(Js, k=3, residual=True, method="full", draws=200, seed=1)
    assert (prof["baseline_mean"], prof["baseline_sd"]) == random_overlap_baseline(16, 3, draws=200, seed=1)
    U, V = spectra.layer_subspaces(Js - np.eye(16), k=3, method="full")
    from crosslayer.linalg.subspace import subspace_overlap

    assert prof["self"][1] == pytest.approx(subspace_overlap(U[1], V[1]))
    assert prof["forward"][0] == pytest.approx(subspace_overlap(U[0], V[1]))
    assert np.all((prof["self"] >= 0) & (prof["self"] <= 1))


# --------------------------------------------------------------------------- effective rank


@pytest.mark.parametrize("power", [1, 2])
def test_effective_rank_identity_and_known(power):
    d = 9
    assert er.cumulative_effective_rank(np.eye(d)[None], power=power)[0][0] == pytest.approx(d)
    assert er.effective_rank(np.ones(d), power=power) == pytest.approx(d)
    assert er.effective_rank(np.array([3.0, 0, 0]), power=power) == pytest.approx(1.0)
    # two equal-weight values (after power) -> 2
    assert er.effective_rank(np.array([1.0, 1.0, 0.0]), power=power) == pytest.approx(2.0)


def test_effective_rank_power_differs():
    s = np.array([2.0, 1.0])
    p1, p2 = np.array([2, 1]) / 3, np.array([4, 1]) / 5
    assert er.effective_rank(s, power=1) == pytest.approx(np.exp(-(p1 * np.log(p1)).sum()))
    assert er.effective_rank(s, power=2) == pytest.approx(np.exp(-(p2 * np.log(p2)).sum()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("power", [1, 2])
def test_cumulative_untruncated_equals_exact_product(dtype, power):
    L, d = 5, 10
    Js = random_layers(L, d, seed=9, scale=1.5).astype(dtype)
    erank, log_fro = er.cumulative_effective_rank(Js, rank=d, power=power)
    J64 = Js.astype(np.float64)
    for start in range(L):
        P = np.eye(d)
        for layer in range(start, L):
            P = J64[layer] @ P  # J_{L-1} ... J_start
        s = np.linalg.svd(P, compute_uv=False)
        assert erank[start] == pytest.approx(er.effective_rank(s, power=power), rel=1e-9)
        assert log_fro[start] == pytest.approx(np.log(np.linalg.norm(P)), rel=1e-9, abs=1e-9)


def test_cumulative_rank_r_bounds_effective_rank():
    Js = random_layers(6, 12, seed=10, scale=1.0)
    for r in (1, 3, 5):
        erank, _ = er.cumulative_effective_rank(Js, rank=r)
        assert np.all(erank <= r + 1e-9) and np.all(erank >= 1 - 1e-9)
    # a rank-2 layer caps every product that passes through it
    Js[3] = np.outer(np.arange(12.0), np.ones(12)) + np.outer(np.ones(12), np.arange(12.0) ** 2)
    erank, _ = er.cumulative_effective_rank(Js, rank=12)
    assert np.all(erank[:4] <= 2 + 1e-9)


def test_cumulative_scale_does_not_overflow():
    Js = np.stack([1e30 * np.eye(4)] * 40)
    erank, log_fro = er.cumulative_effective_rank(Js)
    np.testing.assert_allclose(erank, 4)
    assert log_fro[0] == pytest.approx(40 * math.log(1e30) + math.log(2))


def test_cumulative_default_rank_and_torch():
    Js = torch.from_numpy(random_layers(3, 6, seed=11))
    erank, _ = er.cumulative_effective_rank(Js)  # rank min(256, 6) = 6 = exact
    np.testing.assert_allclose(erank, er.cumulative_effective_rank(Js.numpy(), rank=6)[0])


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

    code = ("import sys, numpy as np; from crosslayer.linalg import schur as S; w = S.TORCH_MIN_WIDTH; "
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


# --------------------------------------------------------------------------- depth regimes


def test_depth_regimes_paper_split():
    labels = R.depth_regimes(32, boundaries=R.PAPER_BOUNDARIES)
    assert list(labels[:5]) == ["early"] * 5
    assert list(labels[5:20]) == ["mid"] * 15
    assert list(labels[20:]) == ["late"] * 12
    np.testing.assert_array_equal(R.depth_regimes(32), labels)  # default fractions
    expected = ["early"] * 2 + ["mid"] * 3 + ["late"] * 5
    np.testing.assert_array_equal(R.depth_regimes(10, fractions=(0.2, 0.5)), expected)


def test_regime_summary_means():
    stats = {"a": np.arange(6.0), "b": [1.0, 1.0, 2.0, 2.0, 3.0, np.nan]}
    labels = R.depth_regimes(6, boundaries=(2, 4))
    table = R.regime_summary(stats, labels)
    assert isinstance(table, pd.DataFrame)
    assert list(table.index) == ["early", "mid", "late"]
    np.testing.assert_allclose(table["a"], [0.5, 2.5, 4.5])
    np.testing.assert_allclose(table["b"], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(table["n_layers"], [2, 2, 2])


def test_spectral_profile_table():
    Js = random_layers(5, 8, seed=15)
    table, eigenvalues = spectra.spectral_profile(Js, k=2, method="full", draws=50, rank=8)
    np.testing.assert_allclose(np.sort_complex(eigenvalues[1]), np.sort_complex(np.linalg.eigvals(Js[1])))
    np.testing.assert_allclose(table["cumulative_effective_rank"], er.cumulative_effective_rank(Js, rank=8)[0])
    assert len(table) == 5 and np.isnan(table["forward_alignment"].iloc[-1])
    assert table["henrici"].iloc[0] == pytest.approx(spectra.henrici_departure(Js[0]))
    assert table["frac_complex_res"].iloc[2] == spectra.eigen_stats(Js[2], residual=True)["frac_complex"]
    summary = R.regime_summary(table, R.depth_regimes(5))
    assert summary["n_layers"].sum() == 5


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: cond.per_sample_stats(np.ones((2, 3, 4))), r"`J` must be .*shape \(2, 3, 4\)"),
        (lambda: cond.participation_ratio(np.ones(3)), r"`J` must be .*shape \(3,\)"),
        (lambda: spectra.eigen_stats(np.ones((3, 2))), r"`J` must be a square .*\(3, 2\)"),
        (lambda: spectra.henrici_departure(np.ones((2, 2, 2))), r"`J` must be a square"),
        (lambda: spectra.residual_norm_ratio(np.ones((2, 3))), r"`J` must be a square"),
        (lambda: spectra.self_alignment(np.eye(4), k=4), r"`k` must satisfy"),
        (lambda: spectra.alignment_profile(np.ones((2, 3, 4))), r"`Js` must be .*\(2, 3, 4\)"),
        (lambda: er.cumulative_effective_rank(np.ones((2, 4, 4)), rank=5), r"`rank` must satisfy"),
        (lambda: er.cumulative_effective_rank(np.ones((2, 4, 5))), r"`Js` must be"),
        (lambda: er.effective_rank(np.ones(3), power=3), r"`power` must be 1 or 2"),
        (lambda: er.effective_rank(-np.ones(3)), r"`s` must be >= 0"),
        (lambda: schur.schur_parts(np.eye(3), mode="J+I"), r"`mode` must be one of"),
        (lambda: schur.schur_recompose(np.eye(3), np.ones(2), np.zeros((3, 3)), 1.0), r"`D` must have shape"),
        (lambda: schur.schur_dose_response(np.ones((1, 3, 2))), r"`Js` must be .*\(1, 3, 2\)"),
        (lambda: R.depth_regimes(10, boundaries=(6, 4)), r"`boundaries` must be"),
        (lambda: R.depth_regimes(10, fractions=(0.5, 1.2)), r"`fractions` must be"),
        (lambda: R.regime_summary({"a": np.ones(3)}, ["early", "mid"]), r"`regimes` must have shape"),
        (lambda: R.regime_summary({"a": np.ones(2)}, ["early", "middle"]), r"`regimes` must hold labels"),
    ],
)
def test_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


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
