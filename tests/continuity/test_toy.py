"""Paper 003's toy MLP (crosslayer.continuity.toy): its switches, initialisation and what training
records."""

import math

import numpy as np
import pytest
import torch

from crosslayer.continuity.toy import TOY_ACTIVATIONS, ToyConfig, ToyMLP, radial, train_toy


def _data(n=768, n_in=20, seed=0):
    """A seeded 10-class problem: labels from a random linear map of Gaussian inputs."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_in, generator=g)
    y = (x @ torch.randn(n_in, 10, generator=g)).argmax(-1)
    return x[: n // 2], y[: n // 2], x[n // 2 :], y[n // 2 :]


def test_radial_keeps_direction_and_squashes_norm():
    h = torch.randn(50, 16, dtype=torch.float64) * torch.logspace(-3, 1, 50, dtype=torch.float64)[:, None]
    out = radial(h)
    cos = (out * h).sum(-1) / (out.norm(dim=-1) * h.norm(dim=-1))
    torch.testing.assert_close(cos, torch.ones(50, dtype=torch.float64), rtol=0, atol=1e-15)
    torch.testing.assert_close(out.norm(dim=-1), torch.tanh(h.norm(dim=-1)))
    assert torch.equal(radial(torch.zeros(2, 4)), torch.zeros(2, 4))
    Q, _ = torch.linalg.qr(torch.randn(16, 16, dtype=torch.float64))  # commutes with rotations
    torch.testing.assert_close(radial(h @ Q.T), radial(h) @ Q.T)


@pytest.mark.parametrize("activation", TOY_ACTIVATIONS)
@pytest.mark.parametrize("residual, layernorm", [(True, False), (False, False), (True, True)])
def test_forward_follows_the_switches(activation, residual, layernorm):
    config = ToyConfig(activation=activation, residual=residual, layernorm=layernorm, width=8, depth=3)
    torch.manual_seed(0)
    model = ToyMLP(config, n_in=5)
    if layernorm:  # non-trivial gains and shifts
        for norm in model.norms:
            torch.nn.init.normal_(norm.weight), torch.nn.init.normal_(norm.bias)
    x = torch.randn(7, 5)
    act = {"gelu": lambda z: z * 0.5 * (1 + torch.erf(z / math.sqrt(2))), "silu": lambda z: z / (1 + torch.exp(-z)),
           "relu": lambda z: z.clamp_min(0), "tanh": torch.tanh, "none": lambda z: z,
           "radial": lambda z: torch.tanh(z.norm(dim=-1, keepdim=True)) * z / z.norm(dim=-1, keepdim=True)}[activation]
    with torch.no_grad():
        h = x @ model.embed.weight.T + model.embed.bias
        for i, W in enumerate(model.weights()):
            n = h
            if layernorm:
                n = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, unbiased=False, keepdim=True) + 1e-5)
                n = n * model.norms[i].weight + model.norms[i].bias
            z = act(n @ W.T)
            h = h + z if residual else z
        expected = h @ model.head.weight.T + model.head.bias
        torch.testing.assert_close(model(x), expected, rtol=1e-5, atol=1e-6)
    assert model.weights().shape == (3, 8, 8) and (model.norms is not None) == layernorm


def test_init_scale():
    default = ToyMLP(ToyConfig(width=64, depth=4)).weights()
    assert default.abs().max() <= 1 / math.sqrt(64)  # PyTorch's Kaiming-uniform bound 1/sqrt(fan_in)
    assert default.std().item() == pytest.approx(1 / math.sqrt(3 * 64), rel=0.05)
    small = ToyMLP(ToyConfig(width=64, depth=4, init_scale=0.001)).weights()
    assert small.std().item() == pytest.approx(0.001, rel=0.05) and abs(small.mean().item()) < 1e-4
    with pytest.raises(ValueError, match="activation"):
        ToyConfig(activation="swish")


def test_training_records_every_tracked_step_and_is_reproducible():
    config = ToyConfig(width=16, depth=4, steps=36, track=3, batch_size=32, ema_betas=(0.9, 0.99))  # 12 steps a pass
    records, status, model = train_toy(config, _data())
    assert [(r["step"], r["epoch"]) for r in records] == [(0, 0), (12, 1), (24, 2), (36, 3)]
    assert status == {"diverged": False, "diverged_step": None, "steps_done": 36}
    first, last = records[0], records[-1]
    assert math.isnan(first["loss"]) and "Gcum.u1" not in first and "delta_u" not in first
    assert 0 <= first["G.v1"] <= 1 and 0 <= first["G.align_v"] <= 1
    for key in ("W.u1", "G.wa_v", "Gcum.v1", "ema0.9.u1", "ema0.99.align_u", "delta_v"):
        assert np.isfinite(last[key]), key
    assert last["delta_u"] == pytest.approx(last["Gcum.u1"] - last["W.u1"])
    assert last["accuracy"] > first["accuracy"] + 0.1 and last["loss"] < records[1]["loss"]  # it learns
    again, _, _ = train_toy(config, _data())
    assert again == records
    assert train_toy(ToyConfig(width=16, depth=4, steps=12, track=1, batch_size=32, seed=1), _data())[0][-1] != records[1]


def test_tracking_leaves_training_alone_and_passes_run_on():
    # tracked at 13 of 30 steps (mid-pass: 12 steps a pass) or at 10, 20, 30: the same training
    data = _data()
    sparse, _, model = train_toy(ToyConfig(width=16, depth=4, steps=30, track=3, batch_size=32), data)
    dense, _, again = train_toy(ToyConfig(width=16, depth=4, steps=30, track=13, batch_size=32), data)
    assert [r["step"] for r in sparse] == [0, 10, 20, 30] and len(dense) == 14 and dense[-1]["step"] == 30
    assert dense[-1]["epoch"] == pytest.approx(2.5)
    for key in ("W.v1", "W.u1", "Gcum.wa_v", "ema0.99.v1", "accuracy", "dW_rel"):
        assert dense[-1][key] == pytest.approx(sparse[-1][key], rel=1e-6), key
    # an independent loop: a fresh shuffled order each pass, the per-tensor Adam (not fused)
    config = ToyConfig(width=16, depth=4, steps=30, batch_size=32)
    torch.manual_seed(config.seed)
    reference = ToyMLP(config, n_in=20)
    optimizer = torch.optim.Adam(reference.parameters(), lr=config.lr, foreach=False)
    generator, done = torch.Generator().manual_seed(config.seed), 0
    while done < config.steps:
        order = torch.randperm(len(data[0]), generator=generator)
        for start in range(0, len(order), config.batch_size):
            if done == config.steps:
                break
            batch = order[start : start + config.batch_size]
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(reference(data[0][batch]), data[1][batch]).backward()
            optimizer.step()
            done += 1
    torch.testing.assert_close(model.weights(), reference.weights(), rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(again.weights(), model.weights(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="steps"):
        ToyConfig(steps=0)


def test_input_width_and_class_count_follow_the_data():
    # a CIFAR-100-shaped problem (3072 inputs, 100 classes): the model takes its shape from the arrays
    g = torch.Generator().manual_seed(0)
    x = torch.rand(600, 3072, generator=g)
    y = torch.arange(600) % 100
    config = ToyConfig(width=16, depth=3, steps=14, track=2, batch_size=64)  # 7 steps a pass
    records, status, model = train_toy(config, (x[:400], y[:400], x[400:], y[400:]))
    assert (model.embed.in_features, model.head.out_features) == (3072, 100)
    assert not status["diverged"] and [r["epoch"] for r in records] == [0, 1, 2]
    assert np.isfinite(records[-1]["loss"]) and np.isfinite(records[-1]["W.v1"])


def test_cumulative_gradient_is_the_sum_of_the_updates_direction():
    # plain SGD-like check: with Adam's first step, the cumulative gradient after one step is that step's gradient
    config = ToyConfig(width=8, depth=3, steps=1, track=1, batch_size=1000)  # one mini-batch per pass
    records, _, _ = train_toy(config, _data())
    assert records[1]["Gcum.u1"] == pytest.approx(records[1]["G.u1"])
    assert records[1]["Gcum.wa_v"] == pytest.approx(records[1]["G.wa_v"])


def test_divergence_is_recorded_with_its_step():
    config = ToyConfig(activation="none", residual=True, width=16, depth=16, init_scale=1e3, steps=24, batch_size=32)
    records, status, _ = train_toy(config, _data())
    assert status == {"diverged": True, "diverged_step": 0, "steps_done": 0} and len(records) == 1
    assert "G.u1" not in records[0] and 0 <= records[0]["W.u1"] <= 1  # no gradient to measure


def test_relative_weight_change_is_recorded_against_the_initial_weights():
    config = ToyConfig(width=16, depth=4, steps=12, track=2, batch_size=64, seed=3)
    records, _, model = train_toy(config, _data())
    torch.manual_seed(config.seed)  # train_toy seeds the same way before building the model
    initial = ToyMLP(config, n_in=20).weights().double().numpy()
    final = model.weights().double().numpy()
    expected = np.mean([np.linalg.norm(w - w0) / np.linalg.norm(w0) for w, w0 in zip(final, initial)])
    assert records[0]["dW_rel"] == 0.0 and records[-1]["dW_rel"] == pytest.approx(expected, rel=1e-5)
    assert 0 < records[1]["dW_rel"] < records[2]["dW_rel"]


def test_a_large_epsilon_makes_adam_sgd_with_momentum():
    # one mini-batch per epoch: Adam's first step is -lr * g / (|g| + eps) with bias-corrected moments
    data = _data()
    for eps in (1e-8, 10.0):
        config = ToyConfig(width=8, depth=3, steps=1, track=1, batch_size=1000, eps=eps, lr=0.01)
        torch.manual_seed(config.seed)
        reference = ToyMLP(config, n_in=20)
        torch.nn.functional.cross_entropy(reference(data[0]), data[1]).backward()
        g, W0 = reference.gradients().double(), reference.weights().double()
        _, _, model = train_toy(config, data)
        expected = W0 - config.lr * g / (g.abs() + eps)
        torch.testing.assert_close(model.weights().double(), expected, rtol=1e-4, atol=1e-7)
    # with eps far above |g| the step is (lr / eps) g: plain gradient descent on its first step
    torch.testing.assert_close(model.weights().double(), W0 - config.lr / eps * g, rtol=1e-3, atol=1e-8)
