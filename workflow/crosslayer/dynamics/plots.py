"""Figures of paper 004 (topology and dynamics). Each ``plot_*`` draws into a given Axes, does no I/O and returns
the main artist; the workflow scripts build the figures and save them.
"""

import matplotlib as mpl
import numpy as np

from crosslayer.plotting import depth_colors, format_step, step_styles

__all__ = ["plot_quantile_profile", "plot_eigenvalue_cloud", "plot_dose_response"]



def plot_quantile_profile(ax, profiles, name, *, cmap="viridis"):
    """Median of a per-sample statistic against depth with its interquartile band, one line
    per checkpoint (styled as in :func:`plot_depth_profile`).

    Parameters
    ----------
    profiles : dict of int -> pandas.DataFrame
        Step -> per-layer table holding ``median_<name>``, ``q25_<name>``, ``q75_<name>``.
    name : str
    """
    styles = step_styles(sorted(profiles), cmap)
    for step, style in styles.items():
        table = profiles[step]
        ax.plot(table.index, table[f"median_{name}"], marker="o", ms=3, lw=1.2, label=f"step {format_step(step)}",
                **style)
        ax.fill_between(table.index, table[f"q25_{name}"], table[f"q75_{name}"], color=style["color"], alpha=0.15,
                        lw=0)
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("layer")


def plot_eigenvalue_cloud(ax, eigenvalues, layers, *, n_layers, cmap="viridis"):
    """Eigenvalues of several layers' Jacobians in the complex plane, coloured by depth, with
    the unit circle (|λ| > 1 expands).

    Parameters
    ----------
    eigenvalues : (n, d) complex array_like
        One row per layer in ``layers``.
    layers : sequence of int
    n_layers : int
        Depth of the model (sets the colour scale).
    """
    eigenvalues = np.asarray(eigenvalues)
    colors = depth_colors(n_layers, cmap)
    for layer, lam in zip(layers, eigenvalues):
        ax.scatter(lam.real, lam.imag, s=7, color=colors[layer], alpha=0.7, lw=0)
    theta = np.linspace(0, 2 * np.pi, 361)
    ax.plot(np.cos(theta), np.sin(theta), color="0.3", lw=0.8, ls=":")
    ax.axhline(0, color="0.8", lw=0.5, zorder=0)
    ax.axvline(0, color="0.8", lw=0.5, zorder=0)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set(xlabel="Re λ", ylabel="Im λ")


def plot_dose_response(ax, table, *, start_layer=0, color="C0", label=None):
    """Cumulative effective rank from `start_layer` against the Schur dose alpha: the dose line
    and the two controls (mean over draws, band = min..max).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`crosslayer.linalg.schur.dose_response_table` (one mode).
    """
    rows = table[table["start_layer"] == start_layer]
    dose = rows[rows["construction"] == "dose"].sort_values("alpha")
    ax.plot(dose["alpha"], dose["effective_rank"], color=color, marker="o", ms=4, lw=1.8, label=label)
    for construction, ls, marker in (("control_a", "--", "^"), ("control_b", ":", "s")):
        stats = rows[rows["construction"] == construction].groupby("alpha")["effective_rank"].agg(["mean", "min", "max"])
        if stats.empty:
            continue
        ax.plot(stats.index, stats["mean"], color=color, ls=ls, marker=marker, ms=3, lw=1)
        ax.fill_between(stats.index, stats["min"], stats["max"], color=color, alpha=0.12, lw=0)
    ax.set(xlabel="dose α of the non-normal Schur part", ylabel="cumulative effective rank")
