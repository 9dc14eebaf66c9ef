"""Paper 003's toy seeds trained as stacked weights: every seed of one configuration in one
computation (``torch.func``: the model's forward vmapped over the seeds' stacked parameters), each
seed with its own initialisation, its own shuffled mini-batches and its own Adam state, as
:func:`crosslayer.continuity.toy.train_toy` trains it alone. Adam acts element by element, so one
optimizer over the stacked parameters is each seed's own; the tracking (weights, first gradients,
cumulative sums, EMAs, their SVDs) is each seed's slice of the stacks.

It pays where one small seed leaves the device idle (a GPU: one kernel per layer for all seeds);
on a CPU core the seeds one at a time are as fast or faster (docs/benchmarks.md). The training loop
never waits for the device: the losses stay there until a tracked step, where divergence is read.
"""

import dataclasses
import math

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state

from crosslayer.continuity.toy import ToyConfig, ToyMLP, _batches, _row

__all__ = ["train_toy_seeds"]


def train_toy_seeds(config: ToyConfig, seeds, data, *, erank_power=2, device="cpu", progress=None):
    """:func:`~crosslayer.continuity.toy.train_toy` of ``config`` at each of ``seeds``, in one batched
    computation (``config.seed`` is not used).

    Returns
    -------
    list of (records, status)
        Per seed, in order: what :func:`~crosslayer.continuity.toy.train_toy` returns for
        ``replace(config, seed=seed)`` but its model. A seed whose loss stops being finite stops
        there, as alone; the others go on.
    """
    seeds = list(seeds)
    S = len(seeds)
    n_classes = int(max(data[1].max(), data[3].max())) + 1
    models = []
    for seed in seeds:  # each seed's initialisation exactly as train_toy draws it
        torch.manual_seed(seed)
        models.append(ToyMLP(dataclasses.replace(config, seed=seed), n_in=data[0].shape[1], n_out=n_classes).to(device))
    params, buffers = stack_module_state(models)  # leaves of shape (S, ...)
    forward = torch.vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)))
    hidden = [f"hidden.{i}.weight" for i in range(config.depth)]
    x_train, y_train, x_test, y_test = (t.to(device) for t in data)
    optimizer = torch.optim.Adam(params.values(), lr=config.lr, betas=(config.beta1, config.beta2), eps=config.eps,
                                 fused=True)
    batches = [_batches(len(x_train), config.batch_size, torch.Generator().manual_seed(seed), device) for seed in seeds]
    per_epoch = math.ceil(len(x_train) / config.batch_size)

    def losses(xb, yb):  # (S, B, inputs), (S, B) -> (S,): each seed's mean cross-entropy
        out = forward(params, buffers, xb)
        return nn.functional.cross_entropy(out.flatten(0, 1), yb.flatten(), reduction="none").view(S, -1).mean(1)

    def stacked(grad=False):  # (S, depth, D, D)
        return torch.stack([(params[name].grad if grad else params[name]).detach() for name in hidden], dim=1)

    def test_accuracy():  # each seed's
        return _accuracy(lambda xb: forward(params, buffers, xb), x_test, y_test, S)

    first_batch = x_train[: config.batch_size].expand(S, -1, -1), y_train[: config.batch_size].expand(S, -1)
    loss0 = losses(*first_batch)
    loss0.sum().backward()  # each seed's gradient is its own loss's: the seeds share no parameter
    finite0 = torch.isfinite(loss0).tolist()
    G0 = stacked(grad=True).clone()
    optimizer.zero_grad()
    track = _Tracking(stacked().clone(), config.ema_betas)
    accuracy = test_accuracy()
    records = [[{"step": 0, "epoch": 0.0, "loss": math.nan, "accuracy": accuracy[s], "dW_rel": 0.0,
                 **_row({"W": track.initial[s], "G": G0[s] if finite0[s] else None, "Gcum": None,
                         **dict.fromkeys(track.names)}, erank_power)}] for s in range(S)]
    status = [{"diverged": not finite0[s], "diverged_step": None if finite0[s] else 0, "steps_done": 0}
              for s in range(S)]
    tracked = config.tracked_steps() if any(finite0) else []
    done = 0
    for until in progress(tracked) if progress else tracked:
        interval, first = [], None
        while done < until:
            batch = torch.stack([next(seed_batches) for seed_batches in batches])  # (S, B)
            optimizer.zero_grad()
            loss = losses(x_train[batch], y_train[batch])
            loss.sum().backward()
            G = stacked(grad=True)
            first = G.clone() if first is None else first
            track.add(G)
            optimizer.step()
            interval.append(loss.detach())
            done += 1
        interval = torch.stack(interval).double().cpu().numpy()  # (steps, S): the one wait per row
        W, accuracy = stacked(), test_accuracy()
        for s in range(S):
            if status[s]["diverged"]:
                continue
            bad = np.flatnonzero(~np.isfinite(interval[:, s]))
            if bad.size:  # train_toy stops at the step whose loss is not finite
                status[s] |= {"diverged": True, "diverged_step": until - len(interval) + int(bad[0]) + 1,
                              "steps_done": until - len(interval) + int(bad[0])}
                continue
            status[s]["steps_done"] = until
            records[s].append({"step": until, "epoch": until / per_epoch, "loss": float(np.mean(interval[:, s])),
                               "accuracy": accuracy[s], **track.row(s, W[s], first[s], erank_power)})
        if all(st["diverged"] for st in status):
            break
    return list(zip(records, status))


def _accuracy(forward, x, y, S, chunk=4096):
    """Each seed's test accuracy, as train_toy's _evaluate counts it."""
    with torch.no_grad():
        correct = torch.zeros(S, dtype=torch.long, device=x.device)
        for i in range(0, len(x), chunk):
            correct += (forward(x[i : i + chunk].expand(S, -1, -1)).argmax(-1) == y[i : i + chunk]).sum(1)
    return (correct.cpu().double() / len(x)).tolist()


class _Tracking:
    """The stacks every seed's row reads, over all seeds at once: the cumulative gradient, the
    EMAs, and the initial weights for the relative change."""

    def __init__(self, initial, betas):
        self.initial, self.norms, self.betas = initial, torch.linalg.matrix_norm(initial), betas
        self.names = [f"ema{beta:g}" for beta in betas]
        self.cumulative = torch.zeros_like(initial)
        self.emas = [torch.zeros_like(initial) for _ in betas]
        self.steps = 0

    def add(self, G):
        self.cumulative += G
        self.steps += 1
        for ema, beta in zip(self.emas, self.betas):
            ema.lerp_(G, 1 - beta)

    def row(self, s, W, first, erank_power):
        stacks = {"W": W, "G": first, "Gcum": self.cumulative[s],
                  **{name: ema[s] / (1 - beta**self.steps) for name, ema, beta in zip(self.names, self.emas, self.betas)}}
        dW = float((torch.linalg.matrix_norm(W - self.initial[s]) / self.norms[s]).mean())
        return {"dW_rel": dW, **_row(stacks, erank_power)}
