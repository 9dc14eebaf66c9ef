"""The shared figure helpers (crosslayer.plotting) by their artists: the step axis (of a single
checkpoint too, drawn with warnings as errors: a singular axis makes matplotlib warn), step labels,
step grids, the training loss (and its report figure) and depth profiles."""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from rule_outputs import rule_figures

from crosslayer.plotting import (
    TRAINING_FIGURES,
    TrainingFigureInputs,
    format_step,
    load_training_inputs,
    pick_steps,
    plot_depth_profile,
    plot_training_loss,
    save_figures,
    save_png_and_pdf,
    set_step_axis,
    step_grid,
)


def test_step_axis_drops_labels_that_would_collide(ax):
    set_step_axis(ax, [0, 10, 25, 50, 100, 150, 200])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "10", "25", "50", "100", "", "200"]


@pytest.mark.parametrize("step, label", [(0, "0"), (512, "512"), (2000, "2k"), (143000, "143k"), (1431000, "1.43M")])
def test_format_step(step, label):
    assert format_step(step) == label


def test_training_loss_draws_train_and_held_out(ax):
    loss = pd.DataFrame({"step": [1, 2, 3, 4], "loss": [5.0, 4.0, 3.5, 3.0], "eval_loss": [np.nan, 4.2, np.nan, 3.4]})
    line = plot_training_loss(ax, loss)
    assert list(line.get_ydata()) == [5.0, 4.0, 3.5, 3.0]
    assert len(ax.lines) == 2 and list(ax.lines[1].get_xdata()) == [2, 4]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "held-out"]


def test_the_training_figure_table_is_the_rules_rule_figures():
    assert rule_figures("checkpoints.smk", "plot_training_loss") == list(TRAINING_FIGURES)


def test_the_loss_figure_draws_the_training_log_of_the_run(tmp_path):
    loss = pd.DataFrame({"step": [1, 2, 3], "loss": [5.0, 4.0, 3.5], "eval_loss": [np.nan, 4.2, 3.9]})
    loss.to_csv(tmp_path / "loss.tsv", sep="\t", index=False)
    inputs = load_training_inputs(model="tiny", run=tmp_path)
    pd.testing.assert_frame_equal(inputs.loss, loss)
    fig = TRAINING_FIGURES["loss"](inputs)
    (ax,) = fig.axes
    train, held_out = ax.get_lines()
    assert list(train.get_ydata()) == [5.0, 4.0, 3.5] and list(held_out.get_ydata()) == [4.2, 3.9]
    assert ax.get_title() == "tiny: training loss"
    plt.close(fig)


def test_the_loss_figure_of_a_log_without_held_out_loss_has_one_line():
    loss = pd.DataFrame({"step": [1, 2], "loss": [3.0, 2.0]})
    fig = TRAINING_FIGURES["loss"](TrainingFigureInputs(model="m", loss=loss))
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["train"]
    plt.close(fig)


def test_depth_profile_one_line_per_step_with_step0_dashed(ax):
    profiles = {s: pd.DataFrame({"henrici": [0.1 * s, 0.2, 0.3]}, index=pd.Index([0, 1, 2], name="layer"))
                for s in (16, 0, 4)}
    lines = plot_depth_profile(ax, profiles, "henrici")
    assert [line.get_label() for line in lines] == ["step 0", "step 4", "step 16"]
    assert lines[0].get_linestyle() == "--" and lines[1].get_linestyle() == "-"
    assert list(lines[2].get_ydata()) == [1.6, 0.2, 0.3] and list(lines[2].get_xdata()) == [0, 1, 2]
    assert not np.allclose(mpl.colors.to_rgba(lines[1].get_color()), mpl.colors.to_rgba(lines[2].get_color()))


def test_pick_steps_keeps_first_and_last():
    assert pick_steps([0, 10, 20]) == [0, 10, 20]
    assert pick_steps(range(0, 100, 10), n=4) == [0, 30, 60, 90]


def test_step_grid_hides_unused_panels_and_saves_both_formats(tmp_path):
    fig, axes = step_grid(5, ncols=4)
    assert len(axes) == 5 and sum(ax.get_visible() for ax in fig.axes) == 5 and len(fig.axes) == 8
    save_png_and_pdf(fig, str(tmp_path / "f.png"), dpi=50)
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"


@pytest.mark.parametrize("pdf", [True, False])
def test_save_figures_draws_each_figure_of_a_table_from_the_inputs_to_its_path(tmp_path, pdf):
    import matplotlib.pyplot as plt

    drawn = []

    def line(height):
        def draw(inputs):
            drawn.append((height, inputs))
            fig, ax = plt.subplots()
            ax.axhline(height)
            return fig

        return draw

    pngs = {"low": str(tmp_path / "low.png"), "high": str(tmp_path / "high.png")}
    save_figures({"low": line(1), "high": line(2)}, "inputs", pngs, dpi=20, pdf=pdf)
    assert drawn == [(1, "inputs"), (2, "inputs")] and plt.get_fignums() == []  # each closed once saved
    assert all((tmp_path / f"{name}.png").read_bytes()[:4] == b"\x89PNG" for name in pngs)
    assert sorted(p.name for p in tmp_path.glob("*.pdf")) == (["high.pdf", "low.pdf"] if pdf else [])


@pytest.mark.parametrize("steps, label", [([0], "0"), ([1000], "1k"), ([1000, 1000], "1k"), ([143000], "143k")])
def test_one_checkpoint_sits_centred_on_a_linear_step_axis_with_its_tick(fig, steps, label):
    ax = fig.subplots()
    set_step_axis(ax, steps)
    fig.canvas.draw()  # a singular axis warns here at the latest
    low, high = ax.get_xlim()
    assert low < steps[0] < high and steps[0] - low == pytest.approx(high - steps[0])
    assert ax.get_xscale() == "linear" and list(ax.get_xticks()) == [steps[0]]
    assert [t.get_text() for t in ax.get_xticklabels()] == [label] and ax.get_xlabel() == "training step"


def test_several_checkpoints_keep_the_symlog_axis_from_the_first_to_the_last(fig):
    ax = fig.subplots()
    set_step_axis(ax, [0, 10, 1000])
    fig.canvas.draw()
    assert ax.get_xscale() == "symlog" and ax.get_xlim() == (0, 1000)
