"""Paper 000's report figures (crosslayer.alignment.figures) by their artists, built without Snakemake
from synthetic alignment tables and overlap matrices."""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from figure_checks import colorbars, drawn, panels
from rule_outputs import rule_figures

from crosslayer.alignment.figures import (
    ALL_MODELS_FIGURES,
    FIGURES,
    AlignmentFigureInputs,
    AllModelsFigureInputs,
    load_all_models_inputs,
    load_figure_inputs,
)
from crosslayer.alignment.tables import SPACES

STEPS = [0, 4, 16]
L = 4  # layers: L - 1 boundaries


def adjacent_table(seed):
    """An adjacent.tsv: overlap across every boundary at every step, in each space."""
    rng = np.random.default_rng(seed)
    rows = [(step, b) for step in STEPS for b in range(L - 1)]
    table = pd.DataFrame(rows, columns=["step", "boundary"])
    for space in SPACES:
        table[space] = rng.uniform(0.05, 0.95, len(table))
    return table


def overlaps(seed):
    """(S, L, L) symmetric overlap matrices with 1 on the diagonal."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 0.9, (len(STEPS), L, L))
    a = (a + a.transpose(0, 2, 1)) / 2
    a[:, range(L), range(L)] = 1.0
    return a


BASELINE = pd.Series({"d_model": 32, "k": 3, "mean": 0.25, "sd": 0.05})


@pytest.fixture(scope="module")
def inputs():
    return AlignmentFigureInputs(model="m", k=3, steps=STEPS, adjacent=adjacent_table(0), baseline=BASELINE,
                                 overlap_left=overlaps(0))


@pytest.fixture(scope="module")
def figures(inputs):
    yield from drawn(FIGURES, inputs)


# --------------------------------------------------------------------------- the figure tables


@pytest.mark.parametrize(("rule", "table"), [("plot_alignment", FIGURES),
                                             ("plot_alignment_overview", ALL_MODELS_FIGURES)])
def test_each_figure_table_is_its_rules_figures_in_order(rule, table):
    assert rule_figures("alignment.smk", rule) == list(table)


def test_every_figure_is_a_new_figure(figures):
    assert len({id(fig) for fig in figures.values()}) == len(FIGURES)
    assert all(isinstance(fig, mpl.figure.Figure) for fig in figures.values())


def test_the_loader_reads_the_tables_and_stacks_the_output_space_overlaps(tmp_path):
    adjacent, overlap = adjacent_table(1), overlaps(1)
    adjacent.to_csv(tmp_path / "adjacent.tsv", sep="\t", index=False)
    BASELINE.to_frame().T.to_csv(tmp_path / "baseline.tsv", sep="\t", index=False)
    npz = []
    for i, step in enumerate(STEPS):
        path = tmp_path / f"step{step}.npz"
        arrays = {f"overlap_{space}": overlap[i] * (j + 1) for j, space in enumerate(SPACES)}
        np.savez(path, **arrays, singular_values=np.ones((L, 4)), d_model=32, k=3, step=step)
        npz.append(path)
    got = load_figure_inputs(model="m", k=3, steps=STEPS, adjacent=tmp_path / "adjacent.tsv",
                             baseline=tmp_path / "baseline.tsv", npz=npz)
    pd.testing.assert_frame_equal(got.adjacent, adjacent)
    assert got.baseline["mean"] == BASELINE["mean"] and got.baseline["d_model"] == 32
    np.testing.assert_array_equal(got.overlap_left, overlap)  # the output space, not another
    assert got.steps == STEPS and got.model == "m" and got.k == 3


# --------------------------------------------------------------------------- per model


def test_adjacent_mean_draws_the_mean_over_boundaries_of_both_spaces_over_the_baseline(figures, inputs):
    (ax,) = panels(figures["adjacent_mean"])
    lines = {line.get_label(): line for line in ax.get_lines()}
    means = inputs.adjacent.groupby("step")[["left", "right"]].mean()
    for space, label in (("left", "output space $U$"), ("right", "input space $V$")):
        np.testing.assert_array_equal(lines[label].get_xdata(), STEPS)
        np.testing.assert_allclose(lines[label].get_ydata(), means[space])
    np.testing.assert_array_equal(lines["random baseline (±2 sd)"].get_ydata(), [0.25, 0.25])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "random baseline (±2 sd)", "output space $U$", "input space $V$"]
    assert ax.get_title() == "m: adjacent layers, top-3 (d = 32)"


def test_boundary_heatmap_draws_each_boundary_at_each_step(figures, inputs):
    fig = figures["boundary_heatmap"]
    (ax,), (bar,) = panels(fig), colorbars(fig)
    expected = inputs.adjacent.pivot(index="boundary", columns="step", values="left").to_numpy()
    np.testing.assert_allclose(ax.collections[0].get_array().reshape(L - 1, len(STEPS)), expected)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0–1", "1–2", "2–3"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "4", "16"]
    assert bar.get_ylabel() == "top-3 overlap (baseline 0.25)"
    assert ax.get_title() == "m: adjacent-layer overlap by depth"


def test_boundary_trajectories_draw_one_line_per_boundary_and_the_baseline(figures, inputs):
    fig = figures["boundary_trajectories"]
    (ax,) = panels(fig)
    expected = inputs.adjacent.pivot(index="boundary", columns="step", values="left").to_numpy()
    lines = ax.get_lines()
    assert len(lines) == L - 1 + 1
    for b in range(L - 1):
        np.testing.assert_allclose(lines[b].get_ydata(), expected[b])
    np.testing.assert_array_equal(lines[-1].get_ydata(), [0.25, 0.25])
    np.testing.assert_allclose(lines[0].get_color(), mpl.colormaps["coolwarm"](0.0))  # early: blue
    np.testing.assert_allclose(lines[-2].get_color(), mpl.colormaps["coolwarm"](1.0))  # late: red
    assert len(colorbars(fig)) == 1


def test_pairwise_draws_every_step_on_one_scale_without_the_diagonal(figures, inputs):
    fig = figures["pairwise"]
    shown = panels(fig)
    assert len(shown) == len(STEPS) and len(fig.axes) == len(STEPS) + 1  # and the colour bar
    off_diagonal = ~np.eye(L, dtype=bool)
    vmax = max(inputs.overlap_left[:, off_diagonal].max(), 0.25)
    for ax, step, overlap in zip(shown, STEPS, inputs.overlap_left):
        (image,) = ax.get_images()
        data = np.ma.filled(image.get_array(), np.nan)
        assert np.isnan(np.diag(data)).all()  # 1 by definition: left out of the scale
        np.testing.assert_array_equal(data[off_diagonal], overlap[off_diagonal])
        assert image.get_clim() == (0.0, vmax)
        assert ax.get_title() == f"step {step}"
    assert fig.get_suptitle() == "m: pairwise overlap of MLP output subspaces"


@pytest.mark.parametrize(("steps", "hidden"), [([8], 0), ([0, 1, 2, 4, 8], 3)])
def test_pairwise_puts_four_steps_in_a_row_and_hides_the_unused_panels(steps, hidden):
    rng = np.random.default_rng(2)
    one = AlignmentFigureInputs(model="m", k=3, steps=steps, adjacent=adjacent_table(0), baseline=BASELINE,
                                overlap_left=rng.uniform(0, 1, (len(steps), L, L)))
    fig = FIGURES["pairwise"](one)
    assert [ax.get_title() for ax in panels(fig)] == [f"step {s}" for s in steps]
    assert sum(not ax.get_visible() for ax in fig.axes) == hidden
    plt.close(fig)


# --------------------------------------------------------------------------- over all models


def test_the_all_models_loader_takes_each_models_mean_of_the_output_space(tmp_path):
    paths = {}
    for i, model in enumerate(("a", "b")):
        adjacent_table(i).to_csv(tmp_path / f"{model}.adjacent.tsv", sep="\t", index=False)
        BASELINE.to_frame().T.assign(mean=0.1 * (i + 1)).to_csv(tmp_path / f"{model}.baseline.tsv", sep="\t",
                                                                 index=False)
        paths[model] = (tmp_path / f"{model}.adjacent.tsv", tmp_path / f"{model}.baseline.tsv")
    got = load_all_models_inputs(models=["a", "b"], k=3, adjacent=[p[0] for p in paths.values()],
                                 baseline=[p[1] for p in paths.values()])
    assert list(got.means) == ["a", "b"]
    pd.testing.assert_series_equal(got.means["b"], adjacent_table(1).groupby("step")["left"].mean())
    assert got.baselines["b"]["mean"] == pytest.approx(0.2)


def test_adjacent_mean_all_models_draws_one_panel_per_model():
    means = {model: adjacent_table(i).groupby("step")["left"].mean() for i, model in enumerate(("a", "b"))}
    baselines = {"a": BASELINE, "b": BASELINE.copy().replace({32: 64})}
    fig = ALL_MODELS_FIGURES["adjacent_mean"](AllModelsFigureInputs(k=3, means=means, baselines=baselines))
    axes = panels(fig)
    assert [ax.get_title() for ax in axes] == ["a (d = 32)", "b (d = 64)"]
    for ax, model in zip(axes, means):
        line = next(line for line in ax.get_lines() if line.get_label() == "mean over boundaries")
        np.testing.assert_allclose(line.get_ydata(), means[model])
    assert axes[0].get_legend() is not None and axes[1].get_legend() is None
    assert axes[1].get_ylabel() == ""
    assert fig.get_suptitle() == "Mean adjacent-layer top-3 MLP subspace overlap across training"
    plt.close(fig)


def test_every_figure_of_a_single_checkpoint_draws_without_a_warning(strict):
    # a user's own model: one final step
    adjacent = adjacent_table(0).query("step == 16")
    one = AlignmentFigureInputs(model="m", k=3, steps=[16], adjacent=adjacent, baseline=BASELINE,
                                overlap_left=overlaps(0)[-1:])
    for draw in FIGURES.values():
        fig = draw(one)
        fig.canvas.draw()
        plt.close(fig)
    means = {"m": adjacent.groupby("step")["left"].mean()}
    fig = ALL_MODELS_FIGURES["adjacent_mean"](AllModelsFigureInputs(k=3, means=means, baselines={"m": BASELINE}))
    fig.canvas.draw()
    plt.close(fig)
