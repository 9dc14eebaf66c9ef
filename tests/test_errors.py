"""crosslayer.errors: the one place a refusal gets the checkpoint's name."""

import pytest

from crosslayer.errors import CheckpointError, naming_checkpoint

MANIFEST = {"model": "m", "revision": "step7", "path": "/ckpt/m/step7", "step": 7}


@pytest.mark.parametrize("error", [ValueError, NotImplementedError])
def test_a_refusal_inside_names_model_revision_and_checkpoint(error):
    with pytest.raises(CheckpointError, match=r"^model 'm' revision 'step7' file '/ckpt/m/step7': layer 3 is NaN$") \
            as caught:
        with naming_checkpoint(MANIFEST):
            raise error("layer 3 is NaN")
    assert isinstance(caught.value.__cause__, error)
    assert (caught.value.model, caught.value.revision, caught.value.file) == ("m", "step7", "/ckpt/m/step7")


def test_file_names_the_input_instead_of_the_checkpoint():
    with pytest.raises(CheckpointError, match=r"^model 'm' revision 'step7' file 'texts.jsonl': too few$"):
        with naming_checkpoint(MANIFEST, file="texts.jsonl"):
            raise ValueError("too few")


def test_a_manifest_without_revision_names_model_and_file():
    with pytest.raises(CheckpointError, match=r"^model 'm' file 'ckpt': bad$"):
        with naming_checkpoint({"model": "m", "path": "ckpt"}):
            raise ValueError("bad")


def test_a_bare_checkpoint_error_is_named_and_a_named_one_passes_unchanged():
    with pytest.raises(CheckpointError, match=r"^model 'm' revision 'step7' file '/ckpt/m/step7': no tokenizer$"):
        with naming_checkpoint(MANIFEST):
            raise CheckpointError("no tokenizer")
    named = CheckpointError("tensor 'w' not found", model="m", revision="step7", file="model.safetensors")
    with pytest.raises(CheckpointError) as caught:
        with naming_checkpoint(MANIFEST):
            raise named
    assert caught.value is named


@pytest.mark.parametrize("error", [KeyError, RuntimeError, FileNotFoundError])
def test_other_errors_pass_through(error):
    with pytest.raises(error):
        with naming_checkpoint(MANIFEST):
            raise error("x")


def test_nothing_raised_nothing_changed():
    with naming_checkpoint(MANIFEST):
        value = 1
    assert value == 1
