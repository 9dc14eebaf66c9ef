"""A registered checkpoint as a live transformers model, loaded strictly.

``from_pretrained`` fills any parameter the checkpoint lacks with fresh random values and only
logs a report; a measurement on such a model is a wrong number that looks right. Here every
missing, unexpected or mismatched tensor is a :class:`~crosslayer.errors.CheckpointError`
naming the model, revision, weight file and tensors. transformers' own documented exceptions
still apply: tied weights (an LM head tied to the embeddings is not stored) and the legacy
buffers a family declares ignorable (``attention.bias``, ``rotary_emb.inv_freq``, ...).
"""

import re
from pathlib import Path

import torch

from crosslayer.errors import CheckpointError, shorten
from crosslayer.models.adapters import adapter_for
from crosslayer.models.weights import WEIGHT_FILES, tensor_shapes

__all__ = ["ABLATION_KEY", "TOKENIZER_FILES", "check_tensors", "drop_norms", "load_model", "weight_file"]

ABLATION_KEY = "crosslayer_ablation"
"""config.json key of a model trained without residual connections or norms (paper 003's
controls, :func:`crosslayer.models.train.build_model`): transformers would run it as the standard
architecture its ``model_type`` names, so :func:`load_model` refuses it; weight-only analyses
read it."""

#: A checkpoint has a tokenizer when it holds one of these (fast, sentencepiece, BPE or WordPiece).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")
_SHOWN = 5  # tensor names listed in a message


def weight_file(path):
    """The checkpoint's weight file (or shard index) as named in errors: the first that exists
    of model.safetensors[.index.json], pytorch_model.bin[.index.json]; else the directory."""
    path = Path(path)
    names = [name for pair in WEIGHT_FILES for name in pair]  # the order the tensor store looks in
    return next((str(path / name) for name in names if (path / name).is_file()), str(path))


def drop_norms(model):
    """Replace a Llama model's RMSNorms (every block's two and the final one) by identities, in place:
    the architecture of paper 003's no-norm control, whose checkpoints hold no norm weights."""
    model.model.norm = torch.nn.Identity()
    for layer in model.model.layers:
        layer.input_layernorm = torch.nn.Identity()
        layer.post_attention_layernorm = torch.nn.Identity()
    return model


def check_tensors(path, *, model=None, revision=None):
    """Refuse a saved checkpoint whose weight files do not hold exactly the tensors of its model.

    The model is built from config.json on the meta device (no memory allocated, no weight read),
    as :func:`load_model` would build it (a causal LM; for an encoder, which only the weight analyses
    read, the class its config.json names, its heads' tensors not required to match), and compared
    with the weight files' headers: every tensor name and shape, under
    transformers' own key renaming, with its documented exceptions (tied weights, legacy buffers a
    family declares ignorable). A checkpoint that passes loads strictly and reads every projection.

    Parameters
    ----------
    path : str or Path
        Directory with ``config.json`` and the weights (safetensors, sharded or not, or ``.bin``).
    model, revision : str, optional
        Named in the error.

    Raises
    ------
    CheckpointError
        Naming the tensors missing from the checkpoint, in it but not in the model, or of another
        shape; or why the model cannot be built from its config.
    """
    from transformers import AutoConfig

    context = {"model": model, "revision": revision}
    try:
        config = AutoConfig.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
        causal = adapter_for(config).causal
        with torch.device("meta"):
            built = _build(config, causal)
    except Exception as err:  # a family without an adapter, a config transformers cannot build
        raise CheckpointError(f"cannot build the model from config.json: {shorten(err)}", **context,
                              file=str(path)) from err
    if not (getattr(config, ABLATION_KEY, None) or {}).get("norm", True):
        drop_norms(built)
    stored = tensor_shapes(path, **context)
    expected = {key: tuple(tensor.shape) for key, tensor in built.state_dict().items()}
    rename, found, unexpected, mismatched = _key_renamer(built, expected), set(), [], []
    for key, shape in stored.items():
        target, converted = rename(key)
        if target not in expected:
            unexpected.append(key)
        elif converted or expected[target] == shape:  # a converter (fused experts, ...) reshapes by design
            found.add(target)
        else:
            mismatched.append((key, shape, expected[target]))
    tied = getattr(built, "all_tied_weights_keys", None) or {}
    missing = [key for key in expected if key not in found and not (key in tied and tied[key] in found)]
    missing = [key for key in missing if not _ignored(key, built._keys_to_ignore_on_load_missing)]
    legacy = {r"rotary_emb\.inv_freq", r"(^|\.)position_ids$", *(built._keys_to_ignore_on_load_unexpected or ())}
    unexpected = [key for key in unexpected if causal and not _ignored(key, legacy)]  # an encoder's heads: unread
    _check_loading_info({"missing_keys": missing, "unexpected_keys": unexpected, "mismatched_keys": mismatched},
                        context=context, file=weight_file(path))


def _build(config, causal):
    """The model :func:`load_model` loads (a causal LM), or for an encoder the class its config.json
    names (e.g. ``BertForMaskedLM``, whose checkpoints have no pooler), else its base model."""
    import transformers

    if causal:
        return transformers.AutoModelForCausalLM.from_config(config)
    named = [getattr(transformers, name, None) for name in getattr(config, "architectures", None) or ()]
    cls = next((cls for cls in named if isinstance(cls, type)), None)
    return cls(config) if cls is not None else transformers.AutoModel.from_config(config)


def _key_renamer(model, expected):
    """``rename(checkpoint key) -> (model key, converted)`` by transformers' own loading rules (legacy
    names, a missing or extra base-model prefix; the same functions in every release from 5.18 on);
    ``converted`` when one of its weight converters (which may fuse or split tensors, so shapes
    differ by design) takes the key."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, rename_source_key

    mapping = get_model_conversion_mapping(model)
    renamings = [m for m in mapping if not isinstance(m, WeightConverter)]
    converters = [m for m in mapping if isinstance(m, WeightConverter)]

    def rename(key):
        target, converter = rename_source_key(key, renamings, converters, model.base_model_prefix, expected)
        return target, converter is not None

    return rename


def _ignored(key, patterns):
    return any(re.search(pattern, key) for pattern in patterns or ())


def load_model(manifest, *, device="cpu", tokenizer=True):
    """The checkpoint a manifest describes, as a float32 transformers model in eval mode, and
    its tokenizer.

    Parameters
    ----------
    manifest : dict
        From :func:`crosslayer.models.checkpoints.verified_manifest` (``path``, ``model``, ``revision``).
    device : str, default="cpu"
    tokenizer : bool, default=True
        Also load the tokenizer; False returns None in its place.

    Returns
    -------
    model : transformers.PreTrainedModel
    tokenizer : transformers tokenizer or None
        None when `tokenizer` is False or the checkpoint holds none of :data:`TOKENIZER_FILES`.

    Raises
    ------
    CheckpointError
        The checkpoint cannot be loaded; a parameter is missing from it, unexpected in it or of
        another shape; its family has no adapter; or its tokenizer files cannot be read.
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    path, context = manifest["path"], {"model": manifest["model"], "revision": manifest.get("revision")}
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=False, local_files_only=True)
        if not adapter_for(config).causal:  # before any weight is read, as is a family without an adapter
            raise NotImplementedError(
                f"{config.model_type} has no causal residual stream: only the weight analyses (alignment, "
                f"continuity) read it; set models.{manifest['model']}.analyses: [alignment, continuity]")
        _refuse_ablated(config)
        model, info = AutoModelForCausalLM.from_pretrained(  # mismatched sizes reported, not raised, to name them
            path, config=config, dtype=torch.float32, trust_remote_code=False, output_loading_info=True,
            ignore_mismatched_sizes=True, device_map=_device_map(device))
    except (NotImplementedError, _Ablated) as err:
        raise CheckpointError(str(err), **context, file=path) from err
    except Exception as err:  # unsupported or broken checkpoint: say which
        raise CheckpointError(f"cannot load the model: {shorten(err)}", **context, file=path) from err
    _check_loading_info(info, context=context, file=weight_file(path))
    return model.to(device).eval(), (_load_tokenizer(path, context) if tokenizer else None)


def _device_map(device):
    # A GPU job's weights go straight to the GPU (transformers places them through accelerate), not
    # through a CPU copy first: at 8B that copy is 32 GB of host memory. The CPU path stays as it was.
    return None if torch.device(device).type == "cpu" else device


class _Ablated(Exception):
    pass


def _refuse_ablated(config):
    # Run as the standard architecture its model_type names, every activation and Jacobian of such
    # a model would be silently wrong.
    ablation = getattr(config, ABLATION_KEY, None)
    if ablation:
        dropped = [part for part in ("residual", "norm") if not ablation.get(part, True)]
        raise _Ablated(
            f"the checkpoint was trained without {' and '.join(dropped)} ({ABLATION_KEY} in config.json); "
            "transformers would run it as a standard model, so only weight analyses (continuity) read it")


def _check_loading_info(info, *, context, file):
    problems = []
    for key, what in (("missing_keys", "missing from the checkpoint (transformers would fill them with random "
                                       "values)"),
                      ("unexpected_keys", "in the checkpoint but not in the model (another architecture or "
                                          "config?)"),
                      ("mismatched_keys", "of another shape than the model's (checkpoint vs model)")):
        # mismatched entries are (name, checkpoint shape, model shape)
        names = sorted(f"'{k}'" if isinstance(k, str) else f"'{k[0]}' {tuple(k[1])} vs {tuple(k[2])}"
                       for k in info.get(key, ()))
        if names:
            shown = ", ".join(names[:_SHOWN])
            more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
            problems.append(f"{len(names)} tensor(s) {what}: {shown}{more}")
    problems += [str(msg) for msg in info.get("error_msgs", ())]
    if problems:
        raise CheckpointError("; ".join(problems) + ". Re-save or re-download the checkpoint.", **context,
                              file=file)


def _load_tokenizer(path, context):
    from transformers import AutoTokenizer

    if not any((Path(path) / name).is_file() for name in TOKENIZER_FILES):
        return None
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False, local_files_only=True)
    except Exception as err:
        raise CheckpointError(f"cannot load the tokenizer: {shorten(err)}", **context, file=path) from err
    if len(tokenizer) == 0:
        raise CheckpointError("the tokenizer has an empty vocabulary", **context, file=path)
    return tokenizer
