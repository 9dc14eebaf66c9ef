"""Paper 000's figures (crosslayer.alignment.plots) by their artists, a single checkpoint's too."""

import numpy as np
import pytest

from crosslayer.alignment.plots import (
    plot_adjacent_mean,
    plot_boundary_heatmap,
    plot_boundary_trajectories,
    plot_overlap_matrix,
    plot_random_baseline,
)
from crosslayer.plotting import depth_colors

STEPS = [0, 128, 512, 2000]


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


@pytest.mark.parametrize("step", [0, 1000])
def test_paper000_trajectories_of_one_checkpoint_draw_without_a_warning(fig, step):
    left, right = fig.subplots(1, 2)
    line = plot_adjacent_mean(left, [step], [0.4])
    plot_boundary_trajectories(right, [step], np.array([[0.3], [0.5], [0.4]]))
    fig.canvas.draw()
    assert list(line.get_xdata()) == [step] and len(right.lines) == 3
    for ax in (left, right):
        assert ax.get_xlim()[0] < step < ax.get_xlim()[1]
