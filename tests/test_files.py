"""A checkpoint folder's files (crosslayer.files.checkpoint_files): links followed as a hub cache
needs them, folder links that loop refused, naming the link."""

import os

import pytest

from crosslayer.errors import CheckpointError
from crosslayer.files import checkpoint_files


@pytest.fixture
def folder(tmp_path):
    checkpoint = tmp_path / "ckpt"
    (checkpoint / "sub").mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "sub" / "model.safetensors").write_bytes(b"x")
    return checkpoint


@pytest.mark.parametrize("links", [{"a": "."}, {"a": ".", "b": "."}, {"sub/up": ".."}, {"up": "../.."}])
def test_a_folder_link_that_loops_is_refused_naming_it(folder, links):
    for name, target in links.items():
        os.symlink(target, folder / name)
    named = "|".join(links)  # whichever the walk meets first
    with pytest.raises(CheckpointError, match=rf"{folder}/({named}) links to [./]+, a folder the checkpoint"):
        checkpoint_files(folder)


def test_links_out_of_the_folder_are_followed_once(folder, tmp_path):
    # a hub snapshot links its files to blobs/; a folder may link to weights kept elsewhere
    elsewhere = tmp_path / "weights"
    elsewhere.mkdir()
    (elsewhere / "model-00001.safetensors").write_bytes(b"y")
    os.symlink(elsewhere / "model-00001.safetensors", folder / "linked.safetensors")
    os.symlink(elsewhere, folder / "shards")
    assert [name for name, _ in checkpoint_files(folder)] == [
        "config.json", "linked.safetensors", "shards/model-00001.safetensors", "sub/model.safetensors"]
    os.symlink(elsewhere, folder / "again")  # the same folder under a second name: its files twice
    with pytest.raises(CheckpointError, match="links to .*weights, a folder the checkpoint"):
        checkpoint_files(folder)
