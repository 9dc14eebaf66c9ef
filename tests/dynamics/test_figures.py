"""Paper 004's Jacobian-dynamics report figures (crosslayer.dynamics.figures) by their artists, built
without Snakemake from synthetic spectra tables, eigenvalues and Schur dose responses."""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from figure_checks import drawn, panels
from rule_outputs import rule_figures

from crosslayer.dynamics.densities import eigenvalue_density
from crosslayer.dynamics.figures import FIGURES, DynamicsFigureInputs, load_figure_inputs
from crosslayer.plotting import pick_steps

STEPS = [0, 2, 4, 8, 16]  # five: the eigenvalue figures show four of them
SHOWN = pick_steps(STEPS)
L, D = 5, 6
REGIMES = ["early", "early", "mid", "late", "late"]
MODES = ["J", "J - I"]
QUANTILED = ["condition_number", "condition_number_res", "participation_ratio", "participation_ratio_res"]
PROFILED = ["self_alignment", "henrici", "forward_alignment", "frac_complex", "self_alignment_res", "henrici_res",
            "forward_alignment_res", "residual_norm_ratio", "frac_expanding", "frac_expanding_res", "spectral_radius"]


def profile(seed, *, condition_numbers=True):
    """A spectra.tsv as read back (index = layer)."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({"regime": REGIMES}, index=pd.RangeIndex(L, name="layer"))
    for column in PROFILED:
        table[column] = rng.uniform(0.1, 2.0, L)
    table["cumulative_effective_rank"] = np.sort(rng.uniform(1, D, L))[::-1]
    for name in QUANTILED:
        if condition_numbers or not name.startswith("condition"):
            q = np.sort(rng.uniform(1, 50, (3, L)), axis=0)
            table[f"q25_{name}"], table[f"median_{name}"], table[f"q75_{name}"] = q
    table["baseline_mean"], table["baseline_sd"] = 0.3, 0.05
    return table


def schur_table(seed):
    """A schur.tsv: per mode, the dose line and two controls over four draws."""
    rng = np.random.default_rng(seed)
    rows = [(construction, draw, alpha, 0, mode) for mode in MODES for alpha in (0.0, 0.5, 1.0)
            for construction, draws in (("dose", 1), ("control_a", 4), ("control_b", 4)) for draw in range(draws)]
    table = pd.DataFrame(rows, columns=["construction", "draw", "alpha", "start_layer", "mode"])
    table["effective_rank"] = rng.uniform(1, D, len(table))
    table["log_frobenius"] = rng.uniform(0, 3, len(table))
    return table


def spectra(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(L, D)) + 1j * rng.normal(size=(L, D))


def make_inputs(*, condition_numbers=True):
    return DynamicsFigureInputs(
        model="m", steps=STEPS,
        profiles={step: profile(i, condition_numbers=condition_numbers) for i, step in enumerate(STEPS)},
        eigenvalues={step: spectra(step) for step in SHOWN}, schur={step: schur_table(step) for step in STEPS})


@pytest.fixture(scope="module")
def inputs():
    return make_inputs()


@pytest.fixture(scope="module")
def figures(inputs):
    yield from drawn(FIGURES, inputs)


def step_lines(ax):
    """The lines labelled ``step ...``, in step order."""
    return [line for line in ax.get_lines() if line.get_label().startswith("step")]


# --------------------------------------------------------------------------- the figure table


def test_the_figure_table_is_the_rules_figures_in_order():
    assert rule_figures("dynamics.smk", "plot_dynamics") == list(FIGURES)


def test_every_figure_is_a_new_figure(figures):
    assert len({id(fig) for fig in figures.values()}) == len(FIGURES)
    assert all(isinstance(fig, mpl.figure.Figure) for fig in figures.values())


def test_the_loader_reads_every_table_and_the_eigenvalues_of_the_shown_steps_only(tmp_path):
    tables, eigenvalues, schur = [], [], []
    for i, step in enumerate(STEPS):
        profile(i).to_csv(tmp_path / f"step{step}.spectra.tsv", sep="\t")
        schur_table(step).to_csv(tmp_path / f"step{step}.schur.tsv", sep="\t", index=False)
        if step in SHOWN:  # the others are never opened
            np.savez(tmp_path / f"step{step}.eigenvalues.npz", eigenvalues=spectra(step))
        tables.append(tmp_path / f"step{step}.spectra.tsv")
        schur.append(tmp_path / f"step{step}.schur.tsv")
        eigenvalues.append(tmp_path / f"step{step}.eigenvalues.npz")
    got = load_figure_inputs(model="m", steps=STEPS, tables=tables, eigenvalues=eigenvalues, schur=schur)
    assert list(got.profiles) == STEPS and list(got.eigenvalues) == SHOWN == [0, 2, 8, 16]
    pd.testing.assert_frame_equal(got.profiles[4], profile(2), check_index_type=False)
    np.testing.assert_array_equal(got.eigenvalues[8], spectra(8))
    pd.testing.assert_frame_equal(got.schur[2], schur_table(2))


# --------------------------------------------------------------------------- the figures


def test_operators_draw_each_column_by_depth_per_step_with_the_baseline_where_it_applies(figures, inputs):
    fig = figures["operators"]
    axes = panels(fig)
    columns = ["self_alignment", "henrici", "forward_alignment", "frac_complex", "self_alignment_res", "henrici_res",
               "forward_alignment_res", "residual_norm_ratio"]
    assert len(axes) == 8
    for ax, column in zip(axes, columns):
        lines = step_lines(ax)
        assert [line.get_label() for line in lines] == [f"step {s}" for s in STEPS]
        for line, step in zip(lines, STEPS):
            np.testing.assert_array_equal(line.get_xdata(), range(L))
            np.testing.assert_allclose(line.get_ydata(), inputs.profiles[step][column])
        assert lines[0].get_linestyle() == "--"  # step 0: the random-init null
        baseline = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
        assert bool(baseline) == ("alignment" in column)
        if baseline:
            np.testing.assert_allclose(baseline[0].get_ydata(), [0.3, 0.3])
    assert axes[0].get_title() == "self-alignment of J" and axes[7].get_title() == "‖J − I‖_F / ‖I‖_F"
    assert "random ±2 sd" in [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert fig.get_suptitle() == ("m: mean single-token block Jacobian across depth "
                                  "(step 0 = random-init null, dashed)")


def test_sample_spectra_draw_medians_of_J_above_and_J_minus_I_below(figures, inputs):
    axes = np.array(panels(figures["sample_spectra"])).reshape(2, 3)
    for row, suffix in enumerate(("", "_res")):
        condition, participation, expanding = axes[row]
        assert condition.get_yscale() == "log"
        for ax, column in ((condition, f"median_condition_number{suffix}"),
                           (participation, f"median_participation_ratio{suffix}"),
                           (expanding, f"frac_expanding{suffix}")):
            np.testing.assert_allclose(step_lines(ax)[-1].get_ydata(), inputs.profiles[16][column])
    assert axes[1, 2].get_title() == "expanding fraction |λ| > 1 of mean J − I"


def test_without_condition_numbers_their_panels_say_so_and_regimes_use_the_participation_ratio():
    inputs = make_inputs(condition_numbers=False)
    fig = FIGURES["sample_spectra"](inputs)
    for ax in np.array(panels(fig)).reshape(2, 3)[:, 0]:
        assert [t.get_text() for t in ax.texts] == ["not computed\n(dynamics.condition_number: false)"]
        assert not ax.get_lines()
    plt.close(fig)
    fig = FIGURES["regimes"](inputs)
    left = panels(fig)[0]
    assert left.get_title() == "participation ratio of J (no condition numbers computed)"
    np.testing.assert_allclose(step_lines(left)[0].get_ydata(), inputs.profiles[0]["median_participation_ratio"])
    plt.close(fig)


def test_eigenvalues_draw_each_regimes_layers_at_each_shown_step(figures, inputs):
    fig = figures["eigenvalues"]
    axes = np.array(panels(fig)).reshape(len(SHOWN), 3)
    for row, step in enumerate(SHOWN):
        for ax, (regime, layers) in zip(axes[row], (("early", [0, 1]), ("mid", [2]), ("late", [3, 4]))):
            clouds = ax.collections
            assert len(clouds) == len(layers)
            for cloud, layer in zip(clouds, layers):
                lam = inputs.eigenvalues[step][layer]
                np.testing.assert_allclose(cloud.get_offsets(), np.column_stack([lam.real, lam.imag]))
            span = f"layer {layers[0]}" if len(layers) == 1 else f"layers {layers[0]}–{layers[-1]}"
            assert ax.get_title() == f"step {step} · {regime} ({span})"
    (bar,) = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert bar.get_ylabel() == "layer" and bar.get_ylim() == (-0.5, L - 0.5)


def test_cumulative_rank_draws_the_funnel_and_each_modes_dose_response_at_the_first_and_last_step(figures, inputs):
    axes = np.array(panels(figures["cumulative_rank"])).reshape(2, 1 + len(MODES))
    np.testing.assert_allclose(step_lines(axes[0, 0])[2].get_ydata(), inputs.profiles[4]["cumulative_effective_rank"])
    assert axes[0, 0].get_yscale() == "linear"  # ranks within a factor 10
    radius = axes[1, 0].collections[-1]  # the last step
    ranks = inputs.profiles[16]["cumulative_effective_rank"].to_numpy()
    np.testing.assert_allclose(radius.get_offsets(), np.column_stack(
        [inputs.profiles[16]["spectral_radius"][:-1], ranks[1:] - ranks[:-1]]))
    for col, mode in enumerate(MODES, start=1):
        for row, column in enumerate(("effective_rank", "log_frobenius")):
            ax = axes[row, col]
            dose = [line for line in ax.get_lines() if line.get_label().startswith("step")]
            assert [line.get_label() for line in dose] == ["step 0", "step 16"]
            for line, step in zip(dose, (0, 16)):
                table = inputs.schur[step]
                rows = table[(table["mode"] == mode) & (table["construction"] == "dose")].sort_values("alpha")
                np.testing.assert_allclose(line.get_ydata(), rows[column])
            what = "rank" if column == "effective_rank" else "amplification"
            assert ax.get_title() == f"Schur surgery of {mode.replace('-', '−')}, from layer 0: {what}"
    assert [t.get_text() for t in axes[0, 1].get_legend().get_texts()][-1] == "control B: Haar-random basis"


def test_regimes_shade_each_regime_behind_the_condition_number_and_self_alignment(figures, inputs):
    left, right = panels(figures["regimes"])
    assert left.get_yscale() == "log"
    np.testing.assert_allclose(step_lines(left)[1].get_ydata(), inputs.profiles[2]["median_condition_number"])
    np.testing.assert_allclose(step_lines(right)[1].get_ydata(), inputs.profiles[2]["self_alignment"])
    for ax in (left, right):
        bands = [p for p in ax.patches if p.get_label() in ("early (0–1)", "mid (2–2)", "late (3–4)")]
        assert len(bands) == 3
    legend = [t.get_text() for t in right.get_legend().get_texts()]
    assert legend[-3:] == ["early (0–1)", "mid (2–2)", "late (3–4)"]


def test_eigenvalue_density_draws_modulus_and_real_part_on_bins_shared_by_the_steps(figures, inputs):
    fig = figures["eigenvalue_density"]
    axes = np.array(panels(fig)).reshape(len(SHOWN), 2)
    for col, part in enumerate(("modulus", "real")):
        values = np.concatenate([np.abs(lam) if part == "modulus" else lam.real for lam in inputs.eigenvalues.values()])
        shared = tuple(np.percentile(values, [0.5, 99.5]))
        for row, step in enumerate(SHOWN):
            density, _ = eigenvalue_density(inputs.eigenvalues[step], part=part, value_range=shared)
            mesh = axes[row, col].collections[0]
            np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(density.shape), density)
            assert isinstance(mesh.norm, mpl.colors.PowerNorm)
            label = "|λ|" if part == "modulus" else "Re λ"
            assert axes[row, col].get_title() == f"step {step}: density of {label} per layer"
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 2 * len(SHOWN)


def test_without_step_0_the_titles_say_so():
    inputs = make_inputs()
    later = DynamicsFigureInputs(model="m", steps=STEPS[1:], profiles={s: inputs.profiles[s] for s in STEPS[1:]},
                                 eigenvalues={s: spectra(s) for s in pick_steps(STEPS[1:])},
                                 schur={s: inputs.schur[s] for s in STEPS[1:]})
    fig = FIGURES["operators"](later)
    assert fig.get_suptitle().endswith("(no step-0 checkpoint configured)")
    plt.close(fig)


def test_every_figure_of_a_single_checkpoint_draws_without_a_warning(strict):
    one = DynamicsFigureInputs(model="m", steps=[1000], profiles={1000: profile(0)}, eigenvalues={1000: spectra(0)},
                               schur={1000: schur_table(0)})
    for draw in FIGURES.values():
        fig = draw(one)
        fig.canvas.draw()
        plt.close(fig)


def test_schur_models_overlays_every_models_checkpoints_and_labels_the_last_with_its_recovery():
    from crosslayer.dynamics.figures import ALL_MODELS_FIGURES, DynamicsModelsInputs
    from crosslayer.dynamics.funnel import recovery_table

    def table(ranks):
        return pd.DataFrame([{"construction": "dose", "draw": 0, "alpha": a, "start_layer": 0, "effective_rank": r,
                              "log_frobenius": 0.0, "mode": "J"} for a, r in zip([0.0, 0.5, 1.0], ranks)])

    schur = {("a", 0): table([10, 10, 10]), ("a", 100): table([30, 20, 12]), ("b", 5): table([8, 6, 4])}
    fig = ALL_MODELS_FIGURES["schur_models"](DynamicsModelsInputs(recovery=recovery_table(schur), schur=schur))
    (ax,) = fig.axes
    assert len(ax.lines) == 3 and [t.get_text() for t in ax.get_legend().get_texts()] == [
        "a, step 100: 2.50x", "b, step 5: 2.00x"]
    assert ax.lines[0].get_alpha() < 1 and list(ax.lines[1].get_ydata()) == [30, 20, 12]
    plt.close(fig)
