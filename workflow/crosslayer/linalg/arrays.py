"""Array conversion and input checks shared by the NumPy-side analyses (spectra, graphs, statistics)."""

import sys

import numpy as np

__all__ = ["to_numpy", "as_float", "check_square", "check_stack", "strip_identity", "is_tensor"]


def to_numpy(x):
    """NumPy view of an array_like or torch tensor (no torch import needed)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)


# --------------------------------------------------------------------------- validation


def as_float(x):
    """float64, or complex128 when the input is complex."""
    x = to_numpy(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64, copy=False)


def check_square(name, J):
    """(d, d) array in float64/complex128."""
    J = as_float(J)
    if J.ndim != 2 or J.shape[0] != J.shape[1] or J.shape[0] == 0:
        raise ValueError(f"`{name}` must be a square 2-D (d, d) matrix, got shape {J.shape}")
    return J


def check_stack(name, Js, *, min_count=1, cast=True):
    """(n, d, d) array in float64/complex128 (input dtype if not cast); (d, d) becomes n = 1."""
    Js = to_numpy(Js) if not isinstance(Js, (list, tuple)) else np.stack([to_numpy(J) for J in Js])
    if cast:
        Js = as_float(Js)
    if Js.ndim == 2:
        Js = Js[None]
    if Js.ndim != 3 or Js.shape[1] != Js.shape[2] or Js.shape[1] == 0:
        raise ValueError(f"`{name}` must be (n, d, d) or (d, d) square matrices, got shape {Js.shape}")
    if Js.shape[0] < min_count:
        raise ValueError(f"`{name}` must hold at least {min_count} matrices, got shape {Js.shape}")
    return Js


def strip_identity(J, residual):
    """J, or J - I when residual (works on (d, d) and (n, d, d))."""
    if not residual:
        return J
    return J - np.eye(J.shape[-1], dtype=J.dtype)


def is_tensor(x):
    """True for a torch.Tensor (torch is imported lazily: if it is not loaded, x is no tensor)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)
