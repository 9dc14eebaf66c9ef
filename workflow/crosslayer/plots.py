"""Figures. Each ``plot_*`` draws into a given Axes, does no I/O and returns the main artist;
the workflow scripts build the figures and save them."""

import matplotlib as mpl
import numpy as np

__all__ = [
    "format_step",
    "set_step_axis",
    "plot_random_baseline",
    "plot_adjacent_mean",
    "plot_boundary_heatmap",
    "plot_boundary_trajectories",
    "plot_overlap_matrix",
    "plot_training_loss",
    "plot_depth_profile",
    "plot_quantile_profile",
    "plot_eigenvalue_cloud",
    "plot_dose_response",
    "pick_steps",
    "step_grid",
    "save_png_and_pdf",
    "depth_colors",
    "plot_block_grid",
    "plot_coupling_graph",
    "plot_trajectories_2d",
    "CONTINUITY_SPACES",
    "projection_colors",
    "plot_continuity_bars",
    "plot_continuity_over_training",
    "plot_adjacent_cosines",
    "plot_trajectory_3d",
    "plot_runs_over_epochs",
    "plot_run_bars",
]

SPACE_LABELS = {"left": "output space $U$", "right": "input space $V$", "cross": "$U_l$ vs $V_{l+1}$"}


def format_step(step):
    """Compact step label: 512, 2k, 143k, 1.43M."""
    for scale, suffix in ((1_000_000, "M"), (1_000, "k")):
        if step >= scale:
            return f"{step / scale:.3g}{suffix}"
    return str(step)


def set_step_axis(ax, steps, *, max_ticks=12, min_ratio=1.75):
    """Training steps on a log-like axis that still shows step 0 (symlog, linear below the first
    positive step), ticked at the checkpoints themselves when there are few; a checkpoint within
    a factor `min_ratio` of the next labelled one gets a tick without a label, so labels never
    collide."""
    steps = sorted(int(s) for s in steps)
    positive = [s for s in steps if s > 0]
    if positive:
        ax.set_xscale("symlog", linthresh=min(positive), linscale=0.5)
    ax.set_xlim(steps[0], steps[-1])
    if len(steps) <= max_ticks:
        labels, last = {}, None
        for step in reversed(steps):  # from the final step back, so it is always labelled
            if last is None or step == 0 or step * min_ratio <= last:
                labels[step], last = format_step(step), step
        ax.set_xticks(steps, [labels.get(step, "") for step in steps])
        ax.minorticks_off()
    ax.set_xlabel("training step")


def plot_random_baseline(ax, mean, sd, *, band_sd=2.0):
    """The random-subspace baseline: a dashed line at `mean` over a grey ``mean +- band_sd * sd``
    band. Returns the line."""
    ax.axhspan(mean - band_sd * sd, mean + band_sd * sd, color="0.85", lw=0, zorder=0)
    return ax.axhline(mean, color="0.5", ls="--", lw=1, label=f"random baseline (±{band_sd:g} sd)", zorder=1)


def plot_adjacent_mean(ax, steps, mean, *, label=None, color=None):
    """Mean adjacent-layer overlap against training step (draw the baseline with
    :func:`plot_random_baseline`).

    Parameters
    ----------
    steps : (S,) array_like of int
    mean : (S,) array_like
        Mean over boundaries of the adjacent-layer overlap at each step, in [0, 1].

    Returns
    -------
    line : matplotlib.lines.Line2D
    """
    steps, mean = np.asarray(steps), np.asarray(mean, dtype=float)
    if steps.shape != mean.shape:
        raise ValueError(f"`steps` and `mean` must have the same shape, got {steps.shape} and {mean.shape}")
    (line,) = ax.plot(steps, mean, marker="o", ms=4, label=label, color=color)
    set_step_axis(ax, steps)
    ax.set_ylabel("mean adjacent-layer overlap")
    return line


def plot_boundary_heatmap(ax, steps, overlap, *, vmin=0.0, vmax=None, cmap="viridis"):
    """Overlap across each layer boundary (rows) at each checkpoint (columns).

    Parameters
    ----------
    steps : (S,) array_like of int
        Column labels; columns are evenly spaced whatever the step values.
    overlap : (B, S) array_like
        ``overlap[b, i]``: overlap between layers b and b+1 at ``steps[i]``.

    Returns
    -------
    mesh : matplotlib.collections.QuadMesh
    """
    overlap = np.asarray(overlap, dtype=float)
    if overlap.ndim != 2 or overlap.shape[1] != len(steps):
        raise ValueError(f"`overlap` must be (boundaries, {len(steps)} steps), got shape {overlap.shape}")
    B = overlap.shape[0]
    mesh = ax.pcolormesh(overlap, vmin=vmin, vmax=vmax if vmax is not None else np.nanmax(overlap), cmap=cmap)
    ax.set_xticks(np.arange(len(steps)) + 0.5, [format_step(s) for s in steps], rotation=45, ha="right")
    ax.set_yticks(np.arange(B) + 0.5, [f"{b}–{b + 1}" for b in range(B)])
    ax.set(xlabel="training step", ylabel="layer boundary")
    return mesh


def depth_colors(n, cmap="coolwarm"):
    """n colours from early (blue) to late (red) layers."""
    return mpl.colormaps[cmap](np.linspace(0.0, 1.0, n))


def plot_boundary_trajectories(ax, steps, overlap, *, cmap="coolwarm"):
    """One line per layer boundary against training step, coloured by depth.

    Parameters
    ----------
    steps : (S,) array_like of int
    overlap : (B, S) array_like

    Returns
    -------
    mappable : matplotlib.cm.ScalarMappable
        For a colorbar of boundary depth.
    """
    overlap = np.asarray(overlap, dtype=float)
    if overlap.ndim != 2 or overlap.shape[1] != len(steps):
        raise ValueError(f"`overlap` must be (boundaries, {len(steps)} steps), got shape {overlap.shape}")
    B = overlap.shape[0]
    for b, color in enumerate(depth_colors(B, cmap)):
        ax.plot(steps, overlap[b], color=color, marker="o", ms=3, lw=1.5)
    set_step_axis(ax, steps)
    ax.set_ylabel("adjacent-layer overlap")
    norm = mpl.colors.Normalize(vmin=-0.5, vmax=B - 0.5)
    return mpl.cm.ScalarMappable(norm=norm, cmap=cmap)


def plot_overlap_matrix(ax, overlap, *, vmin=0.0, vmax=1.0, cmap="viridis"):
    """Pairwise layer-by-layer overlap matrix, layer 0 at the top left.

    Parameters
    ----------
    overlap : (L, L) array_like

    Returns
    -------
    image : matplotlib.image.AxesImage
    """
    overlap = np.asarray(overlap, dtype=float)
    if overlap.ndim != 2 or overlap.shape[0] != overlap.shape[1]:
        raise ValueError(f"`overlap` must be square (L, L), got shape {overlap.shape}")
    masked = overlap.copy()
    np.fill_diagonal(masked, np.nan)  # the diagonal is 1 by definition and would dominate the scale
    image = ax.imshow(masked, vmin=vmin, vmax=vmax, cmap=cmap, interpolation="nearest")
    ax.set(xlabel="layer", ylabel="layer")
    return image


def plot_training_loss(ax, loss):
    """Training (and held-out, when logged) loss against step.

    Parameters
    ----------
    loss : pandas.DataFrame
        Columns ``step`` and ``loss``; ``eval_loss`` is drawn where present.

    Returns
    -------
    line : matplotlib.lines.Line2D
        The training-loss line.
    """
    (line,) = ax.plot(loss["step"], loss["loss"], lw=1, label="train")
    if "eval_loss" in loss:
        held_out = loss.dropna(subset=["eval_loss"])
        ax.plot(held_out["step"], held_out["eval_loss"], marker="o", ms=4, lw=1.5, label="held-out")
    ax.set(xlabel="training step", ylabel="cross-entropy [nats/token]")
    ax.legend(frameon=False)
    return line


def plot_depth_profile(ax, profiles, column, *, cmap="viridis"):
    """One line per checkpoint of a per-layer statistic against depth; step 0 (the random-init
    null) dashed grey, later steps coloured from early (dark) to late (light).

    Parameters
    ----------
    profiles : dict of int -> pandas.DataFrame
        Step -> per-layer table (index = layer) holding `column`.
    column : str

    Returns
    -------
    lines : list of matplotlib.lines.Line2D
        In step order.
    """
    lines = []
    for step, style in _step_styles(sorted(profiles), cmap).items():
        table = profiles[step]
        (line,) = ax.plot(table.index, table[column], marker="o", ms=3, lw=1.2, label=f"step {format_step(step)}", **style)
        lines.append(line)
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("layer")
    return lines


def _step_styles(steps, cmap="viridis"):
    """Step 0 (the random-init null) dashed grey, later steps from dark (early) to light (late)."""
    trained = [s for s in steps if s > 0]
    colors = dict(zip(trained, mpl.colormaps[cmap](np.linspace(0.15, 0.85, max(len(trained), 1)))))
    return {s: dict(color="0.5", ls="--") if s == 0 else dict(color=colors[s]) for s in steps}


def plot_quantile_profile(ax, profiles, name, *, cmap="viridis"):
    """Median of a per-sample statistic against depth with its interquartile band, one line
    per checkpoint (styled as in :func:`plot_depth_profile`).

    Parameters
    ----------
    profiles : dict of int -> pandas.DataFrame
        Step -> per-layer table holding ``median_<name>``, ``q25_<name>``, ``q75_<name>``.
    name : str
    """
    styles = _step_styles(sorted(profiles), cmap)
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
        From :func:`crosslayer.spectra.dose_response_table` (one mode).
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


def pick_steps(steps, n=4):
    """At most `n` of the sorted `steps`, evenly spread, always the first and the last."""
    steps = sorted(steps)
    if len(steps) <= n:
        return steps
    return [steps[i] for i in sorted(set(np.linspace(0, len(steps) - 1, n).round().astype(int)))]


def step_grid(n, *, ncols=4, size=(3.6, 3.2)):
    """A figure with one panel per checkpoint, row-major, shared y axis; unused panels hidden.

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : list of matplotlib.axes.Axes
        The first `n` panels.
    """
    import matplotlib.pyplot as plt

    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), layout="constrained",
                             sharey=True, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def save_png_and_pdf(fig, png, *, dpi):
    """Write `fig` to `png` and, as vector graphics, beside it with the suffix .pdf; close it."""
    import matplotlib.pyplot as plt

    fig.savefig(png, dpi=dpi)
    fig.savefig(str(png).removesuffix(".png") + ".pdf")
    plt.close(fig)


def plot_block_grid(ax, blocks, *, vmax=None, cmap="magma", labels=None):
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

    Returns
    -------
    matplotlib.image.AxesImage
    """
    blocks = np.asarray(blocks, dtype=float)
    n, m, k, _ = blocks.shape
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


def plot_trajectories_2d(ax, coords, *, cmap="viridis"):
    """Token trajectories projected on two principal components: one grey line per token through
    its states, the states coloured by depth (paper Fig. 12).

    Parameters
    ----------
    coords : (L + 1, T, 2) array_like
        NaN-padded tokens are skipped.

    Returns
    -------
    matplotlib.collections.PathCollection
    """
    coords = np.asarray(coords, dtype=float)
    depth = np.broadcast_to(np.arange(coords.shape[0])[:, None], coords.shape[:2])
    ok = np.isfinite(coords).all(axis=-1)
    for t in range(coords.shape[1]):
        if ok[:, t].all():
            ax.plot(coords[:, t, 0], coords[:, t, 1], color="0.7", lw=0.6, zorder=1)
    points = ax.scatter(coords[ok][:, 0], coords[ok][:, 1], c=depth[ok], cmap=cmap, s=8, zorder=2)
    ax.set(xlabel="PC 1", ylabel="PC 2")
    return points


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
        Checkpoint tables (:func:`crosslayer.continuity.checkpoint_summary`); each projection's
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
        :func:`crosslayer.toy_summary.epoch_table` (``run``, ``epoch``, ``metric``, ``metric_sd``).
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
