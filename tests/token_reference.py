"""The autograd reference of token-wise block Jacobians, shared by the Jacobian, coupling and
workflow tests: a tiny model of a family with its norm gains and biases moved off 1 and 0 and a
few token ids (`build`), and d block_l(X)_{t2} / d x_{t1} by autograd of the whole model
(`reference`). The reference never uses our recorded block calls: the model runs whole, a pre-hook
puts the differentiated token into block l's input and a forward hook reads block l's output."""

import torch
from tiny_families import CONFIGS, VOCAB, tiny_model

from crosslayer.models.adapters import adapter_for

TOKENS = 6
FAMILIES = list(CONFIGS)


def build(family, seed=0):
    model = tiny_model(family, seed=seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))  # norm gains away from 1, biases away from 0
    ids = torch.randint(0, VOCAB, (TOKENS,), generator=torch.Generator().manual_seed(seed)).tolist()
    return model, ids


def reference(model, ids, layer, t1, t2, *, branch=True, final_norm=False):
    """d block_l(X)_{t2} / d x_{t1} (minus I at t1 = t2 for the branch) by the paper's autograd;
    with `final_norm` the model's own output after the last block (its ``last_hidden_state``)."""
    block = adapter_for(model).blocks(model)[layer]
    state = {}

    def put(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        state.setdefault("x", hidden[0, t1].detach().clone())
        if state["v"] is None:  # the first pass only records x_{t1}
            return None
        hidden = torch.cat([hidden[:, :t1], state["v"][None, None], hidden[:, t1 + 1 :]], dim=1)
        if args:
            return (hidden, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": hidden}

    def read(module, args, output):
        state["out"] = (output[0] if isinstance(output, tuple) else output)[0, t2]

    def g(v):
        state["v"] = v
        last = model.base_model(input_ids=torch.tensor([ids]), use_cache=False).last_hidden_state[0, t2]
        return (last if final_norm else state["out"]) - (v if branch and t1 == t2 else 0)

    handles = [block.register_forward_pre_hook(put, with_kwargs=True), block.register_forward_hook(read)]
    try:
        state["v"] = None
        with torch.no_grad():
            model.base_model(input_ids=torch.tensor([ids]), use_cache=False)  # records x_{t1}
        return torch.autograd.functional.jacobian(g, state["x"])
    finally:
        for h in handles:
            h.remove()
