"""Regularity of token trajectories (paper 002); numpy only, so that the table jobs need no torch.

Of one trajectory ``x^0 .. x^L`` (:mod:`crosslayer.coupling.trajectories`):

* line-shape score ``LSS = L / ||x~^L - x~^0||`` with ``x~^0 = x^0`` and
  ``x~^l = x~^{l-1} + (x^l - x^{l-1}) / ||x^l - x^{l-1}||``: 1 for collinear steps in one
  direction, larger otherwise;
* expodistance ``ED = Var_l(alpha) / Mean_l(alpha)^2`` with ``alpha_l = ln(||x^l|| / ||x^{l-1}||)``
  and the *population* variance (ddof = 0): 0 for exact geometric growth of the norm. (The paper
  calls it a coefficient of variation; it is the square of one.)
* equidistance ``EQ = Std_l(s) / Mean_l(s)`` with ``s_l = ||x^l - x^{l-1}||`` (population std): the
  coefficient of variation of the step lengths, 0 for equally spaced states (the paper's §5.5 and
  A.3, Fig. 26).

Windowed versions take the sub-trajectory of ``width`` states centred at each depth (paper: 11);
depths whose window does not fit are NaN. None needs the states: the windowed LSS follows from
the Gram matrix of the unit steps (:func:`unit_step_gram`, :func:`windowed_line_shape`), the
windowed ED from the norms (:func:`windowed_expodistance`), the windowed EQ from the step lengths
(:func:`windowed_equidistance`). A checkpoint's job stores those, so
that any width is a statistic over stored arrays, not a new pass through the model.
"""

import numpy as np

__all__ = ["as_trajectories", "equidistance", "expodistance", "line_shape_score", "pack_symmetric", "unit_step_gram", "unit_steps",
           "unpack_symmetric", "windowed", "windowed_equidistance", "windowed_expodistance", "windowed_line_shape"]


def as_trajectories(traj):
    """`traj` as float64, checked to be ``(n_states >= 2, ..., d)``."""
    traj = np.asarray(traj, dtype=np.float64)
    if traj.ndim < 2 or traj.shape[0] < 2:
        raise ValueError(f"`traj` must be (n_states >= 2, ..., d), got shape {traj.shape}")
    return traj


def unit_steps(traj):
    """The unit steps ``(x^l - x^{l-1}) / ||x^l - x^{l-1}||`` of trajectories.

    Parameters
    ----------
    traj : (n, ..., d) array_like

    Returns
    -------
    (n - 1, ..., d) float64 ndarray
        NaN where a step has zero length.
    """
    steps = np.diff(as_trajectories(traj), axis=0)
    lengths = np.linalg.norm(steps, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(lengths > 0, steps / lengths, np.nan)


def unit_step_gram(units):
    """Gram matrices of unit steps, token by token.

    Parameters
    ----------
    units : (m, ..., d) array_like
        Unit steps (:func:`unit_steps`), steps first.

    Returns
    -------
    (..., m, m) float64 ndarray
        ``G[..., i, j] = <u_i, u_j>``: 1 on the diagonal, NaN in the row and column of a zero step.
    """
    units = np.asarray(units, dtype=np.float64)
    return np.einsum("i...d,j...d->...ij", units, units)


def pack_symmetric(matrices):
    """The upper triangles (diagonal included) of symmetric ``(..., m, m)`` matrices, as
    ``(..., m (m + 1) / 2)``: half the bytes of a stored Gram matrix (:func:`unpack_symmetric`)."""
    matrices = np.asarray(matrices)
    rows, cols = np.triu_indices(matrices.shape[-1])
    return matrices[..., rows, cols]


def unpack_symmetric(packed):
    """The ``(..., m, m)`` symmetric matrices of :func:`pack_symmetric`, as float64."""
    packed = np.asarray(packed, dtype=np.float64)
    m = int(round((np.sqrt(8 * packed.shape[-1] + 1) - 1) / 2))
    if m * (m + 1) // 2 != packed.shape[-1]:
        raise ValueError(f"`packed` must hold m (m + 1) / 2 values per matrix, got {packed.shape[-1]}")
    out = np.empty((*packed.shape[:-1], m, m))
    rows, cols = np.triu_indices(m)
    out[..., rows, cols] = packed
    out[..., cols, rows] = packed
    return out


def line_shape_score(traj):
    """Line-shape score of trajectories.

    Parameters
    ----------
    traj : (n, ..., d) array_like
        States along depth first; any batch axes (e.g. tokens) in between.

    Returns
    -------
    ndarray of shape ``traj.shape[1:-1]``
        ``>= 1``; NaN where a step has zero length.
    """
    unit = unit_steps(traj)
    with np.errstate(invalid="ignore", divide="ignore"):
        return unit.shape[0] / np.linalg.norm(unit.sum(axis=0), axis=-1)


def expodistance(traj):
    """Expodistance ``Var(alpha) / Mean(alpha)^2`` (population variance) of trajectories.

    Parameters
    ----------
    traj : (n, ..., d) array_like, n >= 3

    Returns
    -------
    ndarray of shape ``traj.shape[1:-1]``
        ``>= 0``; 0 for exact geometric growth; NaN for a zero state or a zero mean rate.
    """
    traj = as_trajectories(traj)
    if traj.shape[0] < 3:
        raise ValueError(f"expodistance needs at least 3 states (2 rates), got {traj.shape[0]}")
    return _expodistance_of_norms(np.linalg.norm(traj, axis=-1))


def _expodistance_of_norms(norms):
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.diff(np.log(norms), axis=0)
        return alpha.var(axis=0) / alpha.mean(axis=0) ** 2


def equidistance(traj):
    """Equidistance ``Std(s) / Mean(s)`` (population std) of trajectories, ``s_l = ||x^l - x^{l-1}||``.

    Parameters
    ----------
    traj : (n, ..., d) array_like, n >= 3

    Returns
    -------
    ndarray of shape ``traj.shape[1:-1]``
        ``>= 0``; 0 for equally spaced states; NaN where every step is zero.
    """
    traj = as_trajectories(traj)
    if traj.shape[0] < 3:
        raise ValueError(f"equidistance needs at least 3 states (2 steps), got {traj.shape[0]}")
    return _equidistance_of_steps(np.linalg.norm(np.diff(traj, axis=0), axis=-1))


def _equidistance_of_steps(lengths):
    with np.errstate(invalid="ignore", divide="ignore"):
        return lengths.std(axis=0) / lengths.mean(axis=0)


def windowed(statistic, traj, *, width=11):
    """A trajectory statistic on the window of ``width`` states centred at each depth.

    Returns
    -------
    ndarray of shape ``(n, *traj.shape[1:-1])``
        Row ``l`` is the statistic of states ``l - width // 2 .. l + width // 2``; NaN where the
        window does not fit.
    """
    traj = as_trajectories(traj)
    out = np.full((traj.shape[0], *traj.shape[1:-1]), np.nan)
    for centre, first, last in _windows(traj.shape[0], width):
        out[centre] = statistic(traj[first : last + 1])
    return out


def _windows(n_states, width):
    if width < 3 or width % 2 == 0:
        raise ValueError(f"width must be an odd number >= 3, got {width}")
    half = width // 2
    return [(centre, centre - half, centre + half) for centre in range(half, n_states - half)]


def windowed_line_shape(gram, *, width=11):
    """:func:`windowed` line-shape scores from the Gram matrices of the unit steps alone.

    The window of states ``a .. b`` has steps ``a .. b - 1``, and the length of their sum is
    ``sqrt(sum of G[a:b, a:b])``, so the score of every window follows from ``G``.

    Parameters
    ----------
    gram : (..., m, m) array_like
        :func:`unit_step_gram` of the ``m`` steps of trajectories of ``m + 1`` states.

    Returns
    -------
    (m + 1, ...) ndarray
        As ``windowed(line_shape_score, traj, width=width)``; NaN where the window does not fit.
    """
    gram = np.asarray(gram, dtype=np.float64)
    n_states = gram.shape[-1] + 1
    out = np.full((n_states, *gram.shape[:-2]), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        for centre, first, last in _windows(n_states, width):
            out[centre] = (last - first) / np.sqrt(gram[..., first:last, first:last].sum(axis=(-2, -1)))
    return out


def windowed_expodistance(norms, *, width=11):
    """:func:`windowed` expodistance from the norms of the states alone.

    Parameters
    ----------
    norms : (n, ...) array_like
        ``||x^l||`` along depth first.

    Returns
    -------
    (n, ...) ndarray
        As ``windowed(expodistance, traj, width=width)``.
    """
    norms = np.asarray(norms, dtype=np.float64)
    out = np.full(norms.shape, np.nan)
    for centre, first, last in _windows(norms.shape[0], width):
        out[centre] = _expodistance_of_norms(norms[first : last + 1])
    return out


def windowed_equidistance(step_lengths, *, width=11):
    """:func:`windowed` equidistance from the step lengths alone.

    Parameters
    ----------
    step_lengths : (n - 1, ...) array_like
        ``||x^l - x^{l-1}||`` for l = 1 .. n - 1, along depth first.

    Returns
    -------
    (n, ...) ndarray
        As ``windowed(equidistance, traj, width=width)``: the window of states ``a .. b`` has the
        steps ``a + 1 .. b``.
    """
    lengths = np.asarray(step_lengths, dtype=np.float64)
    out = np.full((lengths.shape[0] + 1, *lengths.shape[1:]), np.nan)
    for centre, first, last in _windows(lengths.shape[0] + 1, width):
        out[centre] = _equidistance_of_steps(lengths[first:last])
    return out
