"""Helpers of the artist tests (tests/<paper>/test_figures.py): every figure of a figure table drawn
once per module, and the parts of a figure those tests look at."""

import matplotlib.pyplot as plt


def drawn(table, inputs):
    """A fixture's body (``yield from drawn(FIGURES, inputs)``): every figure of `table` drawn from
    `inputs`, by name, closed when the fixture ends."""
    figures = {name: draw(inputs) for name, draw in table.items()}
    yield figures
    for fig in figures.values():
        plt.close(fig)


def panels(fig):
    """The visible Axes of `fig` that are not colour bars."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]


def colorbars(fig):
    """The colour bars of `fig`."""
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
