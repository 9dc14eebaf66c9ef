"""Figures of paper 002 (block coupling). Each ``plot_*`` draws into a given Axes, does no I/O and returns
the main artist; :mod:`crosslayer.coupling.figures` and :mod:`crosslayer.coupling.figures_models` compose
them into the report figures.
"""

import numpy as np

from crosslayer.plotting import pick_steps

__all__ = ["BLOCK_SCALE_RATIO", "block_window", "needs_block_scales", "plot_block_grid", "plot_coupling_graph", "plot_fit",
           "plot_noise_depth", "plot_noise_levels", "plot_trained_vs_untrained", "plot_trajectories_2d",
           "plot_variant_profiles"]


def block_window(n_layers, first, last):
    """The blocks ``first .. last`` (inclusive) of the |A| grids where the model has them; a model
    too shallow for them shows as many blocks as fit, shifted down (all of them when fewer).

    Returns
    -------
    range
    """
    if not 0 <= first <= last:
        raise ValueError(f"coupling.example_blocks: [{first}, {last}] must be a first and a last block, first <= last")
    width = min(last - first + 1, n_layers)
    start = min(first, n_layers - width)
    return range(start, start + width)


#: A grid whose largest block maximum is this many times its median block maximum is drawn with a
#: colour scale per block: one scale would leave most blocks (and a trained diagonal) dark.
BLOCK_SCALE_RATIO = 10.0


def needs_block_scales(blocks, *, ratio=BLOCK_SCALE_RATIO):
    """Whether one colour scale would hide most blocks of `blocks` (``(n, m, k, k)``): the largest
    block maximum is at least `ratio` times the median block maximum (blank blocks left out)."""
    peaks = np.nanmax(np.abs(np.asarray(blocks, dtype=float)), axis=(2, 3), initial=0.0).ravel()
    peaks = peaks[peaks > 0]
    return bool(peaks.size and peaks.max() >= ratio * np.median(peaks))


def plot_block_grid(ax, blocks, *, vmax=None, cmap="magma", labels=None, per_block=False):
    """A grid of small matrices (e.g. ``|A|`` coupling matrices per layer or token pair), one
    block per cell with a one-pixel gap, as in the paper's Figs 3, 4, 18 and 19.

    Parameters
    ----------
    blocks : (n_rows, n_cols, k, k) array_like
        Cells that do not exist (e.g. ``t1 > t2``) are NaN or all zero and drawn blank.
    vmax : float, optional
        Colour limit (default: the 99th percentile of the drawn values).
    labels : (row labels, column labels), optional
        Default: the cell indices.
    per_block : bool, default=False
        Divide each block by its own maximum (colour limit 1): the pattern inside every block shows
        (:func:`needs_block_scales`), not how blocks compare.

    Returns
    -------
    matplotlib.image.AxesImage
    """
    blocks = np.asarray(blocks, dtype=float)
    n, m, k, _ = blocks.shape
    if per_block:
        with np.errstate(invalid="ignore", divide="ignore"):
            blocks = blocks / np.nanmax(np.abs(blocks), axis=(2, 3), keepdims=True, initial=0.0)
        vmax = 1.0
    blank = ~np.isfinite(blocks).any(axis=(2, 3)) | (np.nan_to_num(blocks) == 0).all(axis=(2, 3))
    canvas = np.full((n * (k + 1) - 1, m * (k + 1) - 1), np.nan)
    for i in range(n):
        for j in range(m):
            if not blank[i, j]:
                canvas[i * (k + 1) : i * (k + 1) + k, j * (k + 1) : j * (k + 1) + k] = blocks[i, j]
    finite = canvas[np.isfinite(canvas)]
    vmax = vmax if vmax is not None else (np.quantile(finite, 0.99) if finite.size else 1.0)
    image = ax.imshow(canvas, cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest")
    rows, cols = labels if labels is not None else (range(n), range(m))
    centres = lambda count: [c * (k + 1) + (k - 1) / 2 for c in range(count)]  # noqa: E731
    ax.set_yticks(centres(n), [str(r) for r in rows])
    ax.set_xticks(centres(m), [str(c) for c in cols])
    ax.tick_params(length=0, labelsize="x-small")
    return image


def plot_coupling_graph(ax, coupling, *, vmin, vmax, cmap="viridis"):
    """Layers as nodes on a circle (layer 0 at the top, clockwise), every pair joined by an edge
    whose width and opacity grow with their coupling (paper Fig. 1c-e).

    Parameters
    ----------
    coupling : (L, L) array_like
        Coupling of layer l on layer l''s basis (not symmetric); an edge shows the mean of both
        directions. The diagonal is ignored.
    vmin, vmax : float
        Coupling drawn as no edge and as the strongest edge (share them between panels).

    Returns
    -------
    matplotlib.collections.LineCollection
        One segment per pair ``l < l'``, in row-major order.
    """
    from matplotlib.collections import LineCollection

    M = np.asarray(coupling, dtype=float)
    L = M.shape[0]
    angle = np.pi / 2 - 2 * np.pi * np.arange(L) / L
    xy = np.stack([np.cos(angle), np.sin(angle)], 1)
    i, j = np.triu_indices(L, 1)
    strength = np.clip((0.5 * (M[i, j] + M[j, i]) - vmin) / max(vmax - vmin, 1e-12), 0, 1)
    strength = np.nan_to_num(strength)
    colors = np.zeros((len(i), 4))
    colors[:, 3] = 0.05 + 0.9 * strength
    edges = LineCollection(np.stack([xy[i], xy[j]], 1), colors=colors, linewidths=0.3 + 3.5 * strength, zorder=1)
    ax.add_collection(edges)
    ax.scatter(*xy.T, c=np.arange(L), cmap=cmap, s=max(12, 220 / max(L, 1) ** 0.5), zorder=2, edgecolors="white")
    for layer in pick_steps(range(L), 8):  # a few labels; every layer on small models
        ax.annotate(str(layer), 1.13 * xy[layer], ha="center", va="center", fontsize="x-small")
    ax.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal")
    ax.set_axis_off()
    return edges


def plot_trajectories_2d(ax, coords, *, depths=None, cmap="viridis"):
    """Token trajectories projected on two principal components: one grey line per token through
    its states, the states coloured by depth (paper Fig. 12).

    Parameters
    ----------
    coords : (L + 1, T, 2) array_like
        NaN-padded tokens are skipped.
    depths : range, optional
        The states drawn (the paper's rows: all, shallow, deep); default all. Colours keep the
        whole depth range, so rows can share one colour bar.

    Returns
    -------
    matplotlib.collections.PathCollection
    """
    coords = np.asarray(coords, dtype=float)
    n_states = coords.shape[0]
    depths = range(n_states) if depths is None else depths
    coords = coords[list(depths)]
    depth = np.broadcast_to(np.asarray(depths)[:, None], coords.shape[:2])
    ok = np.isfinite(coords).all(axis=-1)
    for t in range(coords.shape[1]):
        if ok[:, t].all():
            ax.plot(coords[:, t, 0], coords[:, t, 1], color="0.7", lw=0.6, zorder=1)
    points = ax.scatter(coords[ok][:, 0], coords[ok][:, 1], c=depth[ok], cmap=cmap, s=8, zorder=2, vmin=0,
                        vmax=n_states - 1)
    ax.set(xlabel="PC 1", ylabel="PC 2")
    return points


def plot_variant_profiles(ax, profile):
    """Per-layer coupling of one prompt source, plain prompts solid and chain-of-thought prompts
    dashed (paper Fig. 15).

    Parameters
    ----------
    profile : pandas.DataFrame
        Columns ``variant``, ``layer``, ``coupling`` (rows of ``profile.tsv`` for one source,
        step and K).

    Returns
    -------
    list of matplotlib.lines.Line2D
        ``plain`` then ``cot``, those present.
    """
    lines = []
    for variant, style in (("plain", "-"), ("cot", "--")):
        part = profile[profile.variant == variant].sort_values("layer")
        if len(part):
            lines += ax.plot(part.layer, part.coupling, style, marker="o", ms=3, label=variant)
    ax.set_xlabel("layer l")
    ax.legend(frameon=False, fontsize="small")
    return lines


def plot_trained_vs_untrained(ax, table, column):
    """Per model, in the table's order (by size), the median of a statistic with its inter-quartile
    range: trained black, untrained blue (paper Figs 5 and 25).

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`crosslayer.coupling.tables.regularity_across_models`.
    column : str
        The statistic, e.g. ``"lss"`` or ``"ed_raw"`` (columns ``{column}_median``, ``_q1``, ``_q3``).

    Returns
    -------
    dict of str -> matplotlib.container.ErrorbarContainer
        By state, those present.
    """
    models = list(dict.fromkeys(table.model))
    containers = {}
    for state, color, shift in (("untrained", "C0", -0.12), ("trained", "black", 0.12)):
        part = table[table.state == state]
        if len(part):
            median = part[f"{column}_median"].to_numpy()
            spread = [median - part[f"{column}_q1"].to_numpy(), part[f"{column}_q3"].to_numpy() - median]
            containers[state] = ax.errorbar([models.index(m) + shift for m in part.model], median, yerr=spread,
                                            fmt="o", ms=4, color=color, capsize=2, label=state)
    ax.set_xticks(range(len(models)), models, rotation=45, ha="right", fontsize="x-small")
    ax.legend(frameon=False, fontsize="small")
    return containers


def plot_fit(ax, x, y, fit, *, labels=None):
    """Models as points with the OLS line of a row of
    :func:`crosslayer.coupling.tables.fit_table` (paper Figs 1a, 7, 8, 35, 36); the title gives
    R², p and n, or says why there is no fit.

    Parameters
    ----------
    x, y : array_like
        One value per model (NaN: left out, as the fit leaves it out).
    fit : mapping or None
        ``slope``, ``intercept``, ``r2``, ``p``, ``n``; None or NaN statistics draw no line.
    labels : sequence of str, optional
        Model names written beside the points.

    Returns
    -------
    matplotlib.collections.PathCollection
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    points = ax.scatter(x[ok], y[ok], color="C0", zorder=2)
    for name, xi, yi in zip(labels if labels is not None else (), x, y):
        if np.isfinite(xi) and np.isfinite(yi):
            ax.annotate(name, (xi, yi), fontsize="xx-small", xytext=(3, 3), textcoords="offset points")
    if fit is not None and np.isfinite(fit["r2"]):
        grid = np.linspace(x[ok].min(), x[ok].max(), 50)
        ax.plot(grid, fit["intercept"] + fit["slope"] * grid, color="C1")
        ax.set_title(f"R² = {fit['r2']:.2f}, p = {fit['p']:.2g}, n = {int(fit['n'])}", fontsize="small")
    else:
        ax.set_title(f"no fit: {int(ok.sum())} model(s) with both values (need 3)", fontsize="small")
    return points


def plot_noise_levels(ax, table, layers, *, styles=None, label=""):
    """Cosine of noisy and clean states against the noise level (log axis) at `layers` (Fig. 32).

    Parameters
    ----------
    table : pandas.DataFrame
        One checkpoint's rows of :data:`crosslayer.coupling.tables.NOISE_COLUMNS`.
    layers : dict of int -> str
        Depth -> its name in the legend.
    styles : dict of int -> dict, optional
        Depth -> line keywords.
    label : str
        Appended to each line's legend entry (e.g. the step).

    Returns
    -------
    list of matplotlib.lines.Line2D
    """
    lines = []
    for layer, name in layers.items():
        rows = table[table["layer"] == layer].sort_values("level")
        style = {"marker": "o", "ms": 4, "lw": 1.5, **(styles or {}).get(layer, {})}
        (line,) = ax.plot(rows["level"], rows["cosine"], label=f"{name}{label}", **style)
        lines.append(line)
    ax.set_xscale("log")
    ax.set(xlabel="noise norm / embedding norm", ylabel="cosine with the clean state")
    return lines


def plot_noise_depth(ax, table, *, cmap="viridis"):
    """Cosine of noisy and clean states against depth, one line per noise level (small: dark).

    Returns
    -------
    list of matplotlib.lines.Line2D
        In level order.
    """
    import matplotlib as mpl

    levels = sorted(table["level"].unique())
    colors = mpl.colormaps[cmap](np.linspace(0.1, 0.9, len(levels)))
    lines = []
    for level, color in zip(levels, colors):
        rows = table[table["level"] == level].sort_values("layer")
        (line,) = ax.plot(rows["layer"], rows["cosine"], marker="o", ms=3, lw=1.2, color=color, label=f"noise {level:g}")
        lines.append(line)
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    ax.set(xlabel="depth (0: the noisy embedding)", ylabel="cosine with the clean state")
    return lines
