"""Paper 002's figures (crosslayer.coupling.plots) by their artists."""

import numpy as np
import pandas as pd
import pytest


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


def test_a_grid_one_scale_would_darken_is_drawn_with_a_scale_per_block():
    import matplotlib.pyplot as plt

    from crosslayer.coupling.plots import needs_block_scales, plot_block_grid

    rng = np.random.default_rng(0)
    blocks = rng.uniform(0, 1, (3, 3, 4, 4)) * np.eye(4) * 0.1  # faint diagonals...
    assert not needs_block_scales(blocks)
    blocks[0, 2] = 5.0  # ...and one bright block: 50 times the median block's maximum
    assert needs_block_scales(blocks)
    fig, ax = plt.subplots()
    canvas = plot_block_grid(ax, blocks, per_block=True).get_array()
    assert np.allclose(canvas[0:4, 5:9], blocks[0, 1] / blocks[0, 1].max()) and canvas[0:4, 10:14].max() == 1.0
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
