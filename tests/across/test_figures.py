"""The across-papers report figures (crosslayer.across.figures) by their artists, built without
Snakemake from the library's own tables of synthetic per-boundary values."""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from figure_checks import colorbars, drawn, panels
from rule_outputs import rule_figures

from crosslayer.across.catalog import catalog, legend
from crosslayer.across.figures import (
    ALL_MODELS_FIGURES,
    FIGURES,
    AcrossFigureInputs,
    AllModelsFigureInputs,
    load_all_models_inputs,
    load_figure_inputs,
)
from crosslayer.across.plots import NO_BAND, correlation_matrix, emergence_matrix, short_name
from crosslayer.across.tables import across_models, boundary_table, correlations, emergence

STEPS = [0, 10, 100]
N_BOUNDARIES = 5
MEASURES = catalog(projections=("q",), Ks=(2,))
ABSENT = "jacobian_alignment_res"  # a measure of the catalogue without values: an empty column
PRESENT = [m for m in MEASURES if m.name != ABSENT]
# drawn grouped by paper, each paper in the catalogue's order (order_measures)
DRAWN = ["alignment_output", "alignment_input", "coupling_K2_fwd", "coupling_K2_bwd", "continuity_q_u1",
         "continuity_q_v1", "jacobian_alignment", "community_nmi"]


# each measure's depth profile once trained: a permutation of 0 .. 4 (their correlations differ);
# community NMI falls below its band, every other measure rises above it
SHAPES = {m.name: np.random.default_rng(7 + j).permutation(N_BOUNDARIES) for j, m in enumerate(PRESENT)}
SIGNS = {m.name: -1 if m.name == "community_nmi" else 1 for m in PRESENT}


def values(steps, seed=0):
    """Long per-boundary values: random around the baseline at the first step, then off it by
    0.1 x the measure's shape at the second step (so at shape 0 still in the band) and by 0.3 more at
    each later step; community NMI's baseline moves with the step."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, step in enumerate(steps):
        for boundary in range(N_BOUNDARIES):
            for m in PRESENT:
                off = 0.0 if k == 0 else 0.3 * (k - 1) + 0.1 * SHAPES[m.name][boundary]
                value = 1.0 + 0.01 * rng.standard_normal() + SIGNS[m.name] * off
                baseline = 1.0 + 0.01 * k if m.name == "community_nmi" else 1.0
                rows.append({"step": step, "boundary": boundary, "measure": m.name, "value": value,
                             "baseline": baseline})
    return pd.DataFrame(rows)


def figure_inputs(steps=STEPS):
    """One model's tables as across_papers.py writes them (no step 0: no emergence rows)."""
    table = boundary_table(values(steps), MEASURES)
    return AcrossFigureInputs(model="m", steps=steps, boundaries=table,
                              measures=legend(MEASURES, {m.name for m in PRESENT}), correlations=correlations(table),
                              emergence=emergence(table, PRESENT, reference_step=0 if 0 in steps else None))


@pytest.fixture(scope="module")
def inputs():
    return figure_inputs()


@pytest.fixture(scope="module")
def figures(inputs):
    yield from drawn(FIGURES, inputs)


@pytest.mark.parametrize(("rule", "table"), [("plot_across_papers", FIGURES),
                                             ("plot_across_papers_models", ALL_MODELS_FIGURES)])
def test_each_figure_table_is_its_rules_figures_in_order(rule, table):
    assert rule_figures("across_papers.smk", rule) == list(table)


def test_the_loader_reads_the_four_tables_with_papers_as_text(tmp_path, inputs):
    paths = {}
    for name in ("boundaries", "measures", "correlations", "emergence"):
        paths[name] = tmp_path / f"{name}.tsv"
        getattr(inputs, name).to_csv(paths[name], sep="\t", index=False)
    loaded = load_figure_inputs(model="m", steps=["100", 0, "10"], **paths)
    assert loaded.steps == STEPS
    assert list(loaded.measures["paper"]) == list(inputs.measures["paper"]) and "000" in set(loaded.measures.paper)
    assert list(loaded.drawn["measure"]) == DRAWN and set(loaded.emergence["paper"]) == {"000", "002", "003", "004"}
    assert np.allclose(loaded.boundaries["coupling_K2_fwd"], inputs.boundaries["coupling_K2_fwd"])


def test_profiles_draw_every_measure_with_values_at_three_steps_over_its_baseline(figures, inputs):
    fig = figures["profiles"]
    shown = panels(fig)
    assert [ax.get_title() for ax in shown] == [f"{name} (paper {m.paper})" for name in DRAWN
                                                 for m in MEASURES if m.name == name]
    assert len(fig.axes) == 12  # a 2 x 6 grid, the four unused shown hidden
    nmi = shown[DRAWN.index("community_nmi")]
    for line, step in zip(nmi.lines, STEPS):
        expected = inputs.boundaries.query("step == @step").sort_values("boundary")["community_nmi"]
        assert np.allclose(line.get_ydata(), expected) and line.get_label() == f"step {step}"
    assert [line.get_linestyle() for line in nmi.lines[3:]] == ["--"] * 3  # its baseline moves: one per step
    coupling = shown[DRAWN.index("coupling_K2_fwd")]
    assert len(coupling.lines) == 4 and coupling.lines[3].get_color() == "0.45"  # one shared baseline
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["step 0", "step 10", "step 100", "random baseline"]


def test_correlations_draw_rho_of_every_pair_at_every_step(figures, inputs):
    fig = figures["correlations"]
    shown, (bar,) = panels(fig), colorbars(fig)
    assert [ax.get_title() for ax in shown] == [f"step {s} (n = {N_BOUNDARIES})" for s in STEPS]
    rho, _, _ = correlation_matrix(inputs.correlations, DRAWN, 100)
    assert np.allclose(np.ma.filled(shown[2].collections[0].get_array(), np.nan).reshape(rho.shape), rho,
                       equal_nan=True)
    assert shown[2].collections[0].get_clim() == (-1.0, 1.0) and bar.get_ylabel() == "Spearman's rho along depth"
    assert [t.get_text() for t in shown[0].get_yticklabels()] == [short_name(m) for m in DRAWN]
    assert not any(t.get_text() for t in shown[1].get_yticklabels())  # labels on the first panel only


def test_emergence_colours_each_boundary_by_the_step_it_left_the_band(figures, inputs):
    fig = figures["emergence"]
    (ax,), (bar,) = panels(fig), colorbars(fig)
    index, _, _ = emergence_matrix(inputs.emergence, DRAWN, N_BOUNDARIES, STEPS)
    assert np.array_equal(np.ma.filled(ax.collections[0].get_array(), np.nan).reshape(index.shape), index,
                          equal_nan=True)
    assert [t.get_text() for t in bar.get_yticklabels()] == ["10", "100"]
    assert [t.get_text() for t in ax.get_yticklabels()] == [short_name(m) for m in DRAWN]
    assert np.nanmin(index) == 0 and np.nanmax(index) == 1  # at step 10, or at step 100 where still in the band
    signs = [t.get_text() for t in ax.texts]
    assert signs.count("\u2212") == N_BOUNDARIES and signs.count("+") == (len(DRAWN) - 1) * N_BOUNDARIES
    assert "(+ above" in fig.get_suptitle()


def test_without_step_0_the_emergence_figure_says_there_is_no_band():
    inputs = figure_inputs([10, 100])
    fig = FIGURES["emergence"](inputs)
    assert len(fig.axes) == 1 and fig.axes[0].texts[0].get_text() == NO_BAND
    assert fig.get_suptitle() == "m: when each measure leaves its random band"
    plt.close(fig)


def test_with_no_measure_the_figures_say_so():
    inputs = figure_inputs()
    empty = AcrossFigureInputs(model="m", steps=STEPS, boundaries=inputs.boundaries,
                               measures=legend(MEASURES, set()), correlations=inputs.correlations,
                               emergence=inputs.emergence)
    for name, text in (("profiles", "no measure has values"),
                       ("correlations", "fewer than two measures with values: no correlations")):
        fig = FIGURES[name](empty)
        assert len(fig.axes) == 1 and fig.axes[0].texts[0].get_text() == text
        assert tuple(fig.get_size_inches()) == (6, 2.5)
        plt.close(fig)


# --------------------------------------------------------------------------- over all models


def all_models_inputs():
    tables = {"small": boundary_table(values(STEPS, seed=1), MEASURES),
              "large": boundary_table(values(STEPS[:2], seed=2), MEASURES)}
    return AllModelsFigureInputs(models=across_models(tables, MEASURES),
                                 measures=legend(MEASURES, {m.name for m in PRESENT}))


def test_the_all_models_loader_concatenates_every_models_legend(tmp_path):
    inputs = all_models_inputs()
    inputs.models.to_csv(tmp_path / "models.tsv", sep="\t", index=False)
    legends = [tmp_path / "a.tsv", tmp_path / "b.tsv"]
    for path in legends:
        inputs.measures.to_csv(path, sep="\t", index=False)
    loaded = load_all_models_inputs(models=tmp_path / "models.tsv", measures=legends)
    assert len(loaded.measures) == 2 * len(MEASURES) and loaded.measures["paper"].iloc[0] == "000"
    assert list(loaded.models["model"]) == ["small", "large"]


def test_baseline_ratios_draw_log2_of_each_models_ratio():
    inputs = all_models_inputs()
    fig = ALL_MODELS_FIGURES["baseline_ratios"](inputs)
    (ax,), (bar,) = panels(fig), colorbars(fig)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["small (step 100)", "large (step 10)"]
    assert [t.get_text() for t in ax.get_xticklabels()] == [short_name(m) for m in DRAWN]
    mesh = np.ma.filled(ax.collections[0].get_array(), np.nan).reshape(2, len(DRAWN))
    ratios = inputs.models.set_index("model").loc[["small", "large"], DRAWN].to_numpy(float)
    assert np.allclose(mesh, np.log2(ratios))
    vmax = ax.collections[0].get_clim()[1]
    assert ax.collections[0].get_clim() == (-vmax, vmax) and bar.get_ylabel() == "log2(ratio to random baseline)"
    plt.close(fig)


def test_baseline_ratios_say_when_no_measure_has_a_ratio():
    inputs = all_models_inputs()
    none = AllModelsFigureInputs(models=inputs.models.assign(**{m.name: np.nan for m in MEASURES}),
                                 measures=inputs.measures)
    fig = ALL_MODELS_FIGURES["baseline_ratios"](none)
    assert len(fig.axes) == 1 and fig.axes[0].texts[0].get_text() == "no measure has a ratio to its baseline"
    plt.close(fig)


def test_every_figure_is_a_figure(figures):
    assert all(isinstance(fig, mpl.figure.Figure) for fig in figures.values())
