"""Paper 002's report figures (crosslayer.coupling.figures, .figures_models) by their artists, built
without Snakemake from synthetic checkpoints and the library's own tables."""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from figure_checks import drawn, panels
from rule_outputs import rule_figures

from crosslayer.coupling.figures import FIGURES, NOISE_FIGURES, CouplingFigureInputs, NoiseFigureInputs, load_figure_inputs
from crosslayer.coupling.figures_models import ALL_MODELS_FIGURES, AllModelsFigureInputs, load_all_models_inputs
from crosslayer.coupling.measure import METRICS
from crosslayer.evaluation.tables import heldout_table
from crosslayer.coupling.regularity import pack_symmetric, unit_step_gram, unit_steps
from crosslayer.coupling.tables import (
    TOKEN_WISE,
    across_models,
    regularity_across_models,
    subset_fits,
    summarize_steps,
    training_fits,
)

STEPS = [0, 10, 100]
L, KS, T, K_MIN = 4, (2, 4), 5, 2  # blocks, Ks, token-wise tokens, |A| block size (the smallest K)
VARIANTS, SOURCES, N_TOKENS = ["plain", "plain", "cot", "cot"], ["arc", "gsm8k", "arc", "gsm8k"], (3, 4, 2, 5)
METRIC = "paper"


def synthetic_checkpoint(seed, *, token_wise=True):
    """The arrays of one ``.coupling.npz`` (the block_coupling job's measure_checkpoint), random."""
    rng = np.random.default_rng(seed)
    P, N = len(VARIANTS), sum(N_TOKENS)
    M = rng.uniform(0, 1, (P, len(METRICS), len(KS), L, L))
    M[..., range(L), range(L)] = 0
    states = rng.standard_normal((L + 1, N, 6)) * np.arange(1, L + 2)[:, None, None]
    raw_last = 3 * rng.standard_normal((N, 6))
    units = np.concatenate([unit_steps(states), unit_steps(np.stack([states[-2], raw_last]))])
    data = {
        "depthwise": M, "Ks": np.array(KS), "metrics": list(METRICS), "prompt_ids": [f"p{i}" for i in range(P)],
        "variants": VARIANTS, "sources": SOURCES, "n_tokens": np.array(N_TOKENS),
        "token_prompt": np.repeat(np.arange(P), N_TOKENS), "lss": rng.uniform(1, 3, N), "ed": rng.uniform(0, 1, N),
        "lss_raw": rng.uniform(1, 3, N), "ed_raw": rng.uniform(0, 1, N),
        "norms": np.linalg.norm(states, axis=-1), "norm_last_raw": np.linalg.norm(raw_last, axis=-1),
        "step_lengths": np.linalg.norm(np.concatenate([np.diff(states, axis=0), (raw_last - states[-2])[None]]),
                                       axis=-1),
        "step_gram": pack_symmetric(unit_step_gram(units)).astype(np.float32),
        "logit_entropy": rng.uniform(0, 5, (L + 1, N)),
        "singular_values": np.sort(rng.uniform(0.1, 9, (P, L, max(KS))))[..., ::-1],
        "pca": rng.standard_normal((2, L + 1, 3, 2)), "pca_explained": np.array([[0.5, 0.2], [0.4, 0.3]]),
        "example_abs_coupling": rng.uniform(0.1, 1, (L, L, K_MIN, K_MIN)), "example_prompt": "an example prompt",
        "n_params": 1000 * (seed + 1), "n_layers": L, "d_model": 6, "layer_pairs": np.zeros((0, 2), int),
    }
    if token_wise:
        pairs = [(1, 2), (2, 2)]
        data["layer_pairs"] = np.array(pairs)
        data["tw_self"] = rng.uniform(0, 1, (len(pairs), 2, len(METRICS), len(KS), T, T))
        for kind in ("fixed_input", "fixed_output"):
            data[f"tw_{kind}"] = rng.uniform(0, 1, (len(pairs), 2, len(METRICS), len(KS), T, T, T))
        for kind in TOKEN_WISE:
            data[f"tw_abs_{kind}"] = rng.uniform(0.1, 1, (len(pairs), T, T, K_MIN, K_MIN))
    return data


def figure_inputs(*, token_wise=True, final_norm=True, seed=0, unpooled=(), regularity_source="all"):
    checkpoints = [synthetic_checkpoint(seed + i, token_wise=token_wise) for i in range(len(STEPS))]
    tables = summarize_steps(checkpoints, STEPS, metric=METRIC, window=3, unpooled=unpooled)
    return CouplingFigureInputs(model="m", steps=STEPS, checkpoints={0: checkpoints[0], 100: checkpoints[-1]},
                                tables=tables, metric=METRIC, window=3, pca_fit="last", final_norm=final_norm,
                                example_blocks=(1, 2), unpooled=tuple(unpooled), regularity_source=regularity_source)


@pytest.fixture(scope="module")
def inputs():
    return figure_inputs()


@pytest.fixture(scope="module")
def figures(inputs):
    yield from drawn(FIGURES, inputs)


def mean_coupling(data, K_index, prompts):
    """(L, L) mean over `prompts` of the coupling (minus the mis-coupling) of the paper metric."""
    return -data["depthwise"][prompts, METRICS.index(METRIC), K_index].mean(axis=0)


PLAIN = np.array(VARIANTS) == "plain"


# --------------------------------------------------------------------------- the figure tables


@pytest.mark.parametrize(("smk", "rule", "table"), [("coupling.smk", "plot_coupling", FIGURES),
                                                     ("coupling.smk", "plot_coupling_models", ALL_MODELS_FIGURES),
                                                     ("embedding_noise.smk", "plot_embedding_noise", NOISE_FIGURES)])
def test_each_figure_table_is_its_rules_figures_in_order(smk, rule, table):
    assert rule_figures(smk, rule) == list(table)


def test_every_figure_is_a_new_figure(figures):
    assert len({id(fig) for fig in figures.values()}) == len(FIGURES)
    assert all(isinstance(fig, mpl.figure.Figure) for fig in figures.values())


def test_the_loader_reads_the_first_and_last_checkpoint_and_every_table(tmp_path, inputs):
    npz, tables = [], {}
    for step in STEPS:
        path = tmp_path / f"step{step}.coupling.npz"
        np.savez(path, **synthetic_checkpoint(STEPS.index(step)))
        npz.append(path)
    for name, table in inputs.tables.items():
        tables[name] = tmp_path / f"{name}.tsv"
        table.to_csv(tables[name], sep="\t", index=False)
    loaded = load_figure_inputs(model="m", steps=STEPS, npz=npz, tables=tables, metric=METRIC, window=3,
                                pca_fit="all", final_norm=False, example_blocks=[1, 2])
    assert sorted(loaded.checkpoints) == [0, 100] and loaded.shown == [0, 100]
    assert np.array_equal(loaded.last["depthwise"], synthetic_checkpoint(2)["depthwise"])
    assert loaded.checkpoints[0]["variants"] == VARIANTS  # strings as lists (load_checkpoint)
    assert set(loaded.tables) == set(inputs.tables)
    assert np.allclose(loaded.tables["steps"].coupling_mean, inputs.tables["steps"].coupling_mean)
    assert (loaded.Ks, loaded.raw, loaded.n_layers, loaded.example_blocks) == (list(KS), "_raw", L, (1, 2))


# --------------------------------------------------------------------------- one model


def test_depthwise_shows_the_example_blocks_over_the_mean_plain_coupling(figures, inputs):
    fig = figures["depthwise"]
    top, bottom = panels(fig)[:2], panels(fig)[2:]  # subplots (2, 2) are row-major
    assert len(fig.axes) == 8  # four panels, each with its colour bar
    for ax, step in zip(top, [0, 100]):
        assert ax.get_title() == f"step {step}: |A| (K = 2), blocks 1-2"
        image = ax.images[0].get_array()
        assert np.allclose(image[:K_MIN, :K_MIN], inputs.checkpoints[step]["example_abs_coupling"][1, 1])
        assert np.allclose(image[:K_MIN, K_MIN + 1:], inputs.checkpoints[step]["example_abs_coupling"][1, 2])
    for ax, step in zip(bottom, [0, 100]):
        assert ax.get_title() == f"mean coupling (K = 4, {METRIC})"
        image = np.ma.filled(ax.images[0].get_array(), np.nan)
        expected = mean_coupling(inputs.checkpoints[step], 1, PLAIN)
        off = ~np.eye(L, dtype=bool)
        assert np.allclose(image[off], expected[off]) and np.isnan(np.diagonal(image)).all()
        assert ax.images[0].get_clim() == (-1, 0)
    assert "'an example prompt'" in fig.get_suptitle() and "with the final norm" in fig.get_suptitle()


def test_tokenwise_shows_the_first_pair_and_prompt_of_each_kind(figures, inputs):
    fig = figures["tokenwise"]
    assert len(fig.axes) == 6
    for ax, (step, kind) in zip(fig.axes, [(s, k) for s in (0, 100) for k in TOKEN_WISE]):
        assert ax.get_title().startswith(f"step {step} — ")
        assert ax.get_ylabel().endswith("(layer 1)") and ax.get_xlabel().endswith("(layer 2)")
        blocks = inputs.checkpoints[step][f"tw_abs_{kind}"][0]
        assert np.allclose(ax.images[0].get_array()[:K_MIN, :K_MIN], blocks[0, 0])
    assert fig.get_suptitle() == "m: token-wise |A| (K = 2) of J^1 on the singular vectors of J^2, first prompt"


def test_tokenwise_says_when_token_wise_coupling_is_off():
    fig = FIGURES["tokenwise"](figure_inputs(token_wise=False))
    assert len(fig.axes) == 1 and not fig.axes[0].axison
    assert fig.axes[0].texts[0].get_text().startswith("token-wise coupling is off")
    plt.close(fig)


def test_over_training_draws_every_K_and_every_token_wise_pair(figures, inputs):
    depthwise, tokenwise = figures["over_training"].axes
    assert [t.get_text() for t in depthwise.get_legend().get_texts()] == ["K = 2", "K = 4"]
    plain = inputs.tables["steps"].query("source == 'all' and variant == 'plain' and K == 4")
    assert np.allclose(depthwise.containers[1].lines[0].get_ydata(), plain.coupling_mean)
    every = [mean_coupling(inputs.checkpoints[s], 1, PLAIN)[~np.eye(L, dtype=bool)].mean() for s in (0, 100)]
    assert np.allclose(depthwise.containers[1].lines[0].get_ydata()[[0, -1]], every)
    assert len(tokenwise.lines) == 2 * len(TOKEN_WISE)  # two layer pairs
    assert tokenwise.get_title() == "token-wise (K = 4, off-diagonal token pairs)"


@pytest.mark.parametrize("final_norm", [True, False])
def test_regularity_draws_the_tokens_of_plain_prompts_in_the_chosen_convention(final_norm):
    inputs = figure_inputs(final_norm=final_norm)
    fig = FIGURES["regularity"](inputs)
    suffix = "" if final_norm else "_raw"
    hist_lss, hist_ed, median_lss, median_ed = fig.axes
    plain_tokens = PLAIN[inputs.last["token_prompt"]]
    for hist, name in ((hist_lss, "lss"), (hist_ed, "ed")):
        assert [t.get_text() for t in hist.get_legend().get_texts()] == ["step 0", "step 100"]
        counts = hist.patches[1].get_path().vertices[:, 1].max()  # the last step's histogram, tallest bin
        values = inputs.last[name + suffix][plain_tokens]
        high = np.quantile(np.concatenate([inputs.checkpoints[0][name + suffix][plain_tokens], values]), 0.98)
        assert counts == np.histogram(np.clip(values, None, high), bins=40)[0].max()
    steps = inputs.tables["steps"].query("source == 'all' and variant == 'plain' and K == 4")
    assert np.allclose(median_lss.lines[0].get_ydata(), steps[f"lss{suffix}_median"])
    assert np.allclose(median_ed.lines[0].get_ydata(), steps[f"ed{suffix}_median"])
    assert ("after" if final_norm else "before") in fig.get_suptitle()
    plt.close(fig)


def test_norms_draw_one_line_per_step_by_depth(figures, inputs):
    axes = figures["norms"].axes
    assert len(axes) == 5 and all(len(ax.lines) == len(STEPS) for ax in axes)
    assert axes[0].get_yscale() == "log" and axes[1].get_ylabel() == "windowed LSS (width 3)"
    regularity = inputs.tables["regularity"].query("source == 'all' and variant == 'plain' and step == 10")
    assert np.allclose(axes[0].lines[1].get_ydata(), regularity.norm_median)
    assert np.allclose(axes[2].lines[1].get_ydata(), regularity.eq_windowed_median, equal_nan=True)
    assert axes[2].get_ylabel() == "windowed equidistance (width 3)" and regularity.eq_windowed_median.notna().any()
    assert np.allclose(axes[3].lines[1].get_ydata(), regularity.ed_windowed_median, equal_nan=True)
    assert np.allclose(axes[4].lines[1].get_ydata(), regularity.logit_entropy_median)


def test_pca_draws_all_shallow_and_deep_states_of_the_first_prompt(figures, inputs):
    fig = figures["pca"]
    assert len(fig.axes) == 3 * 2 + 2  # one colour bar per column
    column = panels(fig)[1::2]  # row-major: the second column is the last step
    assert [ax.get_title().split(",")[0] for ax in column] == ["step 100"] * 3
    coords = inputs.last["pca"][0]
    assert np.allclose(column[0].collections[0].get_offsets(), coords.reshape(-1, 2))
    assert np.allclose(column[2].collections[0].get_offsets(), coords[2:].reshape(-1, 2))  # deep: states 2-4
    assert "70% of the variance of X^L, the fit" in panels(fig)[0].get_title()


def test_pca_draws_the_papers_prompt_where_the_checkpoints_keep_it(inputs):
    import dataclasses

    rng = np.random.default_rng(3)
    example = {step: {**c, "example_pca": rng.normal(size=(1, L + 1, 4, 2)),
                      "example_pca_explained": np.array([[0.5, 0.25]])} for step, c in inputs.checkpoints.items()}
    fig = FIGURES["pca"](dataclasses.replace(inputs, checkpoints=example))
    column = panels(fig)[1::2]
    last = example[max(example)]["example_pca"][0]
    assert np.allclose(column[0].collections[0].get_offsets(), last.reshape(-1, 2))
    assert f'"{inputs.last["example_prompt"]}"' in fig.get_suptitle() and "75% of the variance" in column[0].get_title()
    plt.close(fig)


def test_profile_draws_each_steps_coupling_with_all_other_layers(figures, inputs):
    (ax,) = figures["profile"].axes
    assert len(ax.lines) == len(STEPS) and ax.get_ylabel() == "coupling with all other layers (K = 4)"
    M = mean_coupling(inputs.last, 1, PLAIN)
    expected = [(M[l].sum() + M[:, l].sum()) / (2 * (L - 1)) for l in range(L)]
    assert np.allclose(ax.lines[-1].get_ydata(), expected)


def test_graph_draws_the_first_middle_and_last_step_on_one_edge_scale(figures, inputs):
    axes = figures["graph"].axes
    assert [ax.get_title() for ax in axes] == ["step 0", "step 10", "step 100"]
    assert all(len(ax.collections[0].get_segments()) == L * (L - 1) // 2 for ax in axes)
    M = mean_coupling(inputs.last, 1, PLAIN)
    widths = axes[-1].collections[0].get_linewidths()
    assert np.argmax(widths) != np.argmin(widths)
    i, j = np.triu_indices(L, 1)
    assert np.argsort(widths).tolist() == np.argsort(M[i, j] + M[j, i], kind="stable").tolist()


def test_cot_draws_plain_and_cot_of_each_source_at_the_last_step(figures, inputs):
    axes = figures["cot"].axes
    assert [ax.get_title() for ax in axes] == ["arc", "gsm8k"]
    profile = inputs.tables["profile"].query("step == 100 and K == 4 and source == 'gsm8k'")
    plain, cot = axes[1].lines
    assert np.allclose(plain.get_ydata(), profile.query("variant == 'plain'").coupling)
    assert np.allclose(cot.get_ydata(), profile.query("variant == 'cot'").coupling) and cot.get_linestyle() == "--"


def test_fixed_depths_draws_three_depths_inside_the_window(figures, inputs):
    lss, ed = figures["fixed_depths"].axes
    assert [t.get_text() for t in lss.get_legend().get_texts()] == ["depth 1", "depth 2", "depth 3"]
    part = inputs.tables["regularity"].query("source == 'all' and variant == 'plain' and depth == 2")
    assert np.allclose(ed.lines[1].get_ydata(), part.ed_windowed_median)


def test_singular_values_draw_the_median_of_sigma_1_K_and_K_max(figures, inputs):
    axes = figures["singular_values"].axes
    assert [ax.get_title() for ax in axes] == ["step 0", "step 100"]
    assert [t.get_text() for t in axes[1].get_legend().get_texts()] == ["σ_1", "σ_2", "σ_4"]
    values = inputs.last["singular_values"][PLAIN]
    assert np.allclose(axes[1].lines[1].get_ydata(), np.median(values[..., 1], axis=0))


def test_prompt_length_places_each_prompt_of_the_last_step(figures, inputs):
    (ax,) = figures["prompt_length"].axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cot", "plain"]
    prompts = inputs.tables["prompts"].query("step == 100 and variant == 'plain'")
    assert np.allclose(ax.collections[1].get_offsets(), prompts[["n_tokens", "coupling_K4"]].to_numpy())


def test_an_unpooled_source_is_left_out_of_the_pooled_figures_and_can_be_the_regularity_source():
    # gsm8k as the suite's WikiText-2 prompts: measured, but not pooled; its tokens alone give Fig. 26
    inputs = figure_inputs(unpooled=["gsm8k"], regularity_source="gsm8k")
    drawn_figures = {name: FIGURES[name](inputs) for name in ("regularity", "singular_values", "prompt_length",
                                                             "norms", "fixed_depths")}
    arc = np.array(SOURCES) == "arc"
    hist = drawn_figures["regularity"].axes[0]
    tokens = (PLAIN & arc)[inputs.last["token_prompt"]]
    values = inputs.last["lss"][tokens]
    high = np.quantile(np.concatenate([inputs.checkpoints[0]["lss"][tokens], values]), 0.98)
    assert hist.patches[1].get_path().vertices[:, 1].max() == np.histogram(np.clip(values, None, high), 40)[0].max()
    sigma = drawn_figures["singular_values"].axes[1]
    assert np.allclose(sigma.lines[0].get_ydata(), inputs.last["singular_values"][PLAIN & arc][0, :, 0])
    (ax,) = drawn_figures["prompt_length"].axes
    assert len(ax.collections[1].get_offsets()) == 1  # arc's one plain prompt
    norms = drawn_figures["norms"]
    assert "plain prompts of gsm8k" in norms.get_suptitle() and "gsm8k" in drawn_figures["fixed_depths"].get_suptitle()
    gsm8k_tokens = (PLAIN & ~arc)[inputs.last["token_prompt"]]
    assert np.allclose(norms.axes[0].lines[-1].get_ydata(), np.median(inputs.last["norms"][:, gsm8k_tokens], axis=1))
    assert "of gsm8k" not in FIGURES["norms"](figure_inputs()).get_suptitle()
    with pytest.raises(ValueError, match="coupling.regularity_source: 'mmlu' has no rows in the regularity table"):
        FIGURES["norms"](figure_inputs(regularity_source="mmlu"))
    plt.close("all")


# --------------------------------------------------------------------------- over all models

MODELS = ["small", "medium", "large"]


def all_models_inputs(*, scores=True, heldout=True):
    steps, final, losses = {}, {}, {}
    for k, model in enumerate(MODELS):
        checkpoints = [synthetic_checkpoint(10 * k + i, token_wise=False) for i in range(3)]
        steps[model] = summarize_steps(checkpoints, [0, 10, 100], metric=METRIC, window=3)["steps"]
        final[model] = (steps[model], checkpoints[-1])
        losses[model] = heldout_table({step: {"loss": 6.0 - k - i, "bits_per_byte": 2.0 - k / 4 - i / 8}
                                       for i, step in enumerate([0, 10, 100])})
    losses = losses if heldout else None
    models = across_models(final, scores=dict(zip(MODELS, [30.0, 45.0, 70.0])) if scores else None,
                           training_tokens=dict(zip(MODELS, [1e9, 3e9, 2e10])), heldout=losses)
    return AllModelsFigureInputs(steps=steps, models=models, fits=subset_fits(models, {"two": MODELS[:2]}),
                                 regularity=regularity_across_models(steps, models), metric=METRIC, final_norm=True,
                                 training_fits=training_fits(steps, losses), heldout=losses or {})


@pytest.fixture(scope="module")
def all_models():
    return all_models_inputs()


@pytest.fixture(scope="module")
def all_figures(all_models):
    yield from drawn(ALL_MODELS_FIGURES, all_models)


def test_the_all_models_loader_reads_every_table(tmp_path, all_models):
    paths = {}
    for name in ("models", "fits", "regularity"):
        paths[name] = tmp_path / f"{name}.tsv"
        getattr(all_models, name).to_csv(paths[name], sep="\t", index=False)
    steps = {}
    for model, table in all_models.steps.items():
        steps[model] = tmp_path / f"{model}.steps.tsv"
        table.to_csv(steps[model], sep="\t", index=False)
    loaded = load_all_models_inputs(steps=steps, **paths, metric=METRIC, final_norm=False)
    assert list(loaded.steps) == MODELS and loaded.Ks == list(KS) and loaded.has_score
    assert set(loaded.fits.subset) == {"all", "two"} and len(loaded.regularity) == 2 * len(MODELS)


def test_over_training_all_draws_one_line_per_model_at_the_largest_K(all_figures, all_models):
    coupling, lss = all_figures["over_training"].axes
    assert [t.get_text() for t in coupling.get_legend().get_texts()] == MODELS
    for k, model in enumerate(MODELS):
        part = all_models.steps[model].query("source == 'all' and variant == 'plain' and K == 4")
        assert np.allclose(coupling.containers[k].lines[0].get_ydata(), part.coupling_mean)
        assert np.allclose(lss.lines[k].get_ydata(), part.lss_median)
    assert coupling.get_ylabel() == f"mean depth-wise coupling (K = 4, {METRIC})"


def test_over_training_all_leaves_out_models_with_fewer_than_3_checkpoints():
    import dataclasses

    inputs = all_models_inputs()
    twin = inputs.steps["small"][inputs.steps["small"].step.isin([0, 100])]  # a final checkpoint and its twin
    fig = ALL_MODELS_FIGURES["over_training"](dataclasses.replace(inputs, steps={**inputs.steps, "small": twin}))
    coupling, lss = fig.axes
    assert [t.get_text() for t in coupling.get_legend().get_texts()] == MODELS[1:] and len(lss.lines) == 2
    assert fig.texts[0].get_text().endswith(": small")
    plt.close(fig)


def test_vs_score_draws_score_against_coupling_with_both_fits(all_figures, all_models):
    (ax,) = all_figures["vs_score"].axes
    models = all_models.models
    assert np.allclose(ax.collections[0].get_offsets(), models[["coupling_K4", "score"]].to_numpy())
    fit = all_models.fits.query("subset == 'all' and y == 'score' and x == 'coupling' and K == 4").iloc[0]
    assert ax.get_title() == f"OLS: R² = {fit.r2:.2f}, p = {fit.p:.2g}, n = 3"
    linear, exponential = ax.lines
    assert np.allclose(linear.get_ydata(), fit.intercept + fit.slope * linear.get_xdata())
    assert exponential.get_linestyle() == "--"
    assert [t.get_text() for t in ax.texts] == MODELS


def test_vs_score_draws_size_while_no_score_is_set():
    inputs = all_models_inputs(scores=False)
    fig = ALL_MODELS_FIGURES["vs_score"](inputs)
    (ax,) = fig.axes
    assert ax.get_ylabel() == "log10 parameters" and "size instead of score" in fig.get_suptitle()
    assert list(inputs.models.n_params) == [3000, 13000, 23000]
    assert np.allclose(ax.collections[0].get_offsets()[:, 1], np.log10([3000, 13000, 23000]))
    plt.close(fig)


def test_vs_loss_draws_loss_over_training_and_bits_per_byte_across_models(all_figures, all_models):
    training, across = all_figures["vs_loss"].axes
    fits = all_models.training_fits.query("K == 4")
    labels = [t.get_text() for t in training.get_legend().get_texts()]
    assert labels == [f"{m} (R² = {fits[fits.model == m].r2.iloc[0]:.2f}, n = 3)" for m in MODELS]
    for k, model in enumerate(MODELS):
        part = all_models.steps[model].query("source == 'all' and variant == 'plain' and K == 4")
        assert np.allclose(training.lines[k].get_xdata(), part.coupling_mean)
        assert np.allclose(training.lines[k].get_ydata(), all_models.heldout[model].loss)
    assert np.allclose(across.collections[0].get_offsets(), all_models.models[["coupling_K4", "bits_per_byte"]])
    fit = all_models.fits.query("subset == 'all' and y == 'bits_per_byte' and K == 4").iloc[0]
    assert across.get_title().startswith(f"R² = {fit.r2:.2f}") and fit.n == 3


def test_vs_loss_says_why_it_is_empty_without_the_evaluation_stage():
    fig = ALL_MODELS_FIGURES["vs_loss"](all_models_inputs(heldout=False))
    assert all("evaluation.activate is false" in ax.texts[0].get_text() for ax in fig.axes)
    plt.close(fig)


def test_gsm8k_draws_gsm8k_against_the_average_of_the_last_step():
    import dataclasses

    def scores(step, gsm, average):
        return pd.DataFrame({"step": step, "task": ["gsm8k", "arc", "average"], "value": [gsm, 0.5, average]})

    tables = {m: pd.concat([scores(0, 0.0, 0.1), scores(100, 0.1 * k, 0.3 + 0.1 * k)]) for k, m in enumerate(MODELS)}
    fig = ALL_MODELS_FIGURES["gsm8k"](dataclasses.replace(all_models_inputs(), benchmarks=tables))
    (ax,) = fig.axes
    assert np.allclose(ax.collections[0].get_offsets(), [[0.3, 0.0], [0.4, 0.1], [0.5, 0.2]])
    assert ax.get_title() == "Pearson r = 1.00, n = 3" and [t.get_text() for t in ax.texts] == MODELS
    plt.close(fig)
    empty = ALL_MODELS_FIGURES["gsm8k"](all_models_inputs())
    assert "no GSM8K scores" in empty.axes[0].texts[0].get_text()
    plt.close(empty)


def test_regularity_models_puts_untrained_beside_trained_per_model(all_figures, all_models):
    lss, ed = all_figures["regularity"].axes
    assert [t.get_text() for t in lss.get_xticklabels()] == MODELS  # by size
    assert [c.get_label() for c in lss.containers] == ["untrained", "trained"]
    trained = all_models.regularity.query("state == 'trained'")
    assert np.allclose(ed.containers[1].lines[0].get_ydata(), trained.ed_median)


def test_sizes_fit_coupling_and_score_against_each_size(all_figures, all_models):
    axes = all_figures["sizes"].axes
    assert len(axes) == 8
    assert [ax.get_xlabel() for ax in axes[:4]] == ["log10 parameters", "layers", "width d", "log10 training tokens"]
    tokens = all_models.fits.query("subset == 'all' and y == 'coupling' and x == 'log10_tokens' and K == 4").iloc[0]
    assert axes[3].get_title() == f"R² = {tokens.r2:.2f}, p = {tokens.p:.2g}, n = 3"
    assert np.allclose(axes[7].collections[0].get_offsets()[:, 1], all_models.models.score)
    assert axes[1].get_title().startswith("no fit")  # every model has 4 layers: no spread to fit


def test_per_K_draws_score_against_coupling_at_every_K(all_figures, all_models):
    axes = all_figures["per_K"].axes
    assert [ax.get_xlabel() for ax in axes] == ["mean coupling (K = 2)", "mean coupling (K = 4)"]
    assert np.allclose(axes[0].collections[0].get_offsets()[:, 0], all_models.models.coupling_K2)


# --------------------------------------------------------------------------- Fig. 32, noise on the embeddings


def noise_table(steps=(0, 100), levels=(0.01, 0.1, 1.0), n_layers=4):
    """A ``noise.tsv``: the cosine falls with the level, and from the first layer on recovers with depth."""
    rows = [{"step": step, "level": level, "layer": layer, "n_prompts": 40, "sd": 0.01,
             "cosine": 1 / (1 + level) + (0.01 * layer * level if layer and step else 0)}
            for step in steps for level in levels for layer in range(n_layers + 1)]
    return pd.DataFrame(rows)


def test_the_noise_figure_draws_first_and_last_layers_against_the_level_and_every_depth():
    table = noise_table()
    fig = NOISE_FIGURES["first_last"](NoiseFigureInputs(model="m", table=table))
    left, right = panels(fig)
    labels = [line.get_label() for line in left.get_lines()]
    assert labels == ["first layer, step 100", "last layer (4), step 100", "first layer, step 0",
                      "last layer (4), step 0", "embeddings"]
    assert left.get_xscale() == "log"
    last = left.get_lines()[1]
    expected = table[(table.step == 100) & (table.layer == 4)].sort_values("level")
    np.testing.assert_allclose(last.get_xdata(), expected.level)
    np.testing.assert_allclose(last.get_ydata(), expected.cosine)
    assert left.get_lines()[2].get_linestyle() == "--"  # step 0, the random-init null
    assert [line.get_label() for line in right.get_lines()] == ["noise 0.01", "noise 0.1", "noise 1"]
    np.testing.assert_allclose(right.get_lines()[0].get_xdata(), range(5))
    plt.close(fig)
    alone = NOISE_FIGURES["first_last"](NoiseFigureInputs(model="m", table=noise_table(steps=(50,))))
    assert len(panels(alone)[0].get_lines()) == 3  # no step 0 configured: no null drawn
    plt.close(alone)
