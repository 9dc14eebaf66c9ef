"""Paper 004's spectral statistics (crosslayer.dynamics.spectra): complex pairs, the expanding
fraction, Henrici's departure from normality, self- and forward alignment, the spectral profile and
its progress reporting, and bad input."""

import math

import numpy as np
import pandas as pd
import pytest
from layer_stacks import DTYPES, random_layers
from progress_recorder import Recorder, small_jacobians
from scipy.stats import ortho_group

from crosslayer.dynamics import regimes as R
from crosslayer.dynamics import spectra
from crosslayer.dynamics.spectra import spectral_profile
from crosslayer.linalg import conditioning as cond
from crosslayer.linalg import effective_rank as er
from crosslayer.dynamics import surgery as schur
from crosslayer.linalg.subspace import random_overlap_baseline


def rotation(theta):
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


def psd(d, seed=0):
    Q = ortho_group.rvs(d, random_state=seed)
    return Q @ np.diag(np.linspace(3.0, 0.5, d)) @ Q.T  # distinct eigenvalues: gap after every k


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


def test_spectral_profile_reports_both_passes_and_same_table():
    Js, recorder = small_jacobians(), Recorder()
    plain, eig = spectral_profile(Js, k=2, draws=20)
    wrapped, eig_wrapped = spectral_profile(Js, k=2, draws=20, progress=recorder)
    assert recorder.seen == [(("J",), 3), (("J - I",), 3)]
    pd.testing.assert_frame_equal(wrapped, plain)
    np.testing.assert_array_equal(eig_wrapped, eig)
