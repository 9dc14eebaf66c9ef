"""Model families: one module per family, each a :class:`~crosslayer.models.adapters.base.FamilyAdapter`;
this registry maps a config's ``model_type`` to its adapter, with the generic path for a causal decoder
no adapter describes (:mod:`crosslayer.models.adapters.generic`). Adding a family: docs/adding_a_family.md.
"""



from crosslayer.models.adapters.base import FamilyAdapter
from crosslayer.models.adapters.bert import BertAdapter
from crosslayer.models.adapters.bloom import BloomAdapter
from crosslayer.models.adapters.exaone4 import Exaone4Adapter
from crosslayer.models.adapters.falcon import FalconAdapter
from crosslayer.models.adapters.gemma import GemmaAdapter
from crosslayer.models.adapters.gemma2 import Gemma2Adapter
from crosslayer.models.adapters.gemma3 import Gemma3Adapter, Gemma3TextAdapter
from crosslayer.models.adapters.gemma4 import Gemma4Adapter, Gemma4TextAdapter
from crosslayer.models.adapters.generic import REFUSED, GenericAdapter
from crosslayer.models.adapters.gpt2 import GPT2Adapter
from crosslayer.models.adapters.gpt_neo import GPTNeoAdapter
from crosslayer.models.adapters.gpt_neox import GPTNeoXAdapter
from crosslayer.models.adapters.llama import LlamaAdapter
from crosslayer.models.adapters.mistral import MistralAdapter
from crosslayer.models.adapters.mpt import MptAdapter
from crosslayer.models.adapters.olmo2 import Olmo2Adapter
from crosslayer.models.adapters.olmo3 import Olmo3Adapter
from crosslayer.models.adapters.phi import PhiAdapter
from crosslayer.models.adapters.phi3 import Phi3Adapter
from crosslayer.models.adapters.qwen2 import Qwen2Adapter
from crosslayer.models.adapters.qwen3 import Qwen3Adapter

__all__ = ["SUPPORTED_MODEL_TYPES", "adapter_for"]


ADAPTERS: dict[str, type[FamilyAdapter]] = {
    a.model_type: a
    for a in (GPTNeoXAdapter, LlamaAdapter, Olmo2Adapter, Olmo3Adapter, BloomAdapter, GPT2Adapter, MistralAdapter,
              Qwen2Adapter, Qwen3Adapter, Phi3Adapter, Exaone4Adapter, GemmaAdapter, Gemma2Adapter, Gemma3TextAdapter,
              Gemma3Adapter, Gemma4TextAdapter, Gemma4Adapter, PhiAdapter,
              GPTNeoAdapter, MptAdapter, FalconAdapter, BertAdapter)
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(ADAPTERS)


def adapter_for(model_or_config) -> FamilyAdapter:
    """The :class:`FamilyAdapter` of a loaded transformers model or of its config.

    A causal decoder transformers knows but no adapter describes gets the
    :class:`GenericAdapter`.

    Raises
    ------
    NotImplementedError
        ``model_type`` is neither in ``SUPPORTED_MODEL_TYPES`` nor a transformers causal decoder.
    """
    config = getattr(model_or_config, "config", model_or_config)
    model_type = getattr(config, "model_type", None)
    if model_type in ADAPTERS:
        return ADAPTERS[model_type](config)
    if model_type in REFUSED:
        raise NotImplementedError(f"{model_type}: {REFUSED[model_type]}")
    if model_type is not None and GenericAdapter.accepts(config):
        return GenericAdapter(config)
    raise NotImplementedError(
        f"unsupported model_type '{model_type}': no adapter (supported: {', '.join(SUPPORTED_MODEL_TYPES)}) and "
        "not a transformers causal decoder the generic path can run")
