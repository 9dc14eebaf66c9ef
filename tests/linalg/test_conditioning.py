"""Per-sample norms, participation ratios and condition numbers (crosslayer.linalg.conditioning)
against NumPy's SVD, on numpy and torch input, float32 within its rounding bounds."""

import numpy as np
import pytest
import torch
from layer_stacks import DTYPES, conditioned, random_layers
from scipy.stats import ortho_group

from crosslayer.dynamics import spectra
from crosslayer.linalg import arrays
from crosslayer.linalg import conditioning as cond

# relative tolerances per input dtype (statistics are computed in float64 from the cast input)
RTOL = {np.float32: 1e-5, np.float64: 1e-10}


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
