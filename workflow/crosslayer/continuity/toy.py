"""The toy residual MLP of paper 003 (section 4, appendices C-F) and its training with continuity
tracked on weights and gradients.

Model: ``h = E x`` (``E``: inputs -> D, with bias; 784 for MNIST, 3072 for the colour sets of
Fig. 13), then ``depth`` layers ``h <- h + act(W_l n(h))`` (``W_l`` D x D without bias; ``n`` =
LayerNorm when ``layernorm`` else identity; without ``residual``: ``h <- act(W_l n(h))``), then a
linear head D -> classes (10 for MNIST; the data's largest label + 1). ``init_scale`` None keeps
PyTorch's default (Kaiming-uniform) init of ``W_l``; a number draws ``W_l ~ N(0, init_scale^2)``.
The radial activation acts on the norm only, ``act(h) = tanh(||h||) h / ||h||`` (ours: r = tanh),
so it commutes with every rotation.

Training: Adam, cross-entropy, shuffled mini-batches from a seeded generator, ``steps`` Adam steps
in all (the paper's 20 epochs of 60k digits at batch 128: 9,380), passing over the data epoch after
epoch. Tracked at step 0 (before any update) and at ``track`` evenly spaced steps (the paper's
every epoch): the weights ``W_l``; the gradient ``G_l`` of the first mini-batch since the last
tracked step (at step 0 the first backward pass); the cumulative sum of every mini-batch gradient
so far; exponential moving averages of the gradient (``g <- beta g + (1 - beta) G``, bias-
corrected) at each configured beta. Continuity statistics of each stack come from batched SVDs.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from crosslayer.continuity.measure import stack_continuity

__all__ = ["TOY_ACTIVATIONS", "ToyConfig", "ToyMLP", "as_tensors", "radial", "train_toy"]

TOY_ACTIVATIONS = ("gelu", "silu", "relu", "tanh", "none", "radial")


def radial(h, eps=1e-12):
    """``tanh(||h||) h / ||h||`` over the last axis: rescales each vector, never turns it."""
    r = h.norm(dim=-1, keepdim=True)
    return h * (torch.tanh(r) / r.clamp_min(eps))


_ACT = {"gelu": nn.functional.gelu, "silu": nn.functional.silu, "relu": torch.relu, "tanh": torch.tanh,
        "none": lambda h: h, "radial": radial}


@dataclass(frozen=True)
class ToyConfig:
    """One configuration of the ablation grid (defaults: METHODS.md, section 003)."""

    activation: str = "relu"  # one of TOY_ACTIVATIONS
    residual: bool = True  # h <- h + act(W n(h)), else h <- act(W n(h))
    layernorm: bool = False  # n = LayerNorm (with gain and bias) before each W
    width: int = 128  # D
    depth: int = 16  # hidden layers W_1..W_depth
    init_scale: float | None = None  # None: PyTorch default; else std of N(0, std^2) for every W_l
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8  # Adam's epsilon; one far above sqrt(v) makes the step lr/eps * m (SGD with momentum)
    batch_size: int = 128
    steps: int = 9380  # Adam steps; an epoch is ceil(digits / batch_size) of them
    track: int = 20  # tracked steps after step 0, evenly spaced (the last is `steps`)
    ema_betas: tuple = (0.9, 0.99, 0.999)  # smoothing levels of the gradient EMAs
    seed: int = 0

    def __post_init__(self):
        if self.activation not in TOY_ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r} is not one of {TOY_ACTIVATIONS}")
        if self.depth < 2 or self.width < 1:
            raise ValueError(f"need depth >= 2 and width >= 1, got depth {self.depth}, width {self.width}")
        if self.steps < 1 or self.track < 1:
            raise ValueError(f"need steps >= 1 and track >= 1, got steps {self.steps}, track {self.track}")

    def tracked_steps(self):
        """The Adam steps after which training is tracked: ``track`` evenly spaced, ending at ``steps``."""
        return sorted({round(k * self.steps / self.track) for k in range(1, self.track + 1)} - {0})


class ToyMLP(nn.Module):
    """The toy model of one :class:`ToyConfig`; ``hidden`` holds ``W_1..W_depth``."""

    def __init__(self, config: ToyConfig, n_in=784, n_out=10):
        super().__init__()
        self.config = config
        self.embed = nn.Linear(n_in, config.width)
        self.hidden = nn.ModuleList(nn.Linear(config.width, config.width, bias=False) for _ in range(config.depth))
        self.norms = nn.ModuleList(nn.LayerNorm(config.width) for _ in range(config.depth)) if config.layernorm else None
        self.head = nn.Linear(config.width, n_out)
        if config.init_scale is not None:
            for layer in self.hidden:
                nn.init.normal_(layer.weight, std=config.init_scale)
        self.act = _ACT[config.activation]

    def forward(self, x):  # (B, n_in) -> (B, n_out)
        h = self.embed(x)  # (B, D)
        for i, layer in enumerate(self.hidden):
            z = self.act(layer(self.norms[i](h) if self.norms is not None else h))
            h = h + z if self.config.residual else z
        return self.head(h)

    def weights(self):
        """``(depth, D, D)`` stack of the hidden weights (detached)."""
        return torch.stack([layer.weight.detach() for layer in self.hidden])

    def gradients(self):
        """``(depth, D, D)`` stack of the hidden weights' current gradients."""
        return torch.stack([layer.weight.grad.detach() for layer in self.hidden])


def _evaluate(model, x, y, batch_size=4096):
    """Accuracy of `model` on (x, y)."""
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x[i : i + batch_size]).argmax(-1) == y[i : i + batch_size]).sum())
                      for i in range(0, len(x), batch_size))
    model.train()
    return correct / len(x)


def _row(stacks, erank_power):
    """Continuity statistics of every tracked stack, plus each stack's principal vectors' mean
    alignment with the weights' (``align_u``/``align_v``: mean_l |<x1(W_l), x1(S_l)>|)."""
    row, principal = {}, {}
    for name, stack in stacks.items():
        if stack is None:
            continue
        stats = stack_continuity(stack, erank_power=erank_power, vectors=True)
        principal[name] = stats.pop("u1_vectors"), stats.pop("v1_vectors")
        row |= {f"{name}.{key}": value for key, value in stats.items()}
    for name, (u, v) in principal.items():
        if name != "W" and "W" in principal and u is not None and principal["W"][0] is not None:
            row[f"{name}.align_u"] = float(np.abs(np.sum(u * principal["W"][0], axis=1)).mean())
            row[f"{name}.align_v"] = float(np.abs(np.sum(v * principal["W"][1], axis=1)).mean())
    if "Gcum.u1" in row:  # the transfer gap: coherence made in the cumulative gradient minus that kept in W
        row["delta_u"], row["delta_v"] = row["Gcum.u1"] - row["W.u1"], row["Gcum.v1"] - row["W.v1"]
    return row


def _batches(n, batch_size, generator, device):
    """Mini-batch index tensors forever: each pass over the n examples in a fresh shuffled order."""
    while True:
        order = torch.randperm(n, generator=generator).to(device)
        yield from (order[start : start + batch_size] for start in range(0, n, batch_size))


def train_toy(config: ToyConfig, data, *, erank_power=2, device="cpu", progress=None):
    """Train one configuration for ``config.steps`` Adam steps and track continuity at step 0 and
    at ``config.tracked_steps()``.

    Parameters
    ----------
    config : ToyConfig
    data : tuple of torch.Tensor
        ``(x_train (N, inputs) float, y_train (N,) int64, x_test, y_test)``: the input width and
        the class count follow the data.
    erank_power : {1, 2}
    progress : callable, optional
        Wraps the iterator over the tracked steps.

    Returns
    -------
    records : list of dict
        One per tracked step, the first before any update: ``step`` (Adam steps so far), ``epoch``
        (passes over the training data so far, ``step / ceil(N / batch_size)``), ``loss`` (mean
        training loss since the last tracked step; NaN at 0), ``accuracy`` (test), and for each
        tracked stack ``W`` (weights), ``G`` (gradient of the first mini-batch since the last
        tracked step; at step 0 the first backward pass), ``Gcum`` (sum of all gradients so far),
        ``ema{beta}`` (bias-corrected EMA of the gradients) the keys ``{stack}.u1``, ``.v1``,
        ``.u2``, ``.v2``, ``.wa_u``, ``.wa_v``, ``.erank`` and, for the gradient stacks,
        ``.align_u``/``.align_v`` with the weights; ``delta_u``/``delta_v`` = ``Gcum`` minus ``W``
        continuity; ``dW_rel``, the weights' relative change since initialisation,
        ``mean_l ||W_l - W_l(0)||_F / ||W_l(0)||_F``.
    status : dict
        ``diverged`` (bool), ``diverged_step`` (the Adam step whose loss was not finite, 0 for the
        initial model, or None), ``steps_done``.
    model : ToyMLP
    """
    torch.manual_seed(config.seed)
    n_classes = int(max(data[1].max(), data[3].max())) + 1  # the data's labels are 0..classes - 1
    model = ToyMLP(config, n_in=data[0].shape[1], n_out=n_classes).to(device)
    x_train, y_train, x_test, y_test = (t.to(device) for t in data)
    # fused: one kernel updates every parameter (not a loop of small kernels per tensor)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, betas=(config.beta1, config.beta2),
                                 eps=config.eps, fused=True)
    batches = _batches(len(x_train), config.batch_size, torch.Generator().manual_seed(config.seed), device)
    loss_fn = nn.CrossEntropyLoss()
    per_epoch = math.ceil(len(x_train) / config.batch_size)

    def first_gradient():  # None when the initial model's loss is not finite
        model.zero_grad()
        loss = loss_fn(model(x_train[: config.batch_size]), y_train[: config.batch_size])
        if not torch.isfinite(loss):
            return None
        loss.backward()
        return model.gradients().clone()

    ema_names = [f"ema{beta:g}" for beta in config.ema_betas]
    initial = model.weights().clone()
    initial_norms = torch.linalg.matrix_norm(initial)

    def relative_change(W):
        return float((torch.linalg.matrix_norm(W - initial) / initial_norms).mean())

    stacks = {"W": initial, "G": first_gradient(), "Gcum": None, **dict.fromkeys(ema_names)}
    records = [{"step": 0, "epoch": 0.0, "loss": math.nan, "accuracy": _evaluate(model, x_test, y_test),
                "dW_rel": 0.0, **_row(stacks, erank_power)}]
    diverged = stacks["G"] is None
    status = {"diverged": diverged, "diverged_step": 0 if diverged else None, "steps_done": 0}
    cumulative = torch.zeros_like(stacks["W"])
    emas = [torch.zeros_like(stacks["W"]) for _ in config.ema_betas]
    tracked = [] if diverged else config.tracked_steps()
    for until in progress(tracked) if progress else tracked:
        losses, first = [], None
        while status["steps_done"] < until:
            batch = next(batches)
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[batch]), y_train[batch])
            if not torch.isfinite(loss):
                status |= {"diverged": True, "diverged_step": status["steps_done"] + 1}
                break
            loss.backward()
            G = model.gradients()
            first = G.clone() if first is None else first
            cumulative += G
            for ema, beta in zip(emas, config.ema_betas):
                ema.lerp_(G, 1 - beta)
            optimizer.step()
            status["steps_done"] += 1
            losses.append(loss.item())
        if status["diverged"]:
            break
        n = status["steps_done"]
        stacks = {"W": model.weights(), "G": first, "Gcum": cumulative,
                  **{name: ema / (1 - beta**n) for name, ema, beta in zip(ema_names, emas, config.ema_betas)}}
        records.append({"step": n, "epoch": n / per_epoch, "loss": float(np.mean(losses)),
                        "accuracy": _evaluate(model, x_test, y_test), "dW_rel": relative_change(stacks["W"]),
                        **_row(stacks, erank_power)})
    return records, status, model


def as_tensors(arrays):
    """``(x_train, y_train, x_test, y_test)`` tensors from uint8 image arrays (MNIST, or an image set
    of :mod:`crosslayer.data.image_sets`): pixels scaled to [0, 1] (float32), labels int64."""
    x_train, y_train, x_test, y_test = (arrays[key] for key in ("x_train", "y_train", "x_test", "y_test"))
    return (torch.from_numpy(x_train.astype(np.float32) / 255), torch.from_numpy(y_train.astype(np.int64)),
            torch.from_numpy(x_test.astype(np.float32) / 255), torch.from_numpy(y_test.astype(np.int64)))
