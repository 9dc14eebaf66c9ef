"""Multi-token Jacobians of the residual branch against torch.autograd.functional.jacobian of the
real transformers model, for every supported family. The reference never uses our recorded
block calls: the model runs whole, a pre-hook puts the differentiated token into block l's input
and a forward hook reads block l's output."""

import pytest
import torch
import transformers as T
from tiny_families import LAYERS, D, tiny_model
from token_reference import FAMILIES, TOKENS, build, reference

from crosslayer.jacobians.multi_token import (
    _sweep,
    last_token_jacobians,
    released_last_token_jacobians,
    token_jacobians,
)
from crosslayer.models.adapters import adapter_for
from crosslayer.models.blocks import block_calls


def rel_err(a, b):
    """Relative Frobenius error; 0 when both are exactly zero (a token outside a sliding window)."""
    scale = torch.linalg.norm(b)
    return float(torch.linalg.norm(a - b) / scale) if scale > 0 else float(torch.linalg.norm(a))


@pytest.mark.parametrize("family", FAMILIES)
def test_token_wise_jacobians_equal_autograd_of_the_real_model_per_pair(family):
    model, ids = build(family)
    for layer in (0, LAYERS - 1):
        found = dict(token_jacobians(model, ids, layer, outputs=[0, 3, TOKENS - 1], chunk_bytes=4 * D * TOKENS * 5))
        assert sorted(found) == [0, 3, TOKENS - 1]
        for t2, J in found.items():
            assert J.shape == (t2 + 1, D, D)
            for t1 in {0, t2 // 2, t2}:
                assert rel_err(J[t1], reference(model, ids, layer, t1, t2)) <= 1e-5, (layer, t1, t2)


@pytest.mark.parametrize("family", ["llama", "bloom"])
def test_a_later_token_has_no_effect(family):
    model, ids = build(family)
    call = block_calls(model, adapter_for(model).blocks(model), ids, layers=[1])[1]
    with torch.enable_grad():
        X = call.hidden.clone().requires_grad_(True)
        grads = _sweep((call(X) - X)[2], X, 1 << 20, 1 << 12)  # (d, T, d), 256 rows per chunk
    assert torch.count_nonzero(grads[:, 3:]) == 0  # exact zeros, not small numbers
    assert torch.count_nonzero(reference(model, ids, 1, 4, 2)) == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_last_token_jacobians_from_the_cache_equal_the_whole_sequence_and_the_released_method(family):
    model, ids = build(family)
    cached = dict(last_token_jacobians(model, ids, chunk_bytes=4 * D * 7))
    released = dict(released_last_token_jacobians(model, ids))
    assert sorted(cached) == sorted(released) == list(range(LAYERS))
    for layer in range(LAYERS):
        whole = dict(token_jacobians(model, ids, layer, outputs=[TOKENS - 1]))[TOKENS - 1][-1]
        assert rel_err(cached[layer], whole) <= 1e-5 and rel_err(released[layer], whole) <= 1e-5
        # the branch is the whole block minus the identity
        block = reference(model, ids, layer, TOKENS - 1, TOKENS - 1, branch=False)
        assert rel_err(cached[layer] + torch.eye(D), block) <= 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_the_last_blocks_jacobian_with_the_final_norm_is_autograd_of_the_models_output(family):
    """Paper 002's eq. 7: the final norm closes the last block; earlier blocks are unchanged."""
    model, ids = build(family)
    last = LAYERS - 1
    normed = dict(last_token_jacobians(model, ids, final_norm=True, chunk_bytes=4 * D * 7))
    raw = dict(last_token_jacobians(model, ids, layers=[last]))[last]
    expected = reference(model, ids, last, TOKENS - 1, TOKENS - 1, final_norm=True)
    assert rel_err(normed[last], expected) <= 1e-5 and rel_err(raw, expected) > 1e-2
    assert rel_err(normed[0], dict(last_token_jacobians(model, ids, layers=[0]))[0]) <= 1e-6
    token_wise = dict(token_jacobians(model, ids, last, outputs=[3], final_norm=True))[3]
    assert rel_err(token_wise[1], reference(model, ids, last, 1, 3, final_norm=True)) <= 1e-5


# Families whose attention runs through transformers' attention interface and whose block the
# closed form describes: their last-token Jacobian takes the split form (attention through its
# query, new key and new value; the rest in closed form), the others the generic sweep.
GENERIC_SWEEP = {"bloom", "gpt_neo", "stablelm", "mpt", "falcon", "falcon_multi_query", "falcon_sequential"}


def split_jacobians(model, ids):
    from transformers import DynamicCache

    from crosslayer.jacobians.multi_token import _split_jacobian

    cache = DynamicCache(config=model.config)
    blocks = adapter_for(model).blocks(model)
    block_calls(model, blocks, ids[:-1], cache=cache, layers=())
    calls = block_calls(model, blocks, ids[-1:], cache=cache)
    return {layer: _split_jacobian(adapter_for(model), call, 4 * D * 7) for layer, call in sorted(calls.items())}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("repeats", [1, 2])
def test_the_split_form_is_taken_where_it_applies_and_equals_autograd(family, repeats):
    # heads x tokens below d (each logit's gradient, then a product) and above (W_o's rows at once)
    model, ids = build(family)
    ids = ids * repeats
    for layer, J in split_jacobians(model, ids).items():
        if family in GENERIC_SWEEP:
            assert J is None
        else:
            assert J is not None, layer
            assert rel_err(J, reference(model, ids, layer, len(ids) - 1, len(ids) - 1)) <= 1e-5, layer


def test_the_split_form_follows_a_soft_cap_on_the_scores():
    from tiny_families import CONFIGS

    config = CONFIGS["gemma2"]()
    config.attn_logit_softcapping, config._attn_implementation = 0.3, "eager"  # saturates tanh
    torch.manual_seed(0)
    model = T.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    ids = build("gemma2")[1]
    found = split_jacobians(model, ids)
    attention = [block.self_attn for block in model.model.layers]
    for module in attention:  # the same blocks without the cap: other Jacobians
        module.attn_logit_softcapping = None
    uncapped = split_jacobians(model, ids)
    for module in attention:
        module.attn_logit_softcapping = 0.3
    for layer, J in found.items():
        ref = reference(model, ids, layer, TOKENS - 1, TOKENS - 1)
        assert rel_err(J, ref) <= 1e-5 and rel_err(uncapped[layer], ref) > 1e-4, layer  # 10x the tolerance


def test_prepared_constants_are_kept_within_their_budget(monkeypatch):
    import crosslayer.jacobians.multi_token as tj

    model, ids = build("llama")
    blocks = model.model.layers
    split_jacobians(model, ids)
    assert all(block in tj._CONSTANTS for block in blocks)  # 3 x 16 KiB of folded weights
    monkeypatch.setattr(tj, "_CONSTANTS_BYTES", 2 * 4 * 2 * 64 * D)  # two blocks' gate and up
    for block in blocks:
        tj._CONSTANTS.pop(block, None)
    found = split_jacobians(model, ids)
    assert [block in tj._CONSTANTS for block in blocks] == [True, True, False]
    for layer, J in found.items():  # the third, prepared per call, is as exact
        assert rel_err(J, reference(model, ids, layer, TOKENS - 1, TOKENS - 1)) <= 1e-5


def test_the_split_form_sees_weights_changed_after_a_first_call():
    model, ids = build("llama")
    before = split_jacobians(model, ids)[0]
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(1.5)  # in place: the cached constants are stale
    after = split_jacobians(model, ids)[0]
    assert rel_err(after, reference(model, ids, 0, TOKENS - 1, TOKENS - 1)) <= 1e-5 and rel_err(after, before) > 1e-2


def test_a_block_the_closed_form_does_not_describe_falls_back_to_the_generic_sweep():
    model, ids = build("llama")
    model.model.layers[1].mlp.register_forward_hook(lambda module, args, out: 2 * out)
    found = split_jacobians(model, ids)
    assert found[0] is not None and found[1] is None  # the block's own output refutes the parts
    J = dict(last_token_jacobians(model, ids))[1]
    assert rel_err(J, reference(model, ids, 1, TOKENS - 1, TOKENS - 1)) <= 1e-5


def test_one_token_sequences_and_bad_input():
    model, ids = build("llama")
    (layer, J), *_ = last_token_jacobians(model, ids[:1], layers=[0])
    assert layer == 0 and rel_err(J, reference(model, ids[:1], 0, 0, 0)) <= 1e-5
    with pytest.raises(ValueError, match="empty"):
        next(last_token_jacobians(model, []))
    with pytest.raises(ValueError, match=r"must lie in \[0, 6\)"):
        next(token_jacobians(model, ids, 0, outputs=[6]))


def test_a_non_finite_jacobian_names_layer_and_tokens():
    model, ids = build("llama")
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[0, 0] = float("inf")
    with pytest.raises(ValueError, match=r"non-finite Jacobian at layer 1, tokens \(5, 5\)"):
        dict(last_token_jacobians(model, ids))


def test_a_fallback_to_the_generic_sweep_is_logged_once_per_family_and_reason(caplog):
    # fused (SDPA) attention gives the split form no attention call to record: the generic sweep
    # is exact but about 2x slower, which a user sees in the job's log, once, not per prompt
    import crosslayer.jacobians.multi_token as module

    module._FALLBACKS_SAID.clear()
    model, ids = build("llama")
    fused = tiny_model("llama", eager=False)
    fused.load_state_dict(model.state_dict())
    with caplog.at_level("WARNING", logger="crosslayer.jacobians.multi_token"):
        fallback = dict(last_token_jacobians(fused, ids))
        dict(last_token_jacobians(fused, ids[:-1]))
    said = [r.getMessage() for r in caplog.records if "split Jacobian does not apply" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("llama layer 0:") and "generic sweep" in said[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crosslayer.jacobians.multi_token"):
        split = dict(last_token_jacobians(model, ids))
    assert not caplog.records  # the eager model takes the split form
    for layer in split:
        torch.testing.assert_close(fallback[layer], split[layer], rtol=1e-4, atol=1e-5)
