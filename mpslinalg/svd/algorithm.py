"""The SVD family core: ``svd``, ``svd_ex``, ``svdvals`` with ``torch.linalg``'s semantics (DESIGN §6).

Algorithm (Drmač & Veselić's preconditioned one-sided Jacobi, LAPACK ``xGEJSV``/``xGESVJ``)
--------------------------------------------------------------------------------------------
For a batch ``[B, m, n]`` (wide matrices are handled as ``Aᴴ``, so ``m >= n``):

1. **Scale** every matrix by a power of two so that its largest ``|a_ij|`` is in ``[1/2, 1)``
   (exact; 1e±30 float32 inputs neither overflow nor underflow); non-finite input sets
   ``info = 1`` and gives NaN outputs.
2. **Precondition**: sort the rows by decreasing max-norm and the columns by decreasing 2-norm
   (Powell–Reid/Cox–Higham row sorting plus a static stand-in for column pivoting), Householder
   QR ``Pr A Pc = Q R``. ``R`` is then row-graded, so ``X = Rᴴ`` is column-graded: one-sided
   Jacobi on ``X`` is relatively accurate (Demmel & Veselić 1992) for two-sided graded ``A``.
3. **One-sided Jacobi** on the columns of ``X`` (``n × n``): round-robin (circle-method) parallel
   ordering, ``n/2`` disjoint pairs per round, ``n − 1`` rounds per sweep, all pairs of all
   matrices rotated at once. A pair is rotated when ``|x_pᴴ x_q| > tol·√α_p·√α_q`` (square roots
   taken separately: the product of the two squared norms can overflow/underflow),
   ``tol = √n·u`` (``xGESVJ``'s ``CTOL``). That is below the rounding noise of the computed dot
   product (``γ_n ≈ n·u``), so rounding alone can keep a converged matrix rotating by tiny angles
   (2 of 10000 random float32 3x3 matrices did, to the sweep bound): convergence counts only
   rotations with ``|x_pᴴ x_q| > ctol·√α_p·√α_q``, ``ctol = 2n·u``. Rotation: Rutishauser's
   ``t = sign(ζ)/(|ζ| + hypot(1, ζ))`` with the complex phase of ``x_pᴴ x_q`` split off.
4. **Sweep bound**: at most :attr:`Tuning.max_sweeps` sweeps (30, as ``xGESVJ``). On the CPU
   the loop stops after the first sweep without a rotation (checking is free there); on GPUs
   the number of sweeps is fixed in advance (:attr:`Tuning.gpu_sweeps`), so ``svd_ex`` never
   synchronises; a matrix that still rotated in its last sweep gets ``info = 2``.
5. ``σ_j = ‖w_j‖`` of the rotated columns ``W = X V``, sorted descending; ``A = U Σ Vᴴ`` with
   ``U = Prᵀ Q V`` and ``V = Pc W Σ⁻¹``. Columns of ``W Σ⁻¹`` with ``σ_j = 0`` are completed by a
   Householder QR of the computed columns, so ``V`` is orthonormal for rank-deficient and zero
   matrices; ``full_matrices=True`` takes ``U``'s extra columns from the complete ``Q``.

Never the Gram-matrix eigensolver: it squares κ, and singular values below ``√u·σ₁`` lose every
digit.

Kernel contract (identical on every backend)
--------------------------------------------
``jacobi(X, V, sweeps, tol, ctol, early_exit) -> (X', V', rotated)``
    One-sided Jacobi on the columns of the contiguous ``[B, n, n]`` buffer ``X`` (``n`` even; a
    zero padding column is never rotated), the same rotations applied to the columns of ``V``
    (``[B, n, n]`` or ``None``), for at most ``sweeps`` sweeps: pairs above ``tol`` are rotated,
    a sweep with no rotation above ``ctol`` is converged (with ``early_exit`` the loop stops
    there). Returns the rotated ``X``, ``V`` (the Metal kernels rotate the fresh buffers in place
    and return them; the torch kernels return new tensors, as ``torch.func`` needs) and a ``[B]``
    bool tensor: the matrix made a rotation above ``ctol`` in the last sweep run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.autograd.forward_ad as _fwad

from .kernels import backend_for, kernel_name, load_library, svd_c, svd_cuda
from .oplayer import checks as E
from .oplayer import defop, functorch_active
from .oplayer.derivatives import svd_backward, svd_jvp
from .qr import qr_impl

__all__ = ["TUNING", "SVDExResult", "svd", "svd_backward", "svd_ex", "svd_impl", "svd_jvp", "svdvals"]


# --------------------------------------------------------------------------------------------------
# Tuning
# --------------------------------------------------------------------------------------------------


@dataclass
class Tuning:
    """Sweep bounds of the one-sided Jacobi (see the module docstring, step 4).

    Attributes
    ----------
    max_sweeps : int
        Most sweeps run on the CPU (which stops early once converged); ``xGESVJ``'s ``NSWEEP``.
    jacobi_max : dict
        ``torch`` backend, per device type: largest order solved by Jacobi; larger ones take the
        device's own SVD of the preconditioned factor (block Jacobi through matrix products is
        not written yet). The ``metal``/``emulator`` backends always run Jacobi.
    compile_max : int
        CUDA, torch backend: largest (padded) order whose Jacobi sweep is fused by ``torch.compile``
        (0 turns it off).
    triton : bool
        CUDA, torch backend, float32/complex64, (padded) order <= 64: the whole Jacobi iteration is
        one Triton launch (:mod:`mpslinalg.kernels.svd_triton`); False falls back to the sweeps above.
    triton_sweeps : int or None
        Sweep bound of the Triton kernels, which stop each matrix on the GPU after its first sweep
        without a significant rotation (no host read): ``xGESVJ``'s 30, as the CPU, instead of the
        ``gpu_sweeps`` schedule, which one random 8x9 matrix in 100000 exceeded on the H200 (9
        sweeps); None uses the schedule.
    large_driver : str or None
        CUDA, torch backend, orders above ``jacobi_max``: the cuSOLVER driver of ``torch.linalg.svd``
        run on the scaled matrix itself (None: torch's choice); ``"precondition"`` keeps the QR
        preconditioner and runs the device's SVD of its triangular factor instead.
    round_threads : int
        Threads per threadgroup of ``svd_jacobi_round`` (a multiple of 32, at most 256).
    gpu_sweeps : dict
        Devices where checking convergence would synchronise run a fixed ``gpu_sweeps[dtype] +
        ceil(log2 n)`` sweeps (at most ``max_sweeps``). Quadratic convergence after QR
        preconditioning; the sweeps needed on random, graded, κ = 1e6 and clustered spectra are
        in ``docs/ops/svd.md`` (float32 n = 32: 9 of the 11 run).
    """

    max_sweeps: int = 30
    gpu_sweeps: dict | None = None
    round_threads: int = 64
    compile_max: int = 64
    triton: bool = True
    triton_sweeps: int | None = 30
    large_driver: str | None = None
    jacobi_max: dict = field(default_factory=lambda: {"cpu": 128, "cuda": 64})

    def sweeps(self, device: torch.device, dtype: torch.dtype, n: int = 32) -> tuple[int, bool]:
        """``(sweeps, early_exit)`` for ``n``-column matrices of real ``dtype`` on ``device``."""
        if device.type == "cpu":
            return self.max_sweeps, True
        extra = (self.gpu_sweeps or {torch.float32: 6, torch.float64: 7}).get(dtype, self.max_sweeps)
        return min(self.max_sweeps, extra + max(1, math.ceil(math.log2(max(n, 2))))), False


#: The tuning in use (module-level, mutable: benchmarks and tests adjust it).
TUNING = Tuning()

# info codes of svd_ex (per matrix)
INFO_NONFINITE = 1
INFO_NOCONV = 2


def _unit_roundoff(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps / 2


# --------------------------------------------------------------------------------------------------
# Householder QR (the QR family)
# --------------------------------------------------------------------------------------------------


def _householder_qr(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Householder QR ``A = Q R`` (``mode`` as ``torch.linalg.qr``: reduced/complete/r), the QR
    family's internal entry point (its kernels on mps/emulator, no host sync)."""
    return qr_impl(A, mode)


# --------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------


def _round_robin(n: int) -> list[torch.Tensor]:
    """Slot permutations of the circle method for even ``n``.

    In every round, slots ``(2k, 2k+1)`` hold a pair; ``perms[r]`` maps the slot layout of round
    ``r`` to that of round ``r + 1`` (``new[..., j] = old[..., perms[r][j]]``); after ``n − 1``
    rounds the layout is the original one again.
    """
    def layout(r: int) -> list[int]:
        rest = list(range(1, n))
        rest = rest[r % (n - 1):] + rest[: r % (n - 1)]
        players = [0, *rest]
        out = []
        for i in range(n // 2):
            out += [players[i], players[n - 1 - i]]
        return out

    perms = []
    for r in range(n - 1):
        cur, nxt = layout(r), layout(r + 1)
        where = {col: slot for slot, col in enumerate(cur)}
        perms.append(torch.tensor([where[col] for col in nxt], dtype=torch.long))
    return perms


_RR_CACHE: dict[tuple[int, str], list[torch.Tensor]] = {}


def _perms(n: int, device: torch.device) -> list[torch.Tensor]:
    key = (n, str(device))
    if key not in _RR_CACHE:
        _RR_CACHE[key] = [p.to(device) for p in _round_robin(n)]
    return _RR_CACHE[key]


def _rotations(xp: torch.Tensor, xq: torch.Tensor, tol: float, ctol: float):
    """Jacobi rotations of column pairs ``(xp, xq)`` (``[..., rows, h]``): ``(c, s·e, rot)``.

    ``x_p' = c x_p − conj(s·e) x_q``, ``x_q' = (s·e) x_p + c x_q`` orthogonalises the pair.
    """
    a = (xp.real.square() + xp.imag.square()).sum(-2) if xp.is_complex() else xp.square().sum(-2)
    b = (xq.real.square() + xq.imag.square()).sum(-2) if xq.is_complex() else xq.square().sum(-2)
    g = (xp.conj() * xq).sum(-2)
    ag = g.abs()
    scale = a.sqrt() * b.sqrt()  # never √(αβ): αβ can overflow or underflow
    rot = ag > tol * scale
    sig = ag > ctol * scale
    safe = torch.where(rot, ag, torch.ones_like(ag))
    zeta = (b - a) / (2 * safe)
    t = torch.where(zeta >= 0, 1.0, -1.0) / (zeta.abs() + torch.hypot(torch.ones_like(zeta), zeta))
    c = torch.rsqrt(1 + t * t)
    s = c * t
    e = g / safe
    c = torch.where(rot, c, torch.ones_like(c))
    se = torch.where(rot, s * e, torch.zeros_like(e))
    return c, se, rot, sig


def _sweep(Y: torch.Tensor, rows: int, perms: tuple[torch.Tensor, ...], tol: float, ctol: float):
    """One sweep (``n − 1`` rounds) of the torch kernel: ``(Y', rotated)``."""
    Bn, _, n = Y.shape
    h = n // 2
    rotated = torch.zeros(Bn, dtype=torch.bool, device=Y.device)
    for perm in perms:
        P = Y.unflatten(-1, (h, 2))
        yp, yq = P[..., 0], P[..., 1]
        c, se, _, sig = _rotations(yp[:, :rows], yq[:, :rows], tol, ctol)
        rotated = rotated | sig.any(-1)
        c, se = c[:, None, :], se[:, None, :]
        new_p = c * yp - se.conj() * yq
        new_q = se * yp + c * yq
        Y = torch.stack([new_p, new_q], dim=-1).flatten(-2).index_select(-1, perm)
    return Y, rotated


class _TorchKernels:
    """The kernel contract with torch ops, vectorised over the batch and the pairs of a round."""

    name = "torch"

    def jacobi(self, X: torch.Tensor, V: torch.Tensor | None, sweeps: int, tol: float, ctol: float,
               early_exit: bool) -> torch.Tensor:
        if svd_cuda.use_triton(X, TUNING.triton):  # one launch; stops per matrix on the GPU (no host read)
            from .kernels.svd_triton import jacobi

            out = svd_cuda.triton_call(jacobi, X, V, TUNING.triton_sweeps or sweeps, tol, ctol)
            if out is not None:
                return out
        Bn, rows, n = X.shape
        perms = tuple(_perms(n, X.device))
        Y = X if V is None else torch.cat([X, V], dim=-2)
        rotated = torch.zeros(Bn, dtype=torch.bool, device=X.device)
        sweep = svd_cuda.compiled_sweep(_sweep, Y, TUNING.compile_max)
        for _ in range(sweeps):
            Y, rotated = sweep(Y, rows, perms, tol, ctol)
            if early_exit and not bool(rotated.any()):
                break
        return Y[:, :rows], (None if V is None else Y[:, rows:]), rotated


class _MetalKernels:
    """The kernel contract with ``metal/svd.metal`` (``metal`` on mps, ``emulator`` on CPU/CUDA)."""

    name = "metal"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.lib = load_library("svd", device)
        self.dtype = dtype

    def jacobi(self, X: torch.Tensor, V: torch.Tensor | None, sweeps: int, tol: float, ctol: float,
               early_exit: bool) -> torch.Tensor:
        Bn, rows, n = X.shape
        want_v = int(V is not None)
        Vb = V if V is not None else X.new_empty(1)
        if rows == n and n <= SMALL_MAX:  # whole iteration in threadgroup memory, stops on the GPU
            rotated = torch.zeros(Bn, dtype=torch.int32, device=X.device)
            kern = getattr(self.lib, kernel_name("svd_jacobi_small", self.dtype))
            kern(X, Vb, rotated, n, sweeps, tol, ctol, want_v, threads=Bn * 32, group_size=32)
            return X, V, rotated != 0
        h = n // 2
        g = TUNING.round_threads
        flags = torch.zeros(Bn, h, dtype=torch.int32, device=X.device)
        kern = getattr(self.lib, kernel_name("svd_jacobi_round", self.dtype))
        for _ in range(sweeps):
            flags.zero_()
            for r in range(n - 1):
                kern(X, Vb, flags, rows, n, r, tol, ctol, want_v, threads=Bn * h * g, group_size=g)
            if early_exit and not bool(flags.any()):
                break
        return X, V, flags.any(-1)


_TORCH_KERNELS = _TorchKernels()

#: Largest (even) order of the whole-matrix ``svd_jacobi_small`` kernel (its tiles are 32 x 33).
SMALL_MAX = 32


def _on_kernels(x: torch.Tensor) -> bool:
    """``x`` is served by the ``.metal`` kernels (``metal``/``emulator``, float32/complex64, no
    ``torch.func`` transform); else by torch ops."""
    return x.dtype in E.GPU_DTYPES and backend_for(x.device) != "torch" and not functorch_active()


def _kernels(x: torch.Tensor):
    return _MetalKernels(x.device, x.dtype) if _on_kernels(x) else _TORCH_KERNELS


# --------------------------------------------------------------------------------------------------
# The algorithm
# --------------------------------------------------------------------------------------------------


def _device_svd(X: torch.Tensor, compute_uv: bool):
    """The torch backend's route for orders above ``TUNING.jacobi_max``: the device's own SVD
    (LAPACK/cuSOLVER, bidiagonalisation) of the preconditioned factor, returned in the Jacobi
    contract's form ``(X V, V, rotated=False)``. Not relatively accurate for graded matrices and,
    on CUDA, torch checks its ``info`` on the host."""
    not_rotated = torch.zeros(X.shape[0], dtype=torch.bool, device=X.device)
    if not compute_uv:
        return torch.diag_embed(torch.linalg.svdvals(X)).to(X.dtype), None, not_rotated
    Ux, S, Vh = torch.linalg.svd(X, full_matrices=False)
    return Ux * S[:, None, :].to(X.dtype), Vh.mH, not_rotated


def _plain(x: torch.Tensor) -> torch.Tensor:
    """A fresh contiguous copy of ``x`` with its conjugation materialised, in one pass (``resolve_conj``
    then ``contiguous`` of a transposed view is two); under ``torch.func`` transforms the two ops."""
    if functorch_active():
        return x.resolve_conj().contiguous()
    return torch.empty(x.shape, dtype=x.dtype, device=x.device).copy_(x)


def _pow2_scale(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(A·2^-e, e, finite)`` per matrix: max |entry| of the scaled matrix in [1/2, 1)."""
    amax = A.abs().amax(dim=(-2, -1))
    finite = torch.isfinite(amax)
    usable = finite & (amax > 0)
    _, e = torch.frexp(torch.where(usable, amax, torch.ones_like(amax)))
    e = torch.where(usable, e, torch.zeros_like(e))
    scale = torch.ldexp(torch.ones_like(amax), -e)
    As = A * scale[:, None, None].to(A.dtype)
    return As, e, finite


def _complete(Ux: torch.Tensor, S: torch.Tensor, host_reads: bool) -> torch.Tensor:
    """Replace the columns of ``Ux`` whose ``S`` is zero (or negligible) by an orthonormal completion.

    ``S`` is sorted descending, so zero columns are last; Householder QR of ``Ux`` (zero columns
    included) returns, in its first columns, ``±`` the computed ones and, after them, an orthonormal
    basis of their complement. Negligible: ``σ_j <= √tiny·σ₁`` — the squares of such columns
    underflow (float32 columns of ~1e-22 beside ``σ₁ ≈ 1``, from the rounding noise of a
    rank-deficient matrix), so Jacobi cannot orthogonalise them; replacing them moves ``A``'s
    reconstruction by at most ``σ_j``, far below ``u·‖A‖``.
    """
    zero = S <= math.sqrt(torch.finfo(S.dtype).tiny) * S[..., :1]
    if host_reads and not bool(zero.any()):  # skip the QR when nothing needs completing
        return Ux
    if Ux.shape[-2] == Ux.shape[-1] and svd_cuda.triton_ok(Ux, TUNING.triton):
        from .kernels import svd_triton_complete as stc  # the QR only where a column needs it

        if stc.fits(*Ux.shape[-2:]):
            out = svd_cuda.triton_call(stc.complete, Ux, zero)
            if out is not None:
                return out
    Qc, _ = _householder_qr(Ux, "complete")
    return torch.where(zero[:, None, :], Qc, Ux)


def _c_serves(A: torch.Tensor) -> bool:
    """The CPU torch backend with a C compiler runs the whole algorithm in C (outside ``torch.func``
    transforms, which need torch ops) up to ``TUNING.jacobi_max``: :mod:`mpslinalg.kernels.svd_c`."""
    return (A.device.type == "cpu" and backend_for(A.device) == "torch" and not functorch_active()
            and A.shape[-1] <= TUNING.jacobi_max.get("cpu", 0) and svd_c.usable(A))


def _whole_kernel(A: torch.Tensor):
    """The module whose ``svd_tall`` runs the whole algorithm on ``A [B, m, n]`` in one kernel, or
    None: C on the CPU (:func:`_c_serves`), Triton on CUDA (:func:`mpslinalg.kernels.svd_cuda.whole_kernel`)."""
    return svd_c if _c_serves(A) else svd_cuda.whole_kernel(A, TUNING.triton)


def _in_lapack_range(A: torch.Tensor) -> torch.Tensor:
    """Per matrix: finite, and max |a_ij| inside LAPACK's safe range ``[SMLNUM, 1/SMLNUM]`` (where
    ``xGESDD`` scales nothing). ``amax``/``amin`` of ``A`` (complex: of its real view): no
    temporary the size of ``A``, as ``abs()`` would allocate (116 against 50 µs at 256²)."""
    R = torch.view_as_real(A).flatten(-2) if A.is_complex() else A
    big = torch.maximum(R.amax((-2, -1)), -R.amin((-2, -1)))  # complex: max |re|, |im| (within √2)
    fi = torch.finfo(big.dtype)
    lo = math.sqrt(fi.tiny) / fi.eps  # LAPACK's SMLNUM
    return (big >= lo) & (big * math.sqrt(2) <= 1 / lo)


def _lapack_tall(A: torch.Tensor, full: bool, compute_uv: bool):
    """The CPU torch backend above ``TUNING.jacobi_max`` (at every size if ``svd_c.unbuildable``):
    LAPACK's SVD of ``A`` itself (a matrix outside LAPACK's safe range scaled by a power of two first,
    exact where xGESDD's own scaling would round), with the family's non-finite rule (``info = 1``,
    NaN outputs). Absolute accuracy, as the preconditioned factor's SVD (the route on other devices),
    which costs an extra QR and permutations (svdvals 256x256 at 0.64x torch.linalg, svd.md)."""
    in_range = _in_lapack_range(A)
    if bool(in_range.all()):  # finite, in range (a CPU read): A as it is
        info = torch.zeros(A.shape[0], dtype=torch.int32)
        if not compute_uv:
            return None, torch.linalg.svdvals(A), None, info
        U, S, Vh = torch.linalg.svd(A, full_matrices=full)
        return U, S, Vh[:, : A.shape[-1]].mH, info
    As, e, finite = _pow2_scale(A)
    # only the matrices out of range are scaled: a matrix's bits do not depend on its batch
    As, e = torch.where(in_range[:, None, None], A, As), torch.where(in_range, 0, e)
    As = torch.where(finite[:, None, None], As, torch.zeros_like(As))
    info = torch.where(finite, 0, INFO_NONFINITE).to(torch.int32)
    if compute_uv:
        U, S, Vh = torch.linalg.svd(As, full_matrices=full)
    else:
        S = torch.linalg.svdvals(As)
    S = torch.where(finite[:, None], torch.ldexp(S, e[:, None].to(S.dtype)), float("nan"))
    if not compute_uv:
        return None, S, None, info
    bad = ~finite[:, None, None]
    V = Vh[:, : A.shape[-1]].mH  # reduced: the n right singular vectors
    return torch.where(bad, float("nan"), U), S, torch.where(bad, float("nan"), V), info


def _svd_tall(A: torch.Tensor, full: bool, compute_uv: bool):
    """SVD of a batch ``[B, m, n]`` with ``m >= n >= 1``. Returns ``(U, S, V, info)`` (``V``, not
    ``Vh``)."""
    if (A.device.type == "cpu" and backend_for(A.device) == "torch" and not functorch_active()
            and (A.shape[-1] > TUNING.jacobi_max.get("cpu", 0) or svd_c.unbuildable(A))):
        return _lapack_tall(A, full, compute_uv)
    whole = _whole_kernel(A)
    if whole is not None:  # the same algorithm in one kernel; the zero-σ columns of V completed here
        sweeps, host_reads = TUNING.sweeps(A.device, A.real.dtype if A.is_complex() else A.dtype, A.shape[-1])
        if whole is svd_c:
            out = whole.svd_tall(A, full, compute_uv, sweeps)
        else:
            out = svd_cuda.triton_call(whole.svd_tall, A, full, compute_uv, TUNING.triton_sweeps or sweeps)
        if out is not None:
            U, S, V, info = out
            if compute_uv and not getattr(whole, "COMPLETES_V", False):
                V = _complete(V, S, host_reads)
            return U, S, V, info
    Bn, m, n = A.shape
    rdt = A.real.dtype if A.is_complex() else A.dtype
    As, e, finite = _pow2_scale(A)
    As = As.masked_fill(~finite[:, None, None], 0)
    if A.device.type == "cuda" and TUNING.large_driver != "precondition" and not _on_kernels(A) \
            and n > TUNING.jacobi_max.get("cuda", 0):
        U, S, V = svd_cuda.large_svd(As, e, finite, full, compute_uv, TUNING.large_driver)
        return U, S, V, torch.where(finite, 0, INFO_NONFINITE).to(torch.int32)

    # preconditioning: row sort (max-norm), column sort (2-norm), Householder QR
    rperm = As.abs().amax(-1).argsort(dim=-1, descending=True, stable=True)
    As = As.gather(-2, rperm[:, :, None].expand(-1, -1, n))
    cperm = torch.linalg.vector_norm(As, dim=-2).argsort(dim=-1, descending=True, stable=True)
    As = As.gather(-1, cperm[:, None, :].expand(-1, m, -1))
    qr = (svd_cuda.triton_call(svd_cuda.square_qr, As, compute_uv)  # square: in place, tuned warps
          if svd_cuda.triton_ok(As, TUNING.triton) and not _on_kernels(A) else None)
    if qr is not None:
        Q, R = qr
    elif compute_uv:
        Q, R = _householder_qr(As, "complete" if full else "reduced")
    else:
        Q, R = None, _householder_qr(As, "r")[1]
    R = R[:, :n, :]

    sweeps, early = TUNING.sweeps(A.device, rdt, n)
    early = early and not functorch_active()  # early: host reads are free (CPU, no transform)
    jacobi_free = not _on_kernels(A) and n > TUNING.jacobi_max.get(A.device.type, 0)
    if jacobi_free:
        X, V, rotated = _device_svd(R.mH, compute_uv)
    else:  # one-sided Jacobi on X = Rᴴ, padded to an even number of columns
        npad = n + (n % 2)
        X = _plain(R.mH) if npad == n else torch.nn.functional.pad(R.mH.resolve_conj(), (0, 1, 0, 1)).contiguous()
        V = None
        if compute_uv and m == n:  # the rotations start from Q: V ends as U_A's columns (no Q V_x after)
            V = (Q if npad == n else torch.nn.functional.pad(Q, (0, 1, 0, 1))).contiguous()  # Q: rotated in place
        elif compute_uv:
            V = torch.eye(npad, dtype=A.dtype, device=A.device).expand(Bn, -1, -1).contiguous()
        u = _unit_roundoff(rdt)
        X, V, rotated = _kernels(X).jacobi(X, V, sweeps, math.sqrt(npad) * u, 2 * npad * u, early)
        X, V = X[:, :n, :n], (V[:, :n, :n] if V is not None else None)

    out = None
    if n <= 64 and svd_cuda.triton_ok(X, TUNING.triton) and not _on_kernels(A):  # _finish in one launch
        from .kernels import svd_triton_complete as stc

        out = svd_cuda.triton_call(stc.finish, X.contiguous(), V if V is None else V.contiguous(), cperm, e,
                                   finite, rotated)
    if out is None:
        out = _finish(X, V, cperm, e, finite, rotated)
    S, S_out, info, Vout, Vj = out
    if not compute_uv:
        return None, S_out, None, info
    Vout = _complete(Vout, S, early)
    # U_A = Prᵀ Q [Vj 0; 0 I] (square A after the Jacobi: Vj is Q V_x's sorted columns already)
    Un = Vj if m == n and V is not None and not jacobi_free else Q[:, :, :n] @ Vj
    Uq = torch.cat([Un, Q[:, :, n:]], dim=-1) if full else Un
    Uout = Uq.gather(-2, rperm.argsort(dim=-1)[:, :, None].expand(-1, -1, Uq.shape[-1]))
    bad = ~finite[:, None, None]
    return Uout.masked_fill(bad, float("nan")), S_out, Vout.masked_fill(bad, float("nan")), info


def _finish(X: torch.Tensor, V: torch.Tensor | None, cperm: torch.Tensor, e: torch.Tensor, finite: torch.Tensor,
            rotated: torch.Tensor):
    """``(S, S_out, info, V_A, Vj)`` from the Jacobi's ``W = X`` and ``V`` by torch ops: the contract of
    :func:`mpslinalg.kernels.svd_triton_complete.finish` (CUDA's one launch)."""
    n = X.shape[-1]
    # column norms scaled by their largest entry: a column of ~1e-22 (rank-deficient input) has
    # squares below float32's normal range, and an unscaled norm then leaves V = W Σ⁻¹ not unit
    colmax = X.abs().amax(dim=-2)
    colmax = torch.where(colmax > 0, colmax, torch.ones_like(colmax))
    S = colmax * torch.linalg.vector_norm(X / colmax[:, None, :].to(X.dtype), dim=-2)
    S, order = S.sort(dim=-1, descending=True, stable=True)
    info = torch.where(rotated, INFO_NOCONV, 0).to(torch.int32)
    info = torch.where(finite, info, INFO_NONFINITE).to(torch.int32)
    nan = torch.full_like(S, float("nan"))
    S_out = torch.where(finite[:, None], torch.ldexp(S, e[:, None].to(S.dtype)), nan)
    if V is None:
        return S, S_out, info, None, None
    W = X.gather(-1, order[:, None, :].expand(-1, n, -1))
    Vj = V.gather(-1, order[:, None, :].expand(-1, n, -1))
    Ux = W / torch.where(S > 0, S, torch.ones_like(S))[:, None, :].to(W.dtype)
    # V_A = Pc Ux: row i of Ux belongs to column cperm[i] of A
    return S, S_out, info, Ux.gather(-2, cperm.argsort(dim=-1)[:, :, None].expand(-1, -1, n)), Vj


def _empty_svd(A: torch.Tensor, full: bool, compute_uv: bool):
    *batch, m, n = A.shape
    rdt = A.real.dtype if A.is_complex() else A.dtype
    S = torch.zeros(*batch, 0, dtype=rdt, device=A.device)
    info = torch.zeros(batch, dtype=torch.int32, device=A.device)
    if not compute_uv:
        return A.new_empty(0), S, A.new_empty(0), info

    def eye(k: int, cols: int) -> torch.Tensor:
        return torch.eye(k, cols, dtype=A.dtype, device=A.device).expand(*batch, k, cols).clone()

    U = eye(m, m) if full else eye(m, 0)
    Vh = eye(n, n) if full else eye(0, n)
    return U, S, Vh, info


def svd_impl(A: torch.Tensor, full_matrices: bool, compute_uv: bool
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batched SVD ``A = U diag(S) Vh`` with torch's conventions; no input checks, no host sync.

    The internal entry point of the SVD family (``pinv``, ``lstsq``, ``matrix_rank``, ``cond`` and
    ``matrix_norm`` build on it). Not differentiable by itself: the public ops are.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``, float32/float64/complex64/complex128 (not modified).
    full_matrices : bool
        ``U`` is ``(*, m, m)`` and ``Vh`` ``(*, n, n)`` if true, else ``(*, m, k)`` and ``(*, k, n)``,
        ``k = min(m, n)``.
    compute_uv : bool
        If false, ``U`` and ``Vh`` are empty tensors (as ``torch.linalg.svd``'s internals).

    Returns
    -------
    U, S, Vh, info : torch.Tensor
        ``S`` real, ``(*, k)``, descending, non-negative. ``info`` int32 ``(*)``: 0 success,
        1 non-finite input (outputs NaN), 2 no convergence within the sweep bound.
    """
    *batch, m, n = A.shape
    if m == 0 or n == 0:
        return _empty_svd(A, full_matrices, compute_uv)
    wide = m < n
    X = A.reshape(-1, m, n)
    X = X.mH if wide else X
    U, S, V, info = _svd_tall(X.contiguous(), full_matrices, compute_uv)
    S, info = _shaped(S, *batch, min(m, n)), _shaped(info, *batch)
    if not compute_uv:
        empty = A.new_empty(0)
        return empty, S, empty, info
    if wide:  # A = (U' S V'ᴴ)ᴴ = V' S U'ᴴ
        U, V = V, U
    Vh = _plain(V.mH)  # fresh, plain layout (tangents get the same)
    return _shaped(U.contiguous(), *batch, m, U.shape[-1]), S, _shaped(Vh, *batch, Vh.shape[-2], n), info


def _shaped(t: torch.Tensor, *shape: int) -> torch.Tensor:
    """``t.reshape(shape)``, but ``t`` itself when already so shaped (the op would copy a view)."""
    return t if tuple(t.shape) == shape else t.reshape(shape)


# --------------------------------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------------------------------


def _svd_op_impl(A: torch.Tensor, full_matrices: bool, compute_uv: bool
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    U, S, Vh, info = svd_impl(A, full_matrices, compute_uv)
    if not compute_uv:  # custom ops must not return the same tensor twice
        U, Vh = A.new_empty(0), A.new_empty(0)
    # outputs are fresh tensors, never views of intermediates (forward-mode layouts, custom ops)
    return tuple(t.clone() if t._base is not None else t for t in (U, S, Vh, info))


def _svd_fake(A, full_matrices, compute_uv):
    *batch, m, n = A.shape
    k = min(m, n)
    rdt = A.real.dtype if A.is_complex() else A.dtype
    S = A.new_empty((*batch, k), dtype=rdt)
    info = A.new_empty(batch, dtype=torch.int32)
    if not compute_uv:
        return A.new_empty(0), S, A.new_empty(0), info
    uc, vr = (m, n) if full_matrices else (k, k)
    return A.new_empty((*batch, m, uc)), S, A.new_empty((*batch, vr, n)), info


def _svd_setup(ctx, inputs, output):
    A, full_matrices, compute_uv = inputs
    U, S, Vh, _ = output
    ctx.full_matrices, ctx.compute_uv = full_matrices, compute_uv
    ctx.save_for_backward(U, S, Vh)


def _svd_backward(ctx, gU, gS, gVh, ginfo=None):
    if not ctx.compute_uv:
        raise RuntimeError("linalg.svd: the derivative needs the singular vectors; call svd or svdvals "
                           "(which compute them when A requires grad)")
    U, S, Vh = ctx.saved_tensors
    k = S.shape[-1]
    if ctx.full_matrices:  # torch differentiates only the first k columns of U and rows of Vh
        U, Vh = U[..., :k], Vh[..., :k, :]
        gU = None if gU is None else gU[..., :k]
        gVh = None if gVh is None else gVh[..., :k, :]
    return svd_backward(gU, gS, gVh, U, S, Vh), None, None


def _svd_jvp(inputs, outputs, tangents):
    A, full_matrices, compute_uv = inputs
    U, S, Vh, _ = outputs
    dA = tangents[0]
    if dA is None:
        return None, None, None, None
    dU, dS, dVh = svd_jvp(dA, U, S, Vh, full_matrices)
    return dU, dS, dVh, None


_svd = defop("svd", impl=_svd_op_impl, fake=_svd_fake, setup=_svd_setup, backward=_svd_backward,
             jvp=_svd_jvp)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------

_DRIVERS = (None, "gesvd", "gesvdj", "gesvda")
_NONFINITE = "The algorithm failed to converge because the input matrix contained non-finite values."
_NOCONV = ("The algorithm failed to converge because the input matrix is ill-conditioned or has too "
           "many repeated singular values (error code: {info}).")


def _check(op: str, A, driver) -> torch.Tensor:
    A = E.check_matrix(op, "A", A)
    if driver not in _DRIVERS:
        raise ValueError(f"{op}: driver must be None or one of 'gesvd', 'gesvdj', 'gesvda', got {driver!r}")
    return A


def _raise(info: torch.Tensor) -> None:
    # the common case in one host read (svd raises as torch); compile, meta and torch.func: the checks
    if (not E.traced(info) and not info.is_meta and not functorch_active() and info.numel()
            and not bool(info.any())):
        return
    # torch names linalg.svd in the errors of svdvals too
    E.raise_for_info("linalg.svd", (info == INFO_NONFINITE).to(torch.int32), _NONFINITE)
    E.raise_for_info("linalg.svd", torch.where(info == INFO_NOCONV, info, 0), _NOCONV)


def _wants_grad(A: torch.Tensor) -> bool:
    if functorch_active() or (torch.is_grad_enabled() and A.requires_grad):
        return True
    return _fwad.unpack_dual(A).tangent is not None


def svd_ex(A: torch.Tensor, full_matrices: bool = True, *, driver: str | None = None, out=None):
    """SVD with a per-matrix status instead of errors, and no host synchronisation.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``; float32/complex64 on every device, float64/complex128 on CPU/CUDA.
    full_matrices : bool
        As :func:`svd`.
    driver : None or str
        Accepted for compatibility with ``torch.linalg.svd`` (``'gesvd'``, ``'gesvdj'``,
        ``'gesvda'``) on every device; the algorithm is always the preconditioned Jacobi method.
    out : tuple of four tensors, optional

    Returns
    -------
    (U, S, Vh, info)
        As :func:`svd`, plus ``info`` int32 ``(*)``: 0 success, 1 non-finite input (``U``, ``S``,
        ``Vh`` of that matrix are NaN), 2 not converged within the sweep bound.

    Examples
    --------
    >>> import torch, mpslinalg
    >>> U, S, Vh, info = mpslinalg.svd_ex(torch.eye(3))
    >>> S.tolist(), int(info)
    ([1.0, 1.0, 1.0], 0)
    """
    op = "linalg.svd_ex"
    A = _check(op, A, driver)
    full_matrices = E.check_bool(op, "full_matrices", full_matrices)
    U, S, Vh, info = _svd(A, full_matrices, True)
    return E.store(op, out, (U, S, Vh, info), A, kind=SVDExResult)


def svd(A: torch.Tensor, full_matrices: bool = True, *, driver: str | None = None, out=None):
    """Singular value decomposition ``A = U diag(S) Vh``, as ``torch.linalg.svd``.

    Preconditioned one-sided Jacobi (module docstring): small singular values of graded matrices
    are relatively accurate, inputs of any scale are handled, ``U``/``Vh`` are orthonormal also
    for rank-deficient and zero matrices.

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``; float32/complex64 on every device, float64/complex128 on CPU/CUDA.
    full_matrices : bool
        ``U`` ``(*, m, m)`` and ``Vh`` ``(*, n, n)`` if true (default), else ``(*, m, k)`` and
        ``(*, k, n)`` with ``k = min(m, n)``.
    driver : None or str
        Accepted for compatibility (see :func:`svd_ex`).
    out : tuple of three tensors, optional

    Returns
    -------
    (U, S, Vh)
        ``torch.return_types.linalg_svd``; ``S`` real, descending, non-negative.

    Raises
    ------
    torch.linalg.LinAlgError
        Non-finite input or no convergence, naming the batch element (as torch).

    Examples
    --------
    >>> import torch, mpslinalg
    >>> A = torch.tensor([[3.0, 0.0], [0.0, -4.0]])
    >>> mpslinalg.svd(A).S.tolist()
    [4.0, 3.0]
    """
    op = "linalg.svd"
    A = _check(op, A, driver)
    full_matrices = E.check_bool(op, "full_matrices", full_matrices)
    U, S, Vh, info = _svd(A, full_matrices, True)
    _raise(info)
    return E.store(op, out, (U, S, Vh), A, kind=torch.return_types.linalg_svd)


def svdvals(A: torch.Tensor, *, driver: str | None = None, out=None) -> torch.Tensor:
    """Singular values of ``A``, descending, as ``torch.linalg.svdvals``.

    The singular vectors are computed only when a gradient is needed (``A`` requires grad, a
    forward-mode tangent or a ``torch.func`` transform).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, m, n)``.
    driver : None or str
        Accepted for compatibility (see :func:`svd_ex`).
    out : torch.Tensor, optional

    Returns
    -------
    torch.Tensor
        Real ``(*, min(m, n))``.

    Raises
    ------
    torch.linalg.LinAlgError
        Non-finite input or no convergence.

    Examples
    --------
    >>> import torch, mpslinalg
    >>> mpslinalg.svdvals(torch.tensor([[0.0, 2.0], [1.0, 0.0]])).tolist()
    [2.0, 1.0]
    """
    op = "linalg.svdvals"
    A = _check(op, A, driver)
    if (A.device.type == "cpu" and min(A.shape[-2:]) > TUNING.jacobi_max.get("cpu", 0) and not _wants_grad(A)
            and backend_for(A.device) == "torch" and bool(_in_lapack_range(A.reshape(-1, *A.shape[-2:])).all())):
        # LAPACK's xGESDD of A itself (_lapack_tall's in-range case) without the op layer's round
        return E.store(op, out, torch.linalg.svdvals(A), A)
    _, S, _, info = _svd(A, False, _wants_grad(A))
    _raise(info)
    return E.store(op, out, S, A)


class SVDExResult(tuple):
    """``(U, S, Vh, info)`` of :func:`svd_ex`, with named fields."""

    __slots__ = ()
    _fields = ("U", "S", "Vh", "info")

    def __new__(cls, seq):
        return super().__new__(cls, seq)

    U = property(lambda self: self[0])
    S = property(lambda self: self[1])
    Vh = property(lambda self: self[2])
    info = property(lambda self: self[3])
