"""Paper 000's tables: what the alignment stage writes per model (``summarize_alignment``) and the
long form of each checkpoint's layer-pair overlaps (``mlp_alignment``'s ``step{step}.npz``)."""

import numpy as np
import pandas as pd

from crosslayer.claims.readers.base import BOUNDARIES, PAIRS, Reader
from crosslayer.npz import open_npz

_SUMMARY = "results/alignment/{model}/{name}.tsv"
_SPACES = ("left", "right", "cross")


def _summary(name, units=(), shares=None):
    """A reader of ``summarize_alignment``'s per-model table `name` (tab-separated, one file)."""
    def read(root, model, steps):
        return pd.read_csv(root / _SUMMARY.format(model=model, name=name), sep="\t")
    return Reader(f"alignment/{name}", "alignment", (_SUMMARY.replace("{name}", name),), read, units=units,
                  shares=shares)


def _pairs(root, model, steps):
    """One row per checkpoint and layer pair a < b: the overlaps of the three subspaces."""
    rows = []
    for step in steps:
        with open_npz(root / f"results/alignment/{model}/step{step}.npz") as z:
            overlaps = {space: z[f"overlap_{space}"] for space in _SPACES}
        a, b = np.triu_indices(len(overlaps["left"]), k=1)
        rows.append(pd.DataFrame({"step": step, "pair": [f"{i}-{j}" for i, j in zip(a, b)], "layer_a": a,
                                  "layer_b": b, "distance": b - a,
                                  **{space: m[a, b] for space, m in overlaps.items()}}))
    return pd.concat(rows, ignore_index=True)


READERS = (
    _summary("adjacent", units=("boundary",), shares=((), BOUNDARIES)),
    _summary("cascade", units=("boundary",), shares=((), BOUNDARIES)),
    *(_summary(name) for name in ("table1", "cascade_fit", "baseline")),
    Reader("alignment/pairs", "alignment", ("results/alignment/{model}/step{step}.npz",), _pairs, units=("pair",),
           shares=((), PAIRS)),
)
