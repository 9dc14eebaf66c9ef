import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from crosslayer.alignment.plots import (
    plot_adjacent_mean,
    plot_boundary_heatmap,
    plot_boundary_trajectories,
    plot_overlap_matrix,
    plot_random_baseline,
)
from crosslayer.dynamics.plots import plot_dose_response, plot_eigenvalue_cloud, plot_quantile_profile
from crosslayer.plotting import (
    depth_colors,
    format_step,
    pick_steps,
    plot_depth_profile,
    plot_training_loss,
    save_png_and_pdf,
    set_step_axis,
    step_grid,
)

STEPS = [0, 128, 512, 2000]


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_adjacent_mean_draws_line_over_baseline_band(ax):
    baseline = plot_random_baseline(ax, 0.1, 0.01)
    line = plot_adjacent_mean(ax, STEPS, [0.1, 0.2, 0.4, 0.35], label="m")
    assert list(line.get_xdata()) == STEPS and list(line.get_ydata()) == [0.1, 0.2, 0.4, 0.35]
    assert list(baseline.get_ydata()) == [0.1, 0.1]
    band = ax.patches[0]
    assert band.get_y() == pytest.approx(0.08) and band.get_height() == pytest.approx(0.04)  # mean +- 2 sd
    assert ax.get_xscale() == "symlog" and ax.get_xlim() == (0, 2000)
    assert "step" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "128", "512", "2k"]


def test_step_axis_drops_labels_that_would_collide(ax):
    set_step_axis(ax, [0, 10, 25, 50, 100, 150, 200])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "10", "25", "50", "100", "", "200"]


@pytest.mark.parametrize("step, label", [(0, "0"), (512, "512"), (2000, "2k"), (143000, "143k"), (1431000, "1.43M")])
def test_format_step(step, label):
    assert format_step(step) == label


def test_adjacent_mean_rejects_mismatched_lengths(ax):
    with pytest.raises(ValueError, match="same shape"):
        plot_adjacent_mean(ax, STEPS, [0.1])


def test_boundary_heatmap_has_one_cell_per_boundary_and_step(ax):
    overlap = np.arange(12, dtype=float).reshape(3, 4) / 12
    mesh = plot_boundary_heatmap(ax, STEPS, overlap)
    assert np.allclose(mesh.get_array().reshape(3, 4), overlap)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "128", "512", "2k"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0–1", "1–2", "2–3"]
    assert mesh.get_clim() == (0.0, pytest.approx(11 / 12))
    with pytest.raises(ValueError, match="boundaries"):
        plot_boundary_heatmap(ax, STEPS, overlap[:, :2])


def test_boundary_trajectories_colour_early_blue_late_red(ax):
    mappable = plot_boundary_trajectories(ax, STEPS, np.random.default_rng(0).random((5, 4)))
    assert len(ax.lines) == 5
    first, last = ax.lines[0].get_color(), ax.lines[-1].get_color()
    assert first[2] > first[0] and last[0] > last[2]  # blue-ish first boundary, red-ish last
    assert np.allclose(depth_colors(5)[0], first)
    assert mappable.norm.vmin == -0.5 and mappable.norm.vmax == 4.5


def test_overlap_matrix_blanks_the_diagonal(ax):
    O = np.full((3, 3), 0.3) + 0.7 * np.eye(3)
    image = plot_overlap_matrix(ax, O)
    data = image.get_array()
    assert np.ma.getmaskarray(data).diagonal().all() and np.allclose(data[0, 1], 0.3)
    assert image.get_clim() == (0.0, 1.0)
    with pytest.raises(ValueError, match="square"):
        plot_overlap_matrix(ax, np.ones((2, 3)))


def test_training_loss_draws_train_and_held_out(ax):
    loss = pd.DataFrame({"step": [1, 2, 3, 4], "loss": [5.0, 4.0, 3.5, 3.0], "eval_loss": [np.nan, 4.2, np.nan, 3.4]})
    line = plot_training_loss(ax, loss)
    assert list(line.get_ydata()) == [5.0, 4.0, 3.5, 3.0]
    assert len(ax.lines) == 2 and list(ax.lines[1].get_xdata()) == [2, 4]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "held-out"]


def test_depth_profile_one_line_per_step_with_step0_dashed(ax):
    profiles = {s: pd.DataFrame({"henrici": [0.1 * s, 0.2, 0.3]}, index=pd.Index([0, 1, 2], name="layer"))
                for s in (16, 0, 4)}
    lines = plot_depth_profile(ax, profiles, "henrici")
    assert [line.get_label() for line in lines] == ["step 0", "step 4", "step 16"]
    assert lines[0].get_linestyle() == "--" and lines[1].get_linestyle() == "-"
    assert list(lines[2].get_ydata()) == [1.6, 0.2, 0.3] and list(lines[2].get_xdata()) == [0, 1, 2]
    assert not np.allclose(mpl.colors.to_rgba(lines[1].get_color()), mpl.colors.to_rgba(lines[2].get_color()))


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


def test_pick_steps_keeps_first_and_last():
    assert pick_steps([0, 10, 20]) == [0, 10, 20]
    assert pick_steps(range(0, 100, 10), n=4) == [0, 30, 60, 90]


def test_step_grid_hides_unused_panels_and_saves_both_formats(tmp_path):
    fig, axes = step_grid(5, ncols=4)
    assert len(axes) == 5 and sum(ax.get_visible() for ax in fig.axes) == 5 and len(fig.axes) == 8
    save_png_and_pdf(fig, str(tmp_path / "f.png"), dpi=50)
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"


def test_block_grid_tiles_blocks_with_gaps_and_blanks_missing_cells():
    import matplotlib.pyplot as plt

    from crosslayer.coupling.plots import plot_block_grid

    blocks = np.arange(2 * 3 * 2 * 2, dtype=float).reshape(2, 3, 2, 2) + 1
    blocks[1, 0] = 0  # a cell that does not exist
    fig, ax = plt.subplots()
    image = plot_block_grid(ax, blocks, vmax=10.0)
    canvas = image.get_array()
    assert canvas.shape == (2 * 3 - 1, 3 * 3 - 1)
    assert np.array_equal(canvas[:2, 3:5], blocks[0, 1]) and canvas.mask[2].all()  # gap row
    assert canvas.mask[3:5, 0:2].all()  # the blank cell
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2"] and image.get_clim() == (0.0, 10.0)
    plt.close(fig)


def test_coupling_graph_draws_every_layer_pair_stronger_where_more_coupled():
    import matplotlib.pyplot as plt

    from crosslayer.coupling.plots import plot_coupling_graph

    M = -np.array([[0, 0.9, 0.5, 0.3], [0.7, 0, 0.4, 0.2], [0.5, 0.6, 0, 0.1], [0.3, 0.2, 0.1, 0]])
    fig, ax = plt.subplots()
    edges = plot_coupling_graph(ax, M, vmin=-0.8, vmax=-0.1)
    widths, alpha = np.asarray(edges.get_linewidths()), edges.get_colors()[:, 3]
    mean = -np.array([0.8, 0.5, 0.25, 0.5, 0.2, 0.1])  # pairs (0,1) (0,2) (0,3) (1,2) (1,3) (2,3), both directions
    assert len(edges.get_segments()) == 6
    order = np.argsort(mean)
    assert np.all(np.diff(widths[order]) >= 0) and np.all(np.diff(alpha[order]) >= 0)
    assert widths[0] == pytest.approx(0.3) and widths[-1] == pytest.approx(3.8)  # vmin -> thinnest, vmax -> widest
    assert np.allclose(edges.get_segments()[0][0], [0, 1])  # layer 0 at the top
    plt.close(fig)


def test_trajectories_2d_draws_one_line_per_token_and_colours_by_depth():
    import matplotlib.pyplot as plt

    from crosslayer.coupling.plots import plot_trajectories_2d

    coords = np.random.default_rng(0).normal(size=(4, 3, 2))
    coords[:, 2] = np.nan  # a padded token
    fig, ax = plt.subplots()
    points = plot_trajectories_2d(ax, coords)
    assert len(ax.lines) == 2 and len(points.get_offsets()) == 8
    assert np.array_equal(points.get_array(), [0, 0, 1, 1, 2, 2, 3, 3])
    ax.clear()
    deep = plot_trajectories_2d(ax, coords, depths=range(2, 4))  # the deep row: states 2 and 3 only
    assert np.allclose(deep.get_offsets(), coords[2:, :2].reshape(-1, 2)) and np.array_equal(deep.get_array(), [2, 2, 3, 3])
    assert deep.get_clim() == (0, 3) and len(ax.lines) == 2
    plt.close(fig)


def _continuity_table(step, values):
    """A checkpoint table of two present projections and an absent gate."""
    return pd.DataFrame({"step": step, "projection": ["q", "gate", "o"], "present": [True, False, True],
                         "u1": [values[0], np.nan, values[1]], "v1": [values[1], np.nan, values[0]],
                         "baseline_u": [0.1, np.nan, 0.2], "baseline_v": [0.2, np.nan, 0.1]})


def test_continuity_bars_group_steps_per_present_projection(ax):
    from crosslayer.continuity.plots import plot_continuity_bars

    tables = [_continuity_table(0, (0.1, 0.2)), _continuity_table(8, (0.5, 0.7))]
    bars = plot_continuity_bars(ax, tables, space="u", labels=["init", "step 8"], order=["q", "k", "gate", "o"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["Q", "O"]  # gate absent, k not in the tables
    assert len(bars) == 2 and [b.get_height() for b in bars[1]] == [0.5, 0.7]
    assert bars[0][0].get_alpha() < bars[1][0].get_alpha()  # the first step is the faded one
    np.testing.assert_allclose(ax.collections[0].get_segments()[1][:, 1], [0.2, 0.2])  # o's baseline tick


def test_continuity_bars_of_runs_show_every_projection_any_run_has(ax):
    from crosslayer.continuity.plots import plot_continuity_bars

    absent = _continuity_table(8, (0.5, 0.7)).assign(present=False)  # nothing left to show (a diverged run)
    tables = [absent, _continuity_table(8, (0.3, 0.4))]
    bars = plot_continuity_bars(ax, tables, space="u", labels=["a", "b"], order=["q", "o"], fade=False)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["Q", "O"]
    assert np.isnan([b.get_height() for b in bars[0]]).all() and [b.get_height() for b in bars[1]] == [0.3, 0.4]
    assert bars[0][0].get_alpha() == bars[1][0].get_alpha() == 1.0


def test_continuity_over_training_one_line_per_present_projection(ax):
    from crosslayer.continuity.plots import plot_continuity_over_training, projection_colors

    table = pd.concat([_continuity_table(step, (0.1 * i, 0.2 * i)) for i, step in enumerate([0, 4, 16])])
    lines = plot_continuity_over_training(ax, table, space="v", colors=projection_colors(["q", "gate", "o"]))
    assert [line.get_label() for line in lines] == ["Q", "O"]
    assert list(lines[1].get_xdata()) == [0, 4, 16] and np.allclose(lines[1].get_ydata(), [0.0, 0.1, 0.2])
    assert ax.get_xscale() == "symlog" and ax.get_ylim() == (0, 1)


def test_adjacent_cosines_one_point_per_layer_pair(ax):
    from crosslayer.continuity.plots import plot_adjacent_cosines

    lines = plot_adjacent_cosines(ax, {"q": [0.1, 0.5, 0.9], "ov": [0.2, 0.2, 0.3]}, colors={"q": "C0", "ov": "C1"})
    assert [line.get_label() for line in lines] == ["Q", "OV"]
    assert list(lines[0].get_xdata()) == [0.5, 1.5, 2.5] and list(lines[0].get_ydata()) == [0.1, 0.5, 0.9]


def test_trajectory_3d_colours_points_by_layer():
    from crosslayer.continuity.plots import plot_trajectory_3d

    fig = plt.figure()
    ax = fig.add_subplot(projection="3d")
    coords = np.random.default_rng(0).normal(size=(5, 3))
    points = plot_trajectory_3d(ax, coords)
    assert np.array_equal(points.get_array(), np.arange(5)) and len(ax.lines) == 1
    np.testing.assert_allclose(ax.lines[0].get_data_3d()[2], coords[:, 2])
    plt.close(fig)


def test_runs_over_epochs_one_line_per_run_with_sd_band(ax):
    from crosslayer.continuity.plots import plot_runs_over_epochs

    epochs = pd.DataFrame({"run": ["a"] * 3 + ["b"] * 3, "epoch": [0, 1, 2] * 2, "W.v1": [0.1, 0.2, 0.3, 0.5, 0.5, 0.4],
                           "W.v1_sd": [0.01, 0.02, 0.03] + [np.nan] * 3})
    lines = plot_runs_over_epochs(ax, epochs, "W.v1", colors={"a": "C0", "b": "C1"})
    assert [line.get_label() for line in lines] == ["a", "b"] and list(lines[1].get_ydata()) == [0.5, 0.5, 0.4]
    assert len(ax.collections) == 1  # a band only where there is an sd


def test_run_metrics_draw_one_runs_metrics_with_accuracy_on_a_twin_axis(ax):
    from crosslayer.continuity.plots import plot_run_metrics

    epochs = pd.DataFrame({"run": ["a"] * 3 + ["b"] * 3, "epoch": [2, 0, 1] * 2, "W.v1": [0.3, 0.1, 0.2, 0.5, 0.5, 0.4],
                           "W.v1_sd": [0.03, 0.01, 0.02] + [np.nan] * 3, "G.v1": [0.9, 0.95, 0.92, 0, 0, 0],
                           "accuracy": [0.8, 0.1, 0.6, 0, 0, 0]})
    lines, accuracy = plot_run_metrics(ax, epochs, "a", {"W.v1": "weights", "G.v1": "gradient", "Gcum.v1": "absent"},
                                       accuracy=True)
    assert [line.get_label() for line in lines] == ["weights", "gradient"]  # a column the table lacks is skipped
    assert list(lines[0].get_xdata()) == [0, 1, 2] and list(lines[0].get_ydata()) == [0.1, 0.2, 0.3]
    assert list(accuracy.get_ydata()) == [0.1, 0.6, 0.8] and accuracy.axes is not ax and accuracy.get_linestyle() == "--"
    assert len(ax.collections) == 1  # a band only where there is an sd
    with pytest.raises(ValueError, match="'c'"):
        plot_run_metrics(ax, epochs, "c", {"W.v1": "weights"})


def test_run_scatter_one_point_per_run_with_its_spread(ax):
    from crosslayer.continuity.plots import plot_run_scatter

    final = pd.DataFrame({"run": ["x", "y", "z"], "G.erank": [12.0, 30.0, np.nan], "G.erank_sd": [1.0, np.nan, 0.0],
                          "W.v1": [0.9, 0.2, 0.5], "W.v1_sd": [0.05, np.nan, 0.0]})
    points = plot_run_scatter(ax, final, "G.erank", "W.v1", colors={"y": "C1", "x": "C0", "z": "C2", "absent": "C3"})
    assert [p.get_label() for p in points] == ["y", "x"]  # no value (z) or no row (absent): not drawn
    assert tuple(points[1].lines[0].get_xydata()[0]) == (12.0, 0.9)
    assert [t.get_text() for t in ax.texts] == ["y", "x"] and ax.get_xlabel() == "G.erank"


def test_run_bars_one_group_per_run_with_error_bars(ax):
    from crosslayer.continuity.plots import plot_run_bars

    final = pd.DataFrame({"run": ["x", "y"], "W.v1": [0.9, 0.2], "W.v1_sd": [0.05, np.nan], "G0.v1": [0.8, 0.1],
                          "G0.v1_sd": [0.01, 0.02]})
    bars = plot_run_bars(ax, final, ["W.v1", "G0.v1"], runs=["y", "x"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["y", "x"]
    assert [b.get_height() for b in bars[0]] == [0.2, 0.9] and len(bars) == 2


def test_variant_profiles_draw_plain_solid_and_cot_dashed(ax):
    from crosslayer.coupling.plots import plot_variant_profiles

    profile = pd.DataFrame({"variant": ["cot"] * 3 + ["plain"] * 3, "layer": [2, 0, 1, 0, 1, 2],
                            "coupling": [-0.3, -0.1, -0.2, -0.5, -0.6, -0.7]})
    plain, cot = plot_variant_profiles(ax, profile)
    assert (plain.get_label(), plain.get_linestyle(), cot.get_label(), cot.get_linestyle()) == ("plain", "-", "cot", "--")
    assert list(plain.get_ydata()) == [-0.5, -0.6, -0.7] and list(cot.get_ydata()) == [-0.1, -0.2, -0.3]
    assert len(plot_variant_profiles(ax, profile[profile.variant == "plain"])) == 1


def test_trained_vs_untrained_draws_median_and_quartiles_per_model_in_order(ax):
    from crosslayer.coupling.plots import plot_trained_vs_untrained

    table = pd.DataFrame({"model": ["s", "s", "b"], "state": ["untrained", "trained", "trained"],
                          "lss_median": [3.0, 1.5, 1.2], "lss_q1": [2.0, 1.4, 1.1], "lss_q3": [5.0, 1.7, 1.3]})
    drawn = plot_trained_vs_untrained(ax, table, "lss")
    line, _, (bars,) = drawn["trained"]
    assert list(line.get_xdata()) == [0.12, 1.12] and list(line.get_ydata()) == [1.5, 1.2]
    assert np.allclose(bars.get_segments()[0][:, 1], [1.4, 1.7])  # the IQR, not median +- a spread
    untrained, _, _ = drawn["untrained"]
    assert list(untrained.get_xdata()) == [-0.12] and untrained.get_color() == "C0"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["s", "b"]


@pytest.mark.parametrize("n_layers, window", [(32, range(9, 17)), (12, range(4, 12)), (4, range(0, 4)), (17, range(9, 17))])
def test_block_window_keeps_the_papers_blocks_where_they_exist(n_layers, window):
    from crosslayer.coupling.plots import block_window

    assert block_window(n_layers, 9, 16) == window


def test_block_window_refuses_a_reversed_window():
    from crosslayer.coupling.plots import block_window

    with pytest.raises(ValueError, match=r"coupling.example_blocks: \[5, 2\]"):
        block_window(10, 5, 2)


def test_fit_draws_the_models_and_the_ols_line_of_its_row(ax):
    from crosslayer.coupling.plots import plot_fit

    points = plot_fit(ax, [1.0, 2.0, np.nan, 4.0], [2.0, 3.0, 9.0, 5.0],
                      {"slope": 1.0, "intercept": 1.0, "r2": 1.0, "p": 0.001, "n": 3}, labels=["a", "b", "c", "d"])
    assert np.allclose(points.get_offsets(), [[1, 2], [2, 3], [4, 5]])  # the NaN model is left out
    (line,) = ax.lines
    assert np.allclose(line.get_ydata(), 1.0 + line.get_xdata()) and line.get_xdata()[[0, -1]].tolist() == [1, 4]
    assert "R² = 1.00" in ax.get_title() and [t.get_text() for t in ax.texts] == ["a", "b", "d"]
    ax.clear()
    plot_fit(ax, [1.0, 2.0], [1.0, 2.0], {"slope": np.nan, "intercept": np.nan, "r2": np.nan, "p": np.nan, "n": 2})
    assert not ax.lines and "need 3" in ax.get_title()
