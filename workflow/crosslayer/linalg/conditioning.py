"""Per-sample statistics of a batch of block Jacobians (B, d, d): Frobenius norm, participation ratio
(no SVD) and condition number, on the NumPy path or with torch on the tensors' device.

Inputs are Jacobians ``J = d block(x) / d x`` of shape (d, d), float32/float64 NumPy arrays or
torch tensors, with ``J = I + J_res`` (the block contains its residual connection). Every
statistic is computed in float64 (complex128 where the operator is complex); scalars come back
as Python floats. Functions taking ``residual=True`` analyse ``J - I`` instead of ``J``.

The per-sample statistics (:func:`per_sample_stats` and the three functions it combines) have a
second path: given a ``torch.Tensor`` they compute with torch on the tensor's device (CPU or
CUDA), in the precision their ``dtype`` keyword selects (default float64), and only the (B,)
results travel to the host. Everything else converts its input to float64 NumPy.

The spectral geometry of the mean Jacobians (paper 004) builds on these: :mod:`crosslayer.dynamics.spectra`.
"""

import logging
import math
import sys

import numpy as np

from crosslayer.linalg import krylov
from crosslayer.linalg.arrays import as_float, check_stack, is_tensor, strip_identity

log = logging.getLogger(__name__)

__all__ = [
    "warn_unreliable_conditions", "PER_SAMPLE_DTYPES", "frobenius_norm", "participation_ratio", "condition_number",
    "per_sample_stats", "per_sample_stats_pair",
]


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
    gram_fro = _torch_frobenius(_gram(block) if gram is None else gram)
    return fro**4 / gram_fro**2  # 0 / 0 = NaN for J = 0, like the NumPy path


# How each condition number was computed (per_sample_stats' "condition_path", stored in jacobians.npz:
# a new route gets the next code).
CONDITION_PATHS = ("gram", "inverse_iteration", "svd", "krylov")

CONDITION_METHOD = (
    "float64: s_max from the top eigenvalue of J^H J (CPU, 512 <= d < 2048: LAPACK tridiagonal reduction and "
    "bisection for the two end eigenvalues; else eigvalsh); s_min from its bottom one when d eps e <= 1e-8 "
    "s_min^2, e = s_max^2 (for J - I's Gram matrix derived from J's, (s_max(J) + 1)^2) (path 0, gram), else from "
    "block inverse iteration on an LU of J until its residual bound is <= 1e-10 (path 1), else from the full SVD "
    "(path 2); a matrix whose predecessor (same operator, same call) took path 1 tries path 1 first, with s_max^2 "
    "then by Lanczos (ARPACK, relative tolerance 1e-12, on the CPU from d = 512); on a GPU, a chunk at once: s_max^2 "
    "and 1 / s_min^2 as the top eigenvalues of J^H J and X^H X, X the explicit inverse of J, by block Krylov "
    "iterations to a relative residual of 1e-10 (path 3, krylov), a matrix that does not converge as on the CPU; "
    "float32: the full SVD (path 2)")

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
# within the statistics: measured on 2 threads, the reduction wins from d = 512 to about 1536 and
# loses from 2048 (past the cache, MKL's reduction is the better blocked one); below 512 the
# per-matrix calls, alternating with torch's threads, cost more than they save (docs/benchmarks.md).
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
    """:func:`_sequential_condition`, or on a GPU in float64 :func:`_batched_condition`."""
    torch = sys.modules["torch"]  # only reached with a tensor, so torch is loaded

    if block.real.dtype == torch.float64 and block.device.type in BATCHED_DEVICES:
        return _batched_condition(block, _gram(block) if gram is None else gram, gram_error)
    return _sequential_condition(block, gram, gram_error, route)


def _sequential_condition(block, gram=None, gram_error=None, route=None):
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
    gram = _gram(block) if gram is None else gram
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


# Devices whose float64 condition numbers take the batched Krylov route (path 3). On the CPU the
# per-matrix route is faster (2 threads, d = 1024: docs/benchmarks.md), so it stays there.
BATCHED_DEVICES = ("cuda",)


def _batched_condition(block, gram, gram_error):
    """:func:`_torch_condition` of a float64 chunk on a GPU: s_max and s_min of every matrix at once
    by :mod:`crosslayer.linalg.krylov` (path 3); a matrix that does not converge there, or whose
    inverse fails, takes the per-matrix route."""
    torch = sys.modules["torch"]

    top2, top_ok = krylov.gram_top(gram)
    inverse2, inverse_ok = krylov.inverse_top(block)
    kappa = (top2.clamp(min=0).sqrt() * inverse2.sqrt()).cpu().numpy()  # s_max / s_min
    path = np.full(len(kappa), CONDITION_PATHS.index("krylov"), np.int8)
    for i in torch.nonzero(~(top_ok & inverse_ok)).flatten().tolist():
        error = None if gram_error is None else gram_error[i : i + 1]
        kappa[i : i + 1], path[i : i + 1], top = _sequential_condition(block[i : i + 1], gram[i : i + 1], error, None)
        top2[i] = top[0]
    return kappa, path, top2


def _torch_per_chunk(J, fn, *, residual, chunk, dtype):
    """(B,) float64 NumPy array of ``fn(block, scale)`` over the chunks of a tensor."""
    out = []
    for _, block, scale in _torch_blocks(J, residual=residual, chunk=chunk, dtype=dtype):
        values = fn(block, scale)
        out.append(values if isinstance(values, np.ndarray) else values.cpu().numpy())
    return np.concatenate(out).astype(np.float64, copy=False)


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
    if is_tensor(J):
        return _torch_per_chunk(J, lambda b, scale: _torch_frobenius(b) * scale, residual=residual, chunk=chunk,
                                dtype=dtype)
    J = strip_identity(check_stack("J", J), residual)
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
    if is_tensor(J):
        return _torch_per_chunk(J, lambda b, _: _torch_participation(b, _torch_frobenius(b)), residual=residual,
                                chunk=chunk, dtype=dtype)
    J = check_stack("J", J, cast=False)
    out = np.empty(J.shape[0])
    for start in range(0, J.shape[0], chunk):
        block = strip_identity(as_float(J[start : start + chunk]), residual)
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
    if is_tensor(J):
        route = {"inverse_first": False}
        return _torch_per_chunk(J, lambda b, _: _torch_condition(b, route=route)[0], residual=residual, chunk=chunk,
                                dtype=dtype)
    J = strip_identity(check_stack("J", J), residual)
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
    far more slowly. On a GPU (:data:`BATCHED_DEVICES`) a chunk is taken at once instead, by
    matrix products only (:mod:`crosslayer.linalg.krylov`: ``s_max^2`` and ``1 / s_min^2`` as the
    top eigenvalues of ``J^H J`` and of ``X^H X``, X the explicit inverse, path ``krylov``), with
    the per-matrix route for a matrix that does not converge there; on 2 CPU threads that route
    was about 2x slower than the per-matrix one (d = 1024 and 4096), so the CPU keeps the latter.
    With `dtype` float32 the condition number stays the full SVD's.

    Torch path. For a ``torch.Tensor`` input everything runs with torch on the tensor's device
    (no host copy of the Jacobians; ``J - I`` is formed on the device), chunk by chunk, in
    `dtype`; only the (B,) results come back, as float64 NumPy. float64 (the default) agrees with
    the NumPy path to rounding. float32 keeps the full SVD for the condition number, so with condition
    numbers it is slower than float64's Gram route both on a CPU (about 2x at d = 1024) and on an
    H200 (5.8x at d = 4096); it is faster only without them (on a CPU the Gram product about 2.5x).
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
    if is_tensor(J):
        if condition:
            parts["condition_path"] = []
        route = {"inverse_first": False} if condition else None
        for _, block, scale in _torch_blocks(J, residual=residual, chunk=chunk, dtype=dtype):
            _torch_chunk_stats(parts, block, scale, _gram(block), _torch_frobenius(block), route)
        return {name: np.concatenate(values) for name, values in parts.items()}
    Jn = check_stack("J", J, cast=False)
    for start in range(0, Jn.shape[0], chunk):
        block = as_float(Jn[start : start + chunk])
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
    ``(J - I)^H (J - I) = J^H J - J - J^H + I``, O(d^2) instead of a second d^3 product (on 2 CPU threads
    1.04-1.06x faster than two calls at d = 1024, where the eigenvalues dominate, and 1.07-1.25x at
    d = 4096).

    The derived matrix's rounding error scales as ``(||J|| + 1)^2`` rather than ``||J - I||^2``.
    The participation ratio accepts it while that loses at most a factor
    :data:`_DERIVED_GRAM_LOSS` (in Frobenius norms; otherwise that sample's product is formed), and
    the condition number's Gram route accounts for it in its accuracy test (else inverse iteration
    or the SVD, as always). float32 and NumPy input run the two calls: in float32 the shared scaling
    of J and J - I could overflow.
    """
    if not (is_tensor(J) and _dtype_name(dtype) == "float64"):
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
