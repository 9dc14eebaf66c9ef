"""The across-papers stage: the depth null, the per-paper readers, and the boundary, correlation,
emergence and across-model tables, on synthetic profiles and planted results. The joined values
against the per-paper tables of a real run: tests/test_workflow.py."""

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests

from crosslayer.across import measures as read
from crosslayer.across.catalog import Measure, catalog, from_legend, legend
from crosslayer.across.tables import across_models, boundary_table, correlations, emergence, emergence_order
from crosslayer.config import across_papers_settings
from crosslayer.stats.depth_null import MIN_BOUNDARIES, depth_rearrangements, depth_spearman, profile_correlations

# -- the circular-shift null ---------------------------------------------------------------------------


def smooth(rng, n, window=7):
    """A stationary profile correlated over about `window` boundaries (moving average of white noise)."""
    return np.convolve(rng.normal(size=n + window - 1), np.ones(window) / window, mode="valid")


@pytest.mark.parametrize("n", [1, 2, 3, 5, 12])
def test_rearrangements_are_every_shift_and_mirror_without_the_identity(n):
    index = depth_rearrangements(n)
    assert all(sorted(row) == list(range(n)) for row in index)
    assert not (index == np.arange(n)).all(axis=1).any()
    if n >= 3:
        assert len(index) == 2 * n - 1 and len({tuple(row) for row in index}) == 2 * n - 1


def test_rho_is_scipys_spearman_and_nan_boundaries_are_left_out():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=20), rng.normal(size=20)
    y[[3, 7]] = np.nan
    x[11] = np.nan
    keep = np.isfinite(x) & np.isfinite(y)
    result = depth_spearman(x, np.round(y, 1))  # ties too
    assert result["n"] == 17
    assert result["rho"] == pytest.approx(scipy.stats.spearmanr(x[keep], np.round(y, 1)[keep]).statistic, abs=1e-12)
    assert 1 / 34 <= result["p_value"] <= 1


def test_too_few_boundaries_or_a_constant_profile_give_no_correlation():
    assert np.isnan(depth_spearman(np.arange(MIN_BOUNDARIES - 1.0), np.arange(MIN_BOUNDARIES - 1.0))["rho"])
    assert np.isnan(depth_spearman(np.ones(10), np.arange(10.0))["p_value"])
    with pytest.raises(ValueError, match="1-D of one length"):
        depth_spearman(np.ones(4), np.ones(5))


def test_independent_smooth_profiles_are_significant_at_the_nominal_rate_and_spearmans_p_is_not():
    rng = np.random.default_rng(7)
    trials, n = 400, 40
    pairs = [(smooth(rng, n), smooth(rng, n)) for _ in range(trials)]
    ours = np.mean([depth_spearman(x, y)["p_value"] < 0.05 for x, y in pairs])
    naive = np.mean([scipy.stats.spearmanr(x, y).pvalue < 0.05 for x, y in pairs])
    assert ours <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / trials)  # 0.083
    assert naive > 0.2  # the null matters: boundaries are not independent


@pytest.mark.parametrize("n", [12, 40])
def test_a_copy_and_a_noisy_copy_are_significant(n):
    rng = np.random.default_rng(n)
    x = smooth(rng, n)
    assert depth_spearman(x, x.copy())["p_value"] == pytest.approx(1 / (2 * n))
    assert depth_spearman(x, x + 0.05 * x.std() * rng.normal(size=n))["p_value"] < 0.05
    assert depth_spearman(x, -x)["rho"] == pytest.approx(-1.0) and depth_spearman(x, -x)["p_value"] < 0.05


def test_pairs_are_corrected_by_statsmodels_benjamini_hochberg():
    rng = np.random.default_rng(3)
    base = smooth(rng, 30)
    profiles = pd.DataFrame({"a": base, "b": base + 0.01 * rng.normal(size=30), "c": smooth(rng, 30),
                             "d": smooth(rng, 30), "empty": np.nan})
    table = profile_correlations(profiles, q=0.1)
    assert list(zip(table["measure_a"], table["measure_b"]))[:4] == [("a", "b"), ("a", "c"), ("a", "d"),
                                                                     ("a", "empty")]
    numbered = table.dropna(subset=["p_value"])
    assert len(numbered) == 6 and table[table["measure_b"] == "empty"]["rho"].isna().all()
    reject, q_values, *_ = multipletests(numbered["p_value"], alpha=0.1, method="fdr_bh")
    np.testing.assert_allclose(numbered["q_value"], q_values)
    assert list(numbered["significant"]) == list(reject) and bool(table.iloc[0]["significant"])


# -- readers -----------------------------------------------------------------------------------------------


def test_alignment_reads_output_and_input_overlaps_with_the_baseline_mean():
    adjacent = pd.DataFrame({"step": [0, 0, 5, 5], "boundary": [1, 0, 0, 1], "left": [0.2, 0.1, 0.5, 0.6],
                             "right": [0.3, 0.4, 0.7, 0.8], "cross": 0.0})
    baseline = pd.DataFrame({"d_model": [64], "k": [4], "draws": [100], "seed": [0], "mean": [0.25], "sd": [0.02]})
    values = read.alignment_measures(adjacent, baseline).set_index(["step", "measure", "boundary"])
    assert values.loc[(0, "alignment_output", 0), "value"] == 0.1
    assert values.loc[(0, "alignment_input", 1), "value"] == 0.3
    assert values.loc[(5, "alignment_output", 1), "value"] == 0.6 and (values["baseline"] == 0.25).all()


def depthwise_table(M, K=3, step=0, variant="plain"):
    L = M.shape[0]
    return pd.DataFrame([{"step": step, "variant": variant, "K": K, "layer": i, "other": j,
                          "coupling_mean": M[i, j], "coupling_sd": 0.0} for i in range(L) for j in range(L)])


def test_coupling_reads_both_directions_of_each_boundary():
    M = -np.arange(16.0).reshape(4, 4) / 20  # M[layer, other]: J_layer on other's basis
    depthwise = pd.concat([depthwise_table(M), depthwise_table(M - 1, K=5), depthwise_table(M + 1, variant="cot")])
    values = read.coupling_measures(depthwise, Ks=[3], variant="plain").set_index(["measure", "boundary"])
    assert set(values.index.get_level_values("measure")) == {"coupling_K3_fwd", "coupling_K3_bwd"}
    for l in range(3):
        assert values.loc[("coupling_K3_fwd", l), "value"] == M[l, l + 1]
        assert values.loc[("coupling_K3_bwd", l), "value"] == M[l + 1, l]
    assert values["baseline"].eq(-np.sqrt(1 - 1 / 3)).all()
    released = read.coupling_measures(depthwise, Ks=[3], metric="released_l2")
    assert released["baseline"].isna().all()


def test_the_coupling_baseline_is_the_mis_coupling_of_haar_random_bases():
    from crosslayer.coupling.measure import miscoupling

    rng = np.random.default_rng(0)
    d, K, draws = 48, 10, 400
    J = rng.normal(size=(d, d)) * np.linspace(0.1, 3, d)  # any fixed Jacobian: the bases are random
    A = []
    for _ in range(draws):
        U = np.linalg.qr(rng.normal(size=(d, K)))[0]
        V = np.linalg.qr(rng.normal(size=(d, K)))[0]
        A.append(U.T @ J @ V)
    assert np.mean(miscoupling(np.array(A))) == pytest.approx(np.sqrt(1 - 1 / K), rel=0.01)


def test_continuity_and_jacobian_measures_are_the_stored_arrays():
    table = pd.DataFrame({"projection": ["q", "gate"], "present": [True, False], "baseline_u": [0.1, np.nan],
                          "baseline_v": [0.2, np.nan]})
    arrays = {"q.cos_u": np.array([0.5, 0.6]), "q.cos_v": np.array([0.7, 0.8])}
    values = read.continuity_measures({4: (arrays, table)}, ["q", "gate"]).set_index(["measure", "boundary"])
    assert sorted(set(values.index.get_level_values(0))) == ["continuity_q_u1", "continuity_q_v1"]
    assert values.loc[("continuity_q_v1", 1), "value"] == 0.8 and values.loc[("continuity_q_u1", 0), "baseline"] == 0.1

    spectra = pd.DataFrame({"layer": [0, 1, 2], "regime": ["early", "mid", "mid"],
                            "forward_alignment": [0.4, 0.5, np.nan], "forward_alignment_res": [0.1, 0.2, np.nan],
                            "baseline_mean": 0.3})
    values = read.jacobian_measures({7: spectra})
    assert list(values[values["measure"] == "jacobian_alignment"]["value"]) == [0.4, 0.5]
    assert list(read.depth_regimes({7: spectra})["regime"]) == ["early/mid", "mid"]


def test_community_nmi_is_the_block_nmi_with_a_permutation_baseline():
    from sklearn.metrics import normalized_mutual_info_score

    rng = np.random.default_rng(1)
    d, L = 60, 4
    blocks = [np.repeat(np.arange(4), 15)]
    for _ in range(L - 1):  # each block keeps most of the previous partition
        nxt = blocks[-1].copy()
        nxt[rng.choice(d, 10, replace=False)] = rng.integers(0, 4, 10)
        blocks.append(nxt)
    memberships = np.stack([b for block in blocks for b in (block, rng.permutation(block))])  # (2L, d)
    arrays = {"memberships": np.stack([memberships, memberships[::-1]]), "methods": np.array(["signed_cpm", "x"])}
    values = read.community_measures({3: arrays}, method="signed_cpm", draws=300, seed=0)
    expected = [normalized_mutual_info_score(a, b) for a, b in zip(blocks[:-1], blocks[1:])]
    np.testing.assert_allclose(values["value"], expected, atol=1e-12)
    # the baseline: sklearn's NMI of independently shuffled labels, averaged over other draws
    other = np.random.default_rng(99)
    for (a, b), baseline in zip(zip(blocks[:-1], blocks[1:]), values["baseline"]):
        independent = np.mean([normalized_mutual_info_score(a, other.permutation(b)) for _ in range(300)])
        assert baseline == pytest.approx(independent, abs=0.01) and baseline < 0.1
    with pytest.raises(ValueError, match="no 'infomap' partitions"):
        read.community_measures({3: arrays}, method="infomap")


# -- tables ---------------------------------------------------------------------------------------------


def planted_values(steps, n_boundaries, emerge_at, rng):
    """Long values of two measures: `rising` leaves its band at boundary b's step emerge_at[b]
    (a backward cascade when later boundaries come first), `flat` never does."""
    rows, flat = [], -0.9 + 0.001 * rng.normal(size=n_boundaries)  # the same at every step
    for step in steps:
        for b in range(n_boundaries):
            rising = 0.2 + 0.001 * rng.normal() + (0.5 if step >= emerge_at[b] else 0.0)
            rows += [{"step": step, "boundary": b, "measure": "rising", "value": rising, "baseline": 0.2},
                     {"step": step, "boundary": b, "measure": "flat", "value": flat[b], "baseline": -0.9}]
    return pd.DataFrame(rows)


MEASURES = [Measure("rising", "alignment", "", ""), Measure("flat", "coupling", "", "", distance=True),
            Measure("absent", "topology", "", "")]


def test_the_boundary_table_has_value_baseline_and_ratio_per_measure():
    values = planted_values([0, 10], 3, [10, 10, 10], np.random.default_rng(0))
    regimes = pd.DataFrame({"step": [0, 0, 0, 10, 10, 10], "boundary": [0, 1, 2] * 2, "regime": ["early"] * 6})
    table = boundary_table(values, MEASURES, regimes)
    assert list(table.columns[:3]) == ["step", "boundary", "regime"] and len(table) == 6
    row = table.iloc[4]
    assert row["rising.ratio"] == pytest.approx(row["rising"] / 0.2)
    assert row["flat.ratio"] == pytest.approx(-0.9 / row["flat"])  # baseline / value: > 1 = more coupled
    assert table["absent"].isna().all() and table["absent.ratio"].isna().all()
    assert (table["regime"] == "early").all() and boundary_table(values, MEASURES)["regime"].isna().all()


def test_correlations_per_step_leave_out_empty_measures():
    rng = np.random.default_rng(2)
    values = planted_values([0, 10], 8, [10] * 8, rng)
    table = correlations(boundary_table(values, MEASURES))
    assert set(table["step"]) == {0, 10} and set(table["measure_a"]) == {"rising"}
    row = table[table["step"] == 0].iloc[0]
    at0 = values[values["step"] == 0].pivot(index="boundary", columns="measure", values="value")
    assert row["rho"] == pytest.approx(scipy.stats.spearmanr(at0["rising"], at0["flat"]).statistic)


def test_a_planted_backward_cascade_is_found_with_its_steps():
    steps, emerge_at = [0, 10, 20, 40, 80, 160], [160, 80, 40, 20, 10, 10]
    table = boundary_table(planted_values(steps, 6, emerge_at, np.random.default_rng(4)), MEASURES)
    found = emergence(table, MEASURES[:2], band_sd=3)
    rising = found[found["measure"] == "rising"]
    assert list(rising["step"]) == emerge_at and (rising["direction"] == "above").all() and rising["stays_out"].all()
    assert found[found["measure"] == "flat"]["step"].isna().all()
    assert rising["band_high"].iloc[0] == pytest.approx(0.2 + 3 * 0.001, abs=0.004)
    order = emergence_order(found, n_permutations=2000).set_index("measure")
    assert order.loc["rising", "order"] == "backward" and order.loc["rising", "depth_rho"] < -0.9
    assert order.loc["rising", "first_step"] == 10 and order.loc["rising", "n_emerged"] == 6
    assert order.loc["flat", "n_emerged"] == 0 and order.loc["flat", "order"] == ""
    assert emergence(table, MEASURES, reference_step=None).empty
    with pytest.raises(ValueError, match="reference_step"):
        emergence(table, MEASURES, reference_step=5)


def test_a_measure_that_comes_back_into_its_band_does_not_stay_out():
    values = planted_values([0, 10, 20], 4, [10] * 4, np.random.default_rng(5))
    values.loc[(values["step"] == 20) & (values["measure"] == "rising"), "value"] = 0.2
    found = emergence(boundary_table(values, MEASURES), MEASURES[:1])
    assert (found["step"] == 10).all() and not found["stays_out"].any()


def test_across_models_takes_each_models_last_step_depth_mean_ratio():
    rng = np.random.default_rng(6)
    a = boundary_table(planted_values([0, 10], 4, [10] * 4, rng), MEASURES)
    b = boundary_table(planted_values([0, 5, 50], 3, [50] * 3, rng), MEASURES[:1])
    table = across_models({"a": a, "b": b}, MEASURES).set_index("model")
    last = a[a["step"] == 10]
    assert table.loc["a", "step"] == 10 and table.loc["b", "n_boundaries"] == 3
    assert table.loc["a", "rising"] == pytest.approx(last["rising"].mean() / 0.2)
    assert table.loc["a", "flat"] == pytest.approx(-0.9 / last["flat"].mean())
    assert np.isnan(table.loc["b", "flat"]) and np.isnan(table.loc["a", "absent"])


# -- config ------------------------------------------------------------------------------------------------


def config_with(**across):
    return {"across_papers": {"projections": None, "Ks": None, "community_method": None, **across},
            "continuity": {"projections": ["q", "o"]}, "coupling": {"Ks": [10, 30]},
            "topology": {"methods": ["signed_cpm", "infomap"]}}


def test_settings_default_to_what_the_stages_compute_and_name_the_key_otherwise():
    settings = across_papers_settings(config_with())
    assert settings["projections"] == ["q", "o"] and settings["Ks"] == [10, 30]
    assert settings["community_method"] == "signed_cpm"
    assert [m.name for m in catalog(projections=["q"], Ks=[10])][:4] == [
        "alignment_output", "alignment_input", "continuity_q_u1", "continuity_q_v1"]
    for key, value, message in (("projections", ["v"], r"across_papers.projections: \['v'\] are not computed"),
                                ("Ks", [50], r"across_papers.Ks: \[50\] are not computed"),
                                ("community_method", "signed_rb", "across_papers.community_method: 'signed_rb'")):
        with pytest.raises(ValueError, match=message):
            across_papers_settings(config_with(**{key: value}))


def test_the_legend_names_every_measure_and_reads_back_as_the_same_measures(tmp_path):
    measures = catalog(projections=["q", "gate"], Ks=[10], metric="released_l2", community_method="infomap")
    table = legend(measures, present={"alignment_output", "coupling_K10_fwd"})
    table.to_csv(tmp_path / "measures.tsv", sep="\t", index=False)
    back = pd.read_csv(tmp_path / "measures.tsv", sep="\t", dtype={"paper": str})
    assert from_legend(back) == measures and back["present"].sum() == 2
    assert list(back.set_index("measure").loc[["alignment_input", "coupling_K10_bwd", "community_nmi"], "paper"]) == [
        "000", "002", "004"]
    assert "no random baseline" in back.set_index("measure").loc["coupling_K10_fwd", "baseline"]
    assert back.set_index("measure").loc["coupling_K10_fwd", "ratio"] == "baseline / value"
