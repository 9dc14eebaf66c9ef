"""Figure helpers shared by the papers' figures: step labels and axes, depth colours, the depth profile,
the training loss, panel grids and saving. Each ``plot_*`` draws into a given Axes and returns the
main artist; ``save_png_and_pdf`` is the one function that writes. Per paper: ``crosslayer.<paper>.plots``
(Axes level) and ``crosslayer.<paper>.figures`` (the report figures).

The training-loss figure of the models the workflow trains lives here: :data:`TRAINING_FIGURES`
(``{name: function}``, the ``plot_training_loss`` rule's outputs) over :func:`load_training_inputs`.
"""

from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd

__all__ = [
    "format_step", "set_step_axis", "plot_training_loss", "plot_depth_profile", "pick_steps", "step_grid",
    "save_png_and_pdf", "save_figures", "depth_colors", "TrainingFigureInputs", "load_training_inputs", "training_loss_figure",
    "TRAINING_FIGURES",
]


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
    collide. A single checkpoint (a user's one final step) sits in the middle of a linear axis
    (half its step either side; ±1 at step 0): identical limits would be singular."""
    steps = sorted({int(s) for s in steps})
    positive = [s for s in steps if s > 0]
    if len(steps) == 1:
        half = max(steps[0] / 2, 1)
        ax.set_xlim(steps[0] - half, steps[0] + half)
    else:
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


def depth_colors(n, cmap="coolwarm"):
    """n colours from early (blue) to late (red) layers."""
    return mpl.colormaps[cmap](np.linspace(0.0, 1.0, n))


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


def step_styles(steps, cmap="viridis"):
    """Step 0 (the random-init null) dashed grey, later steps from dark (early) to light (late)."""
    trained = [s for s in steps if s > 0]
    colors = dict(zip(trained, mpl.colormaps[cmap](np.linspace(0.15, 0.85, max(len(trained), 1)))))
    return {s: dict(color="0.5", ls="--") if s == 0 else dict(color=colors[s]) for s in steps}

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
    for step, style in step_styles(sorted(profiles), cmap).items():
        table = profiles[step]
        (line,) = ax.plot(table.index, table[column], marker="o", ms=3, lw=1.2, label=f"step {format_step(step)}", **style)
        lines.append(line)
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("layer")
    return lines


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


def save_figures(table, inputs, pngs, *, dpi, pdf=True):
    """Draw every figure of a figure table (name -> function of `inputs` returning a Figure) and
    save each to ``pngs[name]`` with :func:`save_png_and_pdf`: a plotting rule's whole job."""
    for name, draw in table.items():
        save_png_and_pdf(draw(inputs), pngs[name], dpi=dpi, pdf=pdf)


def save_png_and_pdf(fig, png, *, dpi, pdf=True):
    """Write `fig` to `png` and, as vector graphics, beside it with the suffix .pdf (unless not
    `pdf`); close it."""
    import matplotlib.pyplot as plt

    fig.savefig(png, dpi=dpi)
    if pdf:
        # the PNG's draw placed every Axes: the PDF keeps that layout rather than solving it again
        # (a third of the PDF's time)
        fig.set_layout_engine("none")
        fig.savefig(str(png).removesuffix(".png") + ".pdf")
    plt.close(fig)


@dataclass(frozen=True)
class TrainingFigureInputs:
    """What the training figures show: the model's name and its training log (``loss.tsv`` of the
    training run: ``step``, ``loss``, optionally ``eval_loss``)."""

    model: str
    loss: pd.DataFrame


def load_training_inputs(*, model, run):
    """Read the training log of `model` from its training run's directory `run`."""
    return TrainingFigureInputs(model=model, loss=pd.read_csv(Path(run) / "loss.tsv", sep="\t"))


def training_loss_figure(inputs):
    """Training (and held-out) loss against step."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2), layout="constrained")
    plot_training_loss(ax, inputs.loss)
    ax.set_title(f"{inputs.model}: training loss")
    return fig


#: The ``plot_training_loss`` rule's figures, in output order.
TRAINING_FIGURES = {"loss": training_loss_figure}
