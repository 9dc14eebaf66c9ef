"""Figures of a model with a single checkpoint (a user's one final step, README "Your own model"):
the shared step axis, the paper-000 trajectories on it, and the across-papers emergence figure of a
model whose only checkpoint is step 0 (nothing emerges after it: a text, no colorbar). Drawn with
warnings as errors: a singular axis makes matplotlib warn."""

import warnings
from pathlib import Path
from types import SimpleNamespace

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from test_across_figures import MEASURES, boundary_table, correlation_table, emergence_table, run_script

from crosslayer.across.plots import emergence_colorbar, emergence_matrix, plot_emergence
from crosslayer.alignment.plots import plot_adjacent_mean, plot_boundary_trajectories
from crosslayer.plotting import set_step_axis

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"


@pytest.fixture
def strict():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.fixture
def fig(strict):
    fig = plt.figure(layout="constrained")
    yield fig
    plt.close(fig)


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


@pytest.mark.parametrize("step", [0, 1000])
def test_paper000_trajectories_of_one_checkpoint_draw_without_a_warning(fig, step):
    left, right = fig.subplots(1, 2)
    line = plot_adjacent_mean(left, [step], [0.4])
    plot_boundary_trajectories(right, [step], np.array([[0.3], [0.5], [0.4]]))
    fig.canvas.draw()
    assert list(line.get_xdata()) == [step] and len(right.lines) == 3
    for ax in (left, right):
        assert ax.get_xlim()[0] < step < ax.get_xlim()[1]


def test_an_emergence_figure_of_step_0_alone_says_so_without_a_colorbar(fig):
    # across_papers writes a row per measure and boundary whose step is NaN: nothing left the band
    never = emergence_table().assign(step=np.nan, direction="", stays_out=False)
    names = ["alignment_output", "community_nmi"]
    ax = fig.subplots()
    artist = plot_emergence(ax, *emergence_matrix(never, names, 4, [0]), steps=[0], labels=names)
    assert isinstance(artist, mpl.text.Text) and artist.get_text() == "no checkpoint after step 0"
    assert emergence_colorbar(fig, artist, [0], ax=ax) is None
    fig.canvas.draw()
    assert fig.axes == [ax]


@pytest.mark.parametrize("step", [0, 1000])
def test_the_across_papers_figures_of_one_checkpoint(tmp_path, monkeypatch, strict, step):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    # step 0 alone: emergence rows, none left the band; a later step alone: no step 0, no rows
    emergence = emergence_table().assign(step=np.nan, direction="", stays_out=False)
    tables = {"boundaries": boundary_table([step]), "measures": MEASURES,
              "correlations": correlation_table(steps=[step]),
              "emergence": emergence if step == 0 else emergence.iloc[:0]}
    inputs = {}
    for name, table in tables.items():
        inputs[name] = str(tmp_path / f"{name}.tsv")
        pd.DataFrame(table).to_csv(inputs[name], sep="\t", index=False)
    out = {name: str(tmp_path / f"m.{name}.png") for name in ("profiles", "correlations", "emergence")}
    run_script("plot_across_papers", monkeypatch, input=SimpleNamespace(**inputs),
               output=SimpleNamespace(**out, pdfs=[p.replace(".png", ".pdf") for p in out.values()]),
               params=SimpleNamespace(steps=[step], dpi=40), wildcards=SimpleNamespace(model="m"),
               log=[str(tmp_path / "m.log")])
    for path in out.values():
        assert Path(path).stat().st_size > 0 and Path(path.replace(".png", ".pdf")).stat().st_size > 0
    # nothing emerged to draw: the small figure of the text, not one sized for the measures' rows
    assert plt.imread(out["emergence"]).shape[:2] == (100, 240)  # 6 x 2.5 inches at 40 dpi
