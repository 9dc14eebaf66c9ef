"""Figures of the across-papers stage: the four papers' measures against depth, their correlations
along depth, when each leaves its random band, and every model's ratios to the random baselines.
Each ``plot_*`` draws into a given Axes, does no I/O and returns the main artist; the ``*_matrix``,
``*_ratios`` and ``order_measures`` helpers prepare the data beforehand (limits included), and
:mod:`crosslayer.across.figures` composes them into the report figures.
"""

import matplotlib as mpl
import numpy as np
import pandas as pd

from crosslayer.plotting import format_step

__all__ = [
    "NO_BAND", "short_name", "order_measures", "step_colors", "plot_measure_profile", "correlation_matrix",
    "plot_correlation_matrix", "emergence_steps", "emergence_matrix", "plot_emergence", "emergence_colorbar",
    "log2_ratios", "robust_limit", "plot_ratio_heatmap",
]

#: What the emergence panel says when the model has no step-0 checkpoint.
NO_BAND = "no step-0 checkpoint: no random band"

_WORDS = {"alignment": "align", "continuity": "cont", "coupling": "coup", "jacobian": "jac", "community": "comm",
          "output": "out", "input": "in", "nmi": "NMI", "ov": "OV"}


def short_name(measure):
    """A compact label: ``continuity_q_u1`` -> ``cont Q u1``, ``continuity_down_v1`` -> ``cont Down v1``,
    ``alignment_output`` -> ``align out``."""
    words = str(measure).split("_")
    if words[0] == "continuity" and len(words) > 1:  # the projection, as paper 003's figures write it
        words[1] = words[1].upper() if len(words[1]) == 1 or words[1] == "ov" else words[1].capitalize()
    return " ".join(_WORDS.get(word, word) for word in words)


def order_measures(measures, boundaries=None):
    """The measures to draw, grouped by paper (stable: the order of measures.tsv within a paper).

    Parameters
    ----------
    measures : pandas.DataFrame
        measures.tsv (``measure``, ``paper`` read as str, ``present``, ...).
    boundaries : pandas.DataFrame, optional
        boundaries.tsv: when given, measures without a finite value in it are left out.

    Returns
    -------
    pandas.DataFrame
        The rows kept, index reset.
    """
    table = measures.copy()
    table["paper"] = table["paper"].astype(str)
    keep = table["present"].astype(str).str.lower().eq("true").to_numpy(copy=True)
    if boundaries is not None:
        keep &= np.array([m in boundaries and np.isfinite(boundaries[m].to_numpy(float)).any()
                          for m in table["measure"]], dtype=bool)
    return table[keep].sort_values("paper", kind="stable").reset_index(drop=True)


def step_colors(steps, cmap="viridis"):
    """A colour per step, from dark (first) to light (last)."""
    steps = list(steps)
    return dict(zip(steps, mpl.colormaps[cmap](np.linspace(0.05, 0.8, len(steps)))))


def _boundary_axis(ax, nbins="auto"):
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(nbins, integer=True, steps=[1, 2, 5, 10]))
    ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda x, _: f"{int(round(x))}|{int(round(x)) + 1}"))


def plot_measure_profile(ax, boundaries, measure, *, steps, colors):
    """One measure against depth at a few checkpoints, over its random baseline (dashed).

    The baseline is one grey line when it is the same at every shown step, else one dashed line per
    step in that step's colour (community NMI's baseline depends on the partitions).

    Parameters
    ----------
    boundaries : pandas.DataFrame
        boundaries.tsv: ``step``, ``boundary``, ``{measure}`` and ``{measure}.baseline``.
    measure : str
    steps : sequence of int
        Checkpoints to draw; those without rows are skipped.
    colors : dict of int to colour

    Returns
    -------
    list of matplotlib.lines.Line2D
        The value lines, in step order.
    """
    lines, baselines = [], {}
    for step in steps:
        part = boundaries[boundaries["step"] == step].sort_values("boundary")
        if part.empty:
            continue
        lines.append(ax.plot(part["boundary"], part[measure], marker="o", ms=3, lw=1.3, color=colors[step],
                             label=f"step {format_step(step)}")[0])
        if f"{measure}.baseline" in part:
            baselines[step] = part.set_index("boundary")[f"{measure}.baseline"].astype(float)
    finite = {step: b for step, b in baselines.items() if np.isfinite(b.to_numpy()).any()}
    first = next(iter(finite.values()), None)
    if first is not None and all(b.index.equals(first.index) and np.allclose(b, first, equal_nan=True)
                                 for b in finite.values()):
        ax.plot(first.index, first.to_numpy(), color="0.45", ls="--", lw=1.2, label="random baseline")
    else:
        for step, baseline in finite.items():
            ax.plot(baseline.index, baseline.to_numpy(), color=colors[step], ls="--", lw=0.9, alpha=0.8)
    _boundary_axis(ax, nbins=6)  # "10|11" is wide: a small panel holds about six
    return lines


def correlation_matrix(correlations, names, step):
    """The symmetric matrix of one step's Spearman rho (diagonal 1) and its significant pairs.

    Parameters
    ----------
    correlations : pandas.DataFrame
        correlations.tsv: ``step``, ``measure_a``, ``measure_b``, ``n``, ``rho``, ``significant``.
    names : sequence of str
        Row and column order; a measure without pairs at `step` is a NaN row (diagonal too).
    step : int

    Returns
    -------
    rho : (m, m) ndarray of float
    significant : (m, m) ndarray of bool
    n : int
        Boundaries of the step (largest ``n`` of its pairs; 0 without pairs).
    """
    names = list(names)
    index = {name: i for i, name in enumerate(names)}
    rho, significant = np.full((len(names), len(names)), np.nan), np.zeros((len(names), len(names)), bool)
    part = correlations[(correlations["step"] == step) & correlations["measure_a"].isin(index)
                        & correlations["measure_b"].isin(index)]
    for row in part.itertuples():
        i, j = index[row.measure_a], index[row.measure_b]
        rho[i, j] = rho[j, i] = row.rho
        significant[i, j] = significant[j, i] = str(row.significant).lower() == "true" and np.isfinite(row.rho)
    seen = [index[m] for m in {*part["measure_a"], *part["measure_b"]}]
    rho[seen, seen] = 1.0
    n = int(pd.to_numeric(part["n"]).max()) if len(part) else 0
    return rho, significant, n


def _paper_groups(papers):
    """``[(paper, start, stop)]`` of consecutive runs of one paper."""
    groups = []
    for i, paper in enumerate(papers):
        if groups and groups[-1][0] == paper:
            groups[-1][2] = i + 1
        else:
            groups.append([paper, i, i + 1])
    return [tuple(group) for group in groups]


def plot_correlation_matrix(ax, rho, significant, *, labels=None, papers=None):
    """Spearman rho of every pair of measures as a heatmap on [-1, 1] (RdBu_r, white at 0), a dot
    (white on strong colours, else black) on the pairs significant after Benjamini-Hochberg, NaN
    cells mid grey.

    Parameters
    ----------
    rho, significant : (m, m) array_like
        :func:`correlation_matrix`.
    labels : sequence of str, optional
        Tick labels of rows and columns; None leaves the ticks unlabelled.
    papers : sequence of str, optional
        Paper of each measure: thin lines between the papers' blocks.

    Returns
    -------
    matplotlib.collections.QuadMesh
    """
    rho = np.ma.masked_invalid(np.asarray(rho, dtype=float))
    m = rho.shape[0]
    mesh = ax.pcolormesh(np.arange(m + 1), np.arange(m + 1), rho, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    i, j = np.nonzero(np.asarray(significant, dtype=bool))
    ax.scatter(j + 0.5, i + 0.5, s=16, c=np.where(np.abs(rho.filled(0.0)[i, j]) > 0.6, "w", "k"), marker="o", lw=0)
    for _, start, _ in (_paper_groups(papers)[1:] if papers is not None else []):
        ax.axhline(start, color="k", lw=0.6)
        ax.axvline(start, color="k", lw=0.6)
    ax.set_facecolor("0.6")
    ax.set(xlim=(0, m), ylim=(m, 0), aspect="equal")
    ax.set_xticks(np.arange(m) + 0.5, labels if labels is not None else [], rotation=90, fontsize="small")
    ax.set_yticks(np.arange(m) + 0.5, labels if labels is not None else [], fontsize="small")
    ax.tick_params(length=0)
    return mesh


def emergence_steps(steps):
    """The steps a measure can emerge at: every checkpoint after step 0, sorted."""
    return sorted(int(s) for s in steps if int(s) > 0)


def emergence_matrix(emergence, names, n_boundaries, steps):
    """Emergence as (measure x boundary) arrays.

    Parameters
    ----------
    emergence : pandas.DataFrame
        emergence.tsv: ``measure``, ``boundary``, ``step`` (NaN: never), ``direction``, ``stays_out``.
    names : sequence of str
        Row order.
    n_boundaries : int
    steps : sequence of int
        The model's checkpoints.

    Returns
    -------
    index : (m, n_boundaries) ndarray of float
        Position of the emergence step in :func:`emergence_steps`; NaN for never (or no row).
    sign : (m, n_boundaries) ndarray of int
        +1 above the band, -1 below, 0 never.
    stays_out : (m, n_boundaries) ndarray of bool
    """
    later = {step: i for i, step in enumerate(emergence_steps(steps))}
    rows = {name: i for i, name in enumerate(names)}
    shape = (len(rows), int(n_boundaries))
    index, sign, stays = np.full(shape, np.nan), np.zeros(shape, int), np.zeros(shape, bool)
    for row in emergence.itertuples():
        if row.measure not in rows or not 0 <= int(row.boundary) < shape[1] or not np.isfinite(float(row.step)):
            continue
        i, j = rows[row.measure], int(row.boundary)
        index[i, j] = later.get(int(row.step), np.nan)
        sign[i, j] = {"above": 1, "below": -1}.get(str(row.direction), 0)
        stays[i, j] = str(row.stays_out).lower() == "true"
    return index, sign, stays


def _no_band(ax, text):
    ax.set(xticks=[], yticks=[])
    return ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize="large")


def plot_emergence(ax, index, sign, stays_out, *, steps, labels=None, papers=None, cmap="viridis"):
    """When each measure left its step-0 band at each boundary: a cell coloured by the emergence
    step (discrete, early dark to late light), "+" (above the band) or "−" (below) written in it,
    paler where the measure later came back into the band; blank (light grey) where it never left.
    An empty `index` (no measure or no step 0) gives one centred :data:`NO_BAND` text instead.

    Parameters
    ----------
    index, sign, stays_out : (m, n) array_like
        :func:`emergence_matrix`.
    steps : sequence of int
        The model's checkpoints (categories: :func:`emergence_steps`).
    labels : sequence of str, optional
        Row labels.
    papers : sequence of str, optional
        Paper of each row: lines between the papers' blocks.

    Returns
    -------
    matplotlib.collections.QuadMesh or matplotlib.text.Text
        The heatmap, or the text when there is nothing to draw.
    """
    index, sign, stays_out = np.asarray(index, dtype=float), np.asarray(sign), np.asarray(stays_out, dtype=bool)
    later = emergence_steps(steps)
    if index.size == 0 or not later:
        return _no_band(ax, NO_BAND if index.size == 0 else "no checkpoint after step 0")
    m, n = index.shape
    colours = mpl.colormaps[cmap].resampled(len(later))
    norm = mpl.colors.BoundaryNorm(np.arange(len(later) + 1) - 0.5, len(later))
    x, y = np.arange(n + 1) - 0.5, np.arange(m + 1)
    mesh = ax.pcolormesh(x, y, np.ma.masked_invalid(index), cmap=colours, norm=norm, edgecolors="w", lw=0.5)
    pale = np.ma.masked_where(np.isnan(index) | stays_out, np.ones_like(index))
    ax.pcolormesh(x, y, pale, cmap=mpl.colors.ListedColormap(["w"]), alpha=0.55, edgecolors="w", lw=0.5)
    for i, j in zip(*np.nonzero(sign != 0)):
        dark = np.isfinite(index[i, j]) and np.dot(colours(norm(index[i, j]))[:3], [0.3, 0.6, 0.1]) < 0.5
        ax.text(j, i + 0.5, "+" if sign[i, j] > 0 else "\u2212", ha="center", va="center", fontsize="small",
                color="w" if dark and stays_out[i, j] else "k")
    for _, start, _ in (_paper_groups(papers)[1:] if papers is not None else []):
        ax.axhline(start, color="k", lw=1.0)
    ax.set_facecolor("0.93")
    ax.set(xlim=(-0.5, n - 0.5), ylim=(m, 0), xlabel="layer boundary l|l+1")
    _boundary_axis(ax)
    ax.set_yticks(np.arange(m) + 0.5, labels if labels is not None else [], fontsize="small")
    ax.tick_params(axis="y", length=0)
    return mesh


def emergence_colorbar(fig, mesh, steps, **kwargs):
    """A colorbar for :func:`plot_emergence`, one tick per emergence step labelled with
    :func:`crosslayer.plotting.format_step`; `kwargs` go to ``fig.colorbar``. None (and no colorbar)
    when :func:`plot_emergence` drew its text instead of a heatmap (no measure, or no step after 0)."""
    if not isinstance(mesh, mpl.cm.ScalarMappable):
        return None
    later = emergence_steps(steps)
    bar = fig.colorbar(mesh, ticks=np.arange(len(later)), **kwargs)
    bar.set_ticklabels([format_step(step) for step in later])
    bar.ax.tick_params(length=0)
    return bar


def log2_ratios(models, measures):
    """``log2`` of each model's depth-mean ratio to the random baseline, measures grouped by paper.

    Parameters
    ----------
    models : pandas.DataFrame
        models.tsv: ``model``, ``step``, ``n_boundaries``, then one ratio column per measure.
    measures : pandas.DataFrame
        ``measure`` and ``paper`` (str) of every measure (all models' measures.tsv, concatenated);
        a ratio column it does not name goes last, under paper "?".

    Returns
    -------
    log2 : pandas.DataFrame
        Rows = models (in the table's order), columns = measures with a finite value for at least one
        model. A ratio that is not positive (no logarithm) is NaN.
    papers : list of str
        Paper of each column.
    """
    legend = measures.drop_duplicates("measure").assign(paper=lambda t: t["paper"].astype(str))
    legend = legend.sort_values("paper", kind="stable")
    ratio_columns = [c for c in models.columns if c not in ("model", "step", "n_boundaries")]
    papers = dict(zip(legend["measure"], legend["paper"]))
    order = [m for m in legend["measure"] if m in ratio_columns] + [c for c in ratio_columns if c not in papers]
    ratios = models.set_index("model")[order].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log2 = np.where(ratios > 0, np.log2(ratios), np.nan)
    log2[~np.isfinite(log2)] = np.nan
    table = pd.DataFrame(log2, index=models["model"].astype(str).to_numpy(), columns=order)
    table = table.loc[:, table.notna().any(axis=0)]
    return table, [papers.get(m, "?") for m in table.columns]


def robust_limit(values, q=95.0):
    """Symmetric colour limit: the `q`-th percentile of ``|values|`` over the finite ones (1 when
    there are none, a small positive number when all are 0)."""
    finite = np.abs(np.asarray(values, dtype=float))
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return 1.0
    return float(max(np.percentile(finite, q), 1e-3))


def plot_ratio_heatmap(ax, log2, papers, *, vmax, annotate=None, max_cells=(10, 30)):
    """Models (rows) x measures (columns) of ``log2`` ratio to the random baseline on a diverging
    map centred at 0 (red: more aligned than random), NaN cells grey, columns under their paper's
    label on top and separated by paper.

    Parameters
    ----------
    log2 : pandas.DataFrame
        :func:`log2_ratios`.
    papers : sequence of str
        Paper of each column.
    vmax : float
        Colour limits are ``[-vmax, vmax]`` (:func:`robust_limit`).
    annotate : bool, optional
        Write the ratio itself (``2**log2``) in each cell; None does when the matrix is at most
        `max_cells` (rows, columns).

    Returns
    -------
    matplotlib.collections.QuadMesh
    """
    values = log2.to_numpy(float)
    m, n = values.shape
    mesh = ax.pcolormesh(np.arange(n + 1), np.arange(m + 1), np.ma.masked_invalid(values), cmap="RdBu_r",
                         vmin=-vmax, vmax=vmax, edgecolors="w", lw=0.5)
    if annotate is None:
        annotate = m <= max_cells[0] and n <= max_cells[1]
    for i, j in zip(*np.nonzero(np.isfinite(values))) if annotate else ():
        ax.text(j + 0.5, i + 0.5, f"{2 ** values[i, j]:.2g}", ha="center", va="center", fontsize="x-small",
                color="w" if abs(values[i, j]) > 0.6 * vmax else "k")
    groups = _paper_groups(list(papers))
    for _, start, _ in groups[1:]:
        ax.axvline(start, color="k", lw=1.2)
    top = ax.secondary_xaxis("top")
    top.set_xticks([(start + stop) / 2 for _, start, stop in groups], [f"paper {p}" for p, _, _ in groups])
    top.tick_params(length=0)
    ax.set_facecolor("0.8")
    ax.set(xlim=(0, n), ylim=(m, 0))
    ax.set_xticks(np.arange(n) + 0.5, [short_name(c) for c in log2.columns], rotation=90)
    ax.set_yticks(np.arange(m) + 0.5, list(log2.index))
    ax.tick_params(length=0)
    return mesh
