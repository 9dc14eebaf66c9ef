"""Trajectory regularity (crosslayer.coupling.regularity): the line-shape score and expodistance on
exact cases, and the windowed statistics."""

import numpy as np
import pytest

from crosslayer.coupling.regularity import (
    equidistance,
    expodistance,
    line_shape_score,
    pack_symmetric,
    unit_step_gram,
    unit_steps,
    unpack_symmetric,
    windowed,
    windowed_equidistance,
    windowed_expodistance,
    windowed_line_shape,
)


def test_line_shape_score_is_one_exactly_for_collinear_trajectories():
    rng = np.random.default_rng(0)
    x0, v = rng.standard_normal(8), rng.standard_normal(8)
    collinear = x0 + np.cumsum([0, 0.5, 2.0, 0.1, 7.0])[:, None] * v  # steps of any length, one direction
    assert line_shape_score(collinear) == pytest.approx(1.0, abs=1e-12)
    back = x0 + np.array([0, 1.0, 0.0, 1.0])[:, None] * v  # collinear but reversing: 3 / 1
    assert line_shape_score(back) == pytest.approx(3.0)
    random = rng.standard_normal((12, 40, 8))  # (states, tokens, d)
    lss = line_shape_score(random)
    assert lss.shape == (40,) and (lss > 1).all()
    assert np.isnan(line_shape_score(np.stack([x0, x0, x0 + v])))  # a zero step


def test_expodistance_is_zero_exactly_for_geometric_growth():
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((5, 8))  # 5 tokens
    Q = np.linalg.qr(rng.standard_normal((8, 8)))[0]  # direction may turn: only norms matter
    geometric = np.stack([1.3**l * (x0 @ np.linalg.matrix_power(Q, l)) for l in range(7)])
    assert np.allclose(expodistance(geometric), 0.0, atol=1e-20)
    norms = np.array([1.0, 2.0, 3.0, 9.0])  # alpha = ln 2, ln 1.5, ln 3
    alpha = np.log([2.0, 1.5, 3.0])
    traj = norms[:, None] * np.eye(3)[0]
    assert expodistance(traj) == pytest.approx(alpha.var(ddof=0) / alpha.mean() ** 2)
    with pytest.raises(ValueError, match="at least 3 states"):
        expodistance(traj[:2])


def test_equidistance_is_zero_exactly_for_equally_spaced_states():
    rng = np.random.default_rng(3)
    directions = rng.standard_normal((6, 4, 8))
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    spaced = np.concatenate([np.zeros((1, 4, 8)), np.cumsum(2.5 * directions, axis=0)])  # steps of length 2.5
    assert np.allclose(equidistance(spaced), 0.0, atol=1e-12)
    lengths = np.array([1.0, 2.0, 6.0])  # by hand: population std over mean
    traj = np.concatenate([[0.0], np.cumsum(lengths)])[:, None] * np.eye(3)[1]
    assert equidistance(traj) == pytest.approx(np.std(lengths) / np.mean(lengths))
    with pytest.raises(ValueError, match="at least 3 states"):
        equidistance(traj[:2])


def test_windows_are_centred_and_nan_where_they_do_not_fit():
    rng = np.random.default_rng(2)
    traj = rng.standard_normal((9, 4, 6))
    lss = windowed(line_shape_score, traj, width=5)
    assert lss.shape == (9, 4)
    assert np.isnan(lss[[0, 1, 7, 8]]).all()
    np.testing.assert_allclose(lss[4], line_shape_score(traj[2:7]))
    np.testing.assert_allclose(windowed(expodistance, traj, width=3)[1], expodistance(traj[:3]))
    with pytest.raises(ValueError, match="odd"):
        windowed(line_shape_score, traj, width=4)


@pytest.mark.parametrize("width", [3, 5, 9])
def test_windows_from_the_unit_step_gram_and_the_norms_are_those_of_the_states(width):
    # What a checkpoint stores (the Gram matrix of the unit steps, packed, and the norms) gives the
    # windowed statistics of any width without the states
    rng = np.random.default_rng(width)
    traj = rng.standard_normal((9, 6, 5)) * np.geomspace(1, 4, 9)[:, None, None]
    traj[4, 2] = traj[3, 2]  # a zero step: NaN in every window over it, as from the states
    gram = unit_step_gram(unit_steps(traj))
    assert gram.shape == (6, 8, 8)
    np.testing.assert_allclose(np.diagonal(gram[[0, 1, 3, 4, 5]], axis1=-2, axis2=-1), 1.0)
    np.testing.assert_array_equal(unpack_symmetric(pack_symmetric(gram)), gram)
    stored = pack_symmetric(gram).astype(np.float32)
    expected = windowed(line_shape_score, traj, width=width)
    assert np.isnan(expected[:, 2]).any()
    np.testing.assert_allclose(windowed_line_shape(unpack_symmetric(stored), width=width), expected, rtol=1e-6)
    np.testing.assert_allclose(windowed_expodistance(np.linalg.norm(traj, axis=-1), width=width),
                               windowed(expodistance, traj, width=width), rtol=1e-12)
    lengths = np.linalg.norm(np.diff(traj, axis=0), axis=-1)  # the checkpoint's step_lengths
    np.testing.assert_allclose(windowed_equidistance(lengths, width=width), windowed(equidistance, traj, width=width),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="m \\(m \\+ 1\\) / 2"):
        unpack_symmetric(np.zeros(5))
