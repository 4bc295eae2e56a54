"""The CUDA SVD's complex64 speed-ups (issue 12: complex64 4096x64x64 <= 20 ms) keep its results.

* ``mpslinalg.svd.triton_complete``: ``V``'s zero-σ columns completed by the QR family's
  Triton QR run only in the programs whose matrix has such a column. Checked: matrices without a
  flagged column come back bit-identical (their programs do nothing), flagged columns make the
  matrix orthonormal to ``30·n·u`` (Householder QR's ``O(n·u)`` orthogonality, LAPACK's threshold
  30), and through ``svd_ex`` a batch mixing full-rank, rank-deficient and zero complex matrices has
  orthonormal ``U``/``V`` (``‖VᴴV − I‖ < 50·n·u``, issue 12's ratio) and reconstructs ``A`` to
  ``50·n·u·‖A‖``.
* ``svd_triton.REG_JOINT_REDUCE``: the register Jacobi kernel with its four column sums in one
  ``tl.reduce`` gives the separate sums' results to rounding: ``X`` within ``30·n·u·‖X₀‖·n`` and the
  same convergence flags (the sums differ only in their order of addition, ``γ_n``).

* ``svd_triton.TILE_KERNEL = "pairs"`` (``svd_triton_regs``): the same iteration as the register
  kernel with the pairs' columns in two tiles (checked after one sweep and converged); ``"halving"``
  (its recursive-halving ordering for ``n`` a power of two, "pairs" otherwise): converged, ``X0 V = X``
  to ``30·n·u·‖X0‖``, ``V`` orthonormal to ``30·n·u``, the register kernel's column norms to
  ``30·n·u·‖X0‖`` (Weyl: both are backward stable).

* ``svd_triton_complete.finish``: the steps after the Jacobi (σ, their stable descending order,
  ``V_A = Pc W Σ⁻¹``, ``V``'s sorted columns) in one launch, against the torch ops they replace.

On the CPU the kernels run in Triton's interpreter (a subprocess, as ``test_svd_triton.py``); on
CUDA compiled (marked ``cuda``).
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from svd.harness import run_interpreted
from svd.sync_check import no_cuda_sync

import mpslinalg as LA


def _u() -> float:
    return torch.finfo(torch.float32).eps / 2


def _completion(device: str) -> None:
    from mpslinalg.svd import triton_complete as stc

    u = _u()
    for dtype, n in ((torch.complex64, 10), (torch.float32, 7)):
        g = torch.Generator().manual_seed(n)
        Ux = torch.linalg.qr(torch.randn(4, n, n, dtype=dtype, generator=g))[0].to(device)
        zero = torch.zeros(4, n, dtype=torch.bool, device=device)
        zero[1, -2:] = True
        zero[3, 1:] = True
        before = Ux.clone()
        out = stc.complete(Ux, zero)
        assert torch.equal(Ux, before)  # input not modified
        assert torch.equal(out[0], Ux[0]) and torch.equal(out[2], Ux[2])  # not flagged: untouched
        assert torch.equal(out[1][:, :-2], Ux[1][:, :-2]) and torch.equal(out[3][:, :1], Ux[3][:, :1])
        eye = torch.eye(n, dtype=dtype, device=device)
        for b in (1, 3):
            assert float((out[b].mH @ out[b] - eye).abs().max()) <= 30 * n * u


def _completion_through_svd(device: str) -> None:
    u = _u()
    n = 12
    g = torch.Generator().manual_seed(3)
    A = torch.randn(4, n, n, dtype=torch.complex64, generator=g)
    A[1] = A[1][:, :4] @ torch.randn(4, n, dtype=torch.complex64, generator=g)  # rank 4
    A[3] = 0
    A = A.to(device)
    U, S, Vh, info = LA.svd_ex(A)
    eye = torch.eye(n, dtype=A.dtype, device=device)
    assert not bool(info.any())
    assert float((Vh @ Vh.mH - eye).abs().max()) < 50 * n * u
    assert float((U.mH @ U - eye).abs().max()) < 50 * n * u
    recon = U @ torch.diag_embed(S).to(A.dtype) @ Vh
    norm = float(torch.linalg.matrix_norm(A, ord=2).max())
    assert float((recon - A).abs().max()) <= 50 * n * u * max(norm, 1.0)
    assert float(S[3].abs().max()) == 0.0


def _joint_reduce(device: str) -> None:
    from mpslinalg.svd import triton_jacobi as st

    u = _u()
    for n in (6, 12):
        X0 = torch.randn(3, n, n, dtype=torch.complex64, generator=torch.Generator().manual_seed(n)).to(device)
        eye = torch.eye(n, dtype=X0.dtype, device=device).expand(3, n, n).contiguous()
        out = {}
        for joint in (False, True):
            saved = st.REG_JOINT_REDUCE, st.TILE_KERNEL, dict(st.LANE_MAX)
            st.REG_JOINT_REDUCE, st.TILE_KERNEL, st.LANE_MAX = joint, "registers", {torch.float32: 0,
                                                                                  torch.complex64: 0}
            try:
                out[joint] = st.jacobi(X0.clone(), eye.clone(), 30, math.sqrt(n) * u, 2 * n * u)
            finally:
                st.REG_JOINT_REDUCE, st.TILE_KERNEL, st.LANE_MAX = saved
        scale = float(X0.abs().max()) * n
        assert torch.equal(out[True][2], out[False][2])
        assert float((out[True][0] - out[False][0]).abs().max()) <= 30 * n * u * scale
        assert float((out[True][1] - out[False][1]).abs().max()) <= 30 * n * u * n


def _pairs_kernel(device: str, cases=((2, torch.float32), (4, torch.complex64), (10, torch.float32),
                                      (12, torch.complex64), (16, torch.complex64), (16, torch.float32))) -> None:
    """``TILE_KERNEL = "pairs"`` moves the columns as the register kernel does: after one sweep (the
    same pairs, rotations and sums; only the moves differ) ``X`` and ``V`` agree to ``30·n·u`` of
    their scale (bit-identical in the interpreter). Converged, "pairs" and "halving" give ``X0 V = X``
    to ``30·n·u·‖X0‖``, ``V`` orthonormal to ``30·n·u`` and the register kernel's column norms."""
    from mpslinalg.svd import triton_jacobi as st

    u = _u()
    for n, dtype in cases:
        X0 = torch.randn(3, n, n, dtype=dtype, generator=torch.Generator().manual_seed(n)).to(device)
        eye = torch.eye(n, dtype=dtype, device=device).expand(3, n, n).contiguous()
        scale = float(X0.abs().max()) * n
        for sweeps in (1, 30):
            out = {}
            for kernel in ("registers", "pairs", "halving"):
                saved = st.TILE_KERNEL, dict(st.LANE_MAX)
                st.TILE_KERNEL, st.LANE_MAX = kernel, {torch.float32: 0, torch.complex64: 0}
                try:
                    out[kernel] = st.jacobi(X0.clone(), eye.clone(), sweeps, math.sqrt(n) * u, 2 * n * u)
                finally:
                    st.TILE_KERNEL, st.LANE_MAX = saved
            if sweeps == 1:
                X, V, _ = out["pairs"]
                assert float((X - out["registers"][0]).abs().max()) <= 30 * n * u * scale
                assert float((V - out["registers"][1]).abs().max()) <= 30 * n * u
                continue
            saved = st.TILE_KERNEL, dict(st.LANE_MAX), st.REG_FAST_ROTATION
            st.TILE_KERNEL, st.LANE_MAX = "halving", {torch.float32: 0, torch.complex64: 0}
            st.REG_FAST_ROTATION = True  # approximate angles (on CUDA; the interpreter's are exact)
            try:
                out["fast"] = st.jacobi(X0.clone(), eye.clone(), sweeps, math.sqrt(n) * u, 2 * n * u)
            finally:
                st.TILE_KERNEL, st.LANE_MAX, st.REG_FAST_ROTATION = saved
            ref = torch.linalg.vector_norm(out["registers"][0], dim=-2).sort(-1)[0]
            for kernel in ("pairs", "halving", "fast"):  # halving: its own ordering for n a power of two
                X, V, rot = out[kernel]
                assert not bool(rot.any())
                assert float((X0 @ V - X).abs().max()) <= 30 * n * u * scale
                assert float((V.mH @ V - torch.eye(n, device=device)).abs().max()) <= 30 * n * u
                norms = torch.linalg.vector_norm(X, dim=-2).sort(-1)[0]
                assert float((norms - ref).abs().max()) <= 30 * n * u * scale


def _finish(device: str) -> None:
    """``svd_triton_complete.finish`` (σ, order, ``V_A``, ``Vj`` in one launch) against the torch ops of
    ``mpslinalg.svd.algorithm.finish``: σ and ``V_A`` to ``8u`` relative / absolute (the kernel scales a column
    by its largest real or imaginary part, torch by its largest modulus: a few roundings apart), the
    same order (``Vj`` bit-identical, ties included), ``info`` and NaN for non-finite input, exponents
    beyond ``2^±126`` (subnormal σ at ``2^-140``; ``2^125``)."""
    from mpslinalg.svd import triton_complete as stc

    u = _u()
    g = torch.Generator().manual_seed(1)
    for dtype, n in ((torch.complex64, 10), (torch.float32, 7), (torch.complex64, 16)):
        X = torch.randn(5, n, n, dtype=dtype, generator=g)
        X[1, :, 2] = 0
        X[1, :, 5] = X[1, :, 3]  # a tie: the stable order keeps column 3 first
        X[2] = 0
        V = torch.randn(5, n, n, dtype=dtype, generator=g)
        cperm = torch.stack([torch.randperm(n, generator=g) for _ in range(5)])
        e = torch.tensor([-140, 3, 0, 125, -5], dtype=torch.int32)  # 2^-140: subnormal sigma
        finite = torch.tensor([True, True, True, True, False])
        rotated = torch.tensor([False, True, False, False, True])
        args = [t.to(device) for t in (X, V, cperm, e, finite, rotated)]
        got = stc.finish(*args)
        ref = importlib.import_module("mpslinalg.svd.algorithm").finish(*args)
        assert torch.equal(got[2], ref[2]) and torch.equal(got[4], ref[4])  # info, Vj
        assert float(((got[0] - ref[0]).abs() / ref[0].clamp_min(1e-30)).max()) <= 8 * u
        assert torch.equal(got[1][4].isnan(), torch.ones(n, dtype=torch.bool, device=device))
        # subnormal sigmas (2^-140) keep fewer digits: compare those to their spacing 2^-149
        err = (got[1][:4] - ref[1][:4]).abs()
        assert bool((err <= 8 * u * ref[1][:4] + 2.0**-149 * 4).all())
        assert float((got[3][:4] - ref[3][:4]).abs().max()) <= 8 * u


_HALVING_SWITCHES = ("REG_TRACK_NORMS", "REG_UNROLL2", "REG_SCALED_ROTATIONS")


def _halving(X0: torch.Tensor, eye: torch.Tensor, *switches: bool):
    """``svd_triton.jacobi`` by the halving kernel with ``_HALVING_SWITCHES`` set to ``switches``."""
    from mpslinalg.svd import triton_jacobi as st

    u = _u()
    n = X0.shape[-1]
    names = ("TILE_KERNEL", "LANE_MAX", *_HALVING_SWITCHES)
    saved = [getattr(st, k) for k in names]
    for k, v in zip(names, ("halving", {torch.float32: 0, torch.complex64: 0}, *switches)):
        setattr(st, k, v)
    try:
        return st.jacobi(X0.clone(), eye.clone(), 30, math.sqrt(n) * u, 2 * n * u)
    finally:
        for k, v in zip(names, saved):
            setattr(st, k, v)


def _tracked_norms(device: str, cases=((8, torch.complex64), (16, torch.complex64), (16, torch.float32))) -> None:
    """The halving kernel's variants keep the plain kernel's results: ``svd_triton.REG_TRACK_NORMS``
    (the squared column norms carried, LAPACK xGSVJ0's update; a round sums only ``x_pᴴ x_q``) and
    ``REG_SCALED_ROTATIONS`` (xGSVJ0's fast scaled rotations, ``x = d·y``): converged, ``X0 V = X`` to
    ``30·n·u·‖X0‖``, ``V`` orthonormal to ``30·n·u``, converged on the true column norms
    (``|x_iᴴ x_j| <= 4nu·‖x_i‖‖x_j‖``), the sorted column norms within ``30·n·u·‖X0‖`` of the plain
    kernel's (Weyl: all backward stable), and every σ of the graded matrices within the one-sided
    Jacobi bound ``30·n·κ(B)·u`` of float64 LAPACK (Demmel & Veselić; ``κ(B)`` of ``X0`` with unit
    columns, as ``test_svd_accuracy``). Matrix 1 has two equal columns: their rotation cancels
    ``a − t|g|`` to 0 (the ROOTEPS test marks the norm stale), and its sweeps must still end in a
    converged, orthonormal result. ``REG_UNROLL2`` (two rounds per loop iteration): bit-identical results
    in the interpreter; compiled, ptxas may fuse a product and a sum in one copy and not the other, so
    on CUDA the unrolled results meet the same checks instead."""
    for n, dtype in cases:
        g = torch.Generator().manual_seed(n)
        X0 = torch.randn(4, n, n, dtype=dtype, generator=g)
        X0[1, :, 3] = X0[1, :, 1]
        D = torch.logspace(0, -6, n)
        X0[2] = X0[2] * D
        X0[3] = D[:, None] * X0[3] * D
        X0 = X0.to(device)
        eye = torch.eye(n, dtype=dtype, device=device).expand(4, n, n).contiguous()
        ref = torch.linalg.vector_norm(_halving(X0, eye, False, False, False)[0], dim=-2).sort(-1)[0]
        for track, scaled in ((True, False), (True, True)):
            rolled = _halving(X0, eye, track, False, scaled)
            unrolled = _halving(X0, eye, track, True, scaled)
            if device == "cpu":  # REG_UNROLL2: the same operations in the same order (ptxas may contract
                # a product and a sum into an FMA in one copy and not the other: on CUDA the checks below)
                assert all(torch.equal(x, y) for x, y in zip(rolled, unrolled))
            for X, V, rot in (rolled, unrolled):
                _check_converged(X0, X, V, rot, ref, scaled)


def _check_converged(X0, X, V, rot, ref, what) -> None:
    """``_tracked_norms``' checks of one result (``ref``: the plain kernel's sorted column norms)."""
    u = _u()
    n = X0.shape[-1]
    device = X0.device
    dtype = X0.dtype
    scale = float(X0.abs().max()) * n
    assert not bool(rot.any())
    # converged on the true norms: |x_iᴴ x_j| <= 2·ctol·‖x_i‖‖x_j‖ (ctol = 2nu, doubled for the
    # last sweep's rotations below it and the rounding of the sums)
    X64 = X.cpu().to(torch.complex128)
    nrm = torch.linalg.vector_norm(X64, dim=-2)
    cos = (X64.mH @ X64).abs() / (nrm[..., :, None] * nrm[..., None, :]).clamp_min(1e-300)
    cos = cos - torch.diag_embed(cos.diagonal(dim1=-2, dim2=-1))
    assert float(cos.max()) <= 2 * 2 * n * u
    assert float((X0 @ V - X).abs().max()) <= 30 * n * u * scale
    assert float((V.mH @ V - torch.eye(n, device=device)).abs().max()) <= 30 * n * u
    norms = torch.linalg.vector_norm(X, dim=-2).sort(-1)[0]
    assert float((norms - ref).abs().max()) <= 30 * n * u * scale
    A64 = X0[2:].cpu().to(torch.complex128 if dtype.is_complex else torch.float64)
    sigma = torch.linalg.svdvals(A64).flip(-1)
    kappa_B = torch.linalg.cond(A64 / torch.linalg.vector_norm(A64, dim=-2, keepdim=True))
    rel = ((norms[2:].cpu().double() - sigma) / sigma).abs().amax(-1)
    assert bool((rel <= 30 * n * kappa_B * u).all()), (what, rel, kappa_B)


def _tracked_update(device: str) -> None:
    """``svd_triton_regs._rotate_pair_tracked``'s norm update (``a − t|g|``, ``b + t|g|``) is the rotated
    columns' squared norms to ``30·m·u·(a + b)`` (the sums' ``γ_m`` and a few roundings of ``t|g|``,
    LAPACK's threshold 30); an update that cancelled below ``ROOTEPS = 2^-12`` of the old norm (equal
    columns: exactly to 0; nearly parallel ones) is marked stale (−1) instead; a pair entering stale is
    not rotated (its columns bit-identical) and counts as work left."""
    from svd import tracked_kernel as tk

    u = _u()
    m, h = 16, 8
    g = torch.Generator().manual_seed(7)
    P = torch.randn(m, h, dtype=torch.complex64, generator=g)
    Q = torch.randn(m, h, dtype=torch.complex64, generator=g)
    Q[:, 1] = P[:, 1]  # equal columns: a' = a − |g| = 0
    Q[:, 2] = P[:, 2] * (0.6 + 0.8j) + 1e-3 * Q[:, 2]  # nearly parallel: a'/a ~ 1e-6
    Q[:, 4] = 1e3 * Q[:, 4]  # b >> a
    q5 = Q[:, 5].to(torch.complex128)
    p5 = P[:, 5].to(torch.complex128)
    Q[:, 5] = (q5 - p5 * (p5.conj() @ q5) / (p5.conj() @ p5)).to(torch.complex64)  # |g| ~ u: no rotation
    a = torch.linalg.vector_norm(P.double(), dim=0) ** 2
    b = torch.linalg.vector_norm(Q.double(), dim=0) ** 2
    for stale0 in (False, True):
        Pd, Qd = P.clone().to(device), Q.clone().to(device)
        out = torch.empty(4, h, device=device)
        sig = torch.empty(h, dtype=torch.int32, device=device)
        tk.rotate_tracked[(1,)](torch.view_as_real(Pd), torch.view_as_real(Qd), out, sig, math.sqrt(m) * u,
                                2 * m * u, NP=m, HP=h, STALE0=stale0)
        nP1, nQ1, fP, fQ = (x.cpu().double() for x in out)
        stale = (nP1 < 0) | (nQ1 < 0)
        assert bool(stale[1]) and bool(stale[2]) and float(nP1[1]) == -1.0
        keep = ~stale
        bound = 30 * m * u * (a + b)
        assert bool(((nP1 - fP).abs() <= bound)[keep].all()) and bool(((nQ1 - fQ).abs() <= bound)[keep].all())
        assert int(keep.sum()) >= h - 2 - int(stale0)
        assert float(nP1[5]) == float(out[2, 5]) and int(sig[5].item()) == 0  # not rotated: fresh = carried
        assert bool(sig[3].item()) and bool(sig[4].item())
        if stale0:
            assert float(nP1[0]) == -1.0 and bool(sig[0].item())
            assert torch.equal(Pd[:, 0].cpu(), P[:, 0]) and torch.equal(Qd[:, 0].cpu(), Q[:, 0])


# The interpreter's orders: the smallest that take the same kernels and branches as the CUDA test's 16
# (8: the halving ordering's three levels, the first regrouping non-degenerate, two-round loop iterations
# at every level but the last; the interpreter runs a 16x16 complex matrix ~4x slower than an 8x8) and
# 12 (padded orders, an even and an odd half: 12 and 10 real, 6 complex; complex 12 took ~20 s)
_PAIRS_CPU = "((2, torch.float32), (4, torch.complex64), (10, torch.float32), (12, torch.float32), " \
             "(6, torch.complex64), (8, torch.complex64), (8, torch.float32))"
_TRACKED_CPU = "((8, torch.complex64), (8, torch.float32))"


def test_complex_speedups_interpreted():
    run_interpreted("svd.test_svd_triton_complex",
                    "import torch\n"
                    "t._completion('cpu'); t._completion_through_svd('cpu'); t._joint_reduce('cpu')\n"
                    f"t._pairs_kernel('cpu', {_PAIRS_CPU}); t._finish('cpu')")


def test_tracked_norms_interpreted():
    run_interpreted("svd.test_svd_triton_complex",
                    f"import torch\nt._tracked_update('cpu'); t._tracked_norms('cpu', {_TRACKED_CPU})")


@pytest.mark.cuda
def test_complex_speedups_cuda():
    _completion("cuda")
    _completion_through_svd("cuda")
    _joint_reduce("cuda")
    _pairs_kernel("cuda")
    _finish("cuda")
    _tracked_update("cuda")
    _tracked_norms("cuda")


@pytest.mark.cuda
def test_no_host_sync_cuda():
    """Issue 12: ``svd_ex``, ``svdvals``' no-vector path (``svd_impl(A, False, False)``), ``pinv`` and
    ``lstsq`` (every driver) never synchronise with the host, under
    ``torch.cuda.set_sync_debug_mode("error")`` (each call run once before: a first launch may build).
    Shapes: the complex64 64x64 batch of issue 12 (register Jacobi, QR preconditioner, completion), a
    rank-deficient complex batch (the completion's QR runs), float32 32x32 and 8x9."""
    svdmod = importlib.import_module("mpslinalg.svd")
    g = torch.Generator().manual_seed(0)
    C = torch.randn(64, 64, 64, dtype=torch.complex64, generator=g)
    Cr = C.clone()
    Cr[::2] = Cr[::2, :, :8] @ Cr[::2, :8, :]  # rank 8
    mats = [C, Cr, torch.randn(256, 32, 32, generator=g), torch.randn(512, 8, 9, generator=g)]
    calls = []
    for A in (m.cuda() for m in mats):
        B = torch.randn(*A.shape[:-1], 2, dtype=A.dtype, generator=g).cuda()
        calls += [lambda A=A: LA.svd_ex(A), lambda A=A: LA.svd_ex(A, full_matrices=False),
                  lambda A=A: svdmod.svd_impl(A, False, False), lambda A=A: LA.pinv(A)]
        calls += [lambda A=A, B=B, d=d: LA.lstsq(A, B, driver=d) for d in ("gels", "gelsy", "gelsd", "gelss")]
    no_cuda_sync(calls)

