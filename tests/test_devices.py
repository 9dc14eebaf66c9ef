"""A configured device that torch cannot use here is refused by the name of its setting."""

import pytest
import torch

from crosslayer.config import cuda_settings
from crosslayer.devices import check_device, no_cuda_reason


def test_cpu_is_always_usable(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert check_device("cpu", "dynamics.device") == "cpu"


@pytest.mark.parametrize("build, says", [(None, "was built without CUDA"), ("12.4", "(CUDA 12.4) sees no GPU here")])
def test_cuda_without_a_gpu_names_the_key_and_why(monkeypatch, build, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", build)
    assert says in no_cuda_reason()
    with pytest.raises(ValueError, match=r"coupling.device is 'cuda' but torch .* set coupling.device: cpu"):
        check_device("cuda", "coupling.device")


def test_cuda_with_a_gpu_passes(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert no_cuda_reason() is None and check_device("cuda", "dynamics.device") == "cuda"


def test_every_setting_asking_for_cuda_is_named():
    config = {"train": {"device": "cpu"}, "dynamics": {"device": "cuda"}, "continuity": {"device": "cpu"},
              "transformer_ablations": {"train": {"device": "cuda"}},
              "models": {"a": {"train": {"device": "cuda"}}, "b": {"source": "hub"}}}
    assert cuda_settings(config) == ["dynamics.device", "transformer_ablations.train.device", "models.a.train.device"]


def test_a_jobs_device_comes_from_its_config_block_checked():
    # not a rule param (a change re-runs nothing), but checked as one: the key is named
    from crosslayer.devices import configured_device

    assert configured_device({"coupling": {"device": "cpu"}}, "coupling") == "cpu"
    if no_cuda_reason() is not None:
        with pytest.raises(ValueError, match="dynamics.device is 'cuda' but"):
            configured_device({"dynamics": {"device": "cuda"}}, "dynamics")
