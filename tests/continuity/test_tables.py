import numpy as np
import pandas as pd
import pytest

from crosslayer.continuity.tables import ABLATION_COLUMNS, TABLE2_ORDER, ablation_table, steps_table, table2


def _checkpoint(offset, gate=True):
    names = list(TABLE2_ORDER)
    present = [gate or name != "gate" for name in names]
    return pd.DataFrame({"projection": names, "present": present,
                         "u1": [offset + i / 100 if p else np.nan for i, p in enumerate(present)],
                         "v1": [offset + i / 10 if p else np.nan for i, p in enumerate(present)],
                         "u2": [offset / 2 + i / 100 if p else np.nan for i, p in enumerate(present)],
                         "v2": [offset / 2 + i / 10 if p else np.nan for i, p in enumerate(present)]})


def test_steps_table_stacks_checkpoints():
    table = steps_table([_checkpoint(0.0), _checkpoint(0.5)], [0, 100])
    assert list(table.columns[:2]) == ["step", "projection"] and len(table) == 2 * len(TABLE2_ORDER)
    assert table.loc[table["step"] == 100, "u1"].iloc[0] == 0.5
    with pytest.raises(ValueError, match="2 tables for 1 steps"):
        steps_table([_checkpoint(0.0), _checkpoint(0.5)], [0])


def test_table2_one_row_per_model_and_step_in_paper_order():
    steps = {"a": steps_table([_checkpoint(0.0), _checkpoint(0.5)], [0, 100]),
             "b": steps_table([_checkpoint(0.2, gate=False)], [7])}
    out = table2(steps)
    assert list(out.columns[:6]) == ["model", "step", "q.v1", "q.u1", "k.v1", "k.u1"]
    assert list(out.columns[2 + 2 * 7 : 2 + 2 * 8]) == ["ov.v1", "ov.u1"]  # the paper's columns, then the second pair's
    assert list(out.columns[-4:]) == ["v.v2", "v.u2", "ov.v2", "ov.u2"]
    assert out[["model", "step"]].values.tolist() == [["a", 0], ["a", 100], ["b", 7]]
    assert out.loc[1, "k.u2"] == pytest.approx(0.25 + TABLE2_ORDER.index("k") / 100) and np.isnan(out.loc[2, "gate.u2"])
    assert out.loc[1, "down.u1"] == pytest.approx(0.5 + TABLE2_ORDER.index("down") / 100)
    assert np.isnan(out.loc[2, "gate.v1"]) and out.loc[2, "up.v1"] == pytest.approx(0.2 + 0.3)


def _outcome(diverged_step=None, **switches):
    loss = None if diverged_step is not None else 3.0
    return {"activation": "silu", "residual": True, "norm": True, **switches, "steps": 10,
            "diverged_step": diverged_step, "eval_loss": loss, "perplexity": None if loss is None else np.exp(loss)}


def test_ablation_table_one_row_per_run_with_switches_and_continuity():
    diverged = _checkpoint(0.0).assign(present=False)
    out = ablation_table({"silu": _outcome(), "none": _outcome(activation="none"), "nonorm": _outcome(4, norm=False)},
                         {"silu": _checkpoint(0.1), "none": _checkpoint(0.3), "nonorm": diverged})
    assert tuple(out.columns[:len(ABLATION_COLUMNS)]) == ABLATION_COLUMNS
    assert list(out["run"]) == ["silu", "none", "nonorm"] and list(out.columns[-2:]) == ["ov.v2", "ov.u2"]
    assert out["diverged_step"].isna().tolist() == [True, True, False] and out.loc[2, "diverged_step"] == 4
    assert out.loc[1, "gate.v1"] == pytest.approx(0.3 + TABLE2_ORDER.index("gate") / 10)
    assert out.loc[2, ["perplexity", "q.v1", "q.u1"]].isna().all()


def test_ablation_table_when_every_run_diverged():
    out = ablation_table({"a": _outcome(2)}, {"a": _checkpoint(0.0).assign(present=False)})
    assert list(out.columns) == list(ABLATION_COLUMNS) and out.loc[0, "diverged_step"] == 2
