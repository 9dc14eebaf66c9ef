"""The one place that knows a claim's units: gathering one value per independent unit from the
tables, and the interval every verdict kind takes over them.

Units are what a table's reader names as independent (prompts, seeds, models, layers). Two
structures are not independent replicates and get intervals of their own:

* **units that share a layer** (layer pairs, boundaries between adjacent layers): the reader's
  :class:`~crosslayer.claims.readers.base.LayerShare` says which layers each unit joins. Over all
  pairs of layers the interval is the delete-one-layer jackknife (every unit touching the left-out
  layer dropped), against Student's t with one degree of freedom fewer than the layers: the
  variance of dyadic data, where the naive one can be several times too small. Along a chain of
  boundaries it is :func:`chain_interval`, calibrated where the jackknife is not at 4-6 layers;
* **one run's checkpoints** (``series``): a trend over them is read as what it is, one run's
  ordering, by its exact permutation test, with no interval.

Otherwise a mean of units takes Student's t (:func:`t_interval`), exact under normal noise at any
count of units, where a percentile bootstrap over three units is only their range.
"""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from crosslayer.claims.readers import READERS

__all__ = ["Sample", "Estimate", "t_interval", "chain_interval", "jackknife_interval",
           "unseen_rate", "gather", "layer_share"]


@dataclass(frozen=True)
class Sample:
    """One value per unit, and for units that share layers the ``(model, layer)`` keys each touches
    (``chain``: each shares a layer with its neighbours only: boundaries)."""

    values: np.ndarray
    clusters: tuple | None = None
    chain: bool = False

    @property
    def n(self):
        return self.values.shape[-1]

    def masks(self):
        """For each cluster key, the units not touching it (the delete-one-layer subsets)."""
        keys = sorted({k for c in self.clusters for k in c}, key=str)
        return np.array([[k not in c for c in self.clusters] for k in keys])


@dataclass(frozen=True)
class Estimate:
    """What a verdict kind hands the rule: the statistic, its interval at the confidence asked for
    (NaN: none), the units, the paper's value it is read against, words for the reason, and
    ``gate``, why an interval that decides must still leave the verdict open ("" where none);
    ``p``, one-sided p-values (paper's side, other side) where a permutation test alone decides."""

    statistic: float
    low: float
    high: float
    n: int
    reference: float
    detail: str = ""
    gate: str = ""
    p: tuple | None = None
    method: str = ""


def t_interval(values, confidence):
    """Student's t interval of the mean of independent units, over the last axis.

    Examples
    --------
    >>> [round(b, 3) for b in t_interval(np.array([1.0, 2.0, 3.0]), 0.95)]
    [-0.484, 4.484]
    """
    values = np.asarray(values, dtype=float)
    n = values.shape[-1]
    if n < 2:
        nan = np.full(values.shape[:-1], np.nan)
        return nan, nan
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * values.std(axis=-1, ddof=1) / np.sqrt(n)
    mean = values.mean(axis=-1)
    return mean - half, mean + half


def chain_interval(values, confidence):
    """Student's t interval of the mean of a chain of units (boundaries: each shares a layer with its
    neighbours), over the last axis: the variance at its largest under a lag-one correlation, which
    sharing one layer keeps at or below 1/2 (``s^2 / n * (2n - 1) / n``), and the degrees of
    freedom of the ``ceil(n / 2)`` units that share no layer, less one.

    Examples
    --------
    >>> [round(float(b), 3) for b in chain_interval(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 0.95)]
    [-0.657, 6.657]
    """
    values = np.asarray(values, dtype=float)
    n = values.shape[-1]
    df = math.ceil(n / 2) - 1
    if df < 1:
        nan = np.full(values.shape[:-1], np.nan)
        return nan, nan
    half = stats.t.ppf(0.5 + confidence / 2, df) * np.sqrt(values.var(axis=-1, ddof=1) / n * (2 * n - 1) / n)
    mean = values.mean(axis=-1)
    return mean - half, mean + half


def jackknife_interval(statistic, masks, confidence):
    """Delete-one-cluster jackknife interval of ``statistic(mask)`` (``mask``: the units kept),
    ``estimate +- t_{g-1} sqrt((g-1)/g sum (theta_(i) - mean)^2)`` over the g clusters.

    Parameters
    ----------
    statistic : callable
        Boolean mask over units -> the statistic (an array over any leading axes of draws).
    masks : (g, n) bool ndarray
        For each cluster, the units that do not touch it (:meth:`Sample.masks`).
    """
    full = np.asarray(statistic(np.ones(masks.shape[1], bool)), dtype=float)
    g = len(masks)
    if g < 3:
        return np.full_like(full, np.nan), np.full_like(full, np.nan)
    leave = np.stack([np.asarray(statistic(m), dtype=float) for m in masks], axis=-1)
    spread = np.sqrt((g - 1) / g * ((leave - leave.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1))
    half = stats.t.ppf(0.5 + confidence / 2, g - 1) * spread
    return full - half, full + half


def unseen_rate(n, confidence):
    """The largest rate of an event that ``n`` independent units, none showing it, cannot rule out:
    the upper Clopper-Pearson bound of 0 in ``n``, ``1 - ((1 - confidence) / 2) ** (1 / n)``.

    Examples
    --------
    >>> round(unseen_rate(6, 0.95), 3)
    0.459
    """
    return 1 - ((1 - confidence) / 2) ** (1 / n)


def layer_share(claim):
    """The :class:`LayerShare` of the claim's units from its table's reader (None: the units share
    nothing, or whole models are the units)."""
    reader = READERS.get(claim.table)
    if reader is None or reader.shares is None or claim.unit == "model":
        return None
    columns, share = reader.shares
    return share if not columns or claim.column in columns else None


def gather(claim, models, measure):
    """Every model's values per unit (``measure(model)``: a Series indexed by unit, named
    ``"value"`` here, or a DataFrame of several columns), rows with a NaN left out, as one
    :class:`Sample` per column; the clusters of units that share layers are ``(model, layer)``."""
    frames = []
    for model in models:
        frame = measure(model)
        frame = frame.to_frame("value") if isinstance(frame, pd.Series) else frame
        frames.append(frame.astype(float).dropna().assign(_model=model))
    both = pd.concat(frames) if frames else pd.DataFrame(columns=["_model"])
    share = layer_share(claim)
    clusters = None if share is None else tuple(
        tuple((m, layer) for layer in share.layers(unit)) for unit, m in zip(both.index, both["_model"]))
    chain = share is not None and share.chain
    return {c: Sample(both[c].to_numpy(float), clusters, chain) for c in both.columns if c != "_model"}
