"""Array conversion shared by the NumPy-side analyses (spectra, graphs, statistics)."""

import numpy as np

__all__ = ["to_numpy"]


def to_numpy(x):
    """NumPy view of an array_like or torch tensor (no torch import needed)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)
