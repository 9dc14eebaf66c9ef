"""Read each layer's projection matrices straight from a saved checkpoint, without building the model.

Tensors are read one at a time from memory-mapped safetensors (sharded or not; ``pytorch_model.bin``
as a fallback) and sliced by the family's adapter (:mod:`crosslayer.models.adapters`) into the
canonical form of :mod:`crosslayer.models.adapters.base`, so callers never branch on the family.

Example
-------
>>> with open_checkpoint("checkpoints/pythia-70m/step1000") as reader:  # doctest: +SKIP
...     w = reader.projections(3, names=("q", "k"))
...     up, down = reader.mlp(3)
"""

import logging
from pathlib import Path

import torch

from crosslayer.errors import CheckpointError, shorten
from crosslayer.files import read_checkpoint_json
from crosslayer.models.adapters import ADAPTERS, SUPPORTED_MODEL_TYPES, adapter_for
from crosslayer.models.adapters.base import PROJECTIONS, FamilyAdapter, Geometry
from crosslayer.models.adapters.generic import GenericAdapter

log = logging.getLogger(__name__)

__all__ = ["WEIGHT_FILES", "WeightReader", "checkpoint_adapter", "open_checkpoint", "read_geometry", "tensor_shapes"]

#: (shard index, single file) per weight format, in the order they are looked for.
WEIGHT_FILES = (("model.safetensors.index.json", "model.safetensors"),
                ("pytorch_model.bin.index.json", "pytorch_model.bin"))


# --------------------------------------------------------------------------- storage


class _TensorStore:
    """Tensors by full key across one file or shards, opened lazily, never all loaded.

    Safetensors shards are read with ``safe_open`` (memory-mapped, one tensor per
    ``get_tensor``); ``.bin`` shards with ``torch.load(mmap=True)`` so that only the
    pages of requested tensors are touched.
    """

    def __init__(self, directory, *, context):
        self.directory, self.context = Path(directory), context
        self._open: dict[str, object] = {}
        for index, single in WEIGHT_FILES:
            if (self.directory / index).is_file():
                self.source = index  # named in "not found" errors
                try:
                    weight_map = dict(read_checkpoint_json(self.directory / index, **context)["weight_map"])
                except (TypeError, ValueError, KeyError) as e:
                    raise CheckpointError(f"unreadable shard index: no weight_map ({type(e).__name__})", **context,
                                          file=index) from None
                self.file_of = dict(weight_map)
                return
            if (self.directory / single).is_file():
                self.source = single
                self.file_of = dict.fromkeys(self._handle(single).keys(), single)
                return
        raise CheckpointError(
            "no weight files found (looked for model.safetensors[.index.json] and "
            f"pytorch_model.bin[.index.json] in {self.directory}){_gguf_hint(self.directory)}", **context)

    def _handle(self, name):
        if name not in self._open:
            path = self.directory / name
            try:
                if name.endswith(".safetensors"):
                    from safetensors import safe_open

                    self._open[name] = safe_open(str(path), framework="pt", device="cpu")
                else:
                    self._open[name] = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except Exception as e:  # corrupt or missing shard: say which one
                raise CheckpointError(f"cannot open weight file: {e}", **self.context, file=name) from e
        return self._open[name]

    def keys(self):
        return self.file_of.keys()

    def _locate(self, key):
        name = self.file_of.get(key)
        handle = self._handle(name) if name is not None else None
        if handle is None or key not in handle.keys():
            raise CheckpointError(f"tensor '{key}' not found", **self.context, file=name or self.source)
        return name, handle

    def shape(self, key) -> tuple[int, ...]:
        name, handle = self._locate(key)
        if name.endswith(".safetensors"):
            return tuple(handle.get_slice(key).get_shape())  # header only, no data read
        return tuple(handle[key].shape)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor's shape, from each weight file's header (safetensors) or its memory map
        (``.bin``): no tensor data read. A tensor a shard index names but its shard lacks, or a
        shard that cannot be opened, is a :class:`CheckpointError` naming the file."""
        shapes = {}
        for name in sorted(set(self.file_of.values())):
            handle = self._handle(name)
            keys = set(handle.keys())
            absent = sorted(k for k, f in self.file_of.items() if f == name and k not in keys)
            if absent:
                raise CheckpointError(f"tensor '{absent[0]}' is listed in {self.source} but not stored in {name}"
                                      f" ({len(absent)} such)", **self.context, file=name)
            for key in keys:
                shapes[key] = (tuple(handle.get_slice(key).get_shape()) if name.endswith(".safetensors")
                               else tuple(handle[key].shape))
        return shapes

    def get(self, key) -> torch.Tensor:
        """Load one tensor as float32 (fp16/bf16 converted after loading just it)."""
        name, handle = self._locate(key)
        tensor = handle.get_tensor(key) if name.endswith(".safetensors") else handle[key]
        return tensor.to(torch.float32)

    def close(self):
        for handle in self._open.values():
            if hasattr(handle, "__exit__"):
                handle.__exit__(None, None, None)
        self._open.clear()


def _discover_prefix(keys, adapter, context):
    """The key prefix in front of the layer stem, e.g. ``"gpt_neox."`` or ``""``.

    Hub checkpoints differ: the original ``gpt2`` and ``bigscience/bloom-*`` files
    drop ``transformer.``, head models add ``bert.``. So look for any layer-0 key.
    """
    stem = adapter.layer_key.format(layer=0)
    suffixes = {f"{stem}.{s.key}" for s in adapter.sources().values()}
    prefixes = {k[: -len(s)] for k in keys for s in suffixes if k == s or k.endswith("." + s)}
    if adapter.prefix_filter is not None:
        prefixes = {p for p in prefixes if adapter.prefix_filter in p}
    if len(prefixes) == 1:
        return prefixes.pop()
    if not prefixes:
        raise CheckpointError(
            f"no layer-0 tensor of a {adapter.model_type} checkpoint found "
            f"(looked for keys ending in {sorted(suffixes)[0]!r} and similar)", **context)
    raise CheckpointError(f"ambiguous key prefixes {sorted(prefixes)} for layer tensors", **context)


# --------------------------------------------------------------------------- reader


class WeightReader:
    """Per-layer canonical projections of one saved checkpoint; a context manager.

    Use :func:`open_checkpoint` to create one. Only the tensors of the requested
    layer and projections are loaded, and none are kept between calls.

    Parameters
    ----------
    path : str or Path
        Directory with ``config.json`` and the weight file(s).
    model, revision : str, optional
        Named in error messages.

    Attributes
    ----------
    geometry : Geometry
    """

    def __init__(self, path, *, model=None, revision=None):
        self.path = Path(path)
        self._context = {"model": model, "revision": revision}
        self.adapter = _adapter(_read_config(self.path, self._context), self._context)
        self.geometry = self.adapter.geometry
        self._store = _TensorStore(self.path, context=self._context)
        if isinstance(self.adapter, GenericAdapter):
            try:
                missing = self.adapter.bind_keys(self._store.keys())
            except NotImplementedError as e:
                self._store.close()
                raise CheckpointError(str(e), **self._context, file=self._store.source) from None
            if missing:
                log.warning("%s (no adapter): no tensors under the standard names for %s; reported absent",
                            self.adapter.model_type, ", ".join(missing))
        try:
            self._prefix = _discover_prefix(self._store.keys(), self.adapter, self._context)
        except CheckpointError as e:
            self._store.close()
            raise e.with_context(file=self._store.source) from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Release the memory-mapped files."""
        self._store.close()

    def __repr__(self):
        return f"WeightReader({str(self.path)!r}, {self.geometry})"

    def projections(self, layer, names=PROJECTIONS) -> dict[str, torch.Tensor]:
        """Canonical projection matrices of one layer.

        Parameters
        ----------
        layer : int
            Block index, ``0 <= layer < geometry.n_layers``.
        names : iterable of str
            Subset of ``("q", "k", "v", "o", "gate", "up", "down")``. ``"gate"``
            is silently left out for non-gated MLPs.

        Returns
        -------
        dict of str to torch.Tensor
            float32 CPU tensors in ``(out, in)`` layout: ``q`` ``(n_heads*head_dim, d)``,
            ``k``/``v`` ``(n_kv_heads*head_dim, d)``, ``o`` ``(d, n_heads*head_dim)``,
            ``gate``/``up`` ``(d_ff, d)``, ``down`` ``(d, d_ff)``.

        Raises
        ------
        CheckpointError
            A tensor is missing, has an unexpected shape, or holds NaN/Inf.
        """
        names = tuple(names)
        unknown = set(names) - set(PROJECTIONS)
        if unknown:
            raise ValueError(f"unknown projection(s) {sorted(unknown)}; choose from {PROJECTIONS}")
        if not 0 <= layer < self.geometry.n_layers:
            raise IndexError(f"layer {layer} out of range for {self.geometry.n_layers} layers")
        stem = self._prefix + self.adapter.layer_key.format(layer=layer)
        sources = self.adapter.layer_sources(layer)
        loaded = {}  # fused QKV is read once even when q, k and v are all asked for
        out = {}
        for name in names:
            if name not in sources:
                continue  # "gate" of a non-gated MLP; Gemma 4's KV-shared layers have no k, v
            source = sources[name]
            key = f"{stem}.{source.key}"
            if key not in loaded:
                loaded[key] = self._load(key, source.shape)
            matrix = source.take(loaded[key]).contiguous()
            if not torch.isfinite(matrix).all():
                bad = int((~torch.isfinite(matrix)).sum())
                raise CheckpointError(
                    f"layer {layer} projection '{name}' (tensor '{key}') has {bad} non-finite "
                    "value(s) (NaN/Inf)", **self._context, file=self._store.file_of.get(key))
            out[name] = matrix
        return out

    def mlp(self, layer) -> tuple[torch.Tensor, torch.Tensor]:
        """``(up, down)`` of one layer, shapes ``(d_ff, d)`` and ``(d, d_ff)``."""
        w = self.projections(layer, names=("up", "down"))
        if len(w) < 2:
            raise CheckpointError(f"no MLP {' and '.join(n for n in ('up', 'down') if n not in w)} projection "
                                  f"under the names this family is read by", **self._context, file=self._store.source)
        return w["up"], w["down"]

    def _load(self, key, expected):
        actual = self._store.shape(key)
        if actual != expected:
            raise CheckpointError(
                f"tensor '{key}' has shape {actual}, expected {expected}",
                **self._context, file=self._store.file_of.get(key))
        return self._store.get(key)


def _gguf_hint(path):
    """How to convert a GGUF-only checkpoint directory, or "" when it holds no GGUF file."""
    ggufs = sorted(p.name for p in Path(path).glob("*.gguf"))
    if not ggufs:
        return ""
    return (f"; it holds GGUF ({', '.join(ggufs[:3])}), which is read only as safetensors: convert it once with "
            f"transformers, AutoModelForCausalLM.from_pretrained(dir, gguf_file={ggufs[0]!r}, "
            "dtype=torch.float32).save_pretrained(new_dir), plus the tokenizer, and point the model at new_dir "
            "(quantized GGUF weights are dequantized, so the numbers describe the quantized model)")


def _read_config(path, context):
    """The checkpoint's transformers config (defaults filled in, no remote code)."""
    config_file = path / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"config.json missing in {path}{_gguf_hint(path)}", **context)
    raw = read_checkpoint_json(config_file, **context)  # bounded: a 300 MB config.json took 1.6 GB
    if not isinstance(raw, dict):
        raise CheckpointError(f"{config_file} holds no JSON object", **context, file="config.json")
    model_type = raw.get("model_type")
    from transformers import AutoConfig  # imported late: slow, and only needed here
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if model_type not in ADAPTERS and model_type not in CONFIG_MAPPING_NAMES:
        remote = (f"; its config.json points to custom code (auto_map: {sorted(raw['auto_map'])}), which this "
                  "workflow never runs (trust_remote_code is off): use a checkpoint of a transformers architecture "
                  "(many hub repos of such models have one, often under another revision or repo)"
                  if raw.get("auto_map") else "")
        raise CheckpointError(
            f"unsupported model_type '{model_type}': no adapter (supported: {', '.join(SUPPORTED_MODEL_TYPES)}) and "
            f"unknown to the installed transformers{remote}", **context, file="config.json")
    try:
        return AutoConfig.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
    except Exception as e:
        raise CheckpointError(f"cannot parse config: {shorten(e)}", **context, file="config.json") from e


def _adapter(config, context):
    """The family adapter of a checkpoint's config; a variant it does not support is named."""
    try:
        return adapter_for(config)
    except NotImplementedError as e:
        raise CheckpointError(str(e), **context, file="config.json") from None


def checkpoint_adapter(path, *, model=None, revision=None) -> FamilyAdapter:
    """The family adapter of a saved checkpoint, from its config.json alone (no weights read).

    Raises
    ------
    CheckpointError
        config.json missing or unreadable, or a family neither adapted nor generic.
    """
    context = {"model": model, "revision": revision}
    return _adapter(_read_config(Path(path), context), context)


def tensor_shapes(path, *, model=None, revision=None) -> dict[str, tuple[int, ...]]:
    """Every tensor a saved checkpoint's weight files hold, by key, with its shape; read from the
    files' headers, no tensor data loaded (see ``_TensorStore.shapes``).

    Raises
    ------
    CheckpointError
        No weight files, an unreadable shard index or shard, or a tensor the index lists that its
        shard lacks.
    """
    store = _TensorStore(Path(path), context={"model": model, "revision": revision})
    try:
        return store.shapes()
    finally:
        store.close()


def read_geometry(path, *, model=None, revision=None) -> Geometry:
    """The :class:`Geometry` of a saved checkpoint, from its config.json alone (no weights read).

    Raises
    ------
    CheckpointError
        config.json missing or unreadable, or ``model_type`` not in ``SUPPORTED_MODEL_TYPES``.
    """
    return checkpoint_adapter(path, model=model, revision=revision).geometry


def open_checkpoint(path, *, model=None, revision=None) -> WeightReader:
    """Open a saved checkpoint directory for per-layer reading.

    Parameters
    ----------
    path : str or Path
        Directory with ``config.json`` and ``model.safetensors`` (or its sharded
        index), falling back to ``pytorch_model.bin`` (or its index).
    model, revision : str, optional
        Named in every error message.

    Returns
    -------
    WeightReader
        Use as a context manager, or call ``close()``.

    Raises
    ------
    CheckpointError
        config.json missing, ``model_type`` not in ``SUPPORTED_MODEL_TYPES``, or no
        weight files.
    """
    return WeightReader(path, model=model, revision=revision)
