"""The SVD family's CUDA dispatch (torch backend): which Triton kernel serves a batch, and the routes
that exist only on CUDA (:mod:`mpslinalg.svd` calls these; the algorithm itself is there).

* :func:`triton_ok` / :func:`use_triton` / :func:`whole_kernel`: whether the Triton kernels of
  :mod:`mpslinalg.svd.triton_jacobi` serve a tensor (CUDA, or the CPU under ``TRITON_INTERPRET=1``
  for the tests), probed once per process;
* :func:`triton_call`: a Triton kernel call that switches the Triton path off with one warning when
  generated code fails to build (another Triton version), so the caller falls back to torch ops;
* :func:`compiled_sweep`: the torch-op Jacobi sweep fused by ``torch.compile`` for small orders;
* :func:`large_svd`: orders above ``TUNING.jacobi_max["cuda"]``: cuSOLVER's SVD of the scaled matrix;
* :func:`square_qr`: the preconditioner's QR of square matrices, in place, at the SVD's measured warps.

The switches (``TUNING.triton``, ``TUNING.compile_max``, ``TUNING.large_driver``) live in
:class:`mpslinalg.svd.Tuning` and are passed in by the caller (no import cycle).
"""

from __future__ import annotations

import os

import torch

from ..kernels.codegen import warn_once
from ..oplayer import checks as E
from ..oplayer import functorch_active

__all__ = ["compiled_sweep", "large_svd", "square_qr", "triton_call", "triton_ok", "use_triton",
           "whole_kernel"]

#: Triton reads TRITON_INTERPRET when it is imported; so do we. On the CPU the Triton kernels run
#: only in its interpreter (the tests); elsewhere the torch ops of mpslinalg.svd serve the CPU.
_TRITON_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
_triton_state: dict[str, object] = {}  # "ok": bool once probed; "error": why it was switched off


def triton_ok(X: torch.Tensor, enabled: bool = True) -> bool:
    """Whether the torch backend runs ``X``'s SVD kernels in Triton.

    Parameters
    ----------
    X : torch.Tensor
        The batch the kernels would serve.
    enabled : bool
        ``TUNING.triton`` of :mod:`mpslinalg.svd`.

    Returns
    -------
    bool
        ``enabled``, CUDA (or the CPU under ``TRITON_INTERPRET=1``), float32/complex64, no
        ``torch.func`` transform, and :mod:`mpslinalg.svd.triton_jacobi` imports (probed once).
    """
    dev = X.device.type
    if not (enabled and X.dtype in E.GPU_DTYPES) or functorch_active():
        return False
    if dev != "cuda" and not (dev == "cpu" and _TRITON_INTERPRET):
        return False
    ok = _triton_state.get("ok")
    if ok is None:
        try:
            from . import triton_jacobi  # noqa: F401
            ok = True
        except Exception as exc:  # noqa: BLE001 - no Triton: the torch-op sweeps serve
            ok, _triton_state["error"] = False, repr(exc)
        _triton_state["ok"] = ok
    return bool(ok)


def triton_call(fn, *args):
    """``fn(*args)`` for a kernel of :mod:`mpslinalg.svd.triton_jacobi`, or None after switching the
    Triton kernels off for this process with one warning (a kernel that does not build, e.g. on
    another Triton version); the caller then runs the torch-op path (same algorithm, slower)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - any failure of generated code falls back
        _triton_state["ok"], _triton_state["error"] = False, repr(exc)
        warn_once("triton:svd", f"mpslinalg: the SVD family's Triton kernel failed ({type(exc).__name__}: "
                  f"{exc}); using the torch-op Jacobi instead (same algorithm, slower)")
        return None


def use_triton(X: torch.Tensor, enabled: bool = True) -> bool:
    """Whether the torch backend's Jacobi on ``X [B, n, n]`` is the Triton kernel (even ``n <= 64``)."""
    if not (X.shape[-2] == X.shape[-1] and triton_ok(X, enabled)):
        return False
    from .triton_jacobi import fits

    return fits(X.shape[-1])


def whole_kernel(A: torch.Tensor, enabled: bool = True):
    """The Triton module whose ``svd_tall`` runs the whole algorithm on ``A [B, m, n]`` in one kernel (or,
    square, in seven), or None: ``n <= m <= 4`` (one matrix per lane,
    :func:`mpslinalg.svd.triton_jacobi.svd_tall`), float32 ``n <= m <= 32`` (one matrix per program,
    :func:`mpslinalg.svd.triton_fused.svd_tall`, while its ``ENABLED``), square of even order
    ``<= 64`` (:func:`mpslinalg.svd.triton_square.svd_tall`: the preconditioner's passes fused
    around the blocked QR and the Jacobi kernel, while its ``ENABLED``).

    The module's ``svd_tall(A, full, compute_uv, sweeps)`` returns ``(U, S, V, info)``; its
    ``COMPLETES_V`` says whether the caller still completes ``V``'s zero-σ columns.
    """
    if not triton_ok(A, enabled):
        return None
    from . import triton_fused, triton_jacobi, triton_square

    m, n = A.shape[-2:]
    if triton_jacobi.fused_fits(m, n, A.dtype):
        return triton_jacobi
    if triton_fused.ENABLED and triton_fused.fits(m, n, A.dtype):
        return triton_fused
    return triton_square if triton_square.ENABLED and triton_square.fits(m, n, A.dtype) else None


_COMPILED: dict = {}


def compiled_sweep(sweep, Y: torch.Tensor, compile_max: int):
    """``sweep`` (the torch-op sweep of :mod:`mpslinalg.svd`), fused by ``torch.compile`` on CUDA for
    orders up to ``compile_max`` (``TUNING.compile_max``): one round is ~35 tiny launches in eager
    mode, a few fused kernels compiled. Elsewhere (and under transforms or compilation) ``sweep``."""
    n = Y.shape[-1]
    if Y.device.type != "cuda" or n > compile_max or functorch_active() or torch.compiler.is_compiling():
        return sweep
    if sweep not in _COMPILED:
        _COMPILED[sweep] = torch.compile(sweep, dynamic=False, fullgraph=True)
    return _COMPILED[sweep]


def large_svd(As: torch.Tensor, e: torch.Tensor, finite: torch.Tensor, full: bool, compute_uv: bool,
              driver: str | None):
    """CUDA above ``TUNING.jacobi_max``: cuSOLVER's SVD of the power-of-two-scaled ``As`` itself.

    The QR preconditioner buys relative accuracy only for Jacobi; before a bidiagonalising SVD it
    is a second O(n³) factorisation (docs/evidence/svd.md: the 2048² trade). cuSOLVER's ``U``/``V`` are
    orthonormal for rank-deficient input; torch checks its ``info`` on the host (a sync).

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
    driver : str or None
        ``TUNING.large_driver``: the cuSOLVER driver of ``torch.linalg.svd``.

    Returns
    -------
    U, S, V : torch.Tensor or None
        ``V``, not ``Vh``; ``U`` and ``V`` None without ``compute_uv``.
    """
    nan = float("nan")
    if compute_uv:
        U, S, Vh = torch.linalg.svd(As, full_matrices=full, driver=driver)
    else:
        U = Vh = None
        S = torch.linalg.svdvals(As, driver=driver)
    S = torch.where(finite[:, None], torch.ldexp(S, e[:, None].to(S.dtype)), nan)
    if compute_uv:
        U = torch.where(finite[:, None, None], U, nan)
        Vh = torch.where(finite[:, None, None], Vh, nan)
    return U, S, (Vh.mH if compute_uv else None)


def square_qr(As: torch.Tensor, want_q: bool):
    """The preconditioner's Householder QR of the square ``As [B, n, n]`` (fresh, contiguous; factorised
    in place) by the QR family's Triton kernel, launched with the warps the H200 measured fastest for
    the SVD's complex64 64x64 batch (benchmarks/bench_svd_c64.py, round 1: Q and R 7.73 ms at 4 warps
    vs 8.75 at the kernel's own 8; R only 4.57 at 8 warps capped at 128 registers vs 5.42), and
    without ``qr_impl``'s copy of the input. Returns ``(Q or None, R)``, or None where the kernel does
    not fit (the caller then runs ``qr_impl``)."""
    from ..qr import square_qr_fits, square_qr_into

    Bn, m, n = As.shape
    if m != n or not square_qr_fits(m, n) or not As.is_contiguous():
        return None
    Q = torch.empty_like(As) if want_q else None
    square_qr_into(As, As.new_empty(Bn, n), Q, None)
    return Q, As.triu()
