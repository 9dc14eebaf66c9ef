"""One reader per table the claims catalogues name: the workflow's own output files in, one pandas
DataFrame per table out, ``model`` its first column.

A :class:`Reader` names its table (the catalogue's name, e.g. ``"alignment/adjacent"``), the stage
whose models have it (``crosslayer/stages.py``: which models' files exist), the files it reads as
patterns relative to the run's directory (``{model}``, and ``{step}`` for one file per checkpoint),
and a function ``read(root, model, steps)`` returning that model's rows. A stage of its own runs
(``toy``, ``transformer_ablations``: no model) is read as one pseudo-model named after the stage,
with no steps. The claims rule lists the
patterns as its inputs; :func:`read_tables` reads every table whose files a run has. A paper's
readers live in the module of its stage; :data:`READERS` gathers them.
"""

from pathlib import Path

import pandas as pd

from crosslayer.claims.readers.base import Reader  # first: the paper modules import it
from crosslayer.claims.readers import alignment, continuity, coupling, dynamics, models  # noqa: E402, I001

__all__ = ["Reader", "READERS", "reader", "files_of", "read_tables"]


def _all_readers():
    modules = (alignment, coupling, continuity, dynamics, models)
    found = {}
    for module in modules:
        for r in module.READERS:
            if r.table in found:
                raise ValueError(f"two readers of table {r.table!r}")
            found[r.table] = r
    return found


#: Every reader, by table name.
READERS = _all_readers()


def reader(table):
    """The :class:`Reader` of `table`; the error names those there are."""
    try:
        return READERS[table]
    except KeyError:
        raise KeyError(f"no reader of table {table!r}: there are {sorted(READERS)}") from None


def files_of(models):
    """The files reading every table of `models` (``{table: {model: steps}}``, the models that have
    it) takes, once each: the claims rule's inputs."""
    return list(dict.fromkeys(str(p) for table, by_model in models.items() for model, steps in by_model.items()
                              for p in reader(table).paths(Path("."), model, tuple(steps))))


def read_tables(root, models):
    """Every table of `models` (``{table: {model: steps}}``) read from the run at `root`: a
    DataFrame per table, the models' rows concatenated with ``model`` first. A table none of whose
    models has rows is left out (its claims say so: "not testable")."""
    tables = {}
    for table, by_model in models.items():
        frames = []
        for model, steps in by_model.items():
            frame = reader(table).read(Path(root), model, tuple(steps))
            if len(frame):
                frames.append(frame.assign(model=model)[["model", *[c for c in frame.columns if c != "model"]]])
        if frames:
            tables[table] = pd.concat(frames, ignore_index=True)
    return tables
