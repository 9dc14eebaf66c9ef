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


def _cascade(root, model, steps):
    """The per-boundary cascade table with the step its overlaps are read at (``reference_step``,
    from the cascade fit) and the model's last checkpoint (``last_step``), for claims about early
    training; a boundary whose overlap never peaks within the run (``first_peak_step`` NaN) peaks
    after its last checkpoint, so it ranks after every boundary that did instead of dropping out of
    the order (step: one past the last)."""
    table = pd.read_csv(root / _SUMMARY.format(model=model, name="cascade"), sep="\t")
    fit = pd.read_csv(root / _SUMMARY.format(model=model, name="cascade_fit"), sep="\t")
    last = max(steps) if steps else table["first_peak_step"].max()
    return table.assign(first_peak_step=table["first_peak_step"].fillna(last + 1),
                        reference_step=fit["reference_step"].iloc[0], last_step=last)


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
    Reader("alignment/cascade", "alignment", tuple(_SUMMARY.replace("{name}", n) for n in ("cascade", "cascade_fit")),
           _cascade, units=("boundary",), shares=((), BOUNDARIES)),
    Reader("alignment/table1", "alignment", (_SUMMARY.replace("{name}", "table1"),),
           _summary("table1").read, units=("step",), series=True),
    *(_summary(name) for name in ("cascade_fit", "baseline")),
    Reader("alignment/pairs", "alignment", ("results/alignment/{model}/step{step}.npz",), _pairs, units=("pair",),
           shares=((), PAIRS)),
)
