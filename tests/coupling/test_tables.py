"""Paper 002's tables (crosslayer.coupling.tables) against direct means and SciPy's linregress."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from crosslayer.coupling.measure import METRICS
from crosslayer.evaluation.tables import heldout_table
from crosslayer.coupling.regularity import (
    expodistance,
    line_shape_score,
    pack_symmetric,
    unit_step_gram,
    unit_steps,
    windowed,
)
from crosslayer.coupling.tables import (
    across_models,
    checkpoint_prompts,
    fit_table,
    load_checkpoint,
    regularity_across_models,
    subset_fits,
    summarize_steps,
    training_fits,
)


def synthetic_trajectories(seed, L=3, N=14, d=8):
    """Trajectories x^0 .. x^L of N tokens, x^L after the final norm and before it (raw)."""
    rng = np.random.default_rng(seed)
    normed = rng.standard_normal((L + 1, N, d)) * np.arange(1, L + 2)[:, None, None]
    raw = normed.copy()
    raw[-1] = 3 * rng.standard_normal((N, d))
    return normed, raw


def synthetic_checkpoint(seed, P=4, L=3, Ks=(2, 4), n_tokens=(3, 4, 2, 5)):
    rng = np.random.default_rng(seed)
    M = rng.uniform(0, 1, (P, len(METRICS), len(Ks), L, L))
    M[..., range(L), range(L)] = 0
    N = sum(n_tokens)
    normed, raw = synthetic_trajectories(seed, L, N)
    units = np.concatenate([unit_steps(normed), unit_steps(raw[-2:])])  # as block_coupling stores them
    return {"depthwise": M, "Ks": np.array(Ks), "metrics": list(METRICS), "prompt_ids": [f"p{i}" for i in range(P)],
            "variants": ["plain", "plain", "cot", "cot"], "sources": ["arc", "gsm8k", "arc", "gsm8k"], "n_tokens": np.array(n_tokens),
            "token_prompt": np.repeat(np.arange(P), n_tokens), "lss": rng.uniform(1, 3, N), "ed": rng.uniform(0, 1, N),
            "norms": np.linalg.norm(normed, axis=-1), "lss_raw": rng.uniform(1, 3, N), "ed_raw": rng.uniform(0, 1, N),
            "norm_last_raw": np.linalg.norm(raw[-1], axis=-1),
            "step_gram": pack_symmetric(unit_step_gram(units)).astype(np.float32),
            "logit_entropy": rng.uniform(0, 5, (L + 1, N)), "layer_pairs": np.zeros((0, 2), int),
            "n_params": 1000 * (seed + 1), "n_layers": L, "d_model": 8}


def test_prompt_and_step_tables_against_direct_means():
    data = synthetic_checkpoint(0)
    table = checkpoint_prompts(data, metric="released_l2")
    M = data["depthwise"][:, 1]  # released_l2
    L = M.shape[-1]
    expected = -(M.sum(axis=(-2, -1))) / (L * (L - 1))  # the diagonal is 0
    assert np.allclose(table[["coupling_K2", "coupling_K4"]].to_numpy(), expected)
    assert table.lss_median[3] == pytest.approx(np.median(data["lss"][-5:]))
    tables = summarize_steps([data, synthetic_checkpoint(1)], [0, 10], metric="released_l2", window=3)
    assert tables["prompts"].query("step == 10").drop(columns="step").reset_index(drop=True).equals(
        checkpoint_prompts(synthetic_checkpoint(1), metric="released_l2"))
    row = tables["steps"].query("step == 0 and source == 'all' and variant == 'cot' and K == 4").iloc[0]
    assert row.coupling_mean == pytest.approx(expected[2:, 1].mean())
    assert row.coupling_sd == pytest.approx(expected[2:, 1].std(ddof=1))
    assert row.lss_median == pytest.approx(np.median(data["lss"][7:]))
    one = tables["steps"].query("step == 0 and source == 'gsm8k' and variant == 'cot' and K == 4").iloc[0]
    assert one.n_prompts == 1 and one.coupling_mean == pytest.approx(expected[3, 1])
    assert one.lss_median == pytest.approx(np.median(data["lss"][-5:]))
    # plain and CoT prompts are never pooled: the L x L means, profiles and depth profiles are per variant
    depthwise = tables["depthwise"].query("step == 0 and variant == 'plain' and K == 2 and layer == 1 and other == 2")
    assert depthwise.coupling_mean.item() == pytest.approx(-M[:2, 0, 1, 2].mean())
    both = M[:, 0] + M[:, 0].transpose(0, 2, 1)
    per_prompt = -(both.sum(axis=-1) / (2 * (L - 1)))  # the diagonal is 0
    profile = tables["profile"].query("step == 0 and source == 'all' and variant == 'cot' and K == 2")
    assert np.allclose(profile.coupling, per_prompt[2:].mean(axis=0))
    profile = tables["profile"].query("step == 0 and source == 'gsm8k' and variant == 'plain' and K == 2")
    assert np.allclose(profile.coupling, per_prompt[1])
    regularity = tables["regularity"].query("step == 0 and source == 'all' and variant == 'plain'")
    assert len(tables["regularity"]) == 2 * 3 * 2 * (L + 1) and len(regularity) == L + 1  # every group
    assert np.allclose(regularity.norm_median, np.median(data["norms"][:, :7], axis=1))
    assert np.allclose(regularity.norm_raw_median[:L], regularity.norm_median[:L])  # only x^L differs
    assert regularity.norm_raw_median.iloc[L] == pytest.approx(np.median(data["norm_last_raw"][:7]))
    assert regularity.logit_entropy_median.iloc[2] == pytest.approx(np.median(data["logit_entropy"][2, :7]))
    normed, raw = synthetic_trajectories(0, L, 14)
    for suffix, traj in (("", normed), ("_raw", raw)):  # the windows from the stored Gram matrices and norms
        for name, statistic in (("lss", line_shape_score), ("ed", expodistance)):
            expected = np.median(windowed(statistic, traj, width=3)[:, :7], axis=1)
            assert np.allclose(regularity[f"{name}_windowed{suffix}_median"], expected, rtol=1e-6, equal_nan=True)
    assert regularity.lss_windowed_median.isna().tolist() == [True, False, False, True]
    assert row.ed_raw_q3 == pytest.approx(np.quantile(data["ed_raw"][7:], 0.75))
    assert table.ed_raw_median[3] == pytest.approx(np.median(data["ed_raw"][-5:]))


def test_an_unpooled_source_has_its_own_rows_and_can_hold_the_regularity_table():
    data = synthetic_checkpoint(0)  # arc, gsm8k plain; arc, gsm8k cot; tokens 3, 4, 2, 5
    tables = summarize_steps([data], [0], metric="paper", window=3, unpooled=["gsm8k"])
    assert tables["prompts"].pooled.tolist() == [True, False, True, False]
    expected = checkpoint_prompts(data, metric="paper").coupling_K4
    pooled = tables["steps"].query("source == 'all' and variant == 'plain' and K == 4").iloc[0]
    assert pooled.n_prompts == 1 and pooled.coupling_mean == pytest.approx(expected[0])  # arc alone
    assert pooled.lss_median == pytest.approx(np.median(data["lss"][:3]))
    own = tables["steps"].query("source == 'gsm8k' and variant == 'plain' and K == 4").iloc[0]
    assert own.coupling_mean == pytest.approx(expected[1])  # still tabled as its own source
    M = -data["depthwise"][:, 0]  # paper
    depthwise = tables["depthwise"].query("variant == 'cot' and K == 2 and layer == 0 and other == 2")
    assert depthwise.coupling_mean.item() == pytest.approx(M[2, 0, 0, 2])  # arc's cot prompt alone
    regularity = tables["regularity"]  # every group, as steps.tsv: all (arc alone here), arc, gsm8k
    assert len(regularity) == 2 * 3 * 4
    gsm8k = regularity.query("source == 'gsm8k' and variant == 'plain'")
    assert np.allclose(gsm8k.norm_median, np.median(data["norms"][:, 3:7], axis=1))  # gsm8k's plain tokens
    pooled = regularity.query("source == 'all' and variant == 'plain'")
    assert np.allclose(pooled.norm_median, np.median(data["norms"][:, :3], axis=1))
    default = summarize_steps([data], [0], metric="paper", window=3)
    assert default["prompts"].pooled.all()
    assert np.allclose(default["regularity"].query("source == 'all' and variant == 'plain'").norm_median,
                       np.median(data["norms"][:, :7], axis=1))


def test_fits_match_scipy_linregress():
    rng = np.random.default_rng(1)
    n = 7
    models = pd.DataFrame({"model": [f"m{i}" for i in range(n)], "n_params": rng.integers(1e6, 1e9, n),
                           "n_layers": rng.integers(4, 40, n), "d_model": rng.integers(64, 4096, n),
                           "coupling_K10": rng.uniform(-1, 0, n), "score": rng.uniform(20, 70, n),
                           "training_tokens": [3e11, 2e12, np.nan, 1e12, 1.5e12, 6e12, 3e12],
                           "bits_per_byte": rng.uniform(0.7, 1.2, n)})
    fits = fit_table(models)
    tokens = fits.query("y == 'coupling' and x == 'log10_tokens'").iloc[0]  # Fig. 8: unknown tokens are left out
    known = models.training_tokens.notna()
    ref = stats.linregress(np.log10(models.training_tokens[known]), models.coupling_K10[known])
    assert tokens.n == 6 and (tokens.slope, tokens.r2) == pytest.approx((ref.slope, ref.rvalue**2), rel=1e-9)
    for y_name, y, x_name, x in [("score", models.score, "coupling", models.coupling_K10),
                                 ("log_score", np.log(models.score), "coupling", models.coupling_K10),
                                 ("coupling", models.coupling_K10, "log10_params", np.log10(models.n_params)),
                                 ("score", models.score, "d_model", models.d_model),
                                 ("bits_per_byte", models.bits_per_byte, "coupling", models.coupling_K10)]:
        row = fits[(fits.y == y_name) & (fits.x == x_name)].iloc[0]
        ref = stats.linregress(x.astype(float), y.astype(float))
        assert (row.slope, row.intercept, row.r2, row.p) == pytest.approx(
            (ref.slope, ref.intercept, ref.rvalue**2, ref.pvalue), rel=1e-9)
        assert row.n == n
    too_few = fit_table(models.head(2))
    assert too_few.r2.isna().all() and (too_few.n == 2).all()


def test_across_models_takes_each_models_last_step():
    data = {m: synthetic_checkpoint(i) for i, m in enumerate(["a", "b"])}
    steps = {m: summarize_steps([data[m], data[m]], [0, 5], metric="paper", window=3)["steps"] for m in data}
    table = across_models({m: (steps[m], data[m]) for m in data}, scores={"a": 40.0, "b": 50.0},
                          training_tokens={"a": 3e11, "b": None})
    assert list(table.model) == ["a", "b"] and (table.step == 5).all() and list(table.score) == [40.0, 50.0]
    assert table.training_tokens[0] == 3e11 and np.isnan(table.training_tokens[1])
    assert table.coupling_K4[1] == pytest.approx(steps["b"].query("step == 5 and source == 'all' and variant == 'plain' and K == 4")
                                                 .coupling_mean.iloc[0])


def test_across_models_takes_the_held_out_loss_of_the_last_step_and_refuses_another():
    data = {m: synthetic_checkpoint(i) for i, m in enumerate(["a", "b"])}
    steps = {m: summarize_steps([data[m], data[m]], [0, 5], metric="paper", window=3)["steps"] for m in data}
    heldout = {m: heldout_table({0: {"loss": 6.0, "bits_per_byte": 3.0}, 5: {"loss": 4.0 + i, "bits_per_byte": 2.0}})
               for i, m in enumerate(data)}
    table = across_models({m: (steps[m], data[m]) for m in data}, heldout=heldout)
    assert list(table.heldout_loss) == [4.0, 5.0] and list(table.bits_per_byte) == [2.0, 2.0]
    assert list(table.score_source) == ["", ""]
    heldout["b"] = heldout["b"][heldout["b"].step == 0]
    with pytest.raises(ValueError, match="held-out table of b has no step 5"):
        across_models({m: (steps[m], data[m]) for m in data}, heldout=heldout)


def test_training_fits_match_scipy_per_model_and_pooled():
    rng = np.random.default_rng(3)
    data = {m: [synthetic_checkpoint(10 * i + j) for j in range(4)] for i, m in enumerate(["a", "b"])}
    steps = {m: summarize_steps(cs, [0, 1, 2, 3], metric="paper", window=3)["steps"] for m, cs in data.items()}
    heldout = {m: heldout_table({s: {"loss": v} for s, v in zip([0, 1, 2, 3], rng.uniform(3, 6, 4))}) for m in data}
    fits = training_fits(steps, heldout)
    assert set(fits.model) == {"a", "b", "all"} and set(fits.K) == {2, 4}
    points = {m: steps[m].query("source == 'all' and variant == 'plain' and K == 4").merge(heldout[m], on="step")
              for m in data}
    for model, part in [("a", points["a"]), ("all", pd.concat(points.values()))]:
        row = fits[(fits.model == model) & (fits.K == 4)].iloc[0]
        ref = stats.linregress(part.coupling_mean, part.loss)
        assert (row.slope, row.r2, row.p) == pytest.approx((ref.slope, ref.rvalue**2, ref.pvalue), rel=1e-9)
        assert row.n == len(part)
    assert training_fits(steps, None).empty


def test_a_checkpoint_file_without_prompt_sources_is_refused_by_name(tmp_path):
    data = {k: v for k, v in synthetic_checkpoint(0).items() if k != "sources"}
    np.savez(tmp_path / "old.coupling.npz", **data)
    with pytest.raises(ValueError, match=r"old.coupling.npz predates per-source .*snakemake -R block_coupling"):
        load_checkpoint(tmp_path / "old.coupling.npz")
    np.savez(tmp_path / "new.coupling.npz", **data, sources=["arc"] * 4)
    assert load_checkpoint(tmp_path / "new.coupling.npz")["sources"] == ["arc"] * 4


def test_regularity_across_models_puts_each_untrained_step_0_beside_its_last_step_sorted_by_size():
    data = {m: synthetic_checkpoint(i) for i, m in enumerate(["big", "small", "no-init"])}
    steps = {"big": summarize_steps([data["big"], synthetic_checkpoint(7)], [0, 5], metric="paper", window=3)["steps"],
             "small": summarize_steps([data["small"], synthetic_checkpoint(8)], [0, 9], metric="paper", window=3)["steps"],
             "no-init": summarize_steps([data["no-init"]], [3], metric="paper", window=3)["steps"]}
    models = pd.DataFrame({"model": ["big", "small", "no-init"], "n_params": [900, 100, 500]})
    table = regularity_across_models(steps, models)
    assert list(zip(table.model, table.state, table.step)) == [
        ("small", "untrained", 0), ("small", "trained", 9), ("no-init", "trained", 3), ("big", "untrained", 0),
        ("big", "trained", 5)]
    plain_tokens = np.repeat([True, True, False, False], data["big"]["n_tokens"])  # the first two prompts are plain
    assert table.lss_median[3] == pytest.approx(np.median(data["big"]["lss"][plain_tokens]))
    assert table.ed_raw_q1[3] == pytest.approx(np.quantile(data["big"]["ed_raw"][plain_tokens], 0.25))


def test_subset_fits_refit_each_named_subset_alone():
    rng = np.random.default_rng(3)
    n = 8
    models = pd.DataFrame({"model": [f"m{i}" for i in range(n)], "n_params": rng.integers(1e6, 1e9, n),
                           "n_layers": rng.integers(4, 40, n), "d_model": rng.integers(64, 4096, n),
                           "coupling_K10": rng.uniform(-1, 0, n), "score": rng.uniform(20, 70, n)})
    fits = subset_fits(models, {"first": ["m0", "m1", "m2", "m3"]})
    assert list(fits.columns[:3]) == ["subset", "y", "x"] and set(fits.subset) == {"all", "first"}
    row = fits.query("subset == 'first' and y == 'score' and x == 'coupling'").iloc[0]
    ref = stats.linregress(models.coupling_K10[:4], models.score[:4])
    assert row.n == 4 and row.r2 == pytest.approx(ref.rvalue**2, rel=1e-9)
    assert fits.query("subset == 'all' and y == 'score' and x == 'coupling'").n.iloc[0] == n
