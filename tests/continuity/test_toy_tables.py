import numpy as np
import pandas as pd
import pytest

from crosslayer.continuity.toy_tables import datasets_table, epoch_table, final_table, stack_runs


def _epochs(offset, n_epochs=3):
    rows = [{"step": 10 * e, "epoch": e, "loss": np.nan if e == 0 else 1.0 / e, "accuracy": 0.5 + 0.1 * e + offset,
             "W.v1": 0.1 * e + offset, "G.v1": 0.9 - 0.1 * e + offset} for e in range(n_epochs + 1)]
    for row in rows[1:]:
        row["Gcum.v1"] = 0.8 + offset
        row["delta_v"] = row["Gcum.v1"] - row["W.v1"]
    return pd.DataFrame(rows)


def _status(run, seed, diverged_step=None):
    return {"run": run, "seed": seed, "diverged": diverged_step is not None, "diverged_step": diverged_step}


@pytest.fixture
def runs():
    tables = [_epochs(0.0), _epochs(0.02), _epochs(0.0, n_epochs=1)]
    statuses = [_status("a", 0), _status("a", 1), _status("b", 0, diverged_step=2)]
    return stack_runs(tables, statuses), statuses


def test_final_table_means_over_seeds_at_each_seeds_last_epoch(runs):
    long, statuses = runs
    final = final_table(long, statuses, ["b", "a"]).set_index("run")
    assert list(final.index) == ["b", "a"]
    assert final.loc["a", "seeds"] == 2 and final.loc["a", "diverged"] == 0
    assert final.loc["b", "diverged"] == 1 and final.loc["b", "diverged_steps"] == "2"
    assert final.loc["a", "W.v1"] == pytest.approx(0.31) and final.loc["a", "W.v1_sd"] == pytest.approx(0.02 / 2**0.5)
    assert final.loc["a", "G0.v1"] == pytest.approx(0.91)  # the first backward pass, epoch 0
    assert final.loc["b", "W.v1"] == pytest.approx(0.1)  # its last recorded epoch, 1
    assert np.isnan(final.loc["b", "W.v1_sd"])  # one seed: no spread
    assert final.loc["a", "delta_v"] == pytest.approx(final.loc["a", "Gcum.v1"] - final.loc["a", "W.v1"])


def test_epoch_table_per_run_and_epoch(runs):
    long, _ = runs
    table = epoch_table(long)
    a2 = table[(table["run"] == "a") & (table["epoch"] == 2)].iloc[0]
    assert a2["W.v1"] == pytest.approx(0.21) and a2["W.v1_sd"] == pytest.approx(0.02 / 2**0.5)
    assert len(table) == 4 + 2 and np.isnan(table.loc[0, "Gcum.v1"])
    assert a2["step"] == 20 and "step_sd" not in table and "seed" not in table  # keys, not metrics


def test_datasets_table_is_the_final_table_of_each_set_stacked():
    tables, statuses = [_epochs(0.0), _epochs(0.02)], [_status("a", 0), _status("a", 1)]
    other = [_epochs(0.1), _epochs(0.12)]
    table = datasets_table({"mnist": (tables, statuses), "cifar10": (other, statuses)}, ["a"])
    assert list(table.columns[:3]) == ["dataset", "run", "seeds"]
    assert table[["dataset", "run"]].values.tolist() == [["mnist", "a"], ["cifar10", "a"]]
    final = final_table(stack_runs(tables, statuses), statuses, ["a"])
    pd.testing.assert_frame_equal(table.iloc[:1, 1:].reset_index(drop=True), final)
    assert table.loc[1, "W.v1"] == pytest.approx(0.41)
