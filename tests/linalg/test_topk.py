"""Top-K singular bases (crosslayer.linalg.topk) against a float64 SVD."""

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group

from crosslayer.linalg.topk import top_singular


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("decay", [1.0, 1e3, 1e6])
def test_top_singular_equals_a_float64_svd(dtype, decay):
    # decay = s_1 / s_K: 1 and 1e3 take the Gram route; at 1e6 the Gram matrix would lose s_K to
    # ~1e-4, so the full SVD must be taken
    rng = np.random.default_rng(3)
    d, K = 300, 40
    U, V = ortho_group.rvs(d, random_state=rng), ortho_group.rvs(d, random_state=rng)
    top = np.sort(rng.uniform(1, 3, K))[::-1] / np.logspace(0, np.log10(decay), K)
    s = np.concatenate([top, top[-1] * np.sort(rng.uniform(0.1, 0.9, d - K))[::-1]])
    J = torch.as_tensor(U @ np.diag(s) @ V.T, dtype=dtype)
    Ur, sr, Vrh = np.linalg.svd(J.double().numpy())  # the exact triplets of the rounded J
    basis = top_singular(J, K)
    assert basis.U.dtype == basis.V.dtype == basis.s.dtype == dtype
    tol = 1e-6 if dtype == torch.float32 else 1e-8  # float32: rounding of the result; float64: the route's bound
    np.testing.assert_allclose(basis.s.double().numpy(), sr[:K], rtol=tol)
    gaps = np.minimum(np.abs(np.diff(sr[: K + 1])), np.abs(np.diff(sr[:K], prepend=np.inf)))[:K] / sr[0]
    ok = gaps > 1e-4  # singular vectors are defined (to rounding / gap) where the spectrum has gaps
    for got, ref in ((basis.U, Ur[:, :K]), (basis.V, Vrh[:K].T)):
        cos = np.abs(np.sum(got.double().numpy() * ref, axis=0))
        np.testing.assert_allclose(cos[ok], 1.0, atol=1e2 * tol / gaps[ok].min())
