"""A checkpoint's own code (config.json's or tokenizer_config.json's ``auto_map``) never runs, through
any entry point of the library that reads a checkpoint: each passes ``trust_remote_code=False``, so
transformers neither imports the file nor asks at a prompt (the twin builder once did, then ran it)."""

import json

import pytest
import transformers as T

from crosslayer.errors import CheckpointError
from crosslayer.models.loading import check_tensors, load_model
from crosslayer.models.untrained import build_untrained
from crosslayer.models.weights import checkpoint_adapter

CODE = """import pathlib
pathlib.Path({marker!r}).write_text("ran")
from transformers import GPTNeoXConfig, PreTrainedTokenizerFast


class EvilConfig(GPTNeoXConfig):
    model_type = "evil_neox"


class EvilTokenizer(PreTrainedTokenizerFast):
    pass
"""


def checkpoint_with_code(path, *, known_type):
    """A tiny GPT-NeoX whose config.json and tokenizer_config.json point at code beside them that
    leaves a marker file when imported; its model_type the real one (transformers has local code)
    or one only the code defines."""
    from tokenizers import Tokenizer, models

    config = T.GPTNeoXConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                             vocab_size=20)
    T.GPTNeoXForCausalLM(config).save_pretrained(path)
    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    T.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(path)
    marker = path / "code_ran"
    for name in ("configuration_evil.py", "tokenization_evil.py", "modeling_evil.py"):
        (path / name).write_text(CODE.format(marker=str(marker)))
    raw = json.loads((path / "config.json").read_text())
    raw["auto_map"] = {"AutoConfig": "configuration_evil.EvilConfig",
                       "AutoModelForCausalLM": "modeling_evil.EvilModel"}
    if not known_type:
        raw["model_type"] = "evil_neox"
    (path / "config.json").write_text(json.dumps(raw))
    tok = json.loads((path / "tokenizer_config.json").read_text())
    tok["auto_map"] = {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", "tokenization_evil.EvilTokenizer"]}
    (path / "tokenizer_config.json").write_text(json.dumps(tok))
    return path, marker


def entry_points(path, tmp_path):
    manifest = {"model": "m", "revision": "step1", "path": str(path)}
    return {
        "checkpoint_adapter": lambda: checkpoint_adapter(path, model="m"),
        "check_tensors": lambda: check_tensors(path, model="m"),
        "load_model": lambda: load_model(manifest),
        "build_untrained": lambda: build_untrained(path, tmp_path / "twin", seed=0, model="m"),
    }


@pytest.mark.parametrize("known_type", [True, False], ids=["gpt_neox with auto_map", "model_type only its code knows"])
@pytest.mark.parametrize("entry", ["checkpoint_adapter", "check_tensors", "load_model", "build_untrained"])
def test_a_checkpoints_own_code_never_runs(tmp_path, monkeypatch, known_type, entry):
    path, marker = checkpoint_with_code(tmp_path / "ckpt", known_type=known_type)
    monkeypatch.syspath_prepend(str(path))  # even importable from here, it must not be imported
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("transformers asked whether to run the code"))
    call = entry_points(path, tmp_path)[entry]
    if known_type:  # transformers' own GPT-NeoX code runs it; the tokenizer is the saved fast one
        result = call()
        if entry == "load_model":
            assert type(result[1]).__name__ == "PreTrainedTokenizerFast" or "Tokenizers" in type(result[1]).__name__
    else:
        with pytest.raises((CheckpointError, ValueError)):
            call()
    assert not marker.exists(), f"{entry} ran the checkpoint's code"
