"""Untrained twins: the family's own initialisation from a checkpoint's config.json, real
safetensors on disk, the hub path resolved offline through huggingface_hub, and a failed save that
leaves no temporary directory."""

import errno
import hashlib

import pytest
import torch
import transformers as T
from hub_cache import REPO, lay_out_cache
from tiny_families import tiny_model

from crosslayer.errors import CheckpointError
from crosslayer.models.checkpoints import download_checkpoint
from crosslayer.models.untrained import build_untrained


def digest(path):
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.parametrize("family", ["llama", "gpt_neox", "gpt2", "gemma2"])
def test_a_twin_is_the_familys_fresh_initialisation_and_its_seed_fixes_the_bytes(tmp_path, family):
    trained = tiny_model(family, seed=5, eager=False)
    with torch.no_grad():  # "trained": weights far from any initialisation
        for p in trained.parameters():
            p.mul_(3.0).add_(0.5)
    trained.save_pretrained(tmp_path / "trained")
    twin = build_untrained(tmp_path / "trained", tmp_path / "twin", seed=1)
    again = build_untrained(tmp_path / "trained", tmp_path / "again", seed=1)
    other = build_untrained(tmp_path / "trained", tmp_path / "other", seed=2)
    assert digest(twin) == digest(again) != digest(other)
    # read back by transformers (which maps stored names such as GPT-NeoX's embed_out to its modules')
    weights, other_weights = (T.AutoModelForCausalLM.from_pretrained(path).state_dict() for path in (twin, other))
    fresh = tiny_model(family, seed=1, eager=False).state_dict()  # torch.manual_seed, then from_config
    for name, tensor in weights.items():
        assert torch.equal(tensor, fresh[name]), name
        if tensor.numel() >= 512 and tensor.std() > 0:  # another seed: the same distribution per tensor
            assert other_weights[name].std().item() == pytest.approx(tensor.std().item(), rel=0.15), name
            assert not torch.equal(other_weights[name], tensor)
    trained_weights = trained.state_dict()
    assert not any(torch.equal(tensor, trained_weights[name]) for name, tensor in weights.items() if tensor.numel() > 1)
    assert not (tmp_path / "twin.tmp").exists()


def test_the_hub_twin_needs_only_config_and_tokenizer(tmp_path, offline):  # noqa: F811
    source = tmp_path / "source"
    tiny_model("gpt_neox", eager=False).save_pretrained(source)
    (source / "tokenizer.json").write_text("{}")
    snapshot = lay_out_cache(tmp_path / "cache", {n: source / n for n in ("config.json", "tokenizer.json")})
    path = download_checkpoint(REPO, "step128", cache_dir=tmp_path / "cache", weights=False)
    assert path == snapshot
    with pytest.raises(CheckpointError, match="no weights"):  # what a weights download would refuse
        download_checkpoint(REPO, "step128", cache_dir=tmp_path / "cache")
    twin = build_untrained(path, tmp_path / "twin", seed=0)
    assert sorted(p.name for p in twin.iterdir()) == ["config.json", "generation_config.json", "model.safetensors",
                                                     "tokenizer.json"]
    with pytest.raises(CheckpointError, match="no config.json in .*cannot build the untrained twin"):
        build_untrained(tmp_path / "cache", tmp_path / "none", seed=0, model="m")


# -- a failed save of an untrained twin ---------------------------------------------------------------


def test_a_full_disk_while_saving_a_twin_leaves_no_temporary_directory(tmp_path, monkeypatch):
    import transformers as T
    from tiny_families import tiny_model

    from crosslayer.models.untrained import build_untrained

    tiny_model("gpt_neox", eager=False).save_pretrained(tmp_path / "source")
    (tmp_path / "source" / "tokenizer.json").write_text("{}")
    real_save = T.PreTrainedModel.save_pretrained

    def save_then_fill_the_disk(self, directory, *args, **kwargs):
        real_save(self, directory, *args, **kwargs)  # the partial twin is on disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(T.PreTrainedModel, "save_pretrained", save_then_fill_the_disk)
    with pytest.raises(CheckpointError, match=r"model 'tw' revision 'init' file '.*/tw': cannot save the untrained "
                                              r"twin: \[Errno 28\] No space left on device"):
        build_untrained(tmp_path / "source", tmp_path / "tw", seed=0, model="tw")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source"]  # neither tw.tmp/ nor tw/

    def save_then_interrupt(self, directory, *args, **kwargs):
        real_save(self, directory, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(T.PreTrainedModel, "save_pretrained", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        build_untrained(tmp_path / "source", tmp_path / "tw", seed=0, model="tw")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source"]
