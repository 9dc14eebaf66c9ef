"""The :class:`Reader` record (its own module so that the paper modules and the registry in
``__init__`` import it without a cycle)."""

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

__all__ = ["Reader", "LayerShare", "PAIRS", "BOUNDARIES"]


@dataclass(frozen=True)
class LayerShare:
    """Units that each join layers of one model, so that two units sharing a layer are not
    independent: ``layers(label)`` the layers a unit label joins, ``labels(n_layers)`` every unit
    label over that many layers (for simulations and tests); ``chain``: each unit shares a layer
    with its neighbours only (boundaries), so that every other unit shares none."""

    layers: Callable
    labels: Callable
    chain: bool = False


def _pair_layers(label):
    a, b = str(label).split("-")
    return int(a), int(b)


#: Unordered layer pairs labelled ``"a-b"``.
PAIRS = LayerShare(_pair_layers, lambda n: [f"{a}-{b}" for a, b in itertools.combinations(range(n), 2)])
#: Boundaries: boundary ``l`` joins layers l and l + 1.
BOUNDARIES = LayerShare(lambda label: (int(label), int(label) + 1), lambda n: list(range(n - 1)), chain=True)


@dataclass(frozen=True)
class Reader:
    """How one catalogue table is read from a run's files (:mod:`crosslayer.claims.readers`): from
    the models of `stage` that the stages in `also` run on too. `units`: the columns whose values
    are independent units of the table (a claim may resample them, or whole models); `nested`:
    ``(column, why)`` for columns whose values over those units are not independent (a cumulative
    quantity of nested layer ranges), which no claim may resample; `power`: the stage's own warning
    about its power, from a model's rows of the table ("" where it has none), for the verdicts'
    reasons; `shares`: ``(columns, LayerShare)`` where the units join layers that other units
    join too (layer pairs, boundaries), for those columns (all where empty); `series`: the units
    are one run's checkpoints, no replicates of each other; `empty`: why a run's file may hold no
    rows (a setting that turns them off), for the reason of a claim that finds none."""

    table: str
    stage: str
    files: tuple[str, ...]
    read: Callable[[Path, str, tuple], pd.DataFrame]
    also: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    nested: tuple[tuple[str, str], ...] = ()
    power: Callable[[pd.DataFrame], str] | None = None
    shares: tuple | None = None
    series: bool = False
    empty: str = ""

    def paths(self, root, model, steps):
        """The files this reader reads for `model` (``{step}`` patterns once per step, in order)."""
        root = Path(root)
        return [root / pattern.format(model=model, step=step) for pattern in self.files
                for step in (steps if "{step}" in pattern else (None,))]
