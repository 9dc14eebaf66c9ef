"""Paper 003's figures (crosslayer.continuity.plots) by their artists."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest


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
