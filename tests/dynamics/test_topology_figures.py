"""Paper 004's topology report figures (crosslayer.dynamics.topology_figures) by their artists, built
without Snakemake from synthetic community, coupling and summary tables, partitions and Jacobians."""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from figure_checks import drawn, panels
from rule_outputs import rule_figures

from crosslayer.dynamics.statistics import jacobian_column_norms, participation_tails
from crosslayer.dynamics.topology_figures import (
    ALL_MODELS_FIGURES,
    FIGURES,
    AllModelsFigureInputs,
    TopologyFigureInputs,
    load_all_models_inputs,
    load_figure_inputs,
)
from crosslayer.stats.permutation import spearman_permutation

STEPS = [0, 4, 16]
L, D = 4, 10
METHODS = ["leiden", "signed_cpm"]  # the figures show the second: rows of the first must be left out
METHOD = "signed_cpm"
SNAPSHOT_COLUMNS = ["n_communities", "largest", "seed_nmi", "next_nmi"]
LAYER_COLUMNS = ["cohens_d", "q_boundary", "p_mesoscale", "null_mean", "null_sd", "variance_captured", "disruption",
                 "delta_top_singular", "delta_variance", "self_alignment"]
RATE_COLUMNS = ["rho_rate_top_singular", "p_rate_top_singular", "rho_rate_variance", "p_rate_variance"]


def communities_table(seed):
    rng = np.random.default_rng(seed)
    table = pd.DataFrame([(m, s) for m in METHODS for s in range(2 * L)], columns=["method", "snapshot"])
    for column in SNAPSHOT_COLUMNS:
        table[column] = rng.uniform(0, 5, len(table))
    return table


def coupling_table(seed, *, significant=(False, True, False, True)):
    rng = np.random.default_rng(seed)
    table = pd.DataFrame([(m, layer) for m in METHODS for layer in range(L)], columns=["method", "layer"])
    for column in LAYER_COLUMNS:
        table[column] = rng.uniform(-1, 1, len(table))
    table["null_sd"] = table["null_sd"].abs()
    table["p_mesoscale"] = np.tile([0.01, 0.2, 0.03, 0.5], len(METHODS))
    table["significant"] = np.tile(significant, len(METHODS))
    table.loc[table["layer"] == L - 1, "disruption"] = np.nan  # no next block
    return table


def summary_table(seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"method": METHODS, **{c: rng.uniform(0, 1, len(METHODS)) for c in RATE_COLUMNS}})


def of_method(table, index):
    return table[table["method"] == METHOD].set_index(index)


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    return TopologyFigureInputs(
        model="m", method=METHOD, steps=STEPS,
        communities={s: of_method(communities_table(i), "snapshot") for i, s in enumerate(STEPS)},
        layers={s: of_method(coupling_table(i), "layer") for i, s in enumerate(STEPS)},
        summaries={s: of_method(summary_table(i), "method").reset_index().iloc[0] for i, s in enumerate(STEPS)},
        unit_layer=1, participation={s: rng.uniform(0, 1, D) for s in STEPS},
        column_norms={s: rng.uniform(0, 2, D) for s in STEPS}, fdr_q=0.05, tail=0.2)


@pytest.fixture(scope="module")
def figures(inputs):
    yield from drawn(FIGURES, inputs)


# --------------------------------------------------------------------------- the figure tables


@pytest.mark.parametrize(("rule", "table"), [("plot_topology", FIGURES), ("plot_alignment_vs_boundary",
                                                                          ALL_MODELS_FIGURES)])
def test_each_figure_table_is_its_rules_figures_in_order(rule, table):
    assert rule_figures("topology.smk", rule) == list(table)


def test_every_figure_is_a_new_figure(figures):
    assert len({id(fig) for fig in figures.values()}) == len(FIGURES)
    assert all(isinstance(fig, mpl.figure.Figure) for fig in figures.values())


@pytest.mark.parametrize(("significant", "layer"), [((False, True, False, False), 1), ((False,) * L, 3)])
def test_the_loader_keeps_the_methods_rows_and_reads_the_unit_layer_of_every_step(tmp_path, significant, layer):
    # the unit layer: the largest |d| at the last step, among its significant layers where there are any
    rng = np.random.default_rng(1)
    paths = {kind: [] for kind in ("communities", "layers", "summaries", "partitions", "jacobians")}
    participation, means = {}, {}
    for i, step in enumerate(STEPS):
        tables = {"communities": communities_table(i), "layers": coupling_table(i, significant=significant),
                  "summaries": summary_table(i)}
        for kind, table in tables.items():
            table.to_csv(tmp_path / f"{step}.{kind}.tsv", sep="\t", index=False)
            paths[kind].append(tmp_path / f"{step}.{kind}.tsv")
        participation[step] = rng.uniform(0, 1, (len(METHODS) + 1, 2 * L, D))
        means[step] = rng.normal(size=(L, D, D)).astype(np.float32)
        np.savez(tmp_path / f"{step}.partitions.npz", methods=np.array([*METHODS, "other"]),
                 participation=participation[step])
        np.savez(tmp_path / f"{step}.jacobians.npz", mean=means[step])
        paths["partitions"].append(tmp_path / f"{step}.partitions.npz")
        paths["jacobians"].append(tmp_path / f"{step}.jacobians.npz")
    got = load_figure_inputs(model="m", steps=STEPS, method=METHOD, fdr_q=0.1, tail=0.2, **paths)
    assert got.unit_layer == layer
    pd.testing.assert_frame_equal(got.layers[4], of_method(coupling_table(1, significant=significant), "layer"))
    pd.testing.assert_frame_equal(got.communities[16], of_method(communities_table(2), "snapshot"))
    assert got.summaries[0]["rho_rate_variance"] == summary_table(0)["rho_rate_variance"][1]
    for step in STEPS:
        np.testing.assert_array_equal(got.participation[step], participation[step][1, 2 * layer])
        np.testing.assert_allclose(got.column_norms[step], jacobian_column_norms(means[step][layer].astype(float)))


# --------------------------------------------------------------------------- per model


def test_communities_draw_each_snapshot_statistic_per_step(figures, inputs):
    fig = figures["communities"]
    axes = panels(fig)
    for ax, column in zip(axes, SNAPSHOT_COLUMNS):
        for line, step in zip(ax.get_lines(), STEPS):
            np.testing.assert_array_equal(line.get_xdata(), range(2 * L))
            np.testing.assert_allclose(line.get_ydata(), inputs.communities[step][column])
    assert [ax.get_title() for ax in axes][2] == "stability across seeds (NMI)"
    assert fig.get_suptitle() == ("m: communities of the activation-correlation graphs (signed_cpm; "
                                  "step 0 = random-init null, dashed)")


def test_boundary_coupling_fills_the_significant_layers_of_each_step(figures, inputs):
    axes = panels(figures["boundary_coupling"])
    assert len(axes) == len(STEPS)
    for ax, step in zip(axes, STEPS):
        table = inputs.layers[step]
        np.testing.assert_allclose(ax.get_lines()[-1].get_ydata(), table["cohens_d"])
        filled, hollow = ax.collections
        np.testing.assert_allclose(filled.get_offsets(), table.loc[[1, 3], ["cohens_d"]].reset_index())
        np.testing.assert_allclose(hollow.get_offsets(), table.loc[[0, 2], ["cohens_d"]].reset_index())
        assert ax.get_title() == f"step {step}: 2/{L} layers"
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == ["BH q < 0.05", "not significant"]


def test_mesoscale_draws_variance_captured_over_the_random_partition_band(figures, inputs):
    axes = panels(figures["mesoscale"])
    for ax, step in zip(axes, STEPS):
        table = inputs.layers[step]
        np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), table["variance_captured"])
        band, above, below = ax.collections
        np.testing.assert_allclose(above.get_offsets(), table.loc[[0, 2], ["variance_captured"]].reset_index())
        assert ax.get_title() == f"step {step}: 2/{L} layers above null"
        top = band.get_paths()[0].vertices[:, 1].max()
        assert top == pytest.approx((table["null_mean"] + 2 * table["null_sd"]).max())


def test_rate_coupling_places_each_layer_with_a_next_block_and_names_each_steps_fit(figures, inputs):
    axes = panels(figures["rate_coupling"])
    for ax, column, key in ((axes[0], "delta_top_singular", "top_singular"), (axes[1], "delta_variance", "variance")):
        for points, step in zip(ax.collections, STEPS):
            table = inputs.layers[step].dropna(subset=["disruption"])
            np.testing.assert_allclose(points.get_offsets(), table[["disruption", column]])
        fit = inputs.summaries[16]
        assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == (
            f"step 16: ρ = {fit[f'rho_rate_{key}']:.2f}, p = {fit[f'p_rate_{key}']:.2g}")


def test_unit_coupling_draws_every_unit_of_the_unit_layer_with_its_tails(figures, inputs):
    axes = panels(figures["unit_coupling"])
    for ax, step in zip(axes, STEPS):
        participation, norms = inputs.participation[step], inputs.column_norms[step]
        bottom, top = participation_tails(participation, tail=0.2)
        rest, low, high = ax.collections
        np.testing.assert_allclose(high.get_offsets(), np.column_stack([participation[top], norms[top]]))
        np.testing.assert_allclose(low.get_offsets(), np.column_stack([participation[bottom], norms[bottom]]))
        assert len(rest.get_offsets()) == D - len(bottom) - len(top)
        row = inputs.layers[step].loc[1]
        assert ax.get_title() == f"step {step}, layer 1: d = {row['cohens_d']:.2f}, q = {row['q_boundary']:.2g}"


# --------------------------------------------------------------------------- over all models


def test_the_all_models_loader_fits_spearman_over_every_layer_of_the_method(tmp_path):
    paths = []
    for i, (model, step) in enumerate((("a", 0), ("a", 8), ("b", 8))):
        coupling_table(i).to_csv(tmp_path / f"{model}{step}.tsv", sep="\t", index=False)
        paths.append(tmp_path / f"{model}{step}.tsv")
    summary = pd.DataFrame({"model": ["a", "a", "b", "a"], "step": [0, 8, 8, 0], "method": [METHOD] * 3 + ["leiden"],
                            "rho_alignment_d": [0.1, 0.2, 0.3, 0.4], "p_alignment_d": [0.5, 0.6, 0.7, 0.8]})
    summary.to_csv(tmp_path / "summary.tsv", sep="\t", index=False)
    got = load_all_models_inputs(models=["a", "a", "b"], steps=[0, 8, 8], method=METHOD, permutations=99, seed=3,
                                 layers=paths, summary=tmp_path / "summary.tsv")
    assert len(got.points) == 3 * L and set(got.points["method"]) == {METHOD}
    assert list(got.points["step"]) == [0] * L + [8] * 2 * L
    assert list(got.summary["rho_alignment_d"]) == [0.1, 0.2, 0.3]
    assert got.fit == spearman_permutation(got.points["self_alignment"], got.points["cohens_d"], n_permutations=99,
                                           seed=3)


def test_alignment_vs_boundary_draws_every_point_by_model_and_training_and_the_summary_table():
    rng = np.random.default_rng(4)
    points = pd.DataFrame({"model": ["a"] * 6 + ["b"] * 3, "step": [0, 0, 0, 8, 8, 8, 8, 8, 8],
                           "self_alignment": rng.uniform(0, 1, 9), "cohens_d": rng.normal(size=9)})
    summary = pd.DataFrame({"model": ["a", "a", "b"], "step": [0, 8, 8], "rho_alignment_d": [0.1, 0.25, -0.5],
                            "p_alignment_d": [0.5, 0.03, 0.2]})
    fit = {"rho": 0.42, "p_value": 0.013, "n_pairs": 9}
    fig = ALL_MODELS_FIGURES["alignment_vs_boundary"](AllModelsFigureInputs(method=METHOD, points=points,
                                                                            summary=summary, fit=fit))
    ax, side = fig.axes
    trained_a, untrained_a, trained_b, untrained_b = ax.collections
    np.testing.assert_allclose(trained_a.get_offsets(), points.iloc[3:6][["self_alignment", "cohens_d"]])
    np.testing.assert_allclose(untrained_a.get_offsets(), points.iloc[:3][["self_alignment", "cohens_d"]])
    assert len(untrained_b.get_offsets()) == 0 and len(trained_b.get_offsets()) == 3
    slope, intercept = np.polyfit(points["self_alignment"], points["cohens_d"], 1)
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), slope * np.asarray(line.get_xdata()) + intercept)
    assert ax.get_title() == ("all layers, models and checkpoints: Spearman ρ = 0.42 (permutation p = 0.013, "
                              "n = 9)")
    (table,) = side.tables
    cells = table.get_celld()
    assert [cells[1, c].get_text().get_text() for c in range(4)] == ["a", "0", "0.10", "0.5"]
    assert [cells[3, c].get_text().get_text() for c in range(4)] == ["b", "8", "-0.50", "0.2"]
    assert fig.get_suptitle() == "Self-alignment vs boundary coupling (signed_cpm; paper 004, Figure 8)"
    plt.close(fig)


def test_every_figure_of_a_single_checkpoint_draws_without_a_warning(strict, inputs):
    one = TopologyFigureInputs(**{**inputs.__dict__, "steps": [16]})
    for draw in FIGURES.values():
        fig = draw(one)
        fig.canvas.draw()
        plt.close(fig)
