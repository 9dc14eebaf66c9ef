"""The across-papers figures (crosslayer.across.plots) by their artists, on small tables in the formats
the across_papers rules write, and the two plot scripts end to end on such tables, for a model with
a single checkpoint too (step 0 alone: nothing emerges after it, a text and no colorbar)."""

import sys
from pathlib import Path
from types import SimpleNamespace

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from crosslayer.across.plots import (
    NO_BAND,
    correlation_matrix,
    emergence_colorbar,
    emergence_matrix,
    emergence_steps,
    log2_ratios,
    order_measures,
    plot_correlation_matrix,
    plot_emergence,
    plot_measure_profile,
    plot_ratio_heatmap,
    robust_limit,
    short_name,
    step_colors,
)

SCRIPTS = Path(__file__).resolve().parents[2] / "workflow" / "scripts"
STEPS = [0, 10, 100]
MEASURES = pd.DataFrame({
    "measure": ["continuity_q_u1", "alignment_output", "continuity_gate_u1", "community_nmi", "coupling_K10_fwd"],
    "paper": ["003", "000", "003", "004", "002"],
    "analysis": ["continuity", "alignment", "continuity", "topology", "coupling"],
    "description": ["d"] * 5, "baseline": ["b"] * 5,
    "ratio": ["value / baseline"] * 4 + ["baseline / value"],
    "present": [True, True, False, True, True],
})


def boundary_table(steps=STEPS, n=4, seed=0):
    """boundaries.tsv of MEASURES: the gate is all-NaN, NMI's baseline changes with the step."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame([(s, b) for s in steps for b in range(n)], columns=["step", "boundary"])
    table["regime"] = np.nan
    for name in MEASURES["measure"]:
        value = rng.uniform(0.1, 0.9, len(table)) if name != "continuity_gate_u1" else np.full(len(table), np.nan)
        baseline = 0.05 + 0.01 * table["step"] if name == "community_nmi" else np.full(len(table), 0.2)
        table[name], table[f"{name}.baseline"], table[f"{name}.ratio"] = value, baseline, value / baseline
    return table


def correlation_table(names=("alignment_output", "coupling_K10_fwd", "continuity_q_u1"), steps=STEPS):
    rows = [(s, a, b, 4, 0.5, 0.25, 0.5, False) for s in steps for i, a in enumerate(names) for b in names[i + 1:]]
    return pd.DataFrame(rows, columns=["step", "measure_a", "measure_b", "n", "rho", "p_value", "q_value",
                                       "significant"])


def emergence_table():
    rows = [("alignment_output", "000", 0, 0.1, 0.3, 10.0, "above", True),
            ("alignment_output", "000", 1, 0.1, 0.3, 100.0, "below", False),
            ("alignment_output", "000", 2, 0.1, 0.3, np.nan, "", False),
            ("community_nmi", "004", 1, 0.0, 0.2, 100.0, "above", True)]
    return pd.DataFrame(rows, columns=["measure", "paper", "boundary", "band_low", "band_high", "step",
                                       "direction", "stays_out"])


def read_back(table, tmp_path, name):
    """Through a TSV as the scripts read it (empty strings become NaN, booleans stay booleans)."""
    path = tmp_path / f"{name}.tsv"
    table.to_csv(path, sep="\t", index=False)
    return pd.read_csv(path, sep="\t", dtype={"paper": str})


# --------------------------------------------------------------------------- labels and order

@pytest.mark.parametrize("measure, label", [
    ("continuity_q_u1", "cont Q u1"), ("continuity_down_v1", "cont Down v1"), ("continuity_ov_u1", "cont OV u1"),
    ("alignment_output", "align out"), ("coupling_K10_fwd", "coup K10 fwd"), ("community_nmi", "comm NMI"),
    ("jacobian_alignment_res", "jac align res"),
])
def test_short_names(measure, label):
    assert short_name(measure) == label


def test_measures_are_grouped_by_paper_and_empty_ones_left_out(tmp_path):
    measures = read_back(MEASURES, tmp_path, "measures")
    assert measures["paper"].tolist()[:2] == ["003", "000"]  # read as str, leading zeros kept
    assert order_measures(measures)["measure"].tolist() == [
        "alignment_output", "coupling_K10_fwd", "continuity_q_u1", "community_nmi"]
    present = MEASURES.assign(present=True)  # the gate claims to be present but has no value
    kept = order_measures(present, boundary_table())["measure"].tolist()
    assert "continuity_gate_u1" not in kept and len(kept) == 4


# --------------------------------------------------------------------------- profiles

def test_profile_draws_one_line_per_step_and_one_grey_baseline(ax):
    shown = [0, 100]
    lines = plot_measure_profile(ax, boundary_table(), "alignment_output", steps=shown, colors=step_colors(shown))
    assert [line.get_label() for line in lines] == ["step 0", "step 100"]
    assert len(ax.lines) == 3
    baseline = ax.lines[-1]
    assert baseline.get_linestyle() == "--" and mpl.colors.same_color(baseline.get_color(), "0.45")
    np.testing.assert_allclose(baseline.get_ydata(), 0.2)
    np.testing.assert_array_equal(lines[0].get_xdata(), [0, 1, 2, 3])
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels() if 0 <= t.get_position()[0] <= 3] == ["0|1", "1|2", "2|3", "3|4"]


def test_a_baseline_that_changes_with_the_step_is_drawn_per_step_in_its_colour(ax):
    colors = step_colors(STEPS)
    plot_measure_profile(ax, boundary_table(), "community_nmi", steps=STEPS, colors=colors)
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(ax.lines) == 6 and len(dashed) == 3
    assert all(mpl.colors.same_color(line.get_color(), colors[s]) for line, s in zip(dashed, STEPS))


def test_an_all_nan_measure_draws_nan_lines_and_no_baseline(ax):
    table = boundary_table()
    table["continuity_gate_u1.baseline"] = np.nan  # as the rule writes a measure the family lacks
    plot_measure_profile(ax, table, "continuity_gate_u1", steps=STEPS, colors=step_colors(STEPS))
    assert len(ax.lines) == 3 and all(np.isnan(line.get_ydata()).all() for line in ax.lines)


# --------------------------------------------------------------------------- correlations

def test_correlation_matrix_is_symmetric_with_unit_diagonal_and_nan_for_missing():
    table = correlation_table()
    table.loc[0, "rho"], table.loc[1, "significant"] = np.nan, True
    names = ["alignment_output", "coupling_K10_fwd", "continuity_q_u1", "community_nmi"]
    rho, significant, n = correlation_matrix(table, names, 0)
    assert n == 4
    np.testing.assert_array_equal(np.diag(rho)[:3], 1.0)
    assert np.isnan(rho[3]).all() and np.isnan(rho[0, 1]) and np.isnan(rho[1, 0])
    np.testing.assert_array_equal(rho, rho.T)
    assert significant.sum() == 2 and significant[0, 2] and significant[2, 0]
    assert correlation_matrix(table, names, 999)[2] == 0


def test_correlation_heatmap_is_fixed_to_plus_minus_one_and_marks_significant_pairs():
    names = ["alignment_output", "coupling_K10_fwd", "continuity_q_u1"]
    table = correlation_table()
    table.loc[table["step"] == 10, "significant"] = [True, False, False]
    fig, axes = plt.subplots(1, 2, layout="constrained")
    mesh = plot_correlation_matrix(axes[0], *correlation_matrix(table, names, 0)[:2],
                                   labels=[short_name(m) for m in names], papers=["000", "002", "003"])
    plot_correlation_matrix(axes[1], *correlation_matrix(table, names, 10)[:2])
    fig.colorbar(mesh, ax=axes)
    assert mesh.get_clim() == (-1.0, 1.0) and mesh.get_cmap().name == "RdBu_r"
    assert len(fig.axes) == 3
    assert [t.get_text() for t in axes[0].get_yticklabels()] == ["align out", "coup K10 fwd", "cont Q u1"]
    assert all(t.get_text() == "" for t in axes[1].get_xticklabels())
    assert len(axes[0].collections[1].get_offsets()) == 0  # no pair significant at step 0
    assert sorted(map(tuple, np.asarray(axes[1].collections[1].get_offsets()))) == [(0.5, 1.5), (1.5, 0.5)]
    assert len(axes[0].lines) == 4  # papers' blocks: 2 boundaries x (horizontal, vertical)
    plt.close(fig)


def test_correlation_heatmap_with_nan_rho_leaves_the_cell_unpainted(ax):
    rho = np.array([[1.0, np.nan], [np.nan, 1.0]])
    mesh = plot_correlation_matrix(ax, rho, np.zeros((2, 2), bool))
    assert mesh.get_array().mask.sum() == 2


# --------------------------------------------------------------------------- emergence

def test_emergence_matrix_indexes_the_steps_after_step_0(tmp_path):
    table = read_back(emergence_table(), tmp_path, "emergence")
    index, sign, stays = emergence_matrix(table, ["alignment_output", "community_nmi", "coupling_K10_fwd"], 4, STEPS)
    assert emergence_steps(STEPS) == [10, 100]
    np.testing.assert_array_equal(index[0], [0, 1, np.nan, np.nan])
    np.testing.assert_array_equal(index[1], [np.nan, 1, np.nan, np.nan])
    assert np.isnan(index[2]).all()
    np.testing.assert_array_equal(sign[0], [1, -1, 0, 0])
    np.testing.assert_array_equal(stays[0], [True, False, False, False])


def test_emergence_heatmap_colours_by_step_and_writes_the_direction():
    names = ["alignment_output", "community_nmi"]
    fig, ax = plt.subplots(layout="constrained")
    mesh = plot_emergence(ax, *emergence_matrix(emergence_table(), names, 4, STEPS), steps=STEPS,
                          labels=[short_name(m) for m in names], papers=["000", "004"])
    bar = emergence_colorbar(fig, mesh, STEPS, ax=ax)
    assert isinstance(mesh, mpl.collections.QuadMesh) and len(fig.axes) == 2
    assert mesh.get_array().count() == 3  # three cells left the band, the rest never did
    assert [t.get_text() for t in bar.ax.get_yticklabels()] == ["10", "100"]
    assert sorted(t.get_text() for t in ax.texts) == ["+", "+", "\u2212"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["align out", "comm NMI"]
    pale = ax.collections[1].get_array()
    assert pale.count() == 1 and not pale.mask[0, 1]  # boundary 1 of alignment came back into the band
    assert len(ax.lines) == 1
    plt.close(fig)


def test_a_model_without_step_0_gets_an_emergence_figure_saying_so(ax, tmp_path):
    empty = read_back(emergence_table().iloc[:0], tmp_path, "emergence")  # header only, as the rule writes it
    rows = [m for m in MEASURES["measure"] if m in set(empty["measure"])]
    artist = plot_emergence(ax, *emergence_matrix(empty, rows, 4, [10, 100]), steps=[10, 100])
    assert isinstance(artist, mpl.text.Text) and artist.get_text() == NO_BAND
    assert list(ax.get_xticks()) == [] and list(ax.get_yticks()) == [] and not ax.collections


# --------------------------------------------------------------------------- across models

def models_table():
    return pd.DataFrame({"model": ["a", "b"], "step": [200, 1000], "n_boundaries": [5, 5],
                         "continuity_q_u1": [2.0, 0.5], "alignment_output": [4.0, np.nan],
                         "continuity_gate_u1": [np.nan, np.nan], "community_nmi": [0.0, 8.0],
                         "coupling_K10_fwd": [1.0, 1.0]})


def test_log2_ratios_group_by_paper_drop_empty_columns_and_blank_non_positive_ratios():
    log2, papers = log2_ratios(models_table(), MEASURES)
    assert list(log2.columns) == ["alignment_output", "coupling_K10_fwd", "continuity_q_u1", "community_nmi"]
    assert papers == ["000", "002", "003", "004"] and list(log2.index) == ["a", "b"]
    np.testing.assert_array_equal(log2.to_numpy(), [[2.0, 0.0, 1.0, np.nan], [np.nan, 0.0, -1.0, 3.0]])


def test_robust_limit():
    assert robust_limit(np.arange(101.0) - 50, q=90) == pytest.approx(45.0)
    assert robust_limit([np.nan, np.nan]) == 1.0 and robust_limit([0.0]) > 0


def test_ratio_heatmap_is_symmetric_about_0_annotates_small_matrices_and_labels_papers():
    log2, papers = log2_ratios(models_table(), MEASURES)
    fig, ax = plt.subplots(layout="constrained")
    mesh = plot_ratio_heatmap(ax, log2, papers, vmax=2.5)
    fig.colorbar(mesh, ax=ax, label="log2(ratio to random baseline)")
    assert mesh.get_clim() == (-2.5, 2.5) and mesh.get_array().mask.sum() == 2
    assert sorted(t.get_text() for t in ax.texts) == sorted(["4", "1", "2", "1", "0.5", "8"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["align out", "coup K10 fwd", "cont Q u1", "comm NMI"]
    top = ax.child_axes[0]
    assert [t.get_text() for t in top.get_xticklabels()] == ["paper 000", "paper 002", "paper 003", "paper 004"]
    assert len(ax.lines) == 3 and len(fig.axes) == 2
    assert fig.axes[1].get_ylabel() == "log2(ratio to random baseline)"
    plt.close(fig)


def test_ratio_heatmap_leaves_big_matrices_unannotated(ax):
    log2 = pd.DataFrame(np.ones((11, 3)), columns=["x", "y", "z"])
    plot_ratio_heatmap(ax, log2, ["000"] * 3, vmax=1.0)
    assert not ax.texts


# --------------------------------------------------------------------------- the scripts

class NamedList(SimpleNamespace):
    """Snakemake's input, output and params: by attribute and by key."""

    def __getitem__(self, key):
        return getattr(self, key)


def run_script(name, monkeypatch, **fields):
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # start() sends stderr to the log; put it back after
    monkeypatch.setattr(sys, "path", list(sys.path))
    fields = {key: NamedList(**vars(value)) if isinstance(value, SimpleNamespace) else value
              for key, value in fields.items()}
    snakemake = SimpleNamespace(rule=name, threads=1, scriptdir=str(SCRIPTS), **fields)
    try:
        exec(compile((SCRIPTS / f"{name}.py").read_text(), name, "exec"), {"snakemake": snakemake})
    finally:
        if sys.stderr is not sys.__stderr__ and getattr(sys.stderr, "name", "") == snakemake.log[0]:
            sys.stderr.close()
    plt.close("all")


@pytest.mark.parametrize("steps", [STEPS, [10, 100]])
def test_the_plot_scripts_write_every_figure(tmp_path, monkeypatch, steps):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    boundaries = boundary_table(steps)
    emergence = emergence_table() if 0 in steps else emergence_table().iloc[:0]
    inputs = {}
    for name, table in (("boundaries", boundaries), ("measures", MEASURES),
                        ("correlations", correlation_table(steps=steps)), ("emergence", emergence)):
        inputs[name] = str(tmp_path / f"{name}.tsv")
        table.to_csv(inputs[name], sep="\t", index=False)
    out = {name: str(tmp_path / f"m.{name}.png") for name in ("profiles", "correlations", "emergence")}
    run_script("plot_across_papers", monkeypatch, input=SimpleNamespace(**inputs),
               output=SimpleNamespace(**out, pdfs=[p.replace(".png", ".pdf") for p in out.values()]),
               params=SimpleNamespace(steps=steps, dpi=40), wildcards=SimpleNamespace(model="m"),
               log=[str(tmp_path / "m.log")])
    models_table().to_csv(tmp_path / "models.tsv", sep="\t", index=False)
    png = str(tmp_path / "all_models.baseline_ratios.png")
    run_script("plot_across_papers_models", monkeypatch,
               input=SimpleNamespace(models=str(tmp_path / "models.tsv"), measures=[inputs["measures"]]),
               output=SimpleNamespace(baseline_ratios=png, pdf=png.replace(".png", ".pdf")),
               params=SimpleNamespace(dpi=40),
               wildcards=SimpleNamespace(), log=[str(tmp_path / "models.log")])
    for path in [*out.values(), png]:
        assert Path(path).stat().st_size > 0 and Path(path.replace(".png", ".pdf")).stat().st_size > 0


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
