"""Checks shared by the settings dataclasses of the per-checkpoint jobs (``AlignmentSettings``,
``ContinuitySettings``, ``CouplingSettings``, ``JacobianSettings``): each raises ValueError naming the
config key of the value it refuses, so that a library caller gets the message a config would.
:func:`is_int` is also the integer test of the stats layer's argument checks."""

import numpy as np

__all__ = ["is_int", "require_bool", "require_choice", "require_int", "require_number"]


def is_int(value):
    """Whether `value` is a Python or NumPy integer (a bool is not)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def require_int(key, value, *, minimum=None):
    """Refuse anything but an integer (at least `minimum`, when given)."""
    if not is_int(value) or (minimum is not None and value < minimum):
        raise ValueError(f"{key} must be an integer{'' if minimum is None else f' >= {minimum}'}, got {value!r}")


def require_number(key, value, *, minimum):
    """Refuse anything but a real number of at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value >= minimum:
        raise ValueError(f"{key} must be a number >= {minimum}, got {value!r}")


def require_choice(key, value, choices):
    """Refuse a value not among `choices`."""
    if value not in choices:
        raise ValueError(f"{key} must be one of {tuple(choices)}, got {value!r}")


def require_bool(key, value):
    """Refuse anything but True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
