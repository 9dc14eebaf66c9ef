"""Depth regimes (crosslayer.dynamics.regimes): the paper's split, per-regime means, and Table 2's
minimum layer on the spectra table the workflow saves."""

import numpy as np
import pandas as pd
import pytest
from spectra_tables import saved_profile

from crosslayer.dynamics import regimes as R
from crosslayer.dynamics.regimes import minimum_layer


# --------------------------------------------------------------------------- depth regimes


def test_depth_regimes_paper_split():
    labels = R.depth_regimes(32, boundaries=R.PAPER_BOUNDARIES)
    assert list(labels[:5]) == ["early"] * 5
    assert list(labels[5:20]) == ["mid"] * 15
    assert list(labels[20:]) == ["late"] * 12
    np.testing.assert_array_equal(R.depth_regimes(32), labels)  # default fractions
    expected = ["early"] * 2 + ["mid"] * 3 + ["late"] * 5
    np.testing.assert_array_equal(R.depth_regimes(10, fractions=(0.2, 0.5)), expected)


def test_regime_summary_means():
    stats = {"a": np.arange(6.0), "b": [1.0, 1.0, 2.0, 2.0, 3.0, np.nan]}
    labels = R.depth_regimes(6, boundaries=(2, 4))
    table = R.regime_summary(stats, labels)
    assert isinstance(table, pd.DataFrame)
    assert list(table.index) == ["early", "mid", "late"]
    np.testing.assert_allclose(table["a"], [0.5, 2.5, 4.5])
    np.testing.assert_allclose(table["b"], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(table["n_layers"], [2, 2, 2])


# --------------------------------------------------------------------------- Table 2 and Figs 2/S2


def test_minimum_layer_is_argmin_of_saved_self_alignment(tmp_path):
    table, _, _ = saved_profile(tmp_path, 3)
    layer, value = minimum_layer(table["self_alignment"])
    assert layer == int(np.argmin(table["self_alignment"].to_numpy()))
    assert value == table["self_alignment"].min()
    assert minimum_layer([np.nan, 0.5, 0.2, 0.2]) == (2, 0.2)
    with pytest.raises(ValueError, match="non-NaN"):
        minimum_layer([np.nan])
