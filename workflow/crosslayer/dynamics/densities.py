"""Per-layer eigenvalue densities of the mean block Jacobians (paper 004, Fig. S1). NumPy only, so
figure jobs need no torch."""

import numpy as np

__all__ = ["EIGENVALUE_PARTS", "eigenvalue_density"]

#: What :func:`eigenvalue_density` histograms: the modulus |lambda| or the real part Re lambda.
EIGENVALUE_PARTS = {"modulus": np.abs, "real": np.real}


def eigenvalue_density(eigenvalues, *, part="modulus", bins=60, value_range=None):
    """Histogram density of each layer's eigenvalues on shared bins (paper 004, Fig. S1).

    Parameters
    ----------
    eigenvalues : (L, d) complex array_like
        Eigenvalues of each layer's mean Jacobian (the ``eigenvalues`` array of
        :func:`crosslayer.dynamics.spectra.spectral_profile`).
    part : {"modulus", "real"}, default="modulus"
        Histogram ``|lambda|`` or ``Re lambda``.
    bins : int, default=60
        Number of equal-width bins, >= 1.
    value_range : (float, float), optional
        Bin range; default the range of all layers' values (shared by the layers).

    Returns
    -------
    density : (L, bins) ndarray
        Row l is ``numpy.histogram(values[l], bins=edges, density=True)``: integrates to 1 over
        the bins (values outside ``value_range`` are dropped first).
    edges : (bins + 1,) ndarray
    """
    if part not in EIGENVALUE_PARTS:
        raise ValueError(f"`part` must be one of {sorted(EIGENVALUE_PARTS)}, got {part!r}")
    lam = np.asarray(eigenvalues)
    if lam.ndim != 2 or lam.size == 0:
        raise ValueError(f"`eigenvalues` must be a non-empty (L, d) array, got shape {lam.shape}")
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"`bins` must be a positive integer, got {bins!r}")
    values = EIGENVALUE_PARTS[part](lam).astype(float)
    if not np.isfinite(values).all():
        raise ValueError("`eigenvalues` must be finite")
    lo, hi = (values.min(), values.max()) if value_range is None else map(float, value_range)
    if not hi > lo:  # one value everywhere: a unit-wide bin around it
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, int(bins) + 1)
    density = np.zeros((lam.shape[0], int(bins)))
    for layer, row in enumerate(values):
        inside = row[(row >= lo) & (row <= hi)]
        if inside.size:
            density[layer] = np.histogram(inside, bins=edges, density=True)[0]
    return density, edges
