"""Figures of paper 004 (topology and dynamics). Each ``plot_*`` draws into a given Axes, does no I/O and returns
the main artist; the workflow scripts build the figures and save them.
"""

import matplotlib as mpl
import numpy as np

from crosslayer.dynamics.funnel import radius_vs_rank_drop, rank_drop
from crosslayer.plotting import depth_colors, format_step, step_styles

__all__ = ["plot_quantile_profile", "plot_eigenvalue_cloud", "plot_dose_response", "REGIME_COLORS",
           "plot_regime_bands", "plot_layer_density", "plot_radius_vs_rank_drop", "plot_unit_coupling"]

#: Background shade of each depth regime in :func:`plot_regime_bands`.
REGIME_COLORS = {"early": "#dbe9f6", "mid": "#eeeeee", "late": "#fbe3d6"}



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


def plot_dose_response(ax, table, *, start_layer=0, color="C0", label=None, column="effective_rank"):
    """Cumulative effective rank (or another column) from `start_layer` against the Schur dose
    alpha: the dose line and the two controls (mean over draws, band = min..max).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`crosslayer.dynamics.surgery.dose_response_table` (one mode).
    column : {"effective_rank", "log_frobenius"}, default="effective_rank"
        ``"log_frobenius"`` draws the transient amplification ``log ||J_{l->L}||_F`` (Fig. 5).
    """
    rows = table[table["start_layer"] == start_layer]
    dose = rows[rows["construction"] == "dose"].sort_values("alpha")
    ax.plot(dose["alpha"], dose[column], color=color, marker="o", ms=4, lw=1.8, label=label)
    for construction, ls, marker in (("control_a", "--", "^"), ("control_b", ":", "s")):
        stats = rows[rows["construction"] == construction].groupby("alpha")[column].agg(["mean", "min", "max"])
        if stats.empty:
            continue
        ax.plot(stats.index, stats["mean"], color=color, ls=ls, marker=marker, ms=3, lw=1)
        ax.fill_between(stats.index, stats["min"], stats["max"], color=color, alpha=0.12, lw=0)
    ylabel = {"effective_rank": "cumulative effective rank",
              "log_frobenius": r"$\log \|J_{l \to L}\|_F$ (amplification)"}.get(column, column)
    ax.set(xlabel="dose α of the non-normal Schur part", ylabel=ylabel)


def plot_regime_bands(ax, regimes):
    """Shade the layers of each depth regime (early / mid / late) behind a depth profile.

    Parameters
    ----------
    regimes : (L,) array_like of str
        Regime of every layer, in depth order (:func:`crosslayer.dynamics.regimes.depth_regimes`).

    Returns
    -------
    patches : list of matplotlib.patches.Rectangle
        One per run of equal labels, spanning layers ``first - 0.5`` to ``last + 0.5``, labelled
        with the regime (legend entries for the first band of each regime only).
    """
    regimes = np.asarray(regimes)
    patches, seen = [], set()
    start = 0
    for layer in range(1, regimes.size + 1):
        if layer == regimes.size or regimes[layer] != regimes[start]:
            regime = str(regimes[start])
            label = f"{regime} ({start}–{layer - 1})" if regime not in seen else "_nolegend_"
            patches.append(ax.axvspan(start - 0.5, layer - 0.5, color=REGIME_COLORS.get(regime, "0.9"), zorder=0,
                                      lw=0, label=label))
            seen.add(regime)
            start = layer
    return patches


def plot_layer_density(ax, density, edges, *, cmap="magma", reference=None):
    """Per-layer densities as a heatmap: x = value bins, y = layer (paper 004, Fig. S1).

    Parameters
    ----------
    density : (L, B) array_like
        From :func:`crosslayer.dynamics.densities.eigenvalue_density`.
    edges : (B + 1,) array_like
    reference : float, optional
        A dotted vertical line (|λ| = 1, Re λ = 1: the identity's eigenvalue).

    Returns
    -------
    mesh : matplotlib.collections.QuadMesh
    """
    density = np.asarray(density)
    mesh = ax.pcolormesh(np.asarray(edges), np.arange(density.shape[0] + 1) - 0.5, density, cmap=cmap,
                         shading="flat")
    if reference is not None:
        ax.axvline(reference, color="w", lw=0.8, ls=":")
    ax.yaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    ax.set_ylabel("layer")
    return mesh


def plot_radius_vs_rank_drop(ax, profiles, *, cmap="viridis"):
    """Fig. 4b: each layer's spectral radius against the drop of the cumulative effective rank it
    causes, one point series per checkpoint (step 0 hollow), Spearman's rho in the legend.

    Parameters
    ----------
    profiles : dict of int -> pandas.DataFrame
        Step -> per-layer table with ``spectral_radius`` and ``cumulative_effective_rank``.

    Returns
    -------
    collections : list of matplotlib.collections.PathCollection
        One per step in ascending order; offsets ``(radius[l], drop[l])`` for l = 0 .. L-2.
    """
    styles = step_styles(sorted(profiles), cmap)
    collections = []
    for step, style in styles.items():
        table = profiles[step]
        radius, ranks = table["spectral_radius"].to_numpy(), table["cumulative_effective_rank"].to_numpy()
        fit = radius_vs_rank_drop(radius, ranks)
        hollow = style.get("ls") == "--"
        label = f"step {format_step(step)}: ρ = {fit['rho']:.2f}, p = {fit['p_value']:.2g}"
        collections.append(ax.scatter(radius[:-1], rank_drop(ranks), s=16, label=label,
                                      facecolors="none" if hollow else style["color"], edgecolors=style["color"]))
    ax.axhline(0, color="0.7", lw=0.6, zorder=0)
    ax.set(xlabel="spectral radius of mean $J_l$", ylabel=r"rank drop $r(J_{l+1 \to L}) - r(J_{l \to L})$")
    return collections


def plot_unit_coupling(ax, participation, column_norms, bottom, top):
    """Fig. 7a: every unit's Jacobian column norm ``||J[:, i]||`` against its participation
    coefficient, the two tails compared by Test 3 coloured (boundary red, core blue).

    Parameters
    ----------
    participation, column_norms : (d,) array_like
        Units with NaN participation (isolated) are not drawn.
    bottom, top : array_like of int
        Unit indices of the core and boundary tails
        (:func:`crosslayer.dynamics.statistics.participation_tails`).

    Returns
    -------
    collections : list of matplotlib.collections.PathCollection
        ``[other units, bottom tail, top tail]``.
    """
    participation, column_norms = np.asarray(participation, dtype=float), np.asarray(column_norms, dtype=float)
    bottom, top = np.asarray(bottom, dtype=int), np.asarray(top, dtype=int)
    rest = np.setdiff1d(np.flatnonzero(~np.isnan(participation)), np.concatenate([bottom, top]))
    collections = [
        ax.scatter(participation[units], column_norms[units], s=s, color=color, lw=0, alpha=alpha, label=label)
        for units, color, s, alpha, label in (
            (rest, "0.6", 6, 0.5, "other units"),
            (bottom, "C0", 12, 0.9, f"core: bottom tail ({bottom.size})"),
            (top, "C3", 12, 0.9, f"boundary: top tail ({top.size})"),
        )
    ]
    ax.set(xlabel="participation coefficient $P_i$", ylabel=r"column norm $\|J[:, i]\|$")
    return collections
