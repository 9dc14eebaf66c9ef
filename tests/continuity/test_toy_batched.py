"""Paper 003's toy seeds trained as stacked weights (crosslayer.continuity.toy_batched) against each
seed trained alone (crosslayer.continuity.toy.train_toy): the same records and status, on every
activation and with LayerNorm, and where seeds diverge."""

import dataclasses

import numpy as np
import pytest
import torch

from crosslayer.continuity.toy import TOY_ACTIVATIONS, ToyConfig, train_toy
from crosslayer.continuity.toy_batched import train_toy_seeds


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(300, 20, generator=g)
    y = (x[:, :5].sum(1) > 2.5).long() + 2 * (x[:, 5] > 0.5).long()  # four classes the inputs decide
    return x[:240], y[:240], x[240:], y[240:]


def assert_as_alone(config, seeds, data, device="cpu", rtol=2e-4, atol=2e-5):
    batched = train_toy_seeds(config, seeds, data, device=device)
    assert len(batched) == len(seeds)
    for seed, (records, status) in zip(seeds, batched):
        alone, alone_status, _ = train_toy(dataclasses.replace(config, seed=seed), data)
        assert status == alone_status and len(records) == len(alone)
        for mine, theirs in zip(records, alone):
            assert mine.keys() == theirs.keys()
            for key in theirs:
                np.testing.assert_allclose(mine[key], theirs[key], rtol=rtol, atol=atol, err_msg=f"{seed} {key}")
    return batched


@pytest.mark.parametrize("activation, layernorm", [(a, False) for a in TOY_ACTIVATIONS] + [("relu", True)])
def test_each_seed_batched_equals_the_seed_trained_alone(data, activation, layernorm):
    # 8 batches per pass over the 240 examples: 20 steps cross two passes, rows at steps 7, 13, 20
    config = ToyConfig(activation=activation, layernorm=layernorm, width=12, depth=3, batch_size=32, steps=20,
                       track=3, init_scale=0.3)
    batched = assert_as_alone(config, [0, 1, 2], data)
    assert [r["step"] for r in batched[0][0]] == [0, 7, 13, 20]


def test_a_diverging_seed_stops_at_its_step_as_alone_and_the_others_go_on(data):
    # A NaN pixel in example 100: each seed's shuffle reaches it at its own step (seed 6's 2nd
    # mini-batch, seed 0's 5th, seed 2's 8th), and a NaN loss stops that seed there alone
    x_train = data[0].clone()
    x_train[100, 3] = float("nan")
    config = ToyConfig(activation="relu", width=12, depth=3, batch_size=32, steps=6, track=3, init_scale=0.3)
    batched = assert_as_alone(config, [6, 0, 2], (x_train, *data[1:]))
    assert [(status["diverged_step"], status["steps_done"]) for _, status in batched] == [(2, 1), (5, 4), (None, 6)]
    assert [[r["step"] for r in records] for records, _ in batched] == [[0], [0, 2, 4], [0, 2, 4, 6]]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_seeds_batched_on_cuda_equal_each_seed_alone_on_the_cpu(data):
    # TF32 would round the products to 10 bits: float32 as on the CPU
    torch.backends.cuda.matmul.allow_tf32 = False
    for layernorm in (False, True):
        config = ToyConfig(activation="gelu", layernorm=layernorm, width=12, depth=3, batch_size=32, steps=20, track=3,
                           init_scale=0.3)
        assert_as_alone(config, [0, 1, 2], data, device="cuda", rtol=1e-3, atol=1e-4)
