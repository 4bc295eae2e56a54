"""The kernels of ``metal/svd.metal`` in the emulator, through the library's own call site
(``mpslinalg.svd.kernels.MetalKernels.jacobi``, its ``load_library`` patched to add the emulator-only thread
``order``/``seed``), in every thread order, compared with the contract.

The contract: ``X' = X V`` with ``V`` the product of the applied rotations, the columns of ``X'``
mutually orthogonal to the Jacobi tolerance, ``rotated`` false when converged.

Bounds (float32, ``u = 2^-24``, ``n`` columns):

* ``V`` is a product of plane rotations, each orthogonal to ``O(u)``; LAPACK's orthogonality ratio
  ``‖I − VᴴV‖₁/(n u)`` and the residual ratio ``‖X V − X'‖₁/(n ‖X‖₁ u)`` (the SVD test ratios of
  ``xDRVBD``, with ``X'`` in the role of ``UΣ``) must stay below LAPACK's threshold 30.
* A converged sweep made no significant rotation, so every computed ``|g_pq| <= ctol √α_p √α_q``
  with ``ctol = 2 n u`` (smaller rotations, above ``tol = √n u``, only reduce it); the computed
  dot product differs from the exact one by at most ``γ_n ≈ n u`` times
  ``‖x_p‖‖x_q‖`` (Higham, *Accuracy and Stability*, §3.1; ``m`` rows), so the exact cosine of every
  pair of columns is at most ``(2 n + 1.01 m) u``.
* The singular values (column norms of ``X'``) agree with LAPACK's to ``30 n u σ₁`` (backward
  stability: each rotation is an ``O(u)`` orthogonal perturbation, Weyl's theorem).
"""

from __future__ import annotations

import importlib

import pytest
import torch
from helpers import ORDER_IDS, ORDERS, InOrder, require_emulator

from mpslinalg.kernels import load_library
from reference import metrics

svd_kernels = importlib.import_module("mpslinalg.svd.kernels")

U32 = 2.0**-24


@pytest.fixture(scope="module")
def lib():
    require_emulator()
    return load_library("svd", "cpu")


def _jacobi(lib, X, want_v, order, seed, sweeps=30, early_exit=True):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(svd_kernels, "load_library", lambda family, device: InOrder(lib, order, seed))
        kern = svd_kernels.MetalKernels(X.device, X.dtype)
        n = X.shape[-1]
        V = torch.eye(n, dtype=X.dtype).expand(X.shape[0], n, n).contiguous() if want_v else None
        # the library's tolerances: rotate above √n u, count as work left above 2n u
        return kern.jacobi(X.clone(), V, sweeps, n**0.5 * U32, 2 * n * U32, early_exit)


def _cosines(W: torch.Tensor) -> torch.Tensor:
    W = W.to(torch.complex128 if W.is_complex() else torch.float64)
    norms = torch.linalg.vector_norm(W, dim=-2)
    G = (W.mH @ W).abs() / (norms[..., :, None] * norms[..., None, :]).clamp_min(1e-300)
    return (G - torch.diag_embed(torch.diagonal(G, dim1=-2, dim2=-1))).amax(dim=(-2, -1))


@pytest.mark.parametrize("order,seed", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
@pytest.mark.parametrize("rows,n", [(4, 4), (10, 10), (32, 32), (34, 34), (40, 6)],
                         ids=["small4", "small10", "small32", "round34", "round40x6"])
def test_jacobi_contract(lib, order, seed, dtype, rows, n):
    g = torch.Generator().manual_seed(rows * 100 + n)
    X = torch.randn(3, rows, n, dtype=dtype, generator=g)
    X[1] *= 1e-3  # scale does not matter
    Xc = X.clone()
    W, V, rotated = _jacobi(lib, X, True, order, seed)
    assert torch.equal(X, Xc)
    _assert_contract(X, W, V, rotated)


def _assert_contract(X, W, V, rotated):
    """The kernel contract (bounds derived in the module docstring), on CPU copies of the results."""
    W, V, rotated = W.cpu(), V.cpu(), rotated.cpu()
    rows, n = X.shape[-2:]
    dtype = X.dtype
    assert not bool(rotated.any())
    S = torch.linalg.vector_norm(W, dim=-2).double().sort(dim=-1, descending=True).values
    Sref = torch.linalg.svdvals(X.to(torch.complex128 if dtype.is_complex else torch.float64))
    assert float(((S - Sref).abs() / Sref[..., :1]).max()) <= 30 * n * U32
    assert float(metrics.orthogonality_ratio(V).max()) < 30
    X64, V64, W64 = (t.to(torch.complex128 if dtype.is_complex else torch.float64) for t in (X, V, W))
    E = X64 @ V64 - W64
    ratio = E.abs().sum(-2).amax(-1) / (n * X64.abs().sum(-2).amax(-1) * U32)
    assert float(ratio.max()) < 30
    assert float(_cosines(W).max()) <= (2 * n + 1.01 * rows) * U32


@pytest.mark.parametrize("order,seed", ORDERS[:2], ids=ORDER_IDS[:2])
@pytest.mark.parametrize("n", [8, 34], ids=["small", "round"])
def test_jacobi_without_v_and_special_inputs(lib, order, seed, n):
    X = torch.randn(4, n, n, generator=torch.Generator().manual_seed(n))
    X[1] = 0.0  # zero matrix: never rotated, stays zero
    X[2, :, n // 2:] = 0.0  # zero columns stay zero
    X[3, 0, 0] = float("nan")  # NaN never rotates: no hang, flag clear
    W, V, rotated = _jacobi(lib, X, False, order, seed)
    assert V is None
    assert torch.equal(W[1], torch.zeros(n, n))
    assert torch.equal(W[2, :, n // 2:], torch.zeros(n, n - n // 2))
    assert not bool(rotated[:3].any())
    # accumulating V does not change X's rotations. The same batch: the round kernel's host loop stops
    # when no matrix of the batch rotated significantly, so a matrix shares its batch's sweep count (with
    # X[:1] alone, an unseeded draw once got one more sweep of sub-ctol rotations in the batch of 4)
    Wv, _, _ = _jacobi(lib, X, True, order, seed)
    assert torch.equal(W.nan_to_num(), Wv.nan_to_num()) and torch.equal(W.isnan(), Wv.isnan())


def test_sweep_bound_reports_nonconvergence(lib):
    """One sweep on a random 16x16 matrix cannot converge (Jacobi converges quadratically but only
    after the first sweeps): the kernel must stop at the bound and say so."""
    X = torch.randn(2, 16, 16)
    W, _, rotated = _jacobi(lib, X, False, "inorder", 0, sweeps=1, early_exit=False)
    assert bool(rotated.all())
    assert bool(torch.isfinite(W).all())


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=["float32", "complex64"])
def test_jacobi_contract_on_the_cuda_target(dtype):
    """The same kernels on an NVIDIA GPU through the emulator's cuda target (real parallel lanes;
    the H200 run puts this test under compute-sanitizer racecheck/synccheck): both kernels
    (``svd_jacobi_small`` up to 32 columns, ``svd_jacobi_round`` above), batches that leave partial
    threadgroups, the same contract and bounds as the emulator test."""
    for rows, n, batch in [(4, 4, 257), (10, 10, 33), (32, 32, 65), (34, 34, 5), (40, 6, 7)]:
        g = torch.Generator().manual_seed(rows * 100 + n)
        X = torch.randn(batch, rows, n, dtype=dtype, generator=g)
        kern = svd_kernels.MetalKernels(torch.device("cuda"), dtype)
        Vc = torch.eye(n, dtype=dtype, device="cuda").expand(batch, n, n).contiguous()
        W, V, rotated = kern.jacobi(X.cuda(), Vc, 30, n**0.5 * U32, 2 * n * U32, True)
        _assert_contract(X, W, V, rotated)
