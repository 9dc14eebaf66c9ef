"""Block calls (crosslayer.models.blocks) continue a cached context under the installed transformers'
name of the cache argument."""

import pytest
import transformers as T
from tiny_families import LAYERS
from token_reference import FAMILIES, build

from crosslayer.models.adapters import adapter_for
from crosslayer.models.blocks import block_calls


@pytest.mark.parametrize("family", FAMILIES)
def test_block_calls_pass_the_cache_as_the_installed_transformers_names_it(family):
    # transformers 5.2x renamed the models' past_key_values argument `cache` (the old name warns
    # until it goes in 5.40): the recording must continue a cached context under either name
    import warnings

    model, ids = build(family)
    cache = T.DynamicCache(config=model.config)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*past_key_values.*", category=FutureWarning)
        blocks = adapter_for(model).blocks(model)
        block_calls(model, blocks, ids[:-1], cache=cache, layers=())
        calls = block_calls(model, blocks, ids[-1:], cache=cache)
    assert sorted(calls) == list(range(LAYERS))
    assert cache.get_seq_length() == len(ids)  # the last token continued the context, not a new sequence
