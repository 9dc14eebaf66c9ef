"""Paper 004's panels (crosslayer.dynamics.plots) by their artists: quantile profiles, eigenvalue
clouds, dose responses, regime bands, layer densities, the funnel and the amplification scatter
(Figs 2/S2, S1, 4b, 5 and 7a)."""

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest
from spectra_tables import saved_profile

from crosslayer.dynamics.funnel import radius_vs_rank_drop
from crosslayer.dynamics.plots import (
    REGIME_COLORS,
    plot_dose_response,
    plot_eigenvalue_cloud,
    plot_layer_density,
    plot_quantile_profile,
    plot_radius_vs_rank_drop,
    plot_regime_bands,
    plot_unit_coupling,
)
from crosslayer.dynamics.regimes import depth_regimes
from crosslayer.dynamics.statistics import boundary_node_test, jacobian_column_norms, participation_tails


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
    # the same tails as the test they illustrate: Cohen's d of the drawn groups is boundary_node_test's
    x, y = norms[top], norms[bottom]
    pooled = np.sqrt(((x.size - 1) * x.var(ddof=1) + (y.size - 1) * y.var(ddof=1)) / (x.size + y.size - 2))
    result = boundary_node_test(norms, participation, tail=0.1, n_permutations=10)
    assert result["cohens_d"] == pytest.approx((x.mean() - y.mean()) / pooled, rel=1e-9)


def test_quantile_profile_draws_median_with_its_band(ax):
    table = pd.DataFrame({"median_x": [1.0, 2.0], "q25_x": [0.5, 1.5], "q75_x": [1.5, 3.0]}, index=[0, 1])
    plot_quantile_profile(ax, {0: table, 10: table * 2}, "x")
    assert [list(line.get_ydata()) for line in ax.lines] == [[1.0, 2.0], [2.0, 4.0]]
    assert ax.lines[0].get_linestyle() == "--"  # step 0, the null
    band = ax.collections[1].get_paths()[0].vertices
    assert band[:, 1].min() == 1.0 and band[:, 1].max() == 6.0


def test_eigenvalue_cloud_places_every_eigenvalue_and_the_unit_circle(ax):
    lam = np.array([[1 + 1j, 0.5 - 0.2j], [2 + 0j, -1 + 0.3j]])
    plot_eigenvalue_cloud(ax, lam, [0, 2], n_layers=3)
    points = np.concatenate([c.get_offsets() for c in ax.collections])
    np.testing.assert_allclose(points, np.column_stack([lam.ravel().real, lam.ravel().imag]))
    circle = ax.lines[0].get_xydata()
    np.testing.assert_allclose(np.hypot(circle[:, 0], circle[:, 1]), 1.0)


def test_dose_response_draws_dose_and_control_means(ax):
    rows = [("dose", 0, a, 0, 10 - a) for a in (0.0, 1.0)]
    rows += [("control_a", d, a, 0, 20 + d) for d in (0, 1) for a in (0.0, 1.0)]
    rows += [("control_b", d, a, 0, 5 + d) for d in (0, 1) for a in (0.0, 1.0)]
    rows += [("dose", 0, a, 1, 99.0) for a in (0.0, 1.0)]  # another start layer: ignored
    table = pd.DataFrame(rows, columns=["construction", "draw", "alpha", "start_layer", "effective_rank"])
    plot_dose_response(ax, table)
    assert [list(line.get_ydata()) for line in ax.lines] == [[10.0, 9.0], [20.5, 20.5], [5.5, 5.5]]
