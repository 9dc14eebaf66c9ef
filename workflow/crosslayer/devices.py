"""Which torch device a configured ``device`` setting can use here, said before any compute."""

import torch

__all__ = ["check_device", "configured_device", "no_cuda_reason"]


def no_cuda_reason():
    """Why torch cannot use CUDA on this machine, or None when it can."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"torch {torch.__version__} here was built without CUDA"
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU here"


def check_device(device, key):
    """Return `device` when torch can use it here.

    Raises
    ------
    ValueError
        For ``cuda`` on a machine without a usable GPU, naming the setting `key` (e.g.
        ``dynamics.device``) and what to do.
    """
    reason = no_cuda_reason() if device == "cuda" else None
    if reason:
        raise ValueError(f"{key} is 'cuda' but {reason}: set {key}: cpu, or run this job on a GPU node "
                         "(a cluster profile sends jobs with gpu=1 to one)")
    return device


def configured_device(config, block):
    """The checked (:func:`check_device`) device a job's config block sets (``<block>.device``).

    A job reads it from the config, not from its rule's params: like the thread count, the device
    changes speed and float rounding only, so changing it must re-run nothing.
    """
    return check_device(config[block]["device"], f"{block}.device")
