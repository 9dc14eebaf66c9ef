"""Paper 003's report figures (crosslayer.continuity.figures) by their artists, built without Snakemake
from synthetic continuity tables: one model's checkpoints, the toy MLP runs, the transformer ablations."""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from figure_checks import drawn, panels
from rule_outputs import rule_figures

from crosslayer.continuity.figures import (
    ABLATION_FIGURES,
    FIGURES,
    TOY_DATASETS_FIGURES,
    TOY_FIGURES,
    AblationFigureInputs,
    ContinuityFigureInputs,
    ToyDatasetsFigureInputs,
    ToyFigureInputs,
    load_ablation_inputs,
    load_figure_inputs,
    load_toy_datasets_inputs,
    load_toy_inputs,
)
from crosslayer.continuity.plots import projection_colors
from crosslayer.continuity.tables import TABLE2_ORDER

STEPS = [0, 4, 16]
L = 5
ABSENT = {"gate", "ov"}  # a non-gated model: no gate, and OV left out
PRESENT = [name for name in TABLE2_ORDER if name not in ABSENT]


def steps_table(seed, steps=STEPS, absent=ABSENT):
    """A steps.tsv: every projection at every step, values NaN where the model lacks it."""
    rng = np.random.default_rng(seed)
    rows = []
    for step in steps:
        for name in TABLE2_ORDER:
            present = name not in absent
            values = rng.uniform(0.05, 0.95, 8) if present else np.full(8, np.nan)
            rows.append([step, name, present, *values])
    return pd.DataFrame(rows, columns=["step", "projection", "present", "u1", "v1", "baseline_u", "baseline_v", "evr_u",
                                       "evr_v", "evr_baseline_u", "evr_baseline_v"])


def last_arrays(seed):
    rng = np.random.default_rng(seed)
    arrays = {}
    for name in PRESENT:
        for space in ("u", "v"):
            arrays[f"{name}.cos_{space}"] = rng.uniform(0, 1, L - 1)
            arrays[f"{name}.pca_{space}"] = rng.normal(size=(L, 2))  # two components: drawn at PC 3 = 0
    return arrays


@pytest.fixture(scope="module")
def inputs():
    return ContinuityFigureInputs(model="m", steps=STEPS, table=steps_table(0), arrays=last_arrays(0))


@pytest.fixture(scope="module")
def figures(inputs):
    yield from drawn(FIGURES, inputs)


def at(table, step, column):
    """`column` of the present projections at `step`, in Table 2's order."""
    rows = table[(table["step"] == step) & table["present"]].set_index("projection")
    return rows.loc[[name for name in TABLE2_ORDER if name in rows.index], column].to_numpy()


def labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


# --------------------------------------------------------------------------- the figure tables


@pytest.mark.parametrize(("smk", "rule", "table"), [("continuity.smk", "plot_continuity", FIGURES),
                                                     ("ablations.smk", "plot_ablations", ABLATION_FIGURES),
                                                     ("toy.smk", "plot_toy", TOY_FIGURES),
                                                     ("toy.smk", "plot_toy_datasets", TOY_DATASETS_FIGURES)])
def test_each_figure_table_is_its_rules_figures_in_order(smk, rule, table):
    assert rule_figures(smk, rule) == list(table)


def test_every_figure_is_a_new_figure(figures):
    assert len({id(fig) for fig in figures.values()}) == len(FIGURES)
    assert all(isinstance(fig, mpl.figure.Figure) for fig in figures.values())


def test_the_loader_reads_the_steps_table_and_the_last_checkpoints_arrays(tmp_path):
    steps_table(1).to_csv(tmp_path / "steps.tsv", sep="\t", index=False)
    npz = []
    for i, step in enumerate(STEPS):
        np.savez(tmp_path / f"step{step}.npz", **last_arrays(i))
        npz.append(tmp_path / f"step{step}.npz")
    got = load_figure_inputs(model="m", steps=STEPS, table=tmp_path / "steps.tsv", npz=npz)
    pd.testing.assert_frame_equal(got.table, steps_table(1))
    np.testing.assert_array_equal(got.arrays["q.cos_u"], last_arrays(len(STEPS) - 1)["q.cos_u"])
    assert got.present == PRESENT and list(got.colors) == PRESENT
    assert got.colors["down"] == projection_colors(TABLE2_ORDER)["down"]  # one colour per projection, any model


# --------------------------------------------------------------------------- one model's checkpoints


def test_bars_draw_the_first_and_last_step_of_each_present_projection_over_its_baseline(figures, inputs):
    fig = figures["bars"]
    axes = panels(fig)
    assert len(axes) == 2
    for ax, space in zip(axes, ("v", "u")):
        first, last = ax.containers
        np.testing.assert_allclose([bar.get_height() for bar in first], at(inputs.table, 0, f"{space}1"))
        np.testing.assert_allclose([bar.get_height() for bar in last], at(inputs.table, 16, f"{space}1"))
        (baseline,) = ax.collections
        np.testing.assert_allclose([seg[0, 1] for seg in baseline.get_segments()],
                                   at(inputs.table, 0, f"baseline_{space}"))
        assert [t.get_text() for t in ax.get_xticklabels()] == ["Q", "K", "Up", "O", "Down", "V"]
    assert labels(axes[0]) == ["random $E|\\cos|$", "step 0 (init)", "step 16"]
    assert fig.get_suptitle() == "m: continuity of adjacent layers' principal singular vectors"


def test_bars_of_a_single_checkpoint_show_it_once():
    one = ContinuityFigureInputs(model="m", steps=[8], table=steps_table(0, steps=[8]), arrays=last_arrays(0))
    fig = FIGURES["bars"](one)
    assert labels(panels(fig)[0]) == ["random $E|\\cos|$", "step 8"]
    plt.close(fig)


def test_over_training_draws_each_present_projection_against_the_step(figures, inputs):
    axes = panels(figures["over_training"])
    for ax, space in zip(axes, ("v", "u")):
        lines = ax.get_lines()
        assert [line.get_label() for line in lines] == ["Q", "K", "Up", "O", "Down", "V"]
        for line, name in zip(lines, PRESENT):
            part = inputs.table[inputs.table["projection"] == name]
            np.testing.assert_array_equal(line.get_xdata(), STEPS)
            np.testing.assert_allclose(line.get_ydata(), part[f"{space}1"])
            np.testing.assert_allclose(mpl.colors.to_rgba(line.get_color()), projection_colors(TABLE2_ORDER)[name])
    assert axes[1].get_legend() is not None


def test_layers_draw_the_cosines_of_adjacent_layers_at_the_last_step(figures, inputs):
    fig = figures["layers"]
    axes = panels(fig)
    assert [ax.get_title() for ax in axes] == ["input space $v_1$", "output space $u_1$"]
    for ax, space in zip(axes, ("v", "u")):
        for line, name in zip(ax.get_lines(), PRESENT):
            np.testing.assert_array_equal(line.get_xdata(), np.arange(L - 1) + 0.5)
            np.testing.assert_allclose(line.get_ydata(), inputs.arrays[f"{name}.cos_{space}"])
    assert fig.get_suptitle() == "m: layer-wise continuity at step 16"


def test_pca_draws_each_projection_and_space_in_3d_with_its_explained_variance(figures, inputs):
    fig = figures["pca"]
    axes = panels(fig)
    assert len(axes) == 2 * len(PRESENT) and all(ax.name == "3d" for ax in axes)
    last = inputs.table[inputs.table["step"] == 16].set_index("projection")
    for ax, (space, name) in zip(axes, [(s, n) for s in ("v", "u") for n in PRESENT]):
        coords = inputs.arrays[f"{name}.pca_{space}"]
        x, y, z = ax.collections[0]._offsets3d
        np.testing.assert_allclose(np.column_stack([x, y, z]), np.pad(coords, ((0, 0), (0, 1))))
        title = "OV" if name == "ov" else name.capitalize()
        assert ax.get_title() == (f"{title} ${space}_1$: EVR {last.loc[name, f'evr_{space}']:.0%}\n"
                                  f"(random {last.loc[name, f'evr_baseline_{space}']:.0%})")
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 1


# --------------------------------------------------------------------------- the toy MLP runs

RUNS = ["res_relu", "nores_none", "res_tanh"]
TOY_METRICS = ["W.v1", "W.u1", "G.v1", "Gcum.v1", "G.align_v", "Gcum.align_v", "ema0.9.align_v", "ema0.99.align_v",
               "accuracy"]


def epoch_table(seed):
    rng = np.random.default_rng(seed)
    rows = pd.DataFrame([(run, epoch) for run in RUNS for epoch in range(1, 5)], columns=["run", "epoch"])
    for metric in TOY_METRICS:
        rows[metric] = rng.uniform(0, 1, len(rows))
        rows[f"{metric}_sd"] = rng.uniform(0, 0.1, len(rows))
    return rows


def final_table(seed):
    rng = np.random.default_rng(seed)
    rows = pd.DataFrame({"run": RUNS})
    for metric in ("G0.v1", "W.v1", "W.u1", "W.wa_v", "Gcum.v1", "accuracy", "G.erank"):
        rows[metric] = rng.uniform(0, 1, len(rows))
        rows[f"{metric}_sd"] = rng.uniform(0, 0.1, len(rows))
    return rows


@pytest.fixture(scope="module")
def toy():
    return ToyFigureInputs(runs=RUNS, drift_runs=["nores_none", "not_a_run"], ema_run="res_tanh",
                           epochs=epoch_table(0), final=final_table(0))


@pytest.fixture(scope="module")
def toy_figures(toy):
    yield from drawn(TOY_FIGURES, toy)


def of_run(epochs, run, column):
    return epochs[epochs["run"] == run].sort_values("epoch")[column].to_numpy()


def test_the_toy_loader_reads_both_tables(tmp_path):
    epoch_table(0).to_csv(tmp_path / "epochs.tsv", sep="\t", index=False)
    final_table(0).to_csv(tmp_path / "final.tsv", sep="\t", index=False)
    got = load_toy_inputs(runs=RUNS, drift_runs=["a"], ema_run="b", epochs=tmp_path / "epochs.tsv",
                          final=tmp_path / "final.tsv")
    pd.testing.assert_frame_equal(got.epochs, epoch_table(0))
    pd.testing.assert_frame_equal(got.final, final_table(0))
    assert (got.runs, got.drift_runs, got.ema_run) == (RUNS, ["a"], "b")


def test_over_epochs_draws_each_run_in_four_metrics(toy_figures, toy):
    fig = toy_figures["over_epochs"]
    axes = panels(fig)
    assert [ax.get_title() for ax in axes] == ["weights, input space $v_1$", "weights, output space $u_1$",
                                               "gradient (first mini-batch of the epoch), $v_1$",
                                               "cumulative gradient, $v_1$"]
    for ax, metric in zip(axes, ("W.v1", "W.u1", "G.v1", "Gcum.v1")):
        for line, run in zip(ax.get_lines(), RUNS):
            np.testing.assert_allclose(line.get_ydata(), of_run(toy.epochs, run, metric))
    assert [t.get_text() for t in fig.legends[0].get_texts()] == RUNS


def test_final_draws_the_last_epoch_of_every_run_and_continuity_against_gradient_rank(toy_figures, toy):
    bars, scatter = panels(toy_figures["final"])
    metrics = ["G0.v1", "W.v1", "W.u1", "W.wa_v", "Gcum.v1", "accuracy"]
    containers = [c for c in bars.containers if isinstance(c, mpl.container.BarContainer)]
    assert [c.get_label() for c in containers] == metrics
    for container, metric in zip(containers, metrics):
        np.testing.assert_allclose([bar.get_height() for bar in container], toy.final[metric])
    assert [t.get_text() for t in bars.get_xticklabels()] == RUNS
    points = [line for line in scatter.get_lines() if line.get_marker() == "o"]
    np.testing.assert_allclose([line.get_xdata()[0] for line in points], toy.final["G.erank"])
    np.testing.assert_allclose([line.get_ydata()[0] for line in points], toy.final["W.v1"])


def test_drift_draws_the_configured_runs_that_exist(toy_figures, toy):
    axes = [ax for ax in panels(toy_figures["drift"]) if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["nores_none"]  # "not_a_run" is skipped
    lines = axes[0].get_lines()
    np.testing.assert_allclose(lines[0].get_ydata(), of_run(toy.epochs, "nores_none", "W.v1"))
    assert labels(axes[0]) == ["weights $v_1$", "weights $u_1$", "gradient $v_1$", "test accuracy"]


def test_drift_falls_back_to_the_first_two_runs(toy):
    fig = TOY_FIGURES["drift"](ToyFigureInputs(runs=RUNS, drift_runs=["gone"], ema_run="x", epochs=toy.epochs,
                                               final=toy.final))
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == RUNS[:2]
    plt.close(fig)


def test_ema_alignment_compares_each_gradient_average_of_the_ema_run(toy_figures, toy):
    left, right = [ax for ax in panels(toy_figures["ema_alignment"])]
    assert left.get_title() == "res_tanh: continuity"
    np.testing.assert_allclose(left.get_lines()[0].get_ydata(), of_run(toy.epochs, "res_tanh", "G.v1"))
    assert labels(right) == ["raw gradient", "cumulative gradient", "EMA β = 0.9", "EMA β = 0.99"]
    for line, column in zip(right.get_lines(), ("G.align_v", "Gcum.align_v", "ema0.9.align_v", "ema0.99.align_v")):
        np.testing.assert_allclose(line.get_ydata(), of_run(toy.epochs, "res_tanh", column))


# --------------------------------------------------------------------------- toy runs across image sets

SETS = ["mnist", "svhn", "cifar100"]


def datasets_table(seed):
    """A results/toy/datasets.tsv of RUNS on SETS, but (cifar100, res_tanh), which is missing."""
    rng = np.random.default_rng(seed)
    rows = pd.DataFrame([(d, run) for d in SETS for run in RUNS if (d, run) != ("cifar100", "res_tanh")],
                        columns=["dataset", "run"])
    for metric, high in (("W.v1", 1), ("G.erank", 40)):
        rows[metric] = rng.uniform(0, high, len(rows))
        rows[f"{metric}_sd"] = rng.uniform(0, 0.05 * high, len(rows))
    return rows


def test_the_toy_datasets_loader_reads_the_table(tmp_path):
    datasets_table(0).to_csv(tmp_path / "datasets.tsv", sep="\t", index=False)
    got = load_toy_datasets_inputs(runs=RUNS, datasets=SETS, table=tmp_path / "datasets.tsv")
    pd.testing.assert_frame_equal(got.table, datasets_table(0))
    assert (got.runs, got.datasets) == (RUNS, SETS)


def test_datasets_draws_continuity_against_gradient_rank_per_set_and_run():
    table = datasets_table(1)
    fig = TOY_DATASETS_FIGURES["datasets"](ToyDatasetsFigureInputs(runs=RUNS, datasets=SETS, table=table))
    (ax,) = panels(fig)
    points = [line for line in ax.get_lines() if line.get_marker() in ("o", "s", "^")]  # not the error bars' caps
    assert len(points) == len(table)  # the missing pair is skipped
    expected = table.set_index(["dataset", "run"])
    drawn_at = {(line.get_marker(), mpl.colors.to_hex(line.get_color())): (line.get_xdata()[0], line.get_ydata()[0])
                for line in points}
    for i, run in enumerate(RUNS):  # colour: run; marker: image set
        for marker, dataset in zip("os^", SETS):
            if (dataset, run) in expected.index:
                row = expected.loc[(dataset, run)]
                assert drawn_at[(marker, mpl.colors.to_hex(f"C{i}"))] == pytest.approx((row["G.erank"], row["W.v1"]))
    assert [t.get_text() for t in fig.legends[0].get_texts()] == RUNS + SETS
    assert ax.get_xlabel() == "effective rank of the gradient (last epoch)" and ax.get_ylim() == (0, 1)
    plt.close(fig)


# --------------------------------------------------------------------------- the transformer ablations

ABLATIONS = ["res_silu", "res_none", "nores_silu"]


def ablation_inputs(diverged=(None, 3, None), present=(True, True, False)):
    """Three runs of 6 steps saved at 0 and 6; a diverged run's last row is its last saved step."""
    summary = pd.DataFrame({"run": ABLATIONS, "steps": [6, 6, 6], "diverged_step": [np.nan if d is None else d
                                                                                   for d in diverged],
                            "perplexity": [400.0, np.nan, 512.0]}).set_index("run")
    steps = {run: steps_table(i, steps=[0, 6], absent=ABSENT if keep else set(TABLE2_ORDER))
             for i, (run, keep) in enumerate(zip(ABLATIONS, present))}
    return AblationFigureInputs(summary=summary, steps=steps)


def test_the_ablation_loader_reads_the_summary_and_each_runs_table(tmp_path):
    inputs = ablation_inputs()
    inputs.summary.to_csv(tmp_path / "ablations.tsv", sep="\t")
    paths = []
    for run, table in inputs.steps.items():
        table.to_csv(tmp_path / f"{run}.tsv", sep="\t", index=False)
        paths.append(tmp_path / f"{run}.tsv")
    got = load_ablation_inputs(runs=ABLATIONS, summary=tmp_path / "ablations.tsv", tables=paths)
    pd.testing.assert_frame_equal(got.summary, inputs.summary)
    assert list(got.steps) == ABLATIONS
    pd.testing.assert_frame_equal(got.steps["res_none"], inputs.steps["res_none"])


def test_ablation_bars_draw_the_last_step_of_the_finished_runs_and_name_the_diverged():
    inputs = ablation_inputs()
    fig = ABLATION_FIGURES["bars"](inputs)
    axes = panels(fig)
    assert labels(axes[1]) == ["random $E|\\cos|$", "res_silu (ppl 400)", "nores_silu (ppl 512)"]
    first = axes[0].containers[0]
    np.testing.assert_allclose([bar.get_height() for bar in first], at(inputs.steps["res_silu"], 6, "v1"))
    assert fig.get_suptitle().endswith("\ndiverged (no continuity): res_none at step 3")
    plt.close(fig)


def test_ablation_bars_say_when_every_run_diverged():
    fig = ABLATION_FIGURES["bars"](ablation_inputs(diverged=(2, 3, 4)))
    for ax in fig.axes:
        assert [t.get_text() for t in ax.texts] == ["every run diverged"] and not ax.axison
    assert "res_silu at step 2, res_none at step 3, nores_silu at step 4" in fig.get_suptitle()
    plt.close(fig)


def test_ablation_over_training_draws_a_column_per_run_and_marks_divergence():
    inputs = ablation_inputs()
    fig = ABLATION_FIGURES["over_training"](inputs)
    axes = np.array(fig.axes).reshape(2, len(ABLATIONS))
    assert [ax.get_title() for ax in axes[0]] == ABLATIONS and all(ax.get_title() == "" for ax in axes[1])
    q = axes[1, 0].get_lines()[0]  # output space of the first run
    np.testing.assert_array_equal(q.get_xdata(), [0, 6])
    np.testing.assert_allclose(q.get_ydata(), inputs.steps["res_silu"].query("projection == 'q'")["u1"])
    diverged = [line for line in axes[0, 1].get_lines() if line.get_linestyle() == ":"]
    assert len(diverged) == 1 and list(diverged[0].get_xdata()) == [3, 3]
    assert [t.get_text() for t in axes[0, 2].texts] == ["no checkpoint"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["Q", "K", "Up", "O", "Down", "V"]
    plt.close(fig)


def test_every_figure_of_a_single_checkpoint_draws_without_a_warning(strict):
    one = ContinuityFigureInputs(model="m", steps=[1000], table=steps_table(0, steps=[1000]), arrays=last_arrays(0))
    for draw in FIGURES.values():
        fig = draw(one)
        fig.canvas.draw()
        plt.close(fig)
