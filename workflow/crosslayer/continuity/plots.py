"""Figures of paper 003 (geometric continuity). Each ``plot_*`` draws into a given Axes, does no I/O and returns
the main artist; the workflow scripts build the figures and save them.
"""

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from crosslayer.plotting import set_step_axis

__all__ = [
    "CONTINUITY_SPACES", "projection_colors", "plot_continuity_bars", "plot_continuity_over_training",
    "plot_adjacent_cosines", "plot_trajectory_3d", "plot_runs_over_epochs", "plot_run_bars",
    "plot_run_metrics", "plot_run_scatter", "plot_dataset_scatter",
]


# --------------------------------------------------------------------------- continuity (paper 003)

CONTINUITY_SPACES = {"v": "input space $v_1$", "u": "output space $u_1$"}


def projection_colors(names):
    """A fixed colour per projection name (tab10 in the order given)."""
    cmap = mpl.colormaps["tab10"]
    return {name: cmap(i % 10) for i, name in enumerate(names)}


def _present(table):
    return table[table["present"].astype(bool)]


def plot_continuity_bars(ax, tables, *, space, labels, order, fade=True):
    """Continuity per projection as grouped bars, one bar per table (e.g. step 0 and the last
    step), with each projection's random baseline ``E|cos|`` as a black tick over its group.

    Parameters
    ----------
    tables : list of DataFrame
        Checkpoint tables (:func:`crosslayer.continuity.statistics.checkpoint_summary`); each projection's
        baseline is that of the first table holding it (models of one shape).
    space : {"u", "v"}
    labels : list of str
        Legend label per table.
    order : sequence of str
        Projection order; projections no table has are left out.
    fade : bool
        Draw all tables but the last paler (earlier steps behind the last).

    Returns
    -------
    list of matplotlib.container.BarContainer
    """
    present = [_present(table).set_index("projection") for table in tables]
    names = [name for name in order if any(name in table.index for table in present)]
    width = 0.8 / len(tables)
    x = np.arange(len(names))
    bars = []
    for i, (table, label) in enumerate(zip(present, labels)):
        bars.append(ax.bar(x - 0.4 + width * (i + 0.5), table[f"{space}1"].reindex(names), width, label=label,
                           color=f"C{i}", alpha=0.45 if fade and i < len(tables) - 1 else 1.0))
    baseline = [next(table.loc[name, f"baseline_{space}"] for table in present if name in table.index)
                for name in names]
    ax.hlines(baseline, x - 0.45, x + 0.45, color="k", lw=1.5, label="random $E|\\cos|$")
    ax.set_xticks(x, [name.capitalize() if name != "ov" else "OV" for name in names])
    ax.set(ylim=(0, 1), ylabel=f"continuity, {CONTINUITY_SPACES[space]}")
    return bars


def plot_continuity_over_training(ax, steps_table, *, space, colors):
    """Continuity of each present projection against the training step, over a grey band
    spanning the projections' random baselines. Returns the lines."""
    table = _present(steps_table)
    lines = []
    for name, color in colors.items():
        part = table[table["projection"] == name].sort_values("step")
        if len(part):
            lines.append(ax.plot(part["step"], part[f"{space}1"], marker="o", ms=3, color=color,
                                 label=name.capitalize() if name != "ov" else "OV")[0])
    low, high = table[f"baseline_{space}"].min(), table[f"baseline_{space}"].max()
    ax.axhspan(low, max(high, low * 1.02), color="0.85", lw=0, zorder=0, label="random $E|\\cos|$")
    set_step_axis(ax, table["step"].unique())
    ax.set(ylim=(0, 1), ylabel=f"continuity, {CONTINUITY_SPACES[space]}")
    return lines


def plot_adjacent_cosines(ax, cosines, *, colors):
    """``|cos|`` of each adjacent layer pair, one line per projection.

    Parameters
    ----------
    cosines : dict of str to (L - 1,) array_like
    colors : dict of str to colour

    Returns
    -------
    list of matplotlib.lines.Line2D
    """
    lines = []
    for name, values in cosines.items():
        values = np.asarray(values, dtype=float)
        lines.append(ax.plot(np.arange(len(values)) + 0.5, values, marker="o", ms=3, color=colors[name],
                             label=name.capitalize() if name != "ov" else "OV")[0])
    ax.set(ylim=(0, 1), xlabel="layer pair (l, l + 1) at l + 0.5", ylabel="$|\\cos|$ of adjacent layers")
    return lines


def plot_trajectory_3d(ax, coords, *, cmap="viridis"):
    """Principal vectors of every layer on three principal components, joined in depth order
    and coloured by layer (the paper's Figs 4 and 5); `ax` is a 3-D Axes.

    Parameters
    ----------
    coords : (L, 3) array_like

    Returns
    -------
    mpl_toolkits.mplot3d.art3d.Path3DCollection
    """
    coords = np.asarray(coords, dtype=float)
    ax.plot(*coords.T, color="0.6", lw=0.8)
    points = ax.scatter(*coords.T, c=np.arange(len(coords)), cmap=cmap, s=14, depthshade=False)
    ax.set(xlabel="PC 1", ylabel="PC 2", zlabel="PC 3", xticks=[], yticks=[], zticks=[])
    return points


def plot_runs_over_epochs(ax, epochs, metric, *, colors):
    """One line per run: the mean over seeds of `metric` against the epoch, over a band of +- 1 sd
    (where there are several seeds).

    Parameters
    ----------
    epochs : DataFrame
        :func:`crosslayer.continuity.toy_tables.epoch_table` (``run``, ``epoch``, ``metric``, ``metric_sd``).
    colors : dict of str to colour
        Run -> colour, in legend order.

    Returns
    -------
    list of matplotlib.lines.Line2D
    """
    lines = []
    for run, color in colors.items():
        part = epochs[epochs["run"] == run].sort_values("epoch")
        mean, sd = part[metric].to_numpy(float), part[f"{metric}_sd"].to_numpy(float)
        lines.append(ax.plot(part["epoch"], mean, color=color, lw=1.4, label=run)[0])
        if np.isfinite(sd).any():
            ax.fill_between(part["epoch"], mean - sd, mean + sd, color=color, alpha=0.15, lw=0)
    ax.set(xlabel="epoch", ylabel=metric, ylim=(0, 1))
    return lines


def plot_run_bars(ax, final, metrics, *, runs):
    """Grouped bars: per run, the mean over seeds of each metric with its sd as an error bar.

    Returns
    -------
    list of matplotlib.container.BarContainer
        One per metric.
    """
    table = final.set_index("run").reindex(runs)
    width = 0.8 / len(metrics)
    x = np.arange(len(runs))
    bars = []
    for i, metric in enumerate(metrics):
        sd = table[f"{metric}_sd"].to_numpy(float)
        bars.append(ax.bar(x - 0.4 + width * (i + 0.5), table[metric].to_numpy(float), width, label=metric,
                           yerr=np.where(np.isfinite(sd), sd, 0.0), capsize=2, color=f"C{i}"))
    ax.set_xticks(x, runs, rotation=30, ha="right")
    ax.set(ylim=(0, 1), ylabel="mean over seeds")
    return bars


def plot_run_metrics(ax, epochs, run, metrics, *, accuracy=False):
    """One run's metrics against the epoch (mean over seeds, +- 1 sd band where there are several),
    optionally with its test accuracy on a second axis (dashed; the paper's Fig. 2b).

    Parameters
    ----------
    epochs : DataFrame
        :func:`crosslayer.continuity.toy_tables.epoch_table`.
    run : str
    metrics : dict of str to str
        Column -> legend label; columns the table lacks are skipped.
    accuracy : bool

    Returns
    -------
    lines : list of matplotlib.lines.Line2D
        One per drawn metric.
    accuracy_line : matplotlib.lines.Line2D or None
        On ``ax``'s twin axis.
    """
    part = epochs[epochs["run"] == run].sort_values("epoch")
    if part.empty:
        raise ValueError(f"run {run!r} is not in the epoch table")
    lines = []
    for i, (column, label) in enumerate((c, l) for c, l in metrics.items() if c in part.columns):
        mean, sd = part[column].to_numpy(float), part.get(f"{column}_sd", pd.Series(np.nan, part.index)).to_numpy(float)
        lines.append(ax.plot(part["epoch"], mean, color=f"C{i}", lw=1.5, label=label)[0])
        if np.isfinite(sd).any():
            ax.fill_between(part["epoch"], mean - sd, mean + sd, color=f"C{i}", alpha=0.15, lw=0)
    ax.set(xlabel="epoch", ylim=(0, 1))
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    accuracy_line = None
    if accuracy:
        twin = ax.twinx()
        accuracy_line = twin.plot(part["epoch"], part["accuracy"].to_numpy(float), color="0.3", ls="--", lw=1.2,
                                  label="test accuracy")[0]
        twin.set(ylim=(0, 1), ylabel="test accuracy")
    return lines, accuracy_line


def plot_run_scatter(ax, final, x, y, *, colors):
    """One point per run: the mean over seeds of metric `y` against metric `x`, with +- 1 sd error
    bars where there are several seeds, labelled by run (the paper's Fig. 13: weight continuity
    against the gradient's effective rank).

    Parameters
    ----------
    final : DataFrame
        :func:`crosslayer.continuity.toy_tables.final_table`.
    colors : dict of str to colour
        Run -> colour; runs absent from `final` or with no value are skipped.

    Returns
    -------
    list of matplotlib.container.ErrorbarContainer
        One per drawn run.
    """
    table = final.set_index("run")
    points = []
    for run, color in colors.items():
        if run not in table.index or not np.isfinite([table.loc[run, x], table.loc[run, y]]).all():
            continue
        row = table.loc[run]
        xerr, yerr = (np.nan_to_num(float(row.get(f"{m}_sd", np.nan))) for m in (x, y))
        points.append(ax.errorbar(row[x], row[y], xerr=xerr, yerr=yerr, fmt="o", ms=5, color=color, label=run,
                                  capsize=2))
        ax.annotate(run, (row[x], row[y]), fontsize="x-small", xytext=(3, 3), textcoords="offset points")
    ax.set(xlabel=x, ylabel=y)
    return points


#: Markers of the image sets in :func:`plot_dataset_scatter`, in order.
DATASET_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def plot_dataset_scatter(ax, table, x, y, *, runs, datasets):
    """One point per image set and run: the mean over seeds of `y` against `x` with +- 1 sd error
    bars where there are several seeds; colour = run, marker = image set (the paper's Fig. 13:
    weight continuity against the gradient's effective rank, architectures across data sets).

    Parameters
    ----------
    table : DataFrame
        :func:`crosslayer.continuity.toy_tables.datasets_table`.
    runs, datasets : list of str
        Colour and marker order; pairs absent from `table` or with no value are skipped.

    Returns
    -------
    run_handles, dataset_handles : list of matplotlib.lines.Line2D
        Legend entries: one per run (its colour), one per image set (its marker, in grey).
    """
    indexed = table.set_index(["dataset", "run"])
    for i, run in enumerate(runs):
        for j, dataset in enumerate(datasets):
            if (dataset, run) not in indexed.index:
                continue
            row = indexed.loc[(dataset, run)]
            if not np.isfinite([row[x], row[y]]).all():
                continue
            xerr, yerr = (np.nan_to_num(float(row.get(f"{m}_sd", np.nan))) for m in (x, y))
            ax.errorbar(row[x], row[y], xerr=xerr, yerr=yerr, fmt=DATASET_MARKERS[j % len(DATASET_MARKERS)], ms=6,
                        color=f"C{i}", capsize=2)
    run_handles = [Line2D([], [], color=f"C{i}", marker="o", ls="", label=run) for i, run in enumerate(runs)]
    dataset_handles = [Line2D([], [], color="0.4", marker=DATASET_MARKERS[j % len(DATASET_MARKERS)], ls="",
                                        label=dataset) for j, dataset in enumerate(datasets)]
    ax.set(xlabel=x, ylabel=y)
    return run_handles, dataset_handles
