"""The square SVD route of CUDA (issue 12: complex64 4096x64x64 <= 20 ms): the blocked Householder QR
(``mpslinalg.qr.triton_blocked``), the prep kernel and the route through ``svd_impl``
(``mpslinalg.svd.triton_square``).

Bounds (u = 2^-24):

* blocked QR: the packed reflectors and ``tau`` against LAPACK's ``geqrf`` in float64 within the
  perturbation bound of two backward-stable Householder factorisations, ``2·√2 κ₂ · 30 m u √n``
  (the helper of ``tests/qr/test_qr_kernels.py``; at scale 1 only: the bound is absolute in ``‖A‖``
  while the reflectors are O(1)), and ``xQRT01`` ratios ``‖A − QR‖/(m‖A‖u)``, ``‖I − QᴴQ‖/(m u)``
  < 30 (LAPACK's threshold), also at 1e±30 (the scaled norm: no square under- or overflows);
  ``tau = 0`` exactly for an already-zero column; ``X`` is ``Rᴴ`` bit for bit (a copy).
* prep: the same bits as the torch ops it replaces in ``mpslinalg.svd`` (scaling by a power of two
  is exact; the sorts are stable), and for all-subnormal matrices (where torch's ``2^-e`` overflows)
  ``W = A·2^-e`` exactly with ``max |w_ij|`` in ``[1/2, 1)``.
* the route: LAPACK ``xDRVBD`` ratios < 50 (issue 12), every σ of a two-sided graded matrix within
  ``30·n·κ(B)·u`` relative (``test_svd_accuracy``'s bound), 1e±30 inputs, NaN input → ``info = 1``
  and NaN outputs, an exactly zero and a rank-``n/2`` matrix → σ exactly 0 / orthonormal completed ``U``/``V``, and
  the torch-op route's σ to ``30·n·u·σ₁`` (both backward stable: Weyl). CUDA: no host sync.

On the CPU the kernels run in Triton's interpreter (a subprocess); on CUDA compiled (marked ``cuda``).
"""

from __future__ import annotations

import contextlib
import importlib

import pytest
import torch
from svd.harness import assert_svd_ratios, run_interpreted
from svd.sync_check import no_cuda_sync

UNIT = 2.0**-24  # float32 unit roundoff


def _randn(shape, dtype, seed):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _blocked_qr(device: str, sizes=(64, 40, 17, 2), variants=((False, False), (True, False), (False, True),
                                                               (True, True)), scales=(1e30, 1e-30)) -> None:
    """Every ``(CHUNKED, JOINT_REDUCE)`` variant of the blocked kernel in ``variants``; ``scales``: the
    scaled matrices of the batch (besides the two at scale 1)."""
    from mpslinalg.qr import triton_blocked as qb

    saved = qb.CHUNKED, qb.JOINT_REDUCE
    try:
        for qb.CHUNKED, qb.JOINT_REDUCE in variants:
            _blocked_qr_variant(device, sizes, scales)
    finally:
        qb.CHUNKED, qb.JOINT_REDUCE = saved


def _blocked_qr_variant(device: str, sizes, scales) -> None:
    """One launch per build (with Q and X, without, the unblocked kernel) over one batch: matrix 0 at
    scale 1 (against ``geqrf``), matrix 1 with a zero first column (``tau = 0``), then one matrix per
    entry of ``scales`` (the scaled norm: ratios < 30 at 1e±30). A program factors one matrix, so the
    batch costs what separate launches would, and each matrix reaches the kernel's every branch."""
    from qr.test_qr_kernels import _check_geqrf

    from mpslinalg.qr import triton_blocked as qb
    from mpslinalg.qr.triton import square_qr_into
    from reference import metrics

    for dtype in (torch.complex64, torch.float32):
        for n in sizes:
            A = _randn((2 + len(scales), n, n), dtype, n)
            A[1, :, 0] = 0  # tau = 0
            for i, scale in enumerate(scales):
                A[2 + i] *= scale
            QR, tau = A.clone().to(device), torch.full(A.shape[:2], float("nan"), dtype=dtype, device=device)
            Q, X = torch.full_like(QR, float("nan")), torch.full_like(QR, float("nan"))
            qb.geqrf_square(QR, tau, Q, X)
            QR, tau, Q, X = QR.cpu(), tau.cpu(), Q.cpu(), X.cpu()
            assert float(tau[1, 0].abs()) == 0.0
            assert torch.equal(X, QR.triu().mH.resolve_conj()), (dtype, n)
            # geqrf at scale 1 only: its absolute bound mixes R's scale and the reflectors' (O(1))
            _check_geqrf(A[:1], QR[:1], tau[:1])
            res, orth = metrics.qr_ratios(A, Q, QR.triu())
            assert float(res.max()) < 30 and float(orth.max()) < 30, (dtype, n, res, orth)
            # without Q and X: the same factorisation to rounding (another build: contractions may differ)
            A = A[:2]
            QR2, tau2 = A.clone().to(device), torch.empty(2, n, dtype=dtype, device=device)
            qb.geqrf_square(QR2, tau2)
            QR2, tau2 = QR2.cpu(), tau2.cpu()
            assert float(tau2[1, 0].abs()) == 0.0
            _check_geqrf(A[:1], QR2[:1], tau2[:1])
            # the unblocked kernel's own X = Rᴴ output (qr_triton.square_qr_into; the route's SMALL_QR_WRITES_X)
            QR3, tau3 = A.clone().to(device), torch.empty(2, n, dtype=dtype, device=device)
            Q3, X3 = torch.empty_like(QR3), torch.full_like(QR3, float("nan"))
            square_qr_into(QR3, tau3, Q3, X3)
            QR3, Q3, X3 = QR3.cpu(), Q3.cpu(), X3.cpu()
            assert torch.equal(X3, QR3.triu().mH.resolve_conj()), (dtype, n)
            res, orth = metrics.qr_ratios(A, Q3, QR3.triu())
            assert float(res.max()) < 30 and float(orth.max()) < 30, (dtype, n)


def _torch_prep(A):
    """The torch ops of ``mpslinalg.svd.algorithm.svd_tall`` that ``prep`` replaces."""
    n = A.shape[-1]
    As, e, finite = importlib.import_module("mpslinalg.svd.algorithm").pow2_scale(A)
    As = As.masked_fill(~finite[:, None, None], 0)
    rperm = As.abs().amax(-1).argsort(dim=-1, descending=True, stable=True)
    As = As.gather(-2, rperm[:, :, None].expand(-1, -1, n))
    cperm = torch.linalg.vector_norm(As, dim=-2).argsort(dim=-1, descending=True, stable=True)
    return As.gather(-1, cperm[:, None, :].expand(-1, n, -1)), rperm, cperm, e, finite


def _prep(device: str, sizes=(64, 10)) -> None:
    from mpslinalg.svd import triton_square as sq

    for dtype in (torch.complex64, torch.float32):
        for n in sizes:
            A = _randn((7, n, n), dtype, n + 1)
            A[1] *= 1e30
            A[2] *= 1e-30
            A[3, 2, 1] = float("nan")
            A[4, 0, 3] = float("inf")
            A[5] = 0
            A[6, :, 1] = 0  # a zero column and rows of equal keys
            A[6, 3] = A[6, 4]
            A = A.to(device)
            before = A.clone()
            got = sq.prep(A)
            assert torch.equal(A.nan_to_num(), before.nan_to_num()) and torch.equal(A.isnan(), before.isnan())
            for name, x, y in zip(("W", "rperm", "cperm", "e", "finite"), got, _torch_prep(A)):
                assert torch.equal(x.cpu(), y.to(x.dtype).cpu()), (dtype, n, name)
            # all entries subnormal: W = A 2^-e exactly, max |w| in [1/2, 1)
            S = (A[:1] / A[:1].abs().max() * 2.0**-130).nan_to_num()
            W, rperm, cperm, e, _ = sq.prep(S)
            assert int(e[0]) <= -129
            ref = S[0].cpu().to(torch.complex128 if dtype.is_complex else torch.float64) * 2.0 ** -int(e[0])
            assert 0.5 <= float(ref.abs().max()) < 1.0
            ref = ref[rperm[0].cpu()][:, cperm[0].cpu()]
            assert torch.equal(W[0].cpu(), ref.to(dtype))  # exact: a power of two
            keys = ref.abs().amax(-1)
            assert bool((keys[:-1] >= keys[1:]).all())


@contextlib.contextmanager
def _square_route(on: bool = True, qr: str | None = None):
    """The square route switched on (and float32's one-kernel SVD up to 32 off, so it serves those
    orders too) or off; ``qr``: its QR kernel."""
    from mpslinalg.svd import triton_fused as sf
    from mpslinalg.svd import triton_square as sq

    saved = sq.ENABLED, sf.ENABLED, sq.QR_KERNEL
    sq.ENABLED, sf.ENABLED, sq.QR_KERNEL = on, (not on) and saved[1], qr or saved[2]
    try:
        yield
    finally:
        sq.ENABLED, sf.ENABLED, sq.QR_KERNEL = saved


def _route(device: str, sizes=(8, 6), qr: str | None = None) -> None:
    """The route's calls on a batch of seven cases. Default sizes: the smallest that take each Jacobi
    kernel of the route (complex64: 8 the halving ordering with non-degenerate regrouping, 6 the pairs
    kernel with an odd half; float32: the register kernel)."""
    import mpslinalg as LA
    from mpslinalg.svd import cuda as svd_cuda
    from mpslinalg.svd import triton_square as sq

    svdmod = importlib.import_module("mpslinalg.svd")
    for dtype in (torch.complex64, torch.float32):
        wide = torch.complex128 if dtype.is_complex else torch.float64
        for n in sizes:
            A = _randn((7, n, n), dtype, 3 * n)
            A[6] = A[6][:, : n // 2] @ A[6][: n // 2, :]  # rank n/2: half of V completed
            A[1] *= 1e30
            A[2] *= 1e-30
            A[3, 1, 1] = float("nan")
            A[4] = 0
            d = torch.logspace(0, -3, n)
            B = A[5].clone()
            A[5] = B * d[:, None] * d[None, :]  # graded D B D
            A = A.to(device)
            with _square_route(qr=qr):
                assert svd_cuda.whole_kernel(A, True) is sq  # the route under test
                U, S, Vh, info = LA.svd_ex(A)
            assert info.tolist() == [0, 0, 0, 1, 0, 0, 0], info
            good = [0, 1, 2, 4, 5, 6]
            assert_svd_ratios(A[good].cpu(), U[good].cpu(), S[good].cpu(), Vh[good].cpu(), 50, (dtype, n))
            assert bool(S[3].isnan().all() and U[3].isnan().all() and Vh[3].isnan().all())
            assert float(S[4].abs().max()) == 0.0
            ref = torch.linalg.svdvals(A[5].cpu().to(wide))
            kappa_b = float(torch.linalg.cond(B.to(wide)))
            assert float(((S[5].cpu().double() - ref) / ref).abs().max()) <= 30 * n * kappa_b * UNIT
            if dtype.is_complex:  # a conjugate view: its bits materialised (the kernels read memory;
                # the binding resolves the view whatever the values: two matrices, one with a NaN)
                C = A[2:4]
                with _square_route(qr=qr):
                    got = LA.svd_ex(C.conj())[:3]
                    want = LA.svd_ex(C.conj().resolve_conj())[:3]
                assert all(torch.equal(x.nan_to_num(), y.nan_to_num()) for x, y in zip(got, want))
            with _square_route(False):
                S0 = svdmod.svd_impl(A, False, False)[1]
            with _square_route(qr=qr):
                S1 = svdmod.svd_impl(A, False, False)[1]  # sigma only: no Q in the QR
            for Sx in (S, S1):
                diff = (Sx[good] - S0[good]).abs().amax(-1) / S0[good, 0].clamp_min(1e-38)
                assert float(diff.max()) <= 30 * n * UNIT, (dtype, n)


def test_blocked_qr_interpreted():
    # Both builds at 40 (3 panels with padding: a trailing update after an updated panel) and 2; JOINT_REDUCE
    # changes only the panel's reductions (_panel, the same in both builds) and its tl.reduce is the
    # interpreter's slow part (~7 s a 40x40 matrix, ~2.5 s at 17), so it runs at 17: 2 panels, padding, a
    # one-column last panel. The CUDA test runs all four combinations.
    run_interpreted("svd.test_svd_qr_square",
                    "t._blocked_qr('cpu', (40, 2), ((False, False), (True, False)), (1e-30,))\n"
                    "t._blocked_qr('cpu', (17,), ((False, True),), (1e-30,))")


def test_prep_and_route_interpreted():
    run_interpreted("svd.test_svd_qr_square", "t._prep('cpu'); t._route('cpu')")


@pytest.mark.cuda
def test_square_route_cuda():
    """The route as it ships (QR_KERNEL "small"), its prep kernel, and no host sync."""
    _prep("cuda")
    _route("cuda", (64, 34, 16, 6), "small")
    A = _randn((64, 64, 64), torch.complex64, 1).cuda()
    import mpslinalg as LA

    with _square_route():
        no_cuda_sync([lambda: LA.svd_ex(A), lambda: LA.svd_ex(A, full_matrices=False),
                      lambda: importlib.import_module("mpslinalg.svd").svd_impl(A, False, False)])


@pytest.mark.cuda
def test_blocked_qr_cuda():
    """Every variant of the blocked QR, and the route with it."""
    _blocked_qr("cuda")
    _route("cuda", (64, 34), "blocked")
