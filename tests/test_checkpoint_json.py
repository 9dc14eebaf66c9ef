"""The JSON files a checkpoint brings are read within a stated size and refused by file name (never
with their content in the message); tokenizer files are parsed when a checkpoint is registered."""

import json

import pytest

from crosslayer.errors import CheckpointError
from crosslayer.files import JSON_LIMIT, check_tokenizer_files, json_limit, read_checkpoint_json
from crosslayer.models.weights import checkpoint_adapter


def test_the_limits_are_stated_and_a_tokenizer_json_may_be_larger():
    assert JSON_LIMIT == 8 * 2**20 and json_limit("config.json") == JSON_LIMIT
    assert json_limit("tokenizer.json") == 64 * 2**20  # Gemma 3's is 33 MB


def test_a_huge_config_json_is_refused_by_its_size_before_it_is_parsed(tmp_path):
    # the probe: a 300 MB config.json was accepted, 1.6 GB at planning
    (tmp_path / "config.json").write_bytes(b'{"model_type": "gpt_neox", "pad": "' + b"x" * JSON_LIMIT + b'"}')
    with pytest.raises(CheckpointError, match=r"^model 'm' revision 'step1' file 'config\.json': 8,388,645 bytes, "
                                              r"more than a config\.json has \(8,388,608 at most\)"):
        checkpoint_adapter(tmp_path, model="m", revision="step1")


def test_a_malformed_tokenizer_file_is_named_with_a_short_message(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 64}))
    (tmp_path / "tokenizer.json").write_text('{"model": {"vocab": {' + '"a": 1, ' * 100_000)  # cut short
    with pytest.raises(CheckpointError) as refused:
        check_tokenizer_files(tmp_path, model="m", revision="step1")
    message = str(refused.value)
    assert message.startswith("model 'm' revision 'step1' file 'tokenizer.json': ") and "is not valid JSON" in message
    assert len(message) < 600
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "tokenizer_config.json").write_text("{'single': 'quotes'}")
    with pytest.raises(CheckpointError, match="file 'tokenizer_config.json'"):
        check_tokenizer_files(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("[" * 100_000)  # deeper than Python's parser goes
    with pytest.raises(CheckpointError, match="file 'tokenizer_config.json'"):
        check_tokenizer_files(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("{}")
    check_tokenizer_files(tmp_path)  # parses: passes


def test_a_non_utf8_file_is_refused_as_not_json(tmp_path):
    (tmp_path / "special_tokens_map.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CheckpointError, match="file 'special_tokens_map.json'"):
        check_tokenizer_files(tmp_path)
    (tmp_path / "added_tokens.json").write_text('{"<x>": 5}')
    assert read_checkpoint_json(tmp_path / "added_tokens.json") == {"<x>": 5}
