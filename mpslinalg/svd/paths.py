"""The SVD family's device paths: which kernels serve each step of the algorithm, chosen ONCE per call.

:func:`path_for` looks at the batch (device, dtype, backend, order, ``torch.func``) and returns a
path object; :func:`mpslinalg.svd.algorithm.svd_tall` then asks it for each step. Every hook
returns its result, or None for "no kernel of mine: run the torch-op form" (so a Triton kernel that
fails to build falls back step by step, as before).

=============  ===========================================================================
path           serves
=============  ===========================================================================
``LAPACK``     CPU, torch backend, orders above ``TUNING.jacobi_max["cpu"]`` or no C compiler:
               LAPACK's SVD of ``A`` itself (scaled into range first), the family's info rule
``C``          CPU, torch backend: the whole algorithm in C (:mod:`mpslinalg.svd.c`)
``Triton``     CUDA (or the CPU under ``TRITON_INTERPRET=1``), float32/complex64: whole-SVD
               kernels, the QR, the Jacobi, the finish and completion in Triton (:mod:`.cuda`)
``CUDA``       other CUDA batches: cuSOLVER above the Jacobi range, a compiled torch-op sweep
``Metal``      ``metal``/``emulator`` backends, float32/complex64: the Jacobi in ``svd.metal``
``torch``      everything else (``torch.func`` transforms, float64 on the emulator): torch ops
=============  ===========================================================================

``TUNING.large_driver = "qdwh"`` makes every path's ``large`` hook the QDWH SVD
(:mod:`mpslinalg.svd.qdwh`) above that path's Jacobi range (``jacobi_max`` of its device type;
``"metal"`` on the Metal path); the LAPACK path then yields its ``whole`` hook to it.
"""

from __future__ import annotations

import math

import torch

from ..kernels import backend_for
from ..oplayer import functorch_active
from . import c as svd_c
from . import cuda, qdwh
from .algorithm import lapack_smlnum, ldexp, pow2_scale
from .kernels import INFO_NONFINITE, TORCH_KERNELS, TUNING, MetalKernels, on_kernels, sweep

__all__ = ["in_lapack_range", "path_for"]


class TorchPath:
    """Torch ops for every step; the base of the other paths (each hook: a result, or None)."""

    name = "torch"

    def __init__(self, A: torch.Tensor) -> None:
        self.device_type = A.device.type

    def whole(self, A, full, compute_uv, sweeps):
        """The whole algorithm in one kernel: ``(U, S, V, info, V_completed)``, or None."""
        return None

    #: the ``jacobi_max`` key of this path's Jacobi range (None: the device type)
    range_key: str | None = None

    def large(self, As, e, finite, full, compute_uv):
        """An SVD of the scaled ``As`` itself (no preconditioner): ``(U, S, V)``, or None. Here:
        QDWH when ``TUNING.large_driver == "qdwh"`` and the order is above the path's Jacobi range."""
        limit = TUNING.jacobi_max.get(self.range_key or self.device_type, 0)
        if TUNING.large_driver == "qdwh" and As.shape[-1] > limit:
            return qdwh.svd_qdwh(As, e, finite, full, compute_uv)
        return None

    def jacobi_free(self, n: int) -> bool:
        """Orders above the Jacobi range take the device's SVD of the preconditioned factor."""
        return n > TUNING.jacobi_max.get(self.device_type, 0)

    def qr(self, As, want_q):
        """The preconditioner's QR ``(Q or None, R)``, or None (the QR family's ``qr_impl``)."""
        return None

    def jacobi(self, X, V, sweeps, tol, ctol, early):
        return TORCH_KERNELS.jacobi(X, V, sweeps, tol, ctol, early)

    def finish(self, X, V, cperm, e, finite, rotated):
        """Step 5's σ, order and ``V`` in one kernel, or None (:func:`mpslinalg.svd.algorithm.finish`)."""
        return None

    def complete(self, Ux, zero):
        """``Ux`` with its ``zero`` columns completed in one kernel, or None (the QR family's)."""
        return None


class MetalPath(TorchPath):
    """``metal``/``emulator``: the Jacobi in ``metal/svd.metal`` at every order."""

    name = "metal"
    range_key = "metal"

    def __init__(self, A: torch.Tensor) -> None:
        super().__init__(A)
        self.kernels = MetalKernels(A.device, A.dtype)

    def jacobi_free(self, n: int) -> bool:
        return False

    def jacobi(self, X, V, sweeps, tol, ctol, early):
        return self.kernels.jacobi(X, V, sweeps, tol, ctol, early)


class CPath(TorchPath):
    """The CPU torch backend with a C compiler: the whole algorithm in C."""

    name = "C"

    def whole(self, A, full, compute_uv, sweeps):
        U, S, V, info = svd_c.svd_tall(A, full, compute_uv, sweeps)
        return U, S, V, info, False


class LapackPath(TorchPath):
    """The CPU torch backend above the C kernel's range (or without a compiler): LAPACK."""

    name = "LAPACK"

    def whole(self, A, full, compute_uv, sweeps):
        if TUNING.large_driver == "qdwh" and A.shape[-1] > TUNING.jacobi_max.get("cpu", 0):
            return None  # the large hook's QDWH instead
        return (*lapack_tall(A, full, compute_uv), True)


class CudaPath(TorchPath):
    """CUDA, torch ops: cuSOLVER above the Jacobi range, the sweep compiled by ``torch.compile``."""

    name = "CUDA"

    def large(self, As, e, finite, full, compute_uv):
        if TUNING.large_driver == "qdwh":
            return super().large(As, e, finite, full, compute_uv)
        if (self.device_type != "cuda" or TUNING.large_driver == "precondition"
                or As.shape[-1] <= TUNING.jacobi_max.get("cuda", 0)):
            return None
        return cuda.large_svd(As, e, finite, full, compute_uv, TUNING.large_driver)

    def jacobi(self, X, V, sweeps, tol, ctol, early):
        return TORCH_KERNELS.jacobi(X, V, sweeps, tol, ctol, early,
                                    cuda.compiled_sweep(sweep, X, TUNING.compile_max))


class TritonPath(CudaPath):
    """CUDA float32/complex64 (the CPU under ``TRITON_INTERPRET=1``): Triton kernels where they fit.
    Each hook asks :func:`mpslinalg.svd.cuda.triton_ok` again: a kernel that failed to build has
    switched Triton off for the process, and the rest of the call runs the torch-op forms."""

    name = "Triton"

    def whole(self, A, full, compute_uv, sweeps):
        kernel = cuda.whole_kernel(A, TUNING.triton)
        if kernel is None:
            return None
        out = cuda.triton_call(kernel.svd_tall, A, full, compute_uv, TUNING.triton_sweeps or sweeps)
        return None if out is None else (*out, getattr(kernel, "COMPLETES_V", False))

    def qr(self, As, want_q):  # square: in place, tuned warps
        return cuda.triton_call(cuda.square_qr, As, want_q) if cuda.triton_ok(As, TUNING.triton) else None

    def jacobi(self, X, V, sweeps, tol, ctol, early):
        if cuda.use_triton(X, TUNING.triton):  # one launch; stops per matrix on the GPU (no host read)
            from .triton_jacobi import jacobi

            out = cuda.triton_call(jacobi, X, V, TUNING.triton_sweeps or sweeps, tol, ctol)
            if out is not None:
                return out
        return super().jacobi(X, V, sweeps, tol, ctol, early)

    def finish(self, X, V, cperm, e, finite, rotated):
        if X.shape[-1] > 64 or not cuda.triton_ok(X, TUNING.triton):
            return None
        from . import triton_complete as stc

        return cuda.triton_call(stc.finish, X.contiguous(), V if V is None else V.contiguous(), cperm, e,
                                finite, rotated)

    def complete(self, Ux, zero):
        if Ux.shape[-2] != Ux.shape[-1] or not cuda.triton_ok(Ux, TUNING.triton):
            return None
        from . import triton_complete as stc  # the QR only where a column needs it

        return cuda.triton_call(stc.complete, Ux, zero) if stc.fits(*Ux.shape[-2:]) else None


_LAPACK = LapackPath(torch.empty(0))
_C = CPath(torch.empty(0))


def path_for(A: torch.Tensor) -> TorchPath:
    """The device path of the batch ``A [B, m, n]`` (``m >= n``): the one place that looks at the device."""
    if on_kernels(A):
        return MetalPath(A)
    if A.is_cpu and backend_for(A.device) == "torch" and not functorch_active():
        if A.shape[-1] > TUNING.jacobi_max.get("cpu", 0) or svd_c.unbuildable(A):
            return _LAPACK
        if svd_c.usable(A):
            return _C
    if cuda.triton_ok(A, TUNING.triton):
        return TritonPath(A)
    if A.device.type == "cuda":
        return CudaPath(A)
    return TorchPath(A)


def in_lapack_range(A: torch.Tensor) -> torch.Tensor:
    """Per matrix: finite, and max |a_ij| inside LAPACK's safe range ``[SMLNUM, 1/SMLNUM]`` (where
    ``xGESDD`` scales nothing). ``amax``/``amin`` of ``A`` (complex: of its real view): no
    temporary the size of ``A``, as ``abs()`` would allocate (116 against 50 µs at 256²)."""
    R = torch.view_as_real(A).flatten(-2) if A.is_complex() else A
    big = torch.maximum(R.amax((-2, -1)), -R.amin((-2, -1)))  # complex: max |re|, |im| (within √2)
    lo = lapack_smlnum(big.dtype)
    return (big >= lo) & (big * math.sqrt(2) <= 1 / lo)


def lapack_tall(A: torch.Tensor, full: bool, compute_uv: bool):
    """The CPU torch backend above ``TUNING.jacobi_max`` (at every size if ``svd_c.unbuildable``):
    LAPACK's SVD of ``A`` itself (a matrix outside LAPACK's safe range scaled by a power of two first,
    exact where xGESDD's own scaling would round), with the family's non-finite rule (``info = 1``,
    NaN outputs). Absolute accuracy, as the preconditioned factor's SVD (the route on other devices),
    which costs an extra QR and permutations (svdvals 256x256 at 0.64x torch.linalg, svd.md)."""
    in_range = in_lapack_range(A)
    if bool(in_range.all()):  # finite, in range (a CPU read): A as it is
        info = torch.zeros(A.shape[0], dtype=torch.int32)
        if not compute_uv:
            return None, torch.linalg.svdvals(A), None, info
        U, S, Vh = torch.linalg.svd(A, full_matrices=full)
        return U, S, Vh[:, : A.shape[-1]].mH, info
    As, e, finite = pow2_scale(A)
    # only the matrices out of range are scaled: a matrix's bits do not depend on its batch
    As, e = torch.where(in_range[:, None, None], A, As), torch.where(in_range, 0, e)
    As = torch.where(finite[:, None, None], As, torch.zeros_like(As))
    info = torch.where(finite, 0, INFO_NONFINITE).to(torch.int32)
    if compute_uv:
        U, S, Vh = torch.linalg.svd(As, full_matrices=full)
    else:
        S = torch.linalg.svdvals(As)
    S = torch.where(finite[:, None], ldexp(S, e[:, None]), float("nan"))
    if not compute_uv:
        return None, S, None, info
    bad = ~finite[:, None, None]
    V = Vh[:, : A.shape[-1]].mH  # reduced: the n right singular vectors
    return torch.where(bad, float("nan"), U), S, torch.where(bad, float("nan"), V), info
