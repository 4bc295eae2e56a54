"""A GEMM-rich SVD for large orders: the polar decomposition by QDWH, then a Hermitian eigensolver.

``A = Up H`` by the QR-based dynamically weighted Halley iteration (Nakatsukasa, Bai & Gygi 2010;
Nakatsukasa & Higham 2012, "Stable and efficient spectral divide and conquer algorithms for the
symmetric eigenvalue decomposition and the SVD", §5), then ``H = V Λ Vᴴ`` (the eigh family),
``U = Up V``, ``σ = |Λ|`` sorted descending. Every step is a QR, a Cholesky, a triangular solve or a
matrix product of the library's own families (``qr_impl``, ``cholesky_ex_impl``, ``trsm``), so the
same code runs on the torch backend and on the Metal kernels; under ``torch.func`` transforms those
impls are torch.linalg calls.

Accuracy class: **absolute**. Backward stable (``‖A − UΣVᴴ‖ = O(n u ‖A‖)``, ``U``, ``V`` orthonormal to
``O(n u)``) and ``|σ̂_i − σ_i| <= c·n·u·σ_max``, as a bidiagonalising SVD; *not* relatively accurate
for graded matrices (the preconditioned Jacobi is: the routing keeps it where it runs today).

No host read of device data: the number of iterations is computed on the host from the scalar
recurrence of the lower bound ``l`` alone (:func:`iterations`); a matrix whose iterate has stopped
moving is frozen by ``torch.where`` (per batch element).
"""

from __future__ import annotations

import functools
import math

import torch

from ..oplayer import functorch_active
from ..qr import qr_impl

__all__ = ["MAX_ITERATIONS", "TALL_RATIO", "coefficients", "iterations", "l0_of", "polar", "svd_qdwh"]

#: Iteration cap (N–H 2012: 6 iterations reach float64 from ``l0 = u``; the cap only guards a bad ``l0``).
MAX_ITERATIONS = 10
#: ``m > TALL_RATIO·n``: QR first, then the polar factor of the square ``R`` (JAX's 1.15: below it
#: the QR of the tall matrix costs more than the extra rows in each iteration).
TALL_RATIO = 1.15
#: QR-based step while ``c > QR_C``; Cholesky-based after (``κ(I + c XᴴX) <= 1 + c``: stable, N–H §4.3).
QR_C = 100.0


def _real(dtype: torch.dtype) -> torch.dtype:
    return torch.empty(0, dtype=dtype).real.dtype


def l0_of(dtype: torch.dtype) -> float:
    """The lower bound ``l0`` of ``σ_min(A/α)`` the iteration is tuned for: ``u`` of ``dtype`` (as JAX).

    A conservative fixed bound, not an estimate: a matrix with ``σ_min(A/α) < l0`` has
    ``σ_min < u·α <= u·√n·σ_max``, which is numerically rank deficient, and its ``U`` is repaired by
    the QR of :func:`svd_qdwh` instead of more iterations."""
    return torch.finfo(_real(dtype)).eps


@functools.cache
def coefficients(l0: float, tol: float) -> tuple[tuple[float, float, float], ...]:
    """The dynamically weighted ``(a, b, c)`` of each iteration, from the scalar recurrence alone.

    ``a = h(l)``, ``b = (a − 1)²/4``, ``c = a + b − 1`` (N–H–G 2010, eq. 3.6 with
    ``d = ∛(4(1 − l²)/l⁴)``), then ``l ← l(a + b l²)/(1 + c l²)`` (the image of ``[l, 1]``), until
    ``1 − l <= tol``, at most :data:`MAX_ITERATIONS`. Computed in float64 on the host.

    Parameters
    ----------
    l0 : float
        Lower bound of ``σ_min`` of the scaled matrix, ``0 < l0 <= 1``.
    tol : float
        Stop once ``1 − l <= tol``.

    Returns
    -------
    tuple
        One ``(a, b, c)`` per iteration.
    """
    out, l = [], float(l0)
    while 1.0 - l > tol and len(out) < MAX_ITERATIONS:
        l2 = l * l
        d = (4.0 * (1.0 - l2) / (l2 * l2)) ** (1.0 / 3.0)
        sd = math.sqrt(1.0 + d)
        a = sd + 0.5 * math.sqrt(8.0 - 4.0 * d + 8.0 * (2.0 - l2) / (l2 * sd))
        b = (a - 1.0) ** 2 / 4.0
        c = a + b - 1.0
        out.append((a, b, c))
        l = min(1.0, l * (a + b * l2) / (1.0 + c * l2))
    return tuple(out)


def _tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """``(tol_l, tol_x)``: ``l`` counts as 1 within ``5u`` (JAX's ``10·eps/2``); an iterate is
    converged once a step moves it by ``<= ∛tol_l`` in the Frobenius norm (the next step's change
    is cubic in it: below ``tol_l``)."""
    tol_l = 5.0 * torch.finfo(_real(dtype)).eps
    return tol_l, tol_l ** (1.0 / 3.0)


def iterations(dtype: torch.dtype, l0: float | None = None) -> int:
    """The number of QDWH iterations :func:`polar` runs for ``dtype`` (``l0`` default :func:`l0_of`).

    Float32: 4, float64: 6 with ``l0 = u`` (the recurrence of :func:`coefficients`)."""
    return len(coefficients(l0_of(dtype) if l0 is None else l0, _tolerances(dtype)[0]))


def _trsm(A: torch.Tensor, B: torch.Tensor, upper: bool) -> torch.Tensor:
    """``B A⁻¹`` (right solve) by the triangular family; torch.linalg under ``torch.func`` (ours
    does not serve transforms)."""
    if functorch_active():
        return torch.linalg.solve_triangular(A, B, upper=upper, left=False)
    from ..triangular import trsm

    return trsm(A, B, upper=upper, left=False)


def _cholesky(Z: torch.Tensor) -> torch.Tensor:
    """Lower Cholesky factor of ``Z`` by the Cholesky family (``info`` unused: ``Z = I + c XᴴX`` is
    positive definite with ``κ <= 1 + c``)."""
    from ..cholesky import cholesky_ex_impl

    return cholesky_ex_impl(Z, False)[0]


def _norm2_bound(A: torch.Tensor) -> torch.Tensor:
    """Per matrix an upper bound of ``‖A‖₂``: ``min(√(‖A‖₁‖A‖∞), ‖A‖_F)`` (both are bounds; the first
    is tighter for a few dominant rows/columns, the second for flat spectra)."""
    a = A.abs()
    one, inf = a.sum(-2).amax(-1), a.sum(-1).amax(-1)
    return torch.minimum(torch.sqrt(one) * torch.sqrt(inf), torch.linalg.vector_norm(A, dim=(-2, -1)))


def _qr_step(X: torch.Tensor, a: float, b: float, c: float) -> torch.Tensor:
    """``X ← (b/c) X + (a − b/c)/√c · Q₁ Q₂ᴴ`` with ``[√c X; I] = [Q₁; Q₂] R`` (N–H 2012, eq. 5.3)."""
    m, n = X.shape[-2:]
    eye = torch.eye(n, dtype=X.dtype, device=X.device).expand(X.shape[0], n, n)
    Q, _ = qr_impl(torch.cat([X * math.sqrt(c), eye], dim=-2), "reduced")
    return X * (b / c) + (Q[:, :m] @ Q[:, m:].mH) * ((a - b / c) / math.sqrt(c))


def _chol_step(X: torch.Tensor, a: float, b: float, c: float) -> torch.Tensor:
    """``X ← (b/c) X + (a − b/c) X Z⁻¹`` with ``Z = I + c XᴴX = L Lᴴ``: ``X Z⁻¹ = (X L⁻ᴴ) L⁻¹``, two
    triangular solves (N–H 2012, eq. 5.4)."""
    n = X.shape[-1]
    Z = (X.mH @ X) * c + torch.eye(n, dtype=X.dtype, device=X.device)
    L = _cholesky(Z)
    Y = _trsm(L, _trsm(L.mH, X, upper=True), upper=False)
    return X * (b / c) + Y * (a - b / c)


def polar(A: torch.Tensor, l0: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Polar decomposition ``A = Up H`` of a batch by QDWH.

    Parameters
    ----------
    A : torch.Tensor
        ``[B, m, n]``, ``m >= n``, float32/float64/complex64/complex128, finite (zero matrices are fine).
    l0 : float, optional
        Lower bound of ``σ_min(A/α)`` (``α`` the bound of ``‖A‖₂``) the coefficients are tuned for;
        default :func:`l0_of`.

    Returns
    -------
    Up : torch.Tensor
        ``[B, m, n]``, orthonormal columns where ``A`` has full numerical rank (columns of the
        numerical null space are not unit: see :func:`svd_qdwh`).
    H : torch.Tensor
        ``[B, n, n]`` Hermitian positive semidefinite, ``(UpᴴA + AᴴUp)/2``.
    iters : torch.Tensor
        ``[B]`` int32, the iterations each matrix ran before it stopped moving.

    Notes
    -----
    ``m > TALL_RATIO·n`` is factored ``A = Q R`` first and ``Up = Q Up(R)`` (fewer rows per iteration).
    The iteration count is fixed on the host (:func:`iterations`); a matrix whose last Cholesky-based
    step (``c <= 100``) moved it by ``<= ∛(5u)`` is frozen by ``torch.where``: no host read of device
    data. (A QR-based step with ``l`` near ``u`` moves ``σ ≈ 1`` by only ``≈ 1/c``: no test there.)
    """
    Bn, m, n = A.shape
    if m > TALL_RATIO * n:
        Q, R = qr_impl(A, "reduced")
        Upr, _, iters = polar(R, l0)
        Up = Q @ Upr
        return Up, _hermitian_part(Up, A), iters
    tol_l, tol_x = _tolerances(A.dtype)
    alpha = _norm2_bound(A)
    alpha = torch.where(alpha > 0, alpha, torch.ones_like(alpha))  # zero matrix: X = 0 stays 0
    X = A / alpha[:, None, None].to(A.dtype)
    done = torch.zeros(Bn, dtype=torch.bool, device=A.device)
    iters = torch.zeros(Bn, dtype=torch.int32, device=A.device)
    for a, b, c in coefficients(l0_of(A.dtype) if l0 is None else l0, tol_l):
        Xn = _qr_step(X, a, b, c) if c > QR_C else _chol_step(X, a, b, c)
        moved = torch.linalg.vector_norm(Xn - X, dim=(-2, -1))
        X = torch.where(done[:, None, None], X, Xn)
        iters = iters + (~done).to(torch.int32)
        if c <= QR_C:  # early steps (huge a, b/c ≈ 1) barely move σ ≈ 1 while lifting the small σ:
            done = done | (moved <= tol_x)  # the test means "converged" only near Halley's (3, 1, 3)
    return X, _hermitian_part(X, A), iters


def _hermitian_part(Up: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``H = (UpᴴA + (UpᴴA)ᴴ)/2`` (exactly Hermitian; N–H 2012 §5: backward stable with the last ``Up``)."""
    H = Up.mH @ A
    return (H + H.mH) * 0.5


def _eigh(H: torch.Tensor, compute_v: bool):
    """``(w ascending, V or None)`` of the Hermitian ``H``: the eigh family's algorithm on the Metal
    kernels; on the torch backend (and under transforms) its ``torch.linalg.eigh`` route, as the
    eigh front doors take there (LAPACK/cuSOLVER ``syevd``)."""
    from ..eigh import eigh_impl, eigh_via_torch
    from .kernels import on_kernels

    fn = eigh_impl if on_kernels(H) else eigh_via_torch
    w, V, _ = fn(H, "L", compute_v)
    return w, (V if compute_v else None)


def _sign_fixed_q(U: torch.Tensor, mode: str) -> torch.Tensor:
    """The Householder ``Q`` of ``U`` with its first ``n`` columns multiplied by the phase of
    ``diag(R)``, so that an orthonormal column of ``U`` comes back as itself (to rounding)."""
    Q, R = qr_impl(U, mode)
    n = U.shape[-1]
    d = torch.diagonal(R[:, :n, :n], dim1=-2, dim2=-1)
    ad = d.abs()
    ph = torch.where(ad > 0, d / torch.where(ad > 0, ad, torch.ones_like(ad)).to(d.dtype), torch.ones_like(d))
    return torch.cat([Q[:, :, :n] * ph[:, None, :], Q[:, :, n:]], dim=-1)


def svd_qdwh(As: torch.Tensor, e: torch.Tensor, finite: torch.Tensor, full: bool, compute_uv: bool):
    """SVD of the scaled batch by QDWH: the contract of :func:`mpslinalg.svd.cuda.large_svd`.

    Parameters
    ----------
    As : torch.Tensor
        ``[B, m, n]``, ``m >= n``, scaled by ``2^-e`` (non-finite matrices zeroed).
    e : torch.Tensor
        ``[B]`` the scaling exponents (``S`` is scaled back by ``2^e``).
    finite : torch.Tensor
        ``[B]`` bool: the input matrix was finite (else its outputs are NaN).
    full, compute_uv : bool
        As ``svd_impl``.

    Returns
    -------
    U, S, V : torch.Tensor or None
        ``V``, not ``Vh``; ``U`` and ``V`` None without ``compute_uv``.

    Notes
    -----
    Rank deficiency (``σ_min <= n·u·σ_max``, N–H 2012 §5.5): the columns of ``Up`` in the numerical
    null space are not orthonormal, nor are those of ``U = Up V``. ``U`` is then replaced by the
    phase-fixed Householder ``Q`` of itself (columns sorted by σ descending: the good ones first,
    kept to rounding, the deficient ones orthogonalised against them). On the CPU (host reads are
    free) the QR runs only when a matrix needs it; elsewhere it runs always — about ``(4/3)·n³`` of
    the ``≈ 30 n³`` flops of the whole (two QR-based steps on ``2n × n``, two or four Cholesky-based
    steps, the eigensolver ``≈ 9 n³``) — and ``torch.where`` keeps it only for the deficient matrices. With
    ``full`` and ``m > n`` that same QR is the completion of ``U`` (``qr_impl(U, "complete")``).
    A tiny negative eigenvalue of ``H`` (rounding of a zero σ) gives ``σ = |λ|`` and the sign of its
    ``U`` column flipped.
    """
    from .algorithm import ldexp

    Bn, m, n = As.shape
    nan = float("nan")
    Up, H, _ = polar(As)
    w, V = _eigh(H, compute_uv)
    # descending |λ|: σ of A (H = V Λ Vᴴ, |Λ| the singular values)
    S, order = w.abs().sort(dim=-1, descending=True, stable=True)
    S_out = torch.where(finite[:, None], ldexp(S, e[:, None]), nan)
    if not compute_uv:
        return None, S_out, None
    V = V.gather(-1, order[:, None, :].expand(-1, n, -1))
    sgn = torch.where(w.gather(-1, order) < 0, -1.0, 1.0).to(As.dtype)
    U = (Up @ V) * sgn[:, None, :]
    u = torch.finfo(S.dtype).eps
    deficient = S[:, -1] <= n * u * S[:, 0]
    completing = full and m > n
    host_reads = As.is_cpu and not functorch_active()
    if completing or not host_reads or bool(deficient.any()):
        Qf = _sign_fixed_q(U, "complete" if completing else "reduced")
        Un = torch.where(deficient[:, None, None], Qf[:, :, :n], U)
        U = torch.cat([Un, Qf[:, :, n:]], dim=-1) if completing else Un
    bad = ~finite[:, None, None]
    return U.masked_fill(bad, nan), S_out, V.masked_fill(bad, nan)
