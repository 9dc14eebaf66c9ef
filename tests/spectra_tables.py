"""A spectra table as the workflow writes it and reads it back, for the tests of paper 004's
per-layer views (funnel, densities, regimes and their panels)."""

import numpy as np
import pandas as pd

from crosslayer.dynamics.spectra import spectral_profile


def saved_profile(tmp_path, seed=0, L=7, d=12):
    """A spectra table as the workflow writes and reads it back (results/dynamics/.../spectra.tsv)."""
    rng = np.random.default_rng(seed)
    Js = np.eye(d) + rng.normal(scale=rng.uniform(0.1, 0.9, size=(L, 1, 1)) / np.sqrt(d), size=(L, d, d))
    table, eigenvalues = spectral_profile(Js, k=3, draws=20, rank=d)
    path = tmp_path / f"spectra{seed}.tsv"
    table.to_csv(path, sep="\t")
    return pd.read_csv(path, sep="\t", index_col="layer"), eigenvalues, Js
