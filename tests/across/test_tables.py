"""The across-papers tables (crosslayer.across.tables) on planted results: boundary values with their
baselines and ratios, correlations per step, emergence, and the across-model table. The joined
values against the per-paper tables of a real run: tests/workflow/test_workflow.py."""

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from crosslayer.across.catalog import Measure
from crosslayer.across.tables import across_models, boundary_table, correlations, emergence, emergence_order
from crosslayer.evaluation.tables import heldout_table


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
    assert np.isnan(table.loc["a", "heldout_loss"])  # no evaluation stage


def test_across_models_takes_the_held_out_loss_of_the_last_step():
    rng = np.random.default_rng(6)
    a = boundary_table(planted_values([0, 10], 4, [10] * 4, rng), MEASURES)
    heldout = {"a": heldout_table({0: {"loss": 5.0, "bits_per_byte": 2.5}, 10: {"loss": 4.0, "bits_per_byte": 2.0}})}
    row = across_models({"a": a}, MEASURES, heldout).iloc[0]
    assert (row.heldout_loss, row.bits_per_byte) == (4.0, 2.0)
