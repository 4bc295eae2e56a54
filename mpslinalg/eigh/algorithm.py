"""The eigh family's algorithm, written once over a kernel object (:mod:`mpslinalg.eigh.kernels`):
the named triangle made Hermitian, non-finite matrices flagged, power-of-two scaling, then the
batched Jacobi (``n <= jacobi_max``) or Householder tridiagonalisation (two-stage or ``sytrd``) +
implicit QL + back-transformation, the eigenvalues sorted ascending (see :mod:`mpslinalg.eigh`)."""

from __future__ import annotations

import math

import torch

from ..oplayer import functorch_active as _functorch
from ..qr import geqrf_impl, ormqr_impl
from ..triangular import trsm
from .kernels import SMALL_MAX, TUNING, _larfg, kernels_for, on_kernels

#: info codes of eigh_ex (per matrix)
INFO_NONFINITE = 1
INFO_NOCONV = 2


def unit_roundoff(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps / 2


def _real_dtype(dtype: torch.dtype) -> torch.dtype:
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)


# --------------------------------------------------------------------------------------------------
# The named triangle
# --------------------------------------------------------------------------------------------------


def _strict(A: torch.Tensor, lower: bool) -> torch.Tensor:
    return A.tril(-1) if lower else A.triu(1)


def _real_diag(A: torch.Tensor) -> torch.Tensor:
    d = A.diagonal(dim1=-2, dim2=-1)
    return d.real if A.is_complex() else d


def triangle_finite(A: torch.Tensor, lower: bool) -> torch.Tensor:
    """``[...]`` bool: every entry the op reads is finite (the strict triangle and the real part of
    the diagonal: LAPACK ignores the diagonal's imaginary part, and so do we)."""
    S = _strict(A, lower)
    ok = torch.isfinite(S.real if S.is_complex() else S).all(-1).all(-1)
    if S.is_complex():
        ok = ok & torch.isfinite(S.imag).all(-1).all(-1)
    return ok & torch.isfinite(_real_diag(A)).all(-1)


def hermitian(A: torch.Tensor, lower: bool) -> torch.Tensor:
    """The Hermitian matrix whose named triangle is ``A``'s (a fresh tensor): the strict triangle,
    its conjugate transpose and the real part of the diagonal."""
    S = _strict(A, lower)
    return S + S.mH + torch.diag_embed(_real_diag(A).to(A.dtype))


# --------------------------------------------------------------------------------------------------
# The torch.linalg route (torch.func transforms; the front doors outside the table)
# --------------------------------------------------------------------------------------------------


def eigh_via_torch(A: torch.Tensor, uplo: str, compute_v: bool):
    """``(w, V, info)`` of the eigh contract from one ``torch.linalg.eigh`` call: a matrix with a
    non-finite entry in its triangle is replaced by the identity first (LAPACK would report a
    convergence failure and torch raise), then gets ``info = 1`` and NaN outputs. vmap-friendly
    (no host reads, no in-place writes). Differentiable by torch's own formulas, which are ours."""
    ok = triangle_finite(A, uplo == "L")
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    safe = torch.where(ok[..., None, None], A, eye)
    nan = float("nan")
    info = torch.where(ok, 0, INFO_NONFINITE).to(torch.int32)
    if compute_v:
        w, V = torch.linalg.eigh(safe, UPLO=uplo)
        return (torch.where(ok[..., None], w, nan), torch.where(ok[..., None, None], V, nan), info)
    w = torch.linalg.eigvalsh(safe, UPLO=uplo)
    return torch.where(ok[..., None], w, nan), A.new_empty(0), info


# --------------------------------------------------------------------------------------------------
# The algorithm
# --------------------------------------------------------------------------------------------------


def eigh_impl(A: torch.Tensor, uplo: str, compute_v: bool):
    """The eigh contract without checks: ``(w [..., n] real ascending, V [..., n, n] or empty,
    info [...] int32)``; ``info``: 0, 1 (non-finite input: NaN outputs), 2 (Jacobi or QL not
    converged within its bound). Fresh tensors; the input is never modified."""
    if _functorch():
        return eigh_via_torch(A, uplo, compute_v)
    batch, n = A.shape[:-2], A.shape[-1]
    lower = uplo == "L"
    real = _real_dtype(A.dtype)
    Af = A.reshape(math.prod(batch), n, n)
    B = Af.shape[0]
    ok = triangle_finite(Af, lower)
    info = torch.where(ok, 0, INFO_NONFINITE).to(torch.int32)
    if B == 0 or n == 0:
        w = A.new_empty((*batch, n), dtype=real)
        V = A.new_empty((*batch, n, n)) if compute_v else A.new_empty(0)
        return w, V, info.reshape(batch)
    H = hermitian(Af, lower)
    H = torch.where(ok[:, None, None], H, torch.zeros_like(H))
    # scale by 2^-e so that max |h_ij| lies in [1/2, 1) (exact; in two factors: 2^e may not be representable)
    _, ex = torch.frexp(H.abs().amax((-2, -1)))
    e1, e2 = ex // 2, ex - ex // 2
    s1, s2 = torch.exp2(-e1.to(real)), torch.exp2(-e2.to(real))
    H = H * s1[:, None, None].to(H.dtype) * s2[:, None, None].to(H.dtype)
    if n == 1:
        w, V, noconv = _real_diag(H), (torch.ones_like(H) if compute_v else None), torch.zeros_like(ok)
    elif n <= _jacobi_max(Af):
        w, V, noconv = _jacobi(H, compute_v)
    else:
        w, V, noconv = (_two_stage_path if _reduction(Af) == "two_stage" else _tridiagonal_path)(H, compute_v)
    w = w * torch.exp2(e1.to(real))[:, None] * torch.exp2(e2.to(real))[:, None]
    w, order = torch.sort(w, dim=-1)
    info = torch.where(ok & noconv, INFO_NOCONV, info).to(torch.int32)
    w = torch.where(ok[:, None], w, float("nan"))
    if compute_v:
        V = V.gather(-1, order[:, None, :].expand(B, n, n))
        V = torch.where(ok[:, None, None], V, float("nan"))
        V = V.reshape(*batch, n, n)
    else:
        V = A.new_empty(0)
    return w.reshape(*batch, n), V, info.reshape(batch)


def _jacobi_max(A: torch.Tensor) -> int:
    kind = "metal" if on_kernels(A) else "torch"
    return TUNING.jacobi_max[kind].get(A.dtype, 0)


def _reduction(A: torch.Tensor) -> str:
    """``"two_stage"`` or ``"sytrd"``: the large-n reduction for ``A`` (:attr:`Tuning.reduction`)."""
    kind = "metal" if on_kernels(A) else "torch"
    return TUNING.reduction[kind].get(A.dtype, "sytrd")


def jacobi_tolerances(dtype: torch.dtype, n: int) -> tuple[float, float]:
    """``(tol, ctol)`` of the relative stopping rule: rotate above ``tol = sqrt(n) u`` (``xGESVJ``'s
    ``CTOL``), count as not converged above ``ctol = 2 n u`` (rounding noise of the rotated entries,
    ``γ_n``, can keep a converged matrix rotating by tiny angles below it)."""
    u = unit_roundoff(dtype)
    return math.sqrt(n) * u, 2 * n * u


def _jacobi(H: torch.Tensor, compute_v: bool):
    """``(w, V, noconv)`` of the scaled Hermitian ``H [B, n, n]`` by the batched Jacobi kernel (odd
    orders padded by one zero row and column, which no rotation touches and which is dropped)."""
    B, n, _ = H.shape
    if n <= SMALL_MAX:
        return _jacobi_small(H, compute_v)
    npad = n + n % 2
    if npad != n:
        H = torch.nn.functional.pad(H, (0, 1, 0, 1))
    V = None
    if compute_v:
        V = torch.eye(npad, dtype=H.dtype, device=H.device).expand(B, npad, npad).contiguous()
    real = _real_dtype(H.dtype)
    tol, ctol = jacobi_tolerances(real, n)
    kern = kernels_for(H)
    # the Metal kernel stops each matrix in the kernel (no host read): it always gets the CPU's bound
    sweeps, early = (TUNING.max_sweeps, True) if kern.name == "metal" else TUNING.sweeps(H.device, real, n)
    Hj, Vj, rotated = kern.jacobi(H.contiguous(), V, sweeps, tol, ctol, early)
    w = _real_diag(Hj)[:, :n]
    return w, (Vj[:, :n, :n] if compute_v else None), rotated


def _jacobi_small(H: torch.Tensor, compute_v: bool):
    """``(w, V, noconv)`` for ``n <= SMALL_MAX``: the ``jacobi_small`` kernel (Metal: one thread per
    matrix in registers), the same tolerances and sweep bounds as :func:`_jacobi`."""
    B, n, _ = H.shape
    V = torch.eye(n, dtype=H.dtype, device=H.device).expand(B, n, n).contiguous() if compute_v else None
    real = _real_dtype(H.dtype)
    tol, ctol = jacobi_tolerances(real, n)
    kern = kernels_for(H)
    sweeps, early = (TUNING.max_sweeps, True) if kern.name == "metal" else TUNING.sweeps(H.device, real, n)
    Hj, Vj, rotated = kern.jacobi_small(H.contiguous(), V, sweeps, tol, ctol, early)
    return _real_diag(Hj), Vj, rotated


# --------------------------------------------------------------------------------------------------
# Large n: Householder tridiagonalisation (blocked, LAPACK sytrd/latrd), implicit QL, back-transformation
# --------------------------------------------------------------------------------------------------


def tridiagonalize(H: torch.Tensor, nb: int | None = None):
    """Householder reduction ``H = Q T Qᴴ`` of Hermitian ``H [B, n, n]`` (both triangles stored),
    LAPACK ``sytrd``/``hetrd`` with ``UPLO = 'L'``: panels of ``nb`` columns reduced by ``latrd``
    (matrix-vector products, with the panel's earlier reflectors applied lazily through ``W``), the
    trailing matrix updated once per panel by the rank-``2 nb`` product ``A -= V Wᴴ + W Vᴴ``.

    Returns ``(d [B, n], e [B, n-1], Vp [B, n-1, n-1], tau [B, n-1])``: ``T``'s real diagonal and
    off-diagonal, and ``Q = diag(1, Q')`` with ``Q' = H_1 ... H_{n-1}`` in :func:`torch.geqrf`'s packed
    form (reflector ``i`` in column ``i`` of ``Vp``, unit entry implied on the diagonal)."""
    nb = nb or TUNING.nb
    B, n, _ = H.shape
    A = H.clone()
    real = _real_dtype(A.dtype)
    d = A.new_zeros(B, n, dtype=real)
    e = A.new_zeros(B, n - 1, dtype=real)
    Vp = A.new_zeros(B, n - 1, n - 1)
    tau = A.new_zeros(B, n - 1)
    for j0 in range(0, n - 1, nb):
        w = min(nb, n - 1 - j0)
        m = n - j0  # rows of the panel, j0 .. n-1
        Vb = A.new_zeros(B, m, w)  # reflectors (rows j0.., unit entries explicit)
        Wb = A.new_zeros(B, m, w)
        for i in range(w):
            c = j0 + i
            col = A[:, j0:, c].clone()  # rows j0 .. n-1 of column c (rows below c are used)
            if i > 0:
                col -= torch.matmul(Vb[:, :, :i], Wb[:, i, :i].conj()[:, :, None])[..., 0]
                col -= torch.matmul(Wb[:, :, :i], Vb[:, i, :i].conj()[:, :, None])[..., 0]
            d[:, c] = col[:, i].real if A.is_complex() else col[:, i]
            beta, t, v2 = _larfg(col[:, i + 1], col[:, i + 2:])
            e[:, c] = beta
            tau[:, c] = t
            v = torch.cat([torch.ones_like(col[:, :1]), v2], dim=-1)  # rows c+1 .. n-1
            Vp[:, c + 1:, c] = v2
            Vb[:, i + 1:, i] = v
            # W's column: tau (A22 v - V (Wᴴ v) - W (Vᴴ v)), then the -tau/2 (wᴴ v) v correction
            A22 = A[:, c + 1:, c + 1:]
            x = torch.matmul(A22, v[:, :, None])[..., 0]
            if i > 0:
                Vr, Wr = Vb[:, i + 1:, :i], Wb[:, i + 1:, :i]
                x -= torch.matmul(Vr, torch.matmul(Wr.mH, v[:, :, None]))[..., 0]
                x -= torch.matmul(Wr, torch.matmul(Vr.mH, v[:, :, None]))[..., 0]
            x = t[:, None] * x
            alpha = -0.5 * t * (x.conj() * v).sum(-1)
            Wb[:, i + 1:, i] = x + alpha[:, None] * v
        r = j0 + w  # trailing update of rows/columns r .. n-1 (her2k)
        if r < n:
            Vt, Wt = Vb[:, w:], Wb[:, w:]
            A[:, r:, r:] -= torch.matmul(Vt, Wt.mH) + torch.matmul(Wt, Vt.mH)
    last = A[:, n - 1, n - 1]
    d[:, n - 1] = last.real if A.is_complex() else last
    return d, e, Vp, tau


def _larft(V: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """``T`` of ``H_1 ... H_w = I - V T Vᴴ`` (LAPACK ``larft``, forward, columnwise) as the QR family
    forms it: ``T = (I + D N)⁻¹ D``, ``D = diag(tau)``, ``N = striu(Vᴴ V)`` (one product, one
    unit-triangular solve by the triangular family's ``trsm``, its kernels on the kernel backends)."""
    w = V.shape[-1]
    G = torch.matmul(V.mH, V).triu(1)
    M = G * tau[..., :, None] + torch.eye(w, dtype=V.dtype, device=V.device)
    return trsm(M, torch.diag_embed(tau), upper=True, left=True, unitriangular=True)


def reduce_to_band(H: torch.Tensor, nb: int):
    """Stage 1 of the two-stage reduction (LAPACK ``sy2sb``/``he2hb``, lower): ``H = Q1 B Q1ᴴ`` with
    ``B`` Hermitian of bandwidth ``nb``.

    Per panel of ``nb`` columns ``j0 .. j0+nb-1``: ``geqrf`` of the sub-panel below the band (rows
    ``j0 + nb ..``, the QR family), its ``R`` written into the band, and the two-sided update of the
    trailing matrix ``A <- Qᴴ A Q``, ``Q = I - V T Vᴴ``, as ``A -= V Wᴴ + W Vᴴ`` with ``X = A V T``,
    ``W = X - ½ V (Tᴴ Vᴴ X)`` (``her2k`` by matrix products): a fixed number of torch ops a panel.

    Parameters
    ----------
    H : torch.Tensor
        ``[b, n, n]`` Hermitian (both triangles stored), float32/complex64 (any dtype on the
        ``torch`` backend); not modified.
    nb : int
        The bandwidth, ``1 <= nb < n``.

    Returns
    -------
    B : torch.Tensor
        ``[b, n, n]`` the band matrix, both triangles; entries farther than ``nb`` from the
        diagonal are exactly zero.
    Vp, tau : torch.Tensor
        ``[b, n - nb, n - nb]`` and ``[b, n - nb]``: ``Q1 = diag(I_nb, Q')`` with ``Q'`` in
        :func:`torch.geqrf`'s packed form (reflector ``i`` below the diagonal of column ``i``), for
        ``ormqr``.

    Examples
    --------
    >>> A = torch.randn(1, 70, 70); A = A + A.mT
    >>> B, Vp, tau = reduce_to_band(A, 16)
    >>> bool(B.tril(-17).eq(0).all())
    True
    """
    b, n, _ = H.shape
    A = H.clone()
    m0 = n - nb
    Vp = A.new_zeros(b, m0, m0)
    tau = A.new_zeros(b, m0)
    for j0 in range(0, m0 - 1, nb):  # a sub-panel of one row has nothing to clear
        r = j0 + nb  # the panel is columns j0 .. r-1 whole: Q acts on all of their rows r ..
        QR, t = geqrf_impl(A[:, r:, j0:r])
        k = t.shape[-1]  # min(n - r, nb) reflectors
        Vp[:, j0:, j0:j0 + k] = QR[:, :, :k]
        tau[:, j0:j0 + k] = t
        R = QR.triu()
        A[:, r:, j0:r] = R
        A[:, j0:r, r:] = R.mH
        V = QR[:, :, :k].tril(-1) + torch.eye(n - r, k, dtype=A.dtype, device=A.device)
        T = _larft(V, t)
        C = A[:, r:, r:]
        X = torch.matmul(C, torch.matmul(V, T))
        W = torch.baddbmm(X, V, torch.matmul(T.mH, torch.matmul(V.mH, X)), alpha=-0.5)
        C.baddbmm_(V, W.mH, alpha=-1).baddbmm_(W, V.mH, alpha=-1)
    return A, Vp, tau


def _two_stage_path(H: torch.Tensor, compute_v: bool):
    """``(w, V, noconv)`` for large ``n`` by the two-stage reduction: dense -> band (stage 1, torch
    ops per panel), band -> tridiagonal (stage 2, one kernel: bulge chasing), implicit QL, and
    ``V = Q1 (Q2 Z)`` (``Q2`` by a kernel over ``Z``'s columns, ``Q1`` by the QR family's ``ormqr``)."""
    nb = min(TUNING.band_nb, H.shape[-1] - 1)
    kern = kernels_for(H)
    Bm, Vp, tau = reduce_to_band(H, nb)
    d, e, V2, tau2 = kern.band_tridiagonal(Bm, nb)
    w, Z, failed = _tridiagonal_solve(kern, d, e, compute_v, d.dtype)
    if not compute_v:
        return w, None, failed
    Z = kern.band_q2(V2, tau2, Z.to(H.dtype), nb)
    V = torch.cat([Z[:, :nb], ormqr_impl(Vp, tau, Z[:, nb:], True, False)], dim=1)
    return w, V, failed


def _tridiagonal_solve(kern, d: torch.Tensor, e: torch.Tensor, compute_v: bool, z_dtype: torch.dtype):
    """The tridiagonal eigensolver (implicit QL) of both reductions: ``(w, Z, failed)``, ``Z`` the
    eigenvectors of ``T`` (from ``Z = I`` of ``z_dtype``) when ``compute_v``, else None."""
    b, n = d.shape
    Z = torch.eye(n, dtype=z_dtype, device=d.device).expand(b, n, n).contiguous() if compute_v else None
    return kern.tridiagonal(d, e, Z, TUNING.ql_iterations)


def _tridiagonal_path(H: torch.Tensor, compute_v: bool):
    """``(w, V, noconv)`` for large ``n``: tridiagonalise (torch ops: matrix products), solve the
    tridiagonal (the kernel: implicit QL), back-transform ``V = Q Z`` by ``ormqr`` (the QR family)."""
    d, e, Vp, tau = tridiagonalize(H)
    w, Z, failed = _tridiagonal_solve(kernels_for(H), d, e, compute_v, H.dtype)
    if not compute_v:
        return w, None, failed
    Zc = Z.to(H.dtype)
    V = torch.cat([Zc[:, :1], ormqr_impl(Vp, tau, Zc[:, 1:], True, False)], dim=1)
    return w, V, failed
