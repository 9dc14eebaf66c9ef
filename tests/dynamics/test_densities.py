"""Per-layer eigenvalue densities (Figs 2/S2, crosslayer.dynamics.densities) against NumPy histograms
of the saved eigenvalues."""

import numpy as np
import pytest
from spectra_tables import saved_profile

from crosslayer.dynamics.densities import eigenvalue_density


# --------------------------------------------------------------------------- Fig. S1


@pytest.mark.parametrize("part, of", [("modulus", np.abs), ("real", np.real)])
def test_eigenvalue_density_rows_are_numpy_histograms_of_each_layer(tmp_path, part, of):
    _, eigenvalues, Js = saved_profile(tmp_path, 4)
    path = tmp_path / "eigenvalues.npz"
    np.savez(path, eigenvalues=eigenvalues)
    with np.load(path) as npz:
        lam = npz["eigenvalues"]
    density, edges = eigenvalue_density(lam, part=part, bins=9)
    values = of(np.linalg.eigvals(Js))
    np.testing.assert_allclose(edges, np.linspace(values.min(), values.max(), 10), rtol=1e-9)
    for layer in range(len(Js)):
        expected, _ = np.histogram(values[layer], bins=edges, density=True)
        np.testing.assert_allclose(density[layer], expected, rtol=1e-9, atol=1e-9)
        assert (density[layer] * np.diff(edges)).sum() == pytest.approx(1.0)


def test_eigenvalue_density_shared_range_drops_outside_values_and_checks_input():
    density, edges = eigenvalue_density(np.array([[0.5, 1.5, 3.0]]), bins=2, value_range=(0, 2))
    np.testing.assert_allclose(edges, [0, 1, 2])
    np.testing.assert_allclose(density, [[0.5, 0.5]])
    with pytest.raises(ValueError, match="`part`"):
        eigenvalue_density(np.ones((2, 2)), part="imag")
    with pytest.raises(ValueError, match=r"\(L, d\)"):
        eigenvalue_density(np.ones(3))
