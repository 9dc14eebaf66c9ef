"""Paper 004's per-layer views added for Figs 2/S2, S1, 4b, 5 (amplification) and 7a, and Table 2's
min layer: the numbers against NumPy/SciPy on the arrays the workflow saves, the panels by their
artists."""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import scipy.stats

from crosslayer.dynamics.densities import eigenvalue_density
from crosslayer.dynamics.funnel import radius_vs_rank_drop, rank_drop
from crosslayer.dynamics.plots import (
    REGIME_COLORS,
    plot_dose_response,
    plot_layer_density,
    plot_radius_vs_rank_drop,
    plot_regime_bands,
    plot_unit_coupling,
)
from crosslayer.dynamics.regimes import depth_regimes, minimum_layer
from crosslayer.dynamics.spectra import spectral_profile
from crosslayer.dynamics.statistics import boundary_coupling, jacobian_column_norms, participation_tails


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def saved_profile(tmp_path, seed=0, L=7, d=12):
    """A spectra table as the workflow writes and reads it back (results/dynamics/.../spectra.tsv)."""
    rng = np.random.default_rng(seed)
    Js = np.eye(d) + rng.normal(scale=rng.uniform(0.1, 0.9, size=(L, 1, 1)) / np.sqrt(d), size=(L, d, d))
    table, eigenvalues = spectral_profile(Js, k=3, draws=20, rank=d)
    path = tmp_path / f"spectra{seed}.tsv"
    table.to_csv(path, sep="\t")
    return pd.read_csv(path, sep="\t", index_col="layer"), eigenvalues, Js


# --------------------------------------------------------------------------- Fig. 4b


@pytest.mark.parametrize("seed", range(4))
def test_radius_vs_rank_drop_is_scipys_spearman_on_the_saved_columns(tmp_path, seed):
    table, _, _ = saved_profile(tmp_path, seed)
    radius, ranks = table["spectral_radius"].to_numpy(), table["cumulative_effective_rank"].to_numpy()
    got = radius_vs_rank_drop(radius, ranks)
    expected = scipy.stats.spearmanr(radius[:-1], ranks[1:] - ranks[:-1])
    assert got["n"] == len(table) - 1
    assert got["rho"] == pytest.approx(expected.statistic, abs=1e-12)
    assert got["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)


def test_rank_drop_by_hand_and_ties_as_scipy():
    np.testing.assert_array_equal(rank_drop([10.0, 7.0, 7.5, 2.0]), [-3.0, 0.5, -5.5])
    radius, ranks = [1.0, 2.0, 2.0, 3.0, 0.5, 9.0], [9.0, 5.0, 4.0, 4.0, 3.0, 1.0]
    expected = scipy.stats.spearmanr(radius[:-1], np.diff(ranks))
    got = radius_vs_rank_drop(radius, ranks)
    assert (got["rho"], got["p_value"]) == pytest.approx((expected.statistic, expected.pvalue), rel=1e-12)
    perfect = radius_vs_rank_drop([1.0, 2.0, 3.0, 4.0], [10.0, 9.0, 7.0, 4.0])  # drops -1, -2, -3
    assert perfect == {"rho": -1.0, "p_value": 0.0, "n": 3}
    assert np.isnan(radius_vs_rank_drop([1.0, 1.0, 1.0, 1.0], [4.0, 3.0, 1.0, 0.5])["rho"])


@pytest.mark.parametrize("call, match", [
    (lambda: rank_drop([1.0]), "at least 2 layers"),
    (lambda: radius_vs_rank_drop([1.0, 2.0], [3.0, 2.0, 1.0]), r"shape \(3,\)"),
    (lambda: radius_vs_rank_drop([1.0, np.nan, 2.0], [3.0, 2.0, 1.0]), "finite"),
])
def test_funnel_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_radius_vs_rank_drop_panel_places_every_layer_and_names_rho(tmp_path, ax):
    profiles = {step: saved_profile(tmp_path, seed)[0] for step, seed in ((0, 1), (100, 2))}
    collections = plot_radius_vs_rank_drop(ax, profiles)
    assert len(collections) == 2
    for collection, table in zip(collections, profiles.values()):
        r = table["cumulative_effective_rank"].to_numpy()
        np.testing.assert_allclose(collection.get_offsets(),
                                   np.column_stack([table["spectral_radius"].to_numpy()[:-1], np.diff(r)]))
        rho = radius_vs_rank_drop(table["spectral_radius"], r)["rho"]
        assert f"ρ = {rho:.2f}" in collection.get_label()
    assert collections[0].get_facecolors().size == 0  # step 0 hollow
    assert collections[1].get_facecolors().shape[0] == 1


# --------------------------------------------------------------------------- Table 2 and Figs 2/S2


def test_minimum_layer_is_argmin_of_saved_self_alignment(tmp_path):
    table, _, _ = saved_profile(tmp_path, 3)
    layer, value = minimum_layer(table["self_alignment"])
    assert layer == int(np.argmin(table["self_alignment"].to_numpy()))
    assert value == table["self_alignment"].min()
    assert minimum_layer([np.nan, 0.5, 0.2, 0.2]) == (2, 0.2)
    with pytest.raises(ValueError, match="non-NaN"):
        minimum_layer([np.nan])


def test_regime_bands_span_each_regime_and_label_it_once(ax):
    regimes = depth_regimes(8, boundaries=(2, 5))
    patches = plot_regime_bands(ax, regimes)
    spans = [(p.get_x(), p.get_x() + p.get_width()) for p in patches]
    assert spans == [(-0.5, 1.5), (1.5, 4.5), (4.5, 7.5)]
    assert [p.get_label() for p in patches] == ["early (0–1)", "mid (2–4)", "late (5–7)"]
    for p, regime in zip(patches, ("early", "mid", "late")):
        assert mpl.colors.same_color(p.get_facecolor(), REGIME_COLORS[regime])
    ax.cla()
    again = plot_regime_bands(ax, np.array(["early", "late", "early"]))
    assert [p.get_label() for p in again][2].startswith("_")  # the second early band: no legend entry


# --------------------------------------------------------------------------- Fig. S1


@pytest.mark.parametrize("part, of", [("modulus", np.abs), ("real", np.real)])
def test_eigenvalue_density_rows_are_numpy_histograms_of_each_layer(tmp_path, part, of):
    _, eigenvalues, Js = saved_profile(tmp_path, 4)
    path = tmp_path / "eigenvalues.npz"
    np.savez(path, eigenvalues=eigenvalues)
    with np.load(path) as npz:
        lam = npz["eigenvalues"]
    density, edges = eigenvalue_density(lam, part=part, bins=9)
    values = of(np.linalg.eigvals(Js))
    np.testing.assert_allclose(edges, np.linspace(values.min(), values.max(), 10), rtol=1e-9)
    for layer in range(len(Js)):
        expected, _ = np.histogram(values[layer], bins=edges, density=True)
        np.testing.assert_allclose(density[layer], expected, rtol=1e-9, atol=1e-9)
        assert (density[layer] * np.diff(edges)).sum() == pytest.approx(1.0)


def test_eigenvalue_density_shared_range_drops_outside_values_and_checks_input():
    density, edges = eigenvalue_density(np.array([[0.5, 1.5, 3.0]]), bins=2, value_range=(0, 2))
    np.testing.assert_allclose(edges, [0, 1, 2])
    np.testing.assert_allclose(density, [[0.5, 0.5]])
    with pytest.raises(ValueError, match="`part`"):
        eigenvalue_density(np.ones((2, 2)), part="imag")
    with pytest.raises(ValueError, match=r"\(L, d\)"):
        eigenvalue_density(np.ones(3))


def test_layer_density_heatmap_has_one_row_per_layer(ax):
    density = np.arange(12.0).reshape(3, 4)
    mesh = plot_layer_density(ax, density, np.linspace(0, 2, 5), reference=1.0)
    np.testing.assert_array_equal(mesh.get_array().reshape(3, 4), density)
    assert ax.get_ylim() == (-0.5, 2.5) and ax.get_xlim() == (0.0, 2.0)
    assert list(ax.lines[0].get_xdata()) == [1.0, 1.0]


# --------------------------------------------------------------------------- Fig. 5 amplification


def test_dose_response_draws_log_frobenius_of_dose_and_controls(ax):
    rows = [("dose", 0, a, 0, 1.0, 3.0 - a) for a in (0.0, 1.0)]
    rows += [("control_a", d, a, 0, 1.0, 5.0 + d) for d in (0, 1) for a in (0.0, 1.0)]
    rows += [("control_b", d, a, 0, 1.0, 1.0 + 2 * d) for d in (0, 1) for a in (0.0, 1.0)]
    table = pd.DataFrame(rows, columns=["construction", "draw", "alpha", "start_layer", "effective_rank",
                                        "log_frobenius"])
    plot_dose_response(ax, table, column="log_frobenius")
    assert [list(line.get_ydata()) for line in ax.lines] == [[3.0, 2.0], [5.5, 5.5], [2.0, 2.0]]
    band = ax.collections[1].get_paths()[0].vertices  # control B: min..max over draws
    assert band[:, 1].min() == 1.0 and band[:, 1].max() == 3.0
    assert "amplification" in ax.get_ylabel()


# --------------------------------------------------------------------------- Fig. 7a


def test_unit_coupling_scatter_is_column_norms_against_participation_with_the_tested_tails(ax):
    rng = np.random.default_rng(5)
    d = 40
    J = rng.normal(size=(d, d))
    participation = rng.uniform(size=d)
    participation[[3, 17]] = np.nan  # isolated units
    norms = jacobian_column_norms(J)
    bottom, top = participation_tails(participation, tail=0.1)
    rest, low, high = plot_unit_coupling(ax, participation, norms, bottom, top)
    expected = np.column_stack([participation[top], np.linalg.norm(J, axis=0)[top]])
    np.testing.assert_allclose(high.get_offsets(), expected)
    np.testing.assert_allclose(low.get_offsets()[:, 1], np.linalg.norm(J[:, bottom], axis=0))
    assert len(rest.get_offsets()) == d - 2 - 2 * 3
    assert participation[top].min() > np.nanmax(participation[bottom])
    # the same tails as the test they illustrate: Cohen's d of the drawn groups is boundary_coupling's
    x, y = norms[top], norms[bottom]
    pooled = np.sqrt(((x.size - 1) * x.var(ddof=1) + (y.size - 1) * y.var(ddof=1)) / (x.size + y.size - 2))
    result = boundary_coupling(norms, participation, tail=0.1, n_permutations=10)
    assert result["cohens_d"] == pytest.approx((x.mean() - y.mean()) / pooled, rel=1e-9)
