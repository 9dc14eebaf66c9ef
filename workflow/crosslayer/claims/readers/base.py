"""The :class:`Reader` record (its own module so that the paper modules and the registry in
``__init__`` import it without a cycle)."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

__all__ = ["Reader"]


@dataclass(frozen=True)
class Reader:
    """How one catalogue table is read from a run's files (:mod:`crosslayer.claims.readers`): from
    the models of `stage` that the stages in `also` run on too. `units`: the columns whose values
    are independent units of the table (a claim may resample them, or whole models); `nested`:
    ``(column, why)`` for columns whose values over those units are not independent (a cumulative
    quantity of nested layer ranges), which no claim may resample; `power`: the stage's own warning
    about its power, from a model's rows of the table ("" where it has none), for the verdicts'
    reasons."""

    table: str
    stage: str
    files: tuple[str, ...]
    read: Callable[[Path, str, tuple], pd.DataFrame]
    also: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    nested: tuple[tuple[str, str], ...] = ()
    power: Callable[[pd.DataFrame], str] | None = None

    def paths(self, root, model, steps):
        """The files this reader reads for `model` (``{step}`` patterns once per step, in order)."""
        root = Path(root)
        return [root / pattern.format(model=model, step=step) for pattern in self.files
                for step in (steps if "{step}" in pattern else (None,))]
