"""Effective rank and the cumulative effective rank of a product (crosslayer.linalg.effective_rank)
against SciPy's entropy and exact products."""

import math

import numpy as np
import pytest
import torch
from layer_stacks import DTYPES, random_layers

from crosslayer.linalg import effective_rank as er


# --------------------------------------------------------------------------- per-sample


@pytest.mark.parametrize("seed", range(4))
def test_effective_rank_is_scipys_entropy_exponentiated(seed):
    # exp(scipy.stats.entropy(s^power)), bit for bit, zeros included
    from scipy.stats import entropy

    rng = np.random.default_rng(seed)
    s = np.abs(rng.standard_cauchy(int(rng.integers(1, 300))))
    s[rng.random(s.size) < 0.3] = 0.0
    s[0] = max(s[0], 1e-3)
    for power in (1, 2):
        assert er.effective_rank(s, power=power) == float(np.exp(entropy(s**power)))
    assert math.isnan(er.effective_rank(np.zeros(3)))


# --------------------------------------------------------------------------- effective rank


@pytest.mark.parametrize("power", [1, 2])
def test_effective_rank_identity_and_known(power):
    d = 9
    assert er.cumulative_effective_rank(np.eye(d)[None], power=power)[0][0] == pytest.approx(d)
    assert er.effective_rank(np.ones(d), power=power) == pytest.approx(d)
    assert er.effective_rank(np.array([3.0, 0, 0]), power=power) == pytest.approx(1.0)
    # two equal-weight values (after power) -> 2
    assert er.effective_rank(np.array([1.0, 1.0, 0.0]), power=power) == pytest.approx(2.0)


def test_effective_rank_power_differs():
    s = np.array([2.0, 1.0])
    p1, p2 = np.array([2, 1]) / 3, np.array([4, 1]) / 5
    assert er.effective_rank(s, power=1) == pytest.approx(np.exp(-(p1 * np.log(p1)).sum()))
    assert er.effective_rank(s, power=2) == pytest.approx(np.exp(-(p2 * np.log(p2)).sum()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("power", [1, 2])
def test_cumulative_untruncated_equals_exact_product(dtype, power):
    L, d = 5, 10
    Js = random_layers(L, d, seed=9, scale=1.5).astype(dtype)
    erank, log_fro = er.cumulative_effective_rank(Js, rank=d, power=power)
    J64 = Js.astype(np.float64)
    for start in range(L):
        P = np.eye(d)
        for layer in range(start, L):
            P = J64[layer] @ P  # J_{L-1} ... J_start
        s = np.linalg.svd(P, compute_uv=False)
        assert erank[start] == pytest.approx(er.effective_rank(s, power=power), rel=1e-9)
        assert log_fro[start] == pytest.approx(np.log(np.linalg.norm(P)), rel=1e-9, abs=1e-9)


def test_cumulative_rank_r_bounds_effective_rank():
    Js = random_layers(6, 12, seed=10, scale=1.0)
    for r in (1, 3, 5):
        erank, _ = er.cumulative_effective_rank(Js, rank=r)
        assert np.all(erank <= r + 1e-9) and np.all(erank >= 1 - 1e-9)
    # a rank-2 layer caps every product that passes through it
    Js[3] = np.outer(np.arange(12.0), np.ones(12)) + np.outer(np.ones(12), np.arange(12.0) ** 2)
    erank, _ = er.cumulative_effective_rank(Js, rank=12)
    assert np.all(erank[:4] <= 2 + 1e-9)


def test_cumulative_scale_does_not_overflow():
    Js = np.stack([1e30 * np.eye(4)] * 40)
    erank, log_fro = er.cumulative_effective_rank(Js)
    np.testing.assert_allclose(erank, 4)
    assert log_fro[0] == pytest.approx(40 * math.log(1e30) + math.log(2))


def test_cumulative_default_rank_and_torch():
    Js = torch.from_numpy(random_layers(3, 6, seed=11))
    erank, _ = er.cumulative_effective_rank(Js)  # rank min(256, 6) = 6 = exact
    np.testing.assert_allclose(erank, er.cumulative_effective_rank(Js.numpy(), rank=6)[0])
