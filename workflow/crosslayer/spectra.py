"""Spectral geometry of per-layer block Jacobians (paper 004).

Inputs are Jacobians ``J = d block(x) / d x`` of shape (d, d), float32/float64 NumPy arrays or
torch tensors, with ``J = I + J_res`` (the block contains its residual connection). Every
statistic is computed in float64 (complex128 where the operator is complex); scalars come back
as Python floats. Functions taking ``residual=True`` analyse ``J - I`` instead of ``J``.

The per-sample statistics (:func:`per_sample_stats` and the three functions it combines) have a
second path: given a ``torch.Tensor`` they compute with torch on the tensor's device (CPU or
CUDA), in the precision their ``dtype`` keyword selects (default float64), and only the (B,)
results travel to the host. Everything else converts its input to float64 NumPy.

Groups:

* per-sample statistics over a batch (B, d, d): condition number, participation ratio (no SVD),
  Frobenius norm;
* eigen statistics of the mean Jacobian: spectral radius, fraction of expanding modes,
  fraction of eigenvalues in complex-conjugate pairs; Henrici departure from normality;
* singular-subspace alignment: self-alignment (top-k left vs right singular subspace of one
  layer), forward alignment (layer l's left vs layer l+1's right), Monte-Carlo baselines;
* cumulative Jacobians ``J_{l->L}`` by backward truncated-SVD composition, and their effective
  rank;
* Schur surgery: dose response of the cumulative effective rank to scaling the non-normal part
  of every layer, with two random controls;
* the per-layer depth profile of the above. Depth regimes (early / mid / late): :mod:`crosslayer.regimes`.
"""

import logging
import math
import sys

import numpy as np
import scipy.linalg
from scipy.stats import unitary_group

from crosslayer.arrays import to_numpy
from crosslayer.subspace import SVD_METHODS, pairwise_overlap, random_overlap_baseline, top_singular_subspaces

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_ALPHAS",
    "TORCH_MIN_WIDTH",
    "warn_unreliable_conditions",
    "PER_SAMPLE_DTYPES",
    "SCHUR_MODES",
    "frobenius_norm",
    "participation_ratio",
    "condition_number",
    "per_sample_stats",
    "per_sample_stats_pair",
    "eigen_stats",
    "henrici_departure",
    "residual_norm_ratio",
    "layer_subspaces",
    "self_alignment",
    "alignment_profile",
    "effective_rank",
    "cumulative_effective_rank",
    "schur_parts",
    "schur_recompose",
    "random_strict_upper",
    "haar_unitary",
    "schur_dose_response",
    "schur_dose_responses",
    "dose_response_table",
    "spectral_profile",
]

DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
SCHUR_MODES = ("J", "J - I")


# --------------------------------------------------------------------------- validation


def _as_float(x):
    """float64, or complex128 when the input is complex."""
    x = to_numpy(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64, copy=False)


def _check_square(name, J):
    """(d, d) array in float64/complex128."""
    J = _as_float(J)
    if J.ndim != 2 or J.shape[0] != J.shape[1] or J.shape[0] == 0:
        raise ValueError(f"`{name}` must be a square 2-D (d, d) matrix, got shape {J.shape}")
    return J


def _check_stack(name, Js, *, min_count=1, cast=True):
    """(n, d, d) array in float64/complex128 (input dtype if not cast); (d, d) becomes n = 1."""
    Js = to_numpy(Js) if not isinstance(Js, (list, tuple)) else np.stack([to_numpy(J) for J in Js])
    if cast:
        Js = _as_float(Js)
    if Js.ndim == 2:
        Js = Js[None]
    if Js.ndim != 3 or Js.shape[1] != Js.shape[2] or Js.shape[1] == 0:
        raise ValueError(f"`{name}` must be (n, d, d) or (d, d) square matrices, got shape {Js.shape}")
    if Js.shape[0] < min_count:
        raise ValueError(f"`{name}` must hold at least {min_count} matrices, got shape {Js.shape}")
    return Js


def _strip(J, residual):
    """J, or J - I when residual (works on (d, d) and (n, d, d))."""
    if not residual:
        return J
    return J - np.eye(J.shape[-1], dtype=J.dtype)


def _is_tensor(x):
    """True for a torch.Tensor (torch is imported lazily: if it is not loaded, x is no tensor)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


PER_SAMPLE_STATS = ("frobenius", "participation_ratio", "condition_number")  # per_sample_stats' statistics
PER_SAMPLE_DTYPES = ("float64", "float32")  # compute precisions of the per-sample torch path


def _dtype_name(dtype):
    """"float64" or "float32" from a name or a torch/NumPy dtype; anything else is refused."""
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if name not in PER_SAMPLE_DTYPES:
        raise ValueError(f"`dtype` must be one of {PER_SAMPLE_DTYPES} (name or torch dtype), got {dtype!r}")
    return name


def _torch_dtype(dtype, complex_):
    """The torch compute dtype named by `dtype` (complex counterpart for complex input)."""
    torch = sys.modules["torch"]  # only reached with a tensor, so torch is loaded

    name = _dtype_name(dtype)
    if complex_:
        return torch.complex128 if name == "float64" else torch.complex64
    return torch.float64 if name == "float64" else torch.float32


def _check_tensor_stack(name, J):
    """(n, d, d) detached tensor, same device; (d, d) becomes n = 1."""
    J = J.detach()
    if J.ndim == 2:
        J = J[None]
    if J.ndim != 3 or J.shape[1] != J.shape[2] or J.shape[1] == 0:
        raise ValueError(f"`{name}` must be (n, d, d) or (d, d) square matrices, got shape {tuple(J.shape)}")
    if J.shape[0] < 1:
        raise ValueError(f"`{name}` must hold at least 1 matrices, got shape {tuple(J.shape)}")
    return J


def _check_chunk(chunk):
    if chunk < 1:
        raise ValueError(f"`chunk` must be >= 1, got {chunk}")


def _torch_blocks(J, *, residual, chunk, dtype):
    """Yield (start, block, scale): chunks of a (B, d, d) tensor copied to the compute dtype on
    its own device, minus the identity when `residual`, each matrix divided by a power of two
    ``scale`` ((b,) float64) that brings its largest entry into [0.5, 1). Exact (no rounding), and
    float32 statistics neither overflow (entries ~1e20 square past float32's range) nor underflow."""
    torch = sys.modules["torch"]  # only reached with a tensor, so torch is loaded

    J = _check_tensor_stack("J", J)
    compute = _torch_dtype(dtype, J.is_complex())
    for start in range(0, J.shape[0], chunk):
        block = J[start : start + chunk].to(dtype=compute, copy=True)  # modified in place below
        if residual:
            block.diagonal(dim1=-2, dim2=-1).sub_(1)
        _, exponent = torch.frexp(torch.linalg.vector_norm(block, ord=math.inf, dim=(-2, -1)))  # max |entry| = m 2^e
        exponent.clamp_(-125, 126)  # 2^-e stays a normal float32: the division is exact
        block.mul_(torch.pow(2.0, -exponent.to(block.real.dtype))[:, None, None])
        yield start, block, torch.pow(2.0, exponent.double())


def _torch_frobenius(block):
    """(b,) float64 ``||J||_F`` of a chunk: row norms in the block's dtype, summed in float64
    (torch's CPU float32 norm over both axes at once loses ~4e-5 relative at d = 1024)."""
    torch = sys.modules["torch"]  # only reached with a tensor, so torch is loaded

    rows = torch.linalg.vector_norm(block, dim=-1).double()
    return torch.linalg.vector_norm(rows, dim=-1)


def _torch_participation(block, fro, gram=None):
    """(b,) float64 ``||J||_F^4 / ||J^H J||_F^2`` of a chunk, given its Frobenius norms (and its
    Gram matrices ``J^H J`` when already formed)."""
    gram_fro = _torch_frobenius(block.mH @ block if gram is None else gram)
    return fro**4 / gram_fro**2  # 0 / 0 = NaN for J = 0, like the NumPy path


# How each condition number was computed (per_sample_stats' "condition_path"), cheapest first.
CONDITION_PATHS = ("gram", "inverse_iteration", "svd")
CONDITION_METHOD = (
    "float64: s_max from the top eigenvalue of J^H J (CPU, 512 <= d < 2048: LAPACK tridiagonal reduction and "
    "bisection for the two end eigenvalues; else eigvalsh); s_min from its bottom one when d eps e <= 1e-8 "
    "s_min^2, e = s_max^2 (for J - I's Gram matrix derived from J's, (s_max(J) + 1)^2) (path 0, gram), else from "
    "block inverse iteration on an LU of J until its residual bound is <= 1e-10 (path 1), else from the full SVD "
    "(path 2); a matrix whose predecessor (same operator, same call) took path 1 tries path 1 first, with s_max^2 "
    "then by Lanczos (ARPACK, relative tolerance 1e-12, on the CPU from d = 512); float32: the full SVD (path 2)")
_GRAM_TOL = 1e-8  # accepted relative perturbation of s_min^2 from forming and diagonalizing J^H J
_INVERSE_TOL = 1e-10  # accepted relative residual of the Ritz value of (J^H J)^{-1}
_INVERSE_BLOCK = 16  # vectors iterated together: a cluster of up to 15 small singular values still converges
_INVERSE_ITERATIONS = 12


def _torch_smin_inverse(J):
    """s_min of one (d, d) matrix by block inverse iteration on ``(J^H J)^{-1}`` through an LU of J
    (Rayleigh-Ritz each step), or None when it does not reach :data:`_INVERSE_TOL` in
    :data:`_INVERSE_ITERATIONS` steps or J is singular to working precision. Converges fast
    exactly when the Gram route is inaccurate: a small s_min well below the next ones."""
    torch = sys.modules["torch"]  # only reached with a tensor, so torch is loaded

    LU, pivots, info = torch.linalg.lu_factor_ex(J)  # one matrix: batched CPU LU hangs in torch 2.13 (MKL)
    if info.item() != 0:
        return None
    d, p = J.shape[-1], min(_INVERSE_BLOCK, J.shape[-1])
    generator = torch.Generator(device=J.device).manual_seed(0)
    Q = torch.linalg.qr(torch.randn(d, p, dtype=J.dtype, device=J.device, generator=generator)).Q
    for _ in range(_INVERSE_ITERATIONS):
        Z = torch.linalg.lu_solve(LU, pivots, Q, adjoint=True)  # J^{-H} Q
        theta, V = torch.linalg.eigh(Z.mH @ Z)  # Ritz values of (J^H J)^{-1} on span Q
        Y = torch.linalg.lu_solve(LU, pivots, Z @ V)  # (J^H J)^{-1} Q V
        top = theta[-1]
        if not torch.isfinite(top):
            return None
        # an eigenvalue lies within the residual norm of the Ritz pair (Hermitian operator)
        if torch.linalg.vector_norm(Y[:, -1] - top * (Q @ V[:, -1])) <= _INVERSE_TOL * top:
            return float(top.double().rsqrt())
        Q = torch.linalg.qr(Y).Q
    return None


# Widths at which SciPy's tridiagonal reduction (OpenBLAS) beats torch's eigvalsh (MKL) on the CPU
# within the statistics (measured 2026-11-24 on 2 threads, reduction / eigvalsh): 0.06 / 0.13-0.18 s
# at d = 1024, 0.19-0.24 / 0.33-0.78 at 1536, 0.51-0.56 / 0.42-0.59 at 2048, 2.1-2.5 / 1.0-1.4 at
# 3072 and 7.9-8.3 / 2.4-2.5 at 4096 (past the cache, MKL's reduction is the better blocked one).
# Below 512 the per-matrix calls, and OpenBLAS's threads alternating with torch's, cost more than
# they save: the statistics at d = 128 took 3.6-4.3 ms per operator against 1.1-1.2 with eigvalsh.
_REDUCTION_WIDTHS = (512, 2048)


def _gram_extremes(gram):
    """(b, 2) float64 ``[lambda_min, lambda_max]`` of each Hermitian matrix in a chunk.

    On the CPU within :data:`_REDUCTION_WIDTHS`, per matrix: LAPACK's Householder tridiagonal
    reduction (``?sytrd``/``?hetrd``) and bisection (``dstebz``) for the two end eigenvalues
    only, as accurate as a full ``eigvalsh`` (absolute error ~ eps ||G||) and 2-3x faster than
    torch's at d = 1024; the reduction is nearly all of the cost. Otherwise (other widths, or on a
    GPU) ``torch.linalg.eigvalsh``."""
    torch = sys.modules["torch"]  # only reached with a tensor, so torch is loaded

    low, high = _REDUCTION_WIDTHS
    if gram.device.type != "cpu" or not low <= gram.shape[-1] < high:
        lam = torch.linalg.eigvalsh(gram)
        return lam[:, [0, -1]].double()
    from scipy.linalg import eigvalsh_tridiagonal, lapack

    reduce = lapack.zhetrd if gram.is_complex() else lapack.dsytrd
    d = gram.shape[-1]
    ends = np.empty((gram.shape[0], 2))
    for i, G in enumerate(gram.numpy()):
        # G.T is Fortran-ordered (no copy); it is G or, for complex G, conj(G): the same eigenvalues
        _, diagonal, off, _, info = reduce(G.T, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"tridiagonal reduction failed (info={info})")
        for j, k in enumerate((0, d - 1)):
            ends[i, j] = eigvalsh_tridiagonal(diagonal, off, select="i", select_range=(k, k),
                                              check_finite=False, lapack_driver="stebz")[0]
    return torch.from_numpy(ends)


_TOP_TOL = 1e-12  # ARPACK's relative accuracy of the Gram matrix's top eigenvalue (s_max^2)
_TOP_MIN_WIDTH = 512  # below, one eigenvalue decomposition costs less than ARPACK's iterations (measured)


def _gram_top(G):
    """float64 top eigenvalue of one Hermitian matrix: on the CPU by ARPACK's Lanczos (relative
    accuracy :data:`_TOP_TOL`, fixed start vector), 5-10x cheaper than the tridiagonal reduction at
    d = 1024; small, non-converging or GPU matrices by :func:`_gram_extremes`."""
    torch = sys.modules["torch"]  # only reached with a tensor, so torch is loaded

    d = G.shape[-1]
    if G.device.type == "cpu" and d >= _TOP_MIN_WIDTH:
        from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

        # products by torch, like the LU around it: alternating with NumPy's BLAS threads cost 2x here
        op = LinearOperator((d, d), matvec=lambda v: (G @ torch.from_numpy(v.ravel())).numpy(),
                            dtype=G.numpy().dtype)
        start = np.random.default_rng(0).standard_normal(d)  # reproducible; 1 is in LayerNorm Jacobians' kernel
        try:
            return float(eigsh(op, k=1, which="LA", tol=_TOP_TOL, v0=start, return_eigenvectors=False)[0])
        except ArpackNoConvergence:
            pass
    return float(_gram_extremes(G[None])[0, 1])


def _torch_condition(block, gram=None, gram_error=None, route=None):
    """(b,) float64 NumPy ``s_max / s_min`` of a chunk, (b,) int8 :data:`CONDITION_PATHS` codes,
    and (b,) float64 top eigenvalues of the Gram matrices (None for float32 blocks).
    ``gram_error``: (b,) scale of the given Gram matrices' rounding error in units of ``d eps``
    (default their largest eigenvalue, right for a product ``J^H J``). ``route``: a dict carried
    across the chunks of one operator (see below).

    ``s_max^2`` is the top eigenvalue of the Gram matrix ``J^H J`` (relative error ~ d eps).
    ``s_min^2`` is its bottom eigenvalue only while the perturbation of forming and diagonalizing
    ``J^H J`` (~ d eps s_max^2, Weyl) is below ``1e-8 s_min^2``, i.e. kappa <~ 200 at d = 1024
    in float64; otherwise block inverse iteration on an LU of J, and the full SVD when that does
    not converge. Both of those are as accurate as the SVD (absolute error ~ eps s_max). float32
    blocks take the SVD: there the Gram route loses ~d eps_32 kappa^2 and inverse iteration,
    stopped at float32's precision, was slower than the SVD on near-identity J.

    Matrices are taken in order, and one whose predecessor took inverse iteration tries it first:
    the samples of one operator are alike (J - I of a layer is typically ill-conditioned, J is
    not), and when it converges only s_max is needed, by Lanczos (:func:`_gram_top`) instead of
    the tridiagonal reduction that would only confirm the Gram route's failure. Every path checks
    its own accuracy, so the order decides the cost, and the recorded path only where two are
    accurate."""
    torch = sys.modules["torch"]  # only reached with a tensor, so torch is loaded

    if block.real.dtype != torch.float64:  # float32: neither shortcut is accurate enough (measured), so the SVD
        s = torch.linalg.svdvals(block)[:, [0, -1]].double().cpu().numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            return s[:, 0] / s[:, 1], np.full(len(s), CONDITION_PATHS.index("svd"), np.int8), None
    gram = block.mH @ block if gram is None else gram
    route = {"inverse_first": False} if route is None else route
    b, d = block.shape[0], block.shape[-1]
    top2, smax, smin, path = np.empty(b), np.empty(b), np.empty(b), np.empty(b, np.int8)
    for i in range(b):
        value = _torch_smin_inverse(block[i]) if route["inverse_first"] else None
        if value is not None:
            top2[i], path[i] = _gram_top(gram[i]), 1
        else:
            low, top2[i] = _gram_extremes(gram[i : i + 1])[0].tolist()
            error = top2[i] if gram_error is None else max(top2[i], float(gram_error[i]))
            if d * np.finfo(np.float64).eps * error <= _GRAM_TOL * max(low, 0.0):
                value, path[i] = math.sqrt(low), 0
            else:
                tried = route["inverse_first"] or top2[i] == 0
                value, path[i] = (None if tried else _torch_smin_inverse(block[i])), 1
        smax[i] = math.sqrt(max(top2[i], 0.0))
        if value is None:  # no convergence, singular or zero: the full SVD decides
            s = torch.linalg.svdvals(block[i]).double().cpu().numpy()
            smax[i], value, path[i] = s[0], s[-1], 2
        smin[i] = value
        route["inverse_first"] = path[i] == 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return smax / smin, path, torch.from_numpy(top2).to(block.device)


def _torch_per_chunk(J, fn, *, residual, chunk, dtype):
    """(B,) float64 NumPy array of ``fn(block, scale)`` over the chunks of a tensor."""
    out = []
    for _, block, scale in _torch_blocks(J, residual=residual, chunk=chunk, dtype=dtype):
        values = fn(block, scale)
        out.append(values if isinstance(values, np.ndarray) else values.cpu().numpy())
    return np.concatenate(out).astype(np.float64, copy=False)


def _check_power(power):
    if power not in (1, 2):
        raise ValueError(f"`power` must be 1 or 2, got {power!r}")


# --------------------------------------------------------------------------- per-sample


def frobenius_norm(J, *, residual=False, dtype="float64", chunk=16):
    """Frobenius norm of each matrix in a batch.

    Parameters
    ----------
    J : (B, d, d) or (d, d) array_like or torch.Tensor
        Jacobians; a single matrix is a batch of one.
    residual : bool, default=False
        Use ``J - I``.
    dtype : {"float64", "float32"} or torch.float64 / torch.float32, default float64
        Compute precision of the torch path (tensor input only).
    chunk : int, default=16
        Matrices processed at once by the torch path.

    Returns
    -------
    norm : (B,) float64 ndarray
        ``||J||_F >= 0``.

    Notes
    -----
    See :func:`per_sample_stats` for the torch path.
    """
    _check_chunk(chunk)
    _dtype_name(dtype)
    if _is_tensor(J):
        return _torch_per_chunk(J, lambda b, scale: _torch_frobenius(b) * scale, residual=residual, chunk=chunk,
                                dtype=dtype)
    J = _strip(_check_stack("J", J), residual)
    return np.sqrt(np.einsum("bij,bij->b", J.conj(), J).real)


def participation_ratio(J, *, residual=False, chunk=16, dtype="float64"):
    """Participation ratio ``(sum s^2)^2 / sum s^4`` of each matrix, without an SVD.

    Parameters
    ----------
    J : (B, d, d) or (d, d) array_like or torch.Tensor
    residual : bool, default=False
        Use ``J - I``.
    chunk : int, default=16
        Matrices processed at once (bounds the working memory).
    dtype : {"float64", "float32"} or torch.float64 / torch.float32, default float64
        Compute precision of the torch path (tensor input only).

    Returns
    -------
    pr : (B,) float64 ndarray
        In [1, d]: 1 for rank one, d for a multiple of an orthogonal matrix; NaN for J = 0.

    Notes
    -----
    ``sum s^2 = ||J||_F^2`` and ``sum s^4 = ||J^T J||_F^2`` (the eigenvalues of ``J^T J`` are
    ``s^2``), so ``PR = ||J||_F^4 / ||J^T J||_F^2``: one matrix product instead of an SVD.
    See :func:`per_sample_stats` for the torch path.
    """
    _check_chunk(chunk)
    _dtype_name(dtype)
    if _is_tensor(J):
        return _torch_per_chunk(J, lambda b, _: _torch_participation(b, _torch_frobenius(b)), residual=residual,
                                chunk=chunk, dtype=dtype)
    J = _check_stack("J", J, cast=False)
    out = np.empty(J.shape[0])
    for start in range(0, J.shape[0], chunk):
        block = _strip(_as_float(J[start : start + chunk]), residual)
        fro2 = np.einsum("bij,bij->b", block.conj(), block).real
        gram = np.conj(np.swapaxes(block, 1, 2)) @ block
        gram2 = np.einsum("bij,bij->b", gram.conj(), gram).real
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + chunk] = fro2**2 / gram2
    return out


def condition_number(J, *, residual=False, dtype="float64", chunk=16):
    """Condition number ``s_max / s_min`` of each matrix (NumPy: full SVD; torch: extreme
    singular values, see :func:`per_sample_stats`).

    Parameters
    ----------
    J : (B, d, d) or (d, d) array_like or torch.Tensor
    residual : bool, default=False
        Use ``J - I``.
    dtype : {"float64", "float32"} or torch.float64 / torch.float32, default float64
        Compute precision of the torch path (tensor input only).
    chunk : int, default=16
        Matrices processed at once by the torch path.

    Returns
    -------
    kappa : (B,) float64 ndarray
        In [1, inf]; inf for a singular matrix, NaN for J = 0.

    Notes
    -----
    See :func:`per_sample_stats` for the torch path and the accuracy of float32.
    """
    _check_chunk(chunk)
    _dtype_name(dtype)
    if _is_tensor(J):
        route = {"inverse_first": False}
        return _torch_per_chunk(J, lambda b, _: _torch_condition(b, route=route)[0], residual=residual, chunk=chunk,
                                dtype=dtype)
    J = _strip(_check_stack("J", J), residual)
    s = np.linalg.svd(J, compute_uv=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        return s[:, 0] / s[:, -1]


def per_sample_stats(J, *, residual=False, condition=True, chunk=16, dtype="float64"):
    """Distributions of the per-sample statistics over a batch of Jacobians.

    Parameters
    ----------
    J : (B, d, d) or (d, d) array_like or torch.Tensor
        One Jacobian per sample. A tensor is processed on its own device (torch path).
    residual : bool, default=False
        Use ``J - I``.
    condition : bool, default=True
        Also compute the condition number (the only statistic needing an SVD).
    chunk : int, default=16
        Matrices converted to the compute dtype at once (bounds the working memory: about three
        chunks of (d, d) matrices in that dtype, plus the SVD's workspace).
    dtype : {"float64", "float32"} or torch.float64 / torch.float32, default float64
        Compute precision of the torch path; NumPy input is always float64.

    Returns
    -------
    stats : dict of str -> (B,) float64 ndarray
        ``"frobenius"``, ``"participation_ratio"`` and (if ``condition``) ``"condition_number"``;
        the torch path adds ``"condition_path"``, (B,) int8 indices into :data:`CONDITION_PATHS`.

    Notes
    -----
    Condition numbers without a full SVD (torch path; :data:`CONDITION_METHOD`). ``s_max`` is the
    top eigenvalue of the Gram matrix ``J^H J``, which the participation ratio forms anyway
    (on the CPU its two end eigenvalues cost one tridiagonal reduction, about a third of an SVD at
    d = 1024). ``s_min`` comes from the bottom eigenvalue while that
    is accurate to 1e-8 relative (kappa up to ~200 at d = 1024 in float64, e.g. most J of a
    residual network); otherwise from block inverse iteration through an LU of J, which
    converges in a few steps exactly when s_min is small and isolated (J - I with kappa 1e4 and
    beyond); the full SVD remains for the rest (clustered smallest singular values). Every path
    is accurate to about the SVD's own error, ``eps * kappa`` relative (tests compare them with
    NumPy's SVD at kappa up to 1e6). Once a matrix has needed inverse iteration, the next one of
    the same operator tries it first and takes s_max alone by Lanczos (ARPACK): 5-10 ms at
    d = 1024 against 45-65 ms for the tridiagonal reduction, even though the top singular values
    of these Jacobians cluster (s_2 / s_1 = 0.98-0.998 on random Llama and GPT-NeoX layers).
    Lanczos for s_min as well was measured and dropped: the bottom of the spectrum converges
    far more slowly. With `dtype` float32 the condition number stays the full SVD's.

    Torch path. For a ``torch.Tensor`` input everything runs with torch on the tensor's device
    (no host copy of the Jacobians; ``J - I`` is formed on the device), chunk by chunk, in
    `dtype`; only the (B,) results come back, as float64 NumPy. float64 (the default) agrees with
    the NumPy path to rounding. float32 is much faster on GPUs (roughly 10x or more on GPUs with
    reduced-rate float64, e.g. consumer and workstation cards; less on data-center GPUs with
    half-rate float64); on a CPU it is slower with condition numbers (about 2x at d = 1024, measured
    2026-11-24: float32 keeps the full SVD) and faster only without them (the Gram product ~2.5x).
    Its Frobenius norm and participation ratio are accurate to ~1e-6 relative (a-priori bounds
    ``d eps_32`` and ``4 d eps_32``); its condition number to about
    ``eps_32 * kappa`` relative (singular values carry an absolute error ~ ``eps_32 * s_max``),
    so it is meaningful only while ``kappa << 1 / eps_32 ~ 1e7``. (A float32 Jacobian is itself
    rounded at ``eps_32``: float64 then gives the exact condition number of the rounded matrix;
    likewise ``J - I`` of a float32 ``J ~ I`` carries an absolute error ~ ``eps_32`` on its
    diagonal whichever dtype the statistics are computed in.)
    If TF32 matmuls are enabled (``torch.set_float32_matmul_precision("high")``), the float32
    participation ratio on CUDA inherits TF32's ~1e-3 error. NumPy input ignores `dtype` and is
    always computed in float64 (complex128).
    """
    _check_chunk(chunk)
    _dtype_name(dtype)
    parts = {"frobenius": [], "participation_ratio": []}
    if condition:
        parts["condition_number"] = []
    if _is_tensor(J):
        if condition:
            parts["condition_path"] = []
        route = {"inverse_first": False} if condition else None
        for _, block, scale in _torch_blocks(J, residual=residual, chunk=chunk, dtype=dtype):
            _torch_chunk_stats(parts, block, scale, _gram(block), _torch_frobenius(block), route)
        return {name: np.concatenate(values) for name, values in parts.items()}
    Jn = _check_stack("J", J, cast=False)
    for start in range(0, Jn.shape[0], chunk):
        block = _as_float(Jn[start : start + chunk])
        parts["frobenius"].append(frobenius_norm(block, residual=residual))
        parts["participation_ratio"].append(participation_ratio(block, residual=residual, chunk=chunk))
        if condition:
            parts["condition_number"].append(condition_number(block, residual=residual))
    return {name: np.concatenate(values) for name, values in parts.items()}


def _gram(block):
    """``J^H J`` of every matrix in a chunk (the statistics' one d^3 product per matrix)."""
    return block.mH @ block


def _torch_chunk_stats(parts, block, scale, gram, fro, route, gram_error=None):
    """Append one chunk's statistics to `parts` (lists per name), given its Gram matrices
    (shared by the participation ratio and the condition number) and Frobenius norms (of the
    scaled block; the ratios do not see the scale); `route` is the condition number's (see
    :func:`_torch_condition`), None without it. Return the Gram matrices' top eigenvalues when
    the condition number computed them, else None."""
    parts["participation_ratio"].append(_torch_participation(block, fro, gram).cpu().numpy())
    parts["frobenius"].append((fro * scale).cpu().numpy())
    if route is None:
        return None
    kappa, path, top = _torch_condition(block, gram, gram_error, route)
    parts["condition_number"].append(kappa)
    parts["condition_path"].append(path)
    return top


# Largest accepted ratio of the error scale of J - I's Gram matrix derived from J's to that of its
# own product; past it (J - I much smaller than J + I, e.g. a near-zero residual branch), the product.
_DERIVED_GRAM_LOSS = 64.0


def per_sample_stats_pair(J, *, condition=True, chunk=16, dtype="float64"):
    """:func:`per_sample_stats` of J and of ``J - I`` at once, the latter's names with ``_res``.

    Equal to two calls (``residual=False`` and ``True``). For a torch tensor in float64 each
    chunk is converted once and the Gram matrix of ``J - I`` comes from J's:
    ``(J - I)^H (J - I) = J^H J - J - J^H + I``, O(d^2) instead of a second d^3 product (measured
    2026-11-24 on 2 threads: 1.04-1.06x faster than two calls at d = 1024, where the eigenvalues
    dominate, and 1.07-1.25x at d = 4096, where a float64 Gram product is 1.6-1.9 s).

    The derived matrix's rounding error scales as ``(||J|| + 1)^2`` rather than ``||J - I||^2``.
    The participation ratio accepts it while that loses at most a factor
    :data:`_DERIVED_GRAM_LOSS` (in Frobenius norms; otherwise that sample's product is formed), and
    the condition number's Gram route accounts for it in its accuracy test (else inverse iteration
    or the SVD, as always). float32 and NumPy input run the two calls: in float32 the shared scaling
    of J and J - I could overflow.
    """
    if not (_is_tensor(J) and _dtype_name(dtype) == "float64"):
        plain = per_sample_stats(J, condition=condition, chunk=chunk, dtype=dtype)
        res = per_sample_stats(J, residual=True, condition=condition, chunk=chunk, dtype=dtype)
        return plain | {f"{name}_res": values for name, values in res.items()}
    _check_chunk(chunk)
    torch = sys.modules["torch"]
    names = list(PER_SAMPLE_STATS if condition else PER_SAMPLE_STATS[:2]) + (["condition_path"] if condition else [])
    plain, res = {name: [] for name in names}, {name: [] for name in names}
    route, route_res = ({"inverse_first": False}, {"inverse_first": False}) if condition else (None, None)
    for _, block, scale in _torch_blocks(J, residual=False, chunk=chunk, dtype=dtype):
        gram, fro = _gram(block), _torch_frobenius(block)
        top = _torch_chunk_stats(plain, block, scale, gram, fro, route)
        # J - I in J's scale: subtract c = 1 / scale (a power of two, so exact) from the diagonal; J's
        # Gram matrix becomes J - I's in place (per matrix: full-chunk temporaries cost more than they save)
        c = (1 / scale).to(block.real.dtype)
        residual = block.clone()
        residual.diagonal(dim1=-2, dim2=-1).sub_(c[:, None])
        for i, ci in enumerate(c.tolist()):
            gram[i].sub_(block[i], alpha=ci).sub_(block[i].mH, alpha=ci).diagonal().add_(ci * ci)
        # rounding of the derived Gram matrix: eps times (||J|| + c)^2, against ||J - I||^2 for the product
        fro_res = _torch_frobenius(residual)
        own = (fro + c * math.sqrt(block.shape[-1])) ** 2 > _DERIVED_GRAM_LOSS * fro_res**2
        if own.any():
            gram[own] = _gram(residual[own])
        error = None if top is None else torch.where(own, 0.0, (top.clamp(min=0).sqrt() + c) ** 2)
        _torch_chunk_stats(res, residual, scale, gram, fro_res, route_res, error)
        del gram, residual
    return ({name: np.concatenate(values) for name, values in plain.items()} |
            {f"{name}_res": np.concatenate(values) for name, values in res.items()})


def warn_unreliable_conditions(kappa, dtype, where):
    """Log a warning when condition numbers are inf (a singular value rounded to zero) or, from
    float32 statistics, beyond ``1 / eps_32`` (rounding, not the matrix); return how many."""
    dtype = _dtype_name(dtype)
    limit = np.inf if dtype == "float64" else 1 / np.finfo(np.float32).eps
    beyond = int(np.sum(np.asarray(kappa) >= limit))
    if beyond:
        log.warning("%s: %d of %d condition numbers are inf or beyond %s precision (>= %.3g): singular to "
                    "working precision%s", where, beyond, np.size(kappa), dtype, limit,
                    "" if dtype == "float64" else "; per_sample_dtype: float64 resolves them up to ~1e15")
    return beyond


# --------------------------------------------------------------------------- eigenvalues


def eigen_stats(J, *, residual=False, tol=1e-6):
    """Eigenvalue statistics of one (mean) Jacobian.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
        Typically the mean Jacobian of a layer.
    residual : bool, default=False
        Use ``J - I``.
    tol : float, default=1e-6
        An eigenvalue counts as complex when ``|Im lambda| > tol * max|lambda|`` (relative).

    Returns
    -------
    stats : dict
        ``"eigenvalues"``: (d,) complex ndarray (``numpy.linalg.eigvals``);
        ``"spectral_radius"``: float, ``max|lambda| >= 0``;
        ``"frac_expanding"``: float in [0, 1], fraction with ``|lambda| > 1``;
        ``"frac_complex"``: float in [0, 1], fraction in complex-conjugate pairs (for real J they
        come in pairs, so this is even / d).
    """
    if not tol >= 0:
        raise ValueError(f"`tol` must be >= 0, got {tol}")
    J = _strip(_check_square("J", J), residual)
    lam = np.linalg.eigvals(J)
    radius = float(np.abs(lam).max())
    return {
        "eigenvalues": lam,
        "spectral_radius": radius,
        "frac_expanding": float(np.mean(np.abs(lam) > 1.0)),
        "frac_complex": float(np.mean(np.abs(lam.imag) > tol * radius)) if radius > 0 else 0.0,
    }


def henrici_departure(J, *, residual=False, eigenvalues=None):
    """Henrici departure from normality ``sqrt(max(||J||_F^2 - sum|lambda|^2, 0)) / ||J||_F``.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    residual : bool, default=False
        Use ``J - I``.
    eigenvalues : (d,) array_like, optional
        Eigenvalues of the analysed operator if already computed.

    Returns
    -------
    departure : float
        In [0, 1]: 0 for normal matrices, -> 1 when the strictly upper-triangular Schur part
        dominates (it is ``||N||_F / ||J||_F`` for the Schur form ``J = Q (D + N) Q^H``).
        NaN for J = 0.
    """
    J = _strip(_check_square("J", J), residual)
    lam = np.linalg.eigvals(J) if eigenvalues is None else np.asarray(eigenvalues)
    if lam.shape != (J.shape[0],):
        raise ValueError(f"`eigenvalues` must have shape ({J.shape[0]},), got {lam.shape}")
    fro2 = float(np.vdot(J, J).real)
    if fro2 == 0:
        return math.nan
    return math.sqrt(max(fro2 - float(np.sum(np.abs(lam) ** 2)), 0.0) / fro2)


def residual_norm_ratio(J):
    """``||J - I||_F / ||I||_F = ||J - I||_F / sqrt(d)``, a float >= 0.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    """
    J = _check_square("J", J)
    R = _strip(J, True)
    return float(np.sqrt(np.vdot(R, R).real / J.shape[0]))


# --------------------------------------------------------------------------- alignment


def layer_subspaces(Js, *, k=10, residual=False, method="arpack", seed=0):
    """Top-k left and right singular subspaces of each layer's (mean) Jacobian.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
    k : int, default=10
        ``1 <= k < d``.
    residual : bool, default=False
        Use ``J - I``.
    method : {"arpack", "full"}, default="arpack"
        See :func:`crosslayer.subspace.top_singular_subspaces`.
    seed : int, default=0

    Returns
    -------
    U, V : (L, d, k) ndarray
        Left (output-space) and right (input-space) orthonormal bases.
    """
    Js = _check_stack("Js", Js)
    if np.iscomplexobj(Js):
        raise ValueError(f"`Js` must be real, got dtype {Js.dtype}")
    if method not in SVD_METHODS:
        raise ValueError(f"`method` must be one of {SVD_METHODS}, got {method!r}")
    d = Js.shape[1]
    if not 1 <= k < d:
        raise ValueError(f"`k` must satisfy 1 <= k < d = {d}, got {k}")
    Us, Vs = [], []
    for J in Js:
        U, _, V = top_singular_subspaces(_strip(J, residual), k, method=method, seed=seed)
        Us.append(U)
        Vs.append(V)
    return np.stack(Us), np.stack(Vs)


def self_alignment(J, *, k=10, residual=False, method="arpack", seed=0):
    """Overlap between the top-k left and top-k right singular subspaces of one matrix.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    k : int, default=10
        ``1 <= k < d``.
    residual : bool, default=False
        Use ``J - I``.
    method, seed
        See :func:`layer_subspaces`.

    Returns
    -------
    overlap : float
        In [0, 1] (mean cosine of the principal angles); 1 for symmetric (e.g. PSD) matrices
        with a gap after the k-th singular value; about ``random_overlap_baseline(d, k)`` for
        unrelated subspaces.
    """
    J = _check_square("J", J)
    U, V = layer_subspaces(J[None], k=k, residual=residual, method=method, seed=seed)
    return float(pairwise_overlap(U, V)[0, 0])


def alignment_profile(Js, *, k=10, residual=False, method="arpack", seed=0, draws=1000):
    """Self- and forward alignment across layers, with the Monte-Carlo random baseline.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
        Per-layer mean Jacobians in depth order.
    k : int, default=10
    residual : bool, default=False
        Use ``J - I``.
    method, seed
        See :func:`layer_subspaces`; ``seed`` also seeds the baseline.
    draws : int, default=1000
        Monte-Carlo pairs for :func:`crosslayer.subspace.random_overlap_baseline`.

    Returns
    -------
    profile : dict
        ``"self"``: (L,) ndarray, overlap(U_l, V_l);
        ``"forward"``: (L - 1,) ndarray, overlap(U_l, V_{l+1}) (layer l's output subspace against
        layer l+1's input subspace);
        ``"baseline_mean"``, ``"baseline_sd"``: float, overlap of random k-dim subspaces of R^d.
        All in [0, 1].
    """
    U, V = layer_subspaces(Js, k=k, residual=residual, method=method, seed=seed)
    overlap = pairwise_overlap(U, V)  # [i, j] = overlap(U_i, V_j)
    mean, sd = random_overlap_baseline(U.shape[1], k, draws=draws, seed=seed)
    return {
        "self": np.diagonal(overlap).copy(),
        "forward": np.diagonal(overlap, offset=1).copy(),
        "baseline_mean": mean,
        "baseline_sd": sd,
    }


# --------------------------------------------------------------------------- effective rank


def effective_rank(s, *, power=1):
    """Roy-Vetterli effective rank ``exp(H(p))`` of a spectrum.

    Parameters
    ----------
    s : (n,) array_like
        Singular values, >= 0.
    power : {1, 2}, default=1
        ``p_i = s_i^power / sum_j s_j^power``: 1 is Roy-Vetterli (paper 004), 2 weights by
        energy ``s^2``.

    Returns
    -------
    erank : float
        In [1, n] (n when all s_i are equal, 1 for rank one); NaN when all s are 0.
    """
    _check_power(power)
    s = np.asarray(s, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"`s` must be a non-empty 1-D array, got shape {s.shape}")
    if np.any(s < 0):
        raise ValueError("`s` must be >= 0")
    w = s**power
    total = w.sum()
    if total == 0:
        return math.nan
    p = w[w > 0] / total
    return float(np.exp(-np.sum(p * np.log(p))))


#: Width from which the Schur surgery's running products run in torch: its LAPACK SVD is about
#: twice NumPy's at d = 576, while below, importing torch (~2 s per job) costs more than it saves.
TORCH_MIN_WIDTH = 256


class _BackwardProduct:
    """Running rank-r product ``J_L ... J_l`` kept as ``U S V^H`` with max-normalized S.

    Only S and V^H are stored: multiplying an earlier layer on the right, ``U S V^H J_l``,
    has the singular values and right vectors of ``S V^H J_l`` because U has orthonormal
    columns.
    """

    def __init__(self, rank):
        self.rank = rank
        self.s = None
        self.vh = None
        self.log_scale = 0.0

    def push(self, J):
        """Multiply J (the next, earlier layer) on the right; return (singular values, log||P||_F)."""
        _, s, vh = np.linalg.svd(J if self.s is None else self.s[:, None] * (self.vh @ J), full_matrices=False)
        self.vh = vh[: self.rank]
        self.log_scale, self.s, out = _rescale(self.log_scale, s[: self.rank])
        return out


def _rescale(log_scale, s):
    """Divide singular values by their largest and add its log to ``log_scale``. Returns the
    new log scale, the divided values, and ``(those as NumPy, log Frobenius norm)``."""
    top = float(s[0])
    if top > 0:
        log_scale += math.log(top)
        s = s / top
    values = s if isinstance(s, np.ndarray) else s.numpy()
    return log_scale, s, (values, log_scale + math.log(float(np.linalg.norm(values))) if top > 0 else -math.inf)


class _SchurProduct:
    """Running rank-r product ``J_L ... J_l`` of layers given as ``J = B T B^H`` (B unitary, T
    upper triangular: a Schur form, its dose or a control), kept as ``P B_l^H``.

    P is (r, d), scaled so that its largest singular value is 1 (the scale goes to a log), and
    B_l, the basis of the layer pushed last, is never applied: the next push receives
    ``C = B_l^H B_{l-1}``, one d x d product that every running product on the same chain of
    bases shares (the dose and control A at every alpha share the Schur bases of a mode; control
    B's draw j shares its Haar unitaries across alphas and modes). A push is ``P <- P C T`` (two
    r x d x d products) and the singular values of the new P (values only). Truncation to rank r
    happens once, at the start: every later product has rank r already, so P needs no
    re-orthogonalization (its rows carry an absolute error ~ eps ||P|| per layer, as an SVD's
    singular values do). With ``use_torch`` the arrays are float64 / complex128 CPU tensors,
    else NumPy.
    """

    def __init__(self, rank, use_torch=False):
        self.rank = rank
        self.use_torch = use_torch
        self.p = None
        self.log_scale = 0.0

    def start(self, svd_of_T):
        """Begin with the last layer ``B T B^H`` from :func:`_triangle_svd` of T: ``P = S V^H``
        truncated to rank r (the product's own truncation: B rotates both sides)."""
        s, vh = svd_of_T
        self.log_scale, s, out = _rescale(self.log_scale, s[: self.rank])
        self.p = (s.to(vh.dtype) if self.use_torch else s)[:, None] * vh[: self.rank]
        return out

    def push(self, C, T):
        """Multiply the next, earlier layer ``B T B^H`` on the right, given ``C = B_l^H B``;
        return (singular values / their max, log||P||_F)."""
        self.p = (self.p @ C) @ T
        s = sys.modules["torch"].linalg.svdvals(self.p) if self.use_torch else np.linalg.svd(self.p, compute_uv=False)
        if float(s[0]) > 0:
            self.p /= float(s[0])
        self.log_scale, _, out = _rescale(self.log_scale, s)
        return out


def _triangle_svd(T, use_torch):
    """``(s, V^H)`` of a triangle T: those of ``B T B^H`` are ``s`` and ``V^H B^H`` for any
    unitary B, so one SVD starts every product whose last layer shares T (the dose, control B)."""
    _, s, vh = (sys.modules["torch"].linalg.svd if use_torch else np.linalg.svd)(T, full_matrices=False)
    return s, vh


def _torch_of(x):
    """A float64 / complex128 CPU tensor sharing a NumPy array's memory (the arrays here are)."""
    import torch  # imported here: the rest of the module runs without it

    x = torch.from_numpy(np.asarray(x))
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


def _check_rank(rank, d):
    rank = min(256, d) if rank is None else rank
    if not 1 <= rank <= d:
        raise ValueError(f"`rank` must satisfy 1 <= rank <= d = {d}, got {rank}")
    return int(rank)


def cumulative_effective_rank(Js, *, rank=None, power=1):
    """Effective rank of the cumulative Jacobian from each start layer to the last.

    ``J_{l->L} = J_{L-1} ... J_{l+1} J_l`` (layers 0..L-1) is composed backward: the last layer
    is factorized by SVD and truncated to rank r, then each earlier layer is multiplied on the
    right and the product re-truncated by SVD to rank r. After each step the singular values are
    divided by their maximum and the log of that factor accumulated, so the scale never
    overflows; the log Frobenius norm is reported separately.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
        Per-layer (mean) Jacobians in depth order; real or complex.
    rank : int, optional
        Truncation rank r, ``1 <= r <= d``; default ``min(256, d)``. With r = d nothing is
        truncated and the result is that of the exact product.
    power : {1, 2}, default=1
        See :func:`effective_rank`.

    Returns
    -------
    erank : (L,) ndarray
        ``erank[l]`` = effective rank of the rank-r truncation of ``J_{l->L}``, in [1, r];
        ``erank[L-1]`` is the last layer alone.
    log_frobenius : (L,) ndarray
        Natural log of the Frobenius norm of that (truncated) product.
    """
    _check_power(power)
    Js = _check_stack("Js", Js)
    r = _check_rank(rank, Js.shape[1])
    L = Js.shape[0]
    erank, log_fro = np.empty(L), np.empty(L)
    product = _BackwardProduct(r)
    for layer in range(L - 1, -1, -1):
        s, log_fro[layer] = product.push(Js[layer])
        erank[layer] = effective_rank(s, power=power)
    return erank, log_fro


# --------------------------------------------------------------------------- Schur surgery


def schur_parts(J, *, mode="J"):
    """Complex Schur split ``J = Q (D + N) Q^H`` (or of ``J - I`` for mode "J - I").

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    mode : {"J", "J - I"}, default="J"
        Which operator is factorized.

    Returns
    -------
    Q : (d, d) complex ndarray
        Unitary Schur basis.
    D : (d,) complex ndarray
        Eigenvalues of the factorized operator (the Schur diagonal).
    N : (d, d) complex ndarray
        Strictly upper-triangular non-normal part; ``||N||_F`` is the Henrici numerator.
    """
    if mode not in SCHUR_MODES:
        raise ValueError(f"`mode` must be one of {SCHUR_MODES}, got {mode!r}")
    J = _check_square("J", J)
    T, Q = scipy.linalg.schur(_strip(J, mode == "J - I"), output="complex")
    return Q, np.diagonal(T).copy(), np.triu(T, 1)


def schur_recompose(Q, D, N, alpha, *, mode="J"):
    """``Q (diag(D) + alpha N) Q^H``, plus I for mode "J - I".

    Parameters
    ----------
    Q : (d, d) array_like
        Unitary basis.
    D : (d,) array_like
        Diagonal (eigenvalues).
    N : (d, d) array_like
        Strictly upper-triangular part.
    alpha : float
        Dose: 0 gives the normal matrix with eigenvalues D, 1 the original.
    mode : {"J", "J - I"}, default="J"

    Returns
    -------
    J_alpha : (d, d) complex ndarray
    """
    if mode not in SCHUR_MODES:
        raise ValueError(f"`mode` must be one of {SCHUR_MODES}, got {mode!r}")
    Q = np.asarray(Q, dtype=complex)
    d = Q.shape[0]
    if Q.shape != (d, d):
        raise ValueError(f"`Q` must be square (d, d), got shape {Q.shape}")
    D, N = np.asarray(D, dtype=complex), np.asarray(N, dtype=complex)
    if D.shape != (d,):
        raise ValueError(f"`D` must have shape ({d},), got {D.shape}")
    if N.shape != (d, d):
        raise ValueError(f"`N` must have shape ({d}, {d}), got {N.shape}")
    out = Q @ _schur_triangle(D, N, alpha) @ Q.conj().T
    if mode == "J - I":
        out[np.diag_indices(d)] += 1.0
    return out


def _schur_triangle(D, N, alpha, mode="J"):
    """The upper-triangular ``diag(D) + alpha N`` of a Schur form at dose alpha (a new array),
    plus I in mode "J - I" (``Q T Q^H + I = Q (T + I) Q^H``)."""
    T = alpha * N
    T[np.diag_indices(T.shape[0])] += D + (1 if mode == "J - I" else 0)
    return T


def random_strict_upper(N, rng):
    """i.i.d. complex Gaussian strictly upper-triangular matrix with ``||.||_F = ||N||_F``.

    Parameters
    ----------
    N : (d, d) array_like
        Matrix whose Frobenius norm is matched.
    rng : numpy.random.Generator or int
        Source of the draw.

    Returns
    -------
    R : (d, d) complex ndarray
        Strictly upper triangular, ``||R||_F = ||N||_F`` (0 if N = 0 or d = 1).
    """
    N = np.asarray(N)
    if N.ndim != 2 or N.shape[0] != N.shape[1]:
        raise ValueError(f"`N` must be square (d, d), got shape {N.shape}")
    rng = np.random.default_rng(rng)
    d = N.shape[0]
    R = np.triu(rng.standard_normal((d, d)) + 1j * rng.standard_normal((d, d)), 1)
    norm_R, norm_N = np.linalg.norm(R), np.linalg.norm(N)
    return R * (norm_N / norm_R) if norm_R > 0 else R


def haar_unitary(d, rng):
    """Haar-random d x d unitary matrix (``scipy.stats.unitary_group``), complex ndarray."""
    if d < 1:
        raise ValueError(f"`d` must be >= 1, got {d}")
    if d == 1:
        return np.exp(2j * np.pi * np.random.default_rng(rng).random()).reshape(1, 1)
    return unitary_group.rvs(d, random_state=np.random.default_rng(rng))


def schur_dose_response(Js, *, alphas=DEFAULT_ALPHAS, mode="J", rank=None, power=1, draws=4, seed=0):
    """Cumulative effective rank after scaling the non-normal Schur part of every layer.

    For each layer ``J_l = Q (D + N) Q^H`` (complex Schur form) and each dose alpha:

    * dose: ``J_alpha = Q (D + alpha N) Q^H`` - eigenvalues and basis kept, non-normal part
      scaled (alpha = 0 normal, alpha = 1 the original);
    * control A: ``Q (D + alpha R) Q^H`` with R i.i.d. complex Gaussian strictly upper
      triangular, ``||R||_F = ||N||_F`` - keeps the eigenvalues, the basis and the Frobenius mass
      (hence the Henrici departure) but not the structure of N;
    * control B: ``W (D + alpha N) W^H`` with W Haar-random unitary - unitarily similar to
      ``J_alpha``, so it keeps the eigenvalues, the singular values, ``||.||_F`` and the Henrici
      departure of every layer, and replaces only the basis (how layers line up).

    The stack is recomposed and :func:`cumulative_effective_rank` computed from every start
    layer. Random matrices are drawn per (draw, layer) from ``default_rng([seed, draw, layer])``
    and reused across the alpha grid.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
        Per-layer mean Jacobians (real).
    alphas : sequence of float, default=(0, 0.25, 0.5, 0.75, 1, 1.5)
    mode : {"J", "J - I"}, default="J"
        "J - I": factorize the residual operator ``J - I = Q (D + N) Q^H``, scale N and add I
        back. In exact arithmetic this is the same as mode "J" (J and J - I share Q and N);
        it differs only through the non-uniqueness of the numerical Schur form (eigenvalue
        order), which changes N for alpha not in {0, 1}.
    rank : int, optional
        Truncation rank, default ``min(256, d)``.
    power : {1, 2}, default=1
    draws : int, default=4
        Random draws per layer for each control (0 skips the controls).
    seed : int, default=0

    Returns
    -------
    result : dict
        ``"alphas"``: (A,) ndarray;
        ``"dose"``: (A, L) effective rank of ``J_{l->L}`` per alpha and start layer;
        ``"dose_log_frobenius"``: (A, L);
        ``"control_a"``, ``"control_b"``: (draws, A, L) effective ranks.

    Notes
    -----
    Why complex and not real. For real J with complex eigenvalues, ``Q D Q^H`` is complex, so
    ``J_alpha`` is complex for alpha != 1; its real part would change the eigenvalues and
    destroy normality at alpha = 0. The real Schur form (quasi-triangular, 2 x 2 blocks) keeps
    everything real, but its 2 x 2 blocks ``[[a, b], [c, a]]`` are themselves non-normal when
    ``|b| != |c|``, so zeroing the strictly block-upper part does not give a normal matrix at
    alpha = 0. Controls A (complex Gaussian R) and B (complex Haar W) are complex anyway. So all
    operators stay complex; the cumulative product and its singular values are computed in
    complex128 (effective rank is defined by singular values, which are real). At alpha = 1 the
    real J is recovered to rounding.
    """
    if mode not in SCHUR_MODES:
        raise ValueError(f"`mode` must be one of {SCHUR_MODES}, got {mode!r}")
    return schur_dose_responses(Js, modes=(mode,), alphas=alphas, rank=rank, power=power, draws=draws,
                                seed=seed)[mode]


def schur_dose_responses(Js, *, modes=SCHUR_MODES, alphas=DEFAULT_ALPHAS, rank=None, power=1, draws=4, seed=0):
    """:func:`schur_dose_response` of several modes in one backward sweep over the layers.

    Each mode's result equals its own call bit for bit; control B's Haar-random unitaries, which
    are the same in every mode (drawn from the same seeds, after control A's draw of the same
    size), are drawn once per (draw, layer) instead of once per mode (at d = 4096 about 12 s each
    on 2 cores). The modes' running products are held side by side.

    Returns
    -------
    dict
        mode -> result of :func:`schur_dose_response`.
    """
    modes = tuple(modes)
    if not modes or any(m not in SCHUR_MODES for m in modes) or len(set(modes)) < len(modes):
        raise ValueError(f"`modes` must be distinct values of {SCHUR_MODES}, got {modes!r}")
    _check_power(power)
    Js = _check_stack("Js", Js)
    alphas = np.asarray(alphas, dtype=float)
    if alphas.ndim != 1 or alphas.size == 0:
        raise ValueError(f"`alphas` must be a non-empty 1-D sequence, got shape {alphas.shape}")
    if draws < 0:
        raise ValueError(f"`draws` must be >= 0, got {draws}")
    L, d = Js.shape[0], Js.shape[1]
    r = _check_rank(rank, d)
    A = alphas.size
    # one running product per (mode, construction, draw, alpha); layers streamed backward so each
    # Schur form is computed once and no per-layer factors are stored
    fast = d >= TORCH_MIN_WIDTH
    array = _torch_of if fast else np.asarray
    dose = {m: [_SchurProduct(r, fast) for _ in range(A)] for m in modes}
    ctrl_a = {m: [[_SchurProduct(r, fast) for _ in range(A)] for _ in range(draws)] for m in modes}
    ctrl_b = {m: [[_SchurProduct(r, fast) for _ in range(A)] for _ in range(draws)] for m in modes}
    out = {m: {"alphas": alphas, "dose": np.empty((A, L)), "dose_log_frobenius": np.empty((A, L)),
               "control_a": np.empty((draws, A, L)), "control_b": np.empty((draws, A, L))} for m in modes}
    schur_bases, haar_bases = {}, {}  # the later layer's Q per mode and W per draw
    for layer in range(L - 1, -1, -1):
        last = layer == L - 1
        haar = {}  # draw -> (this layer's W, W_later^H W), shared by the modes
        for mode in modes:
            res = out[mode]
            Q, D, N = schur_parts(Js[layer], mode=mode)
            Q = array(Q)
            c_q = None if last else schur_bases[mode].conj().T @ Q  # the basis change of dose and control A
            schur_bases[mode] = Q

            def triangle(X, alpha):
                return array(_schur_triangle(D, X, alpha, mode))

            # the last layer starts every product with a d x d SVD (at d = 4096 a minute each): the
            # dose's SVD of its triangle also starts control B, whose W T W^H shares it
            shared = [_triangle_svd(triangle(N, alpha), fast) for alpha in alphas] if last else None
            for i, alpha in enumerate(alphas):
                product = dose[mode][i]
                s, res["dose_log_frobenius"][i, layer] = (product.start(shared[i]) if last else
                                                          product.push(c_q, triangle(N, alpha)))
                res["dose"][i, layer] = effective_rank(s, power=power)
            for j in range(draws):
                rng = np.random.default_rng([seed, j, layer])
                R = random_strict_upper(N, rng)
                if j not in haar:
                    W = array(haar_unitary(d, rng))
                    haar[j] = W, None if last else haar_bases[j].conj().T @ W
                c_w = haar[j][1]
                for i, alpha in enumerate(alphas):
                    a, b = ctrl_a[mode][j][i], ctrl_b[mode][j][i]
                    s, _ = (a.start(_triangle_svd(triangle(R, alpha), fast)) if last else
                            a.push(c_q, triangle(R, alpha)))
                    res["control_a"][j, i, layer] = effective_rank(s, power=power)
                    s, _ = b.start(shared[i]) if last else b.push(c_w, triangle(N, alpha))
                    res["control_b"][j, i, layer] = effective_rank(s, power=power)
        haar_bases = {j: W for j, (W, _) in haar.items()}
    return out


def dose_response_table(result):
    """Long table of a :func:`schur_dose_response` result.

    Returns
    -------
    table : pandas.DataFrame
        One row per (construction, draw, alpha, start layer): ``construction`` in
        {"dose", "control_a", "control_b"}, ``draw`` (0 for the dose), ``alpha``, ``start_layer``,
        ``effective_rank``.
    """
    import pandas as pd

    alphas = result["alphas"]
    frames = []
    for construction in ("dose", "control_a", "control_b"):
        values = result[construction]
        values = values[None] if construction == "dose" else values  # (draws, A, L)
        draw, a, layer = np.indices(values.shape).reshape(3, -1)
        frames.append(pd.DataFrame({"construction": construction, "draw": draw, "alpha": alphas[a],
                                    "start_layer": layer, "effective_rank": values.ravel()}))
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------- depth profile


def spectral_profile(Js, *, k=10, tol=1e-6, method="arpack", seed=0, draws=1000, rank=None):
    """Per-layer table of the mean-Jacobian statistics, for J and J - I.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
        Per-layer mean Jacobians (real).
    k, tol, method, seed, draws
        See :func:`eigen_stats` and :func:`alignment_profile`.
    rank : int, optional
        Truncation rank of the cumulative Jacobians (:func:`cumulative_effective_rank`).

    Returns
    -------
    table : pandas.DataFrame
        Index ``layer`` 0..L-1. Columns ``spectral_radius``, ``frac_expanding``,
        ``frac_complex``, ``henrici``, ``self_alignment``, ``forward_alignment`` (NaN for the last
        layer), each also with suffix ``_res`` for J - I; ``residual_norm_ratio``;
        ``cumulative_effective_rank`` and ``cumulative_log_frobenius`` of ``J_{l->L}`` from each
        start layer l. The alignment baselines are in ``table.attrs`` (``baseline_mean``,
        ``baseline_sd``).
    eigenvalues : (L, d) complex ndarray
        Eigenvalues of each J (those of J - I are these minus 1).
    """
    import pandas as pd

    Js = _check_stack("Js", Js)
    rows = {}
    for suffix, residual in (("", False), ("_res", True)):
        eig = [eigen_stats(J, residual=residual, tol=tol) for J in Js]
        if not residual:
            eigenvalues = np.stack([e["eigenvalues"] for e in eig])
        rows["spectral_radius" + suffix] = [e["spectral_radius"] for e in eig]
        rows["frac_expanding" + suffix] = [e["frac_expanding"] for e in eig]
        rows["frac_complex" + suffix] = [e["frac_complex"] for e in eig]
        rows["henrici" + suffix] = [
            henrici_departure(J, residual=residual, eigenvalues=e["eigenvalues"]) for J, e in zip(Js, eig)
        ]
        align = alignment_profile(Js, k=k, residual=residual, method=method, seed=seed, draws=draws)
        rows["self_alignment" + suffix] = align["self"]
        rows["forward_alignment" + suffix] = np.append(align["forward"], np.nan)
    rows["residual_norm_ratio"] = [residual_norm_ratio(J) for J in Js]
    rows["cumulative_effective_rank"], rows["cumulative_log_frobenius"] = cumulative_effective_rank(Js, rank=rank)
    table = pd.DataFrame(rows, index=pd.RangeIndex(Js.shape[0], name="layer"))
    table.attrs["baseline_mean"] = align["baseline_mean"]
    table.attrs["baseline_sd"] = align["baseline_sd"]
    return table, eigenvalues
