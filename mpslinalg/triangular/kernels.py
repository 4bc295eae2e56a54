"""The triangular family's tuning and kernels: inverses of the diagonal blocks (``trtri_diag``: Metal,
or torch ops) and the fused small-system solve (``trsm_small``: Metal, or Triton on CUDA)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from ..kernels import backend_for, kernel_name, load_library
from ..oplayer import checks as E

_OP = "solve_triangular"


# --------------------------------------------------------------------------------------------------
# Tuning (chosen by measurement: benchmarks/bench_triangular.py --tune)
# --------------------------------------------------------------------------------------------------


@dataclass
class Tuning:
    """Block sizes and leaf strategy of the blocked solve.

    Attributes
    ----------
    nb : int
        Width of the explicitly inverted diagonal blocks for a non-unit diagonal (``<= 32``).
        With the one refinement step per block, 16 keeps LAPACK's ratio below 1.3 on Gaussian
        triangles in float32, while 32 reaches ~200 (see the module docstring).
    nb_unit : int
        The same for ``unitriangular=True`` (32 passes there: worst ratio 0.4).
    leaf_blocks : int
        A sub-problem of at most this many ``nb``-blocks is solved by blocked substitution with the
        diagonal-block inverses; larger ones are split in two (recursion, one GEMM per split).
    trsm_leaf : int
        ``torch`` backend only: when ``n`` is at least this, recursion stops at leaves of
        ``trsm_leaf_rows`` rows solved by ``torch.linalg.solve_triangular`` (LAPACK/cuBLAS
        substitution) instead of the diagonal-block inverses. ``0`` disables it.
    trsm_leaf_cpu : int
        The same threshold for CPU tensors. LAPACK's ``trsm`` on a 2-core CPU beats the blocked
        inverse path (which does ~2.3x the flops of substitution because of the refinement step)
        by ~2x on batches of 64x64 systems, so on the CPU the ``torch`` backend uses ``trsm``
        leaves at every size (1) and GEMM recursion above ``trsm_leaf_rows``.
    trsm_leaf_rows : int
        Leaf size in rows for the ``trsm`` leaves.
    small_n : int
        ``metal``/``emulator`` backends: systems with ``n`` at most this (``<= 64``) are solved by
        the fused ``trsm_small`` kernel (substitution in one dispatch; 0 disables it).
    small_mma : bool
        ``trsm_small`` for float32: the compile-time variant whose block products run on Apple's
        matrix units (``simdgroup_matrix``; ``trsm_small_f32_64_2``). Off by default: the cuda
        proxy emulates the matrix units with shuffles and cannot time them (docs/ops).
    kernel_leaf : str
        ``metal``/``emulator`` backends, ``n`` above ``small_n``: ``"trsm_small"`` (GEMM recursion
        down to leaves of at most ``small_n`` rows, each one ``trsm_small`` dispatch: substitution,
        no refinement flops, a few dispatches per call) or ``"trtri_diag"`` (the diagonal-block
        inverses with the refinement step, three small GEMMs per block).
    small_cols : int
        ``trsm_small``: right-hand-side columns (threads) per system and threadgroup,
        a multiple of 32 in [32, 128]; fewer columns than this per system put several systems in a
        group. 128: the DeltaNet shape (128 right-hand sides) in one group per system, 3.4x
        torch.linalg on the H200 against 2.6x with 64 (docs/evidence/triangular.md).
    torch_inverse : str
        How the ``torch`` backend inverts the diagonal blocks: ``"trsm"`` (one batched
        ``torch.linalg.solve_triangular`` against the identity) or ``"doubling"`` (log2(nb)
        levels of batched products: ``inv([[A, 0], [C, D]]) = [[A⁻¹, 0], [-D⁻¹ C A⁻¹, D⁻¹]]``).
    direct_max : dict
        ``torch`` backend, per device type: systems with ``n`` up to this are solved by ONE call of
        the device's ``trsm`` (``torch.linalg.solve_triangular``, posed as the transposed problem
        so that its column-major result is our row-major ``X`` without a copy); larger ones take
        the GEMM recursion with ``trsm`` leaves (``trsm_leaf*``) or, where those are disabled, the
        blocked diagonal-inverse path. Devices not listed: 0 (never direct).

        On CUDA that is every size: every alternative of the blocked path lost to one cuBLAS
        ``trsm`` on the H200 (docs/ops/triangular.md, "Tuning measurements"); on the CPU
        LAPACK's ``trsm`` up to 512, GEMM recursion over ``trsm`` leaves above. The kernel
        backends (``metal``, ``emulator``) keep the fused ``trsm_small`` kernel and the blocked
        algorithm: there is no vendor ``trsm``.
    triton_max : int
        ``torch`` backend on CUDA, float32: systems with ``n`` up to this (``<= 64``) are solved by
        one launch of the Triton kernel of :mod:`mpslinalg.triangular.triton` (blocked
        substitution with ``tl.dot`` updates, backward stable) instead of cuBLAS. ``0`` (the
        disables it; 64 is where it beat cuBLAS on the H200 (docs/ops/triangular.md).
        A compile or launch failure switches it off for the process (with a warning).
    direct_transpose_max : dict
        Per device type: direct ``trsm`` calls with ``n`` up to this are posed as the transposed
        problem; above it (and on devices not listed) as the user posed it, i.e. torch.linalg's own
        call (the custom op and :func:`trsm` then copy the result into row-major order); the
        thresholds come from the measurements in docs/ops/triangular.md.
    """

    nb: int = 16
    nb_unit: int = 32
    leaf_blocks: int = 4
    trsm_leaf: int = 1024
    trsm_leaf_cpu: int = 1
    trsm_leaf_rows: int = 512
    torch_inverse: str = "trsm"
    small_n: int = 64
    small_cols: int = 128
    small_mma: bool = False
    kernel_leaf: str = "trsm_small"
    direct_max: dict = field(default_factory=lambda: {"cpu": 512, "cuda": 2**62})
    triton_max: int = 64
    direct_transpose_max: dict = field(default_factory=lambda: {"cuda": 64})


#: The active tuning; benchmarks may modify it (``TUNING.nb = 16``) to compare choices.
TUNING = Tuning()


# --------------------------------------------------------------------------------------------------
# The kernel: inverses of the diagonal blocks
# --------------------------------------------------------------------------------------------------


#: Compile-time limits of ``metal/triangular.metal`` (TRI_MAXNB, TRI_SMALL_N).
_TRTRI_MAX_NB = 32
_TRSM_SMALL_MAX_N = 64
_INT32_MAX = 2**31 - 1


def _check_tuning() -> None:
    """Reject tuning values the kernels cannot run with, naming the field (the algorithm also
    clamps them, but a value outside the kernels' compile-time limits is a configuration error)."""
    for name, lo, hi, what in (("nb", 1, _TRTRI_MAX_NB, "trtri_diag's threadgroup tiles"),
                               ("nb_unit", 1, _TRTRI_MAX_NB, "trtri_diag's threadgroup tiles"),
                               ("small_n", 0, _TRSM_SMALL_MAX_N, "trsm_small's threadgroup triangle"),
                               ("small_cols", 32, _TRSM_SMALL_GROUP, "trsm_small's threadgroup")):
        v = getattr(TUNING, name)
        if not (isinstance(v, int) and lo <= v <= hi) or (name == "small_cols" and v % 32):
            raise ValueError(f"mpslinalg.triangular.TUNING.{name} must be an int in [{lo}, {hi}] ({what}"
                             f"{', a multiple of 32' if name == 'small_cols' else ''}), got {v!r}")


def _index_map(off: int, bs: int, rs: int, cs: int, rows: int, cols: int, what: str) -> list[int]:
    """``[off, bs, rs, cs]`` for a kernel; the offsets inside one matrix must fit in 31 bits
    (the kernels index a matrix with 32-bit integers, only the base offset is 64-bit)."""
    if (rows - 1) * abs(rs) + (cols - 1) * abs(cs) > _INT32_MAX:
        raise ValueError(f"mpslinalg: {what} spans more than 2^31 - 1 elements within one matrix "
                         f"({rows}x{cols}, strides {rs}, {cs}); the Metal triangular kernels index "
                         "a matrix with 32-bit integers")
    return [off, bs, rs, cs]


def _flat(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view from ``t``'s storage offset covering every element ``t`` addresses (no copy).

    Metal binds a tensor's storage at its storage offset and ignores strides; the kernel applies
    the strides we pass as integers. Requires non-negative strides (torch has no negative ones).
    """
    extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return t.as_strided((extent,), (1,))


def _trtri_diag_metal(A3: torch.Tensor, nb: int, upper: bool,
                      unit: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``trtri_diag`` from ``metal/triangular.metal`` (Metal or the emulator; same call site)."""
    bsz, n, _ = A3.shape
    nblk = -(-n // nb)
    conj = A3.is_conj()
    phys = A3.conj() if conj else A3  # same memory, conj bit cleared: the kernel conjugates
    bs, rs, cs = phys.stride()
    if upper:  # an upper block is the transpose of a lower one: swap the strides, transpose after
        rs, cs = cs, rs
    _check_tuning()
    if not 1 <= nb <= _TRTRI_MAX_NB:
        raise ValueError(f"trtri_diag inverts blocks of order 1 to {_TRTRI_MAX_NB}, got nb={nb}")
    D = torch.empty((bsz, nblk, nb, nb), dtype=A3.dtype, device=A3.device)
    Tb = torch.empty_like(D)
    if D.numel():
        lib = load_library("triangular", A3.device)
        flags = int(unit) | (int(conj) << 1)
        getattr(lib, kernel_name("trtri_diag", A3.dtype))(
            _flat(phys), D, Tb, [n, nb, nblk, flags], _index_map(0, bs, rs, cs, n, n, "A"),
            threads=bsz * nblk * 32, group_size=32,
        )
    return (D.mT, Tb.mT) if upper else (D, Tb)


def _kernel_strides(t: torch.Tensor, batch: int, reverse: bool, cols_too: bool):
    """(physical tensor, conj, offset, batch/row/col strides) of a logical 3-D view for a kernel.

    ``reverse`` flips the row order (and the column order if ``cols_too``): element ``(i, j)`` of
    the result is ``t[n-1-i, n-1-j]``, an index map with negative strides and an offset.
    """
    conj = t.is_conj()
    phys = t.conj() if conj else t
    bs, rs, cs = phys.stride()
    if phys.shape[0] != batch:  # broadcast batch
        bs = 0
    off = 0
    if reverse:
        off += (phys.shape[1] - 1) * rs
        rs = -rs
        if cols_too:
            off += (phys.shape[2] - 1) * cs
            cs = -cs
    return phys, conj, off, bs, rs, cs


#: trsm_small's compile-time shapes (metal/triangular.metal): register variants NMAX, threadgroup
#: quads (TRI_SMALL_QUADS) and the kernel's max_total_threads_per_threadgroup (TRI_SMALL_GROUP).
_TRSM_SMALL_NMAX = (16, 32, 64)
_TRSM_SMALL_QUADS = 544
_TRSM_SMALL_GROUP = 128


def _trsm_small_shape(nmat: int, n: int, k: int, cols: int) -> tuple[int, int, int, int, int]:
    """``(nmax, ct, spg, group, ngroups)`` of a ``trsm_small`` launch.

    ``nmax``: the smallest register variant that holds ``n`` rows; ``ct``: right-hand-side
    columns per system in a group (one thread each; ``min(cols, k)``); ``spg``: systems per group,
    as many as fill ``cols`` threads and fit the threadgroup triangle store; ``group``: threads
    per group, a multiple of 32 (the extra threads only help staging the triangles);
    ``ngroups``: groups in the grid.
    """
    nmax = next(v for v in _TRSM_SMALL_NMAX if n <= v)
    ct = min(cols, k)
    nq = 4 * -(-n // 16)  # quads per column of the column-packed triangle (whole 16-row blocks)
    quads = nq * (nq + 1) * 2
    spg = max(1, min(cols // ct, _TRSM_SMALL_QUADS // quads, nmat))
    group = -(-spg * ct // 32) * 32
    ngroups = -(-nmat // spg) * -(-k // ct)
    return nmax, ct, spg, group, ngroups


def _trsm_small_launch(A: torch.Tensor, B: torch.Tensor, X: torch.Tensor, upper: bool,
                       unit: bool) -> tuple[str, tuple, list[int], int, int]:
    """``(kernel name, tensor arguments, argument buffer, threads, group_size)`` of the
    ``trsm_small`` launch that solves ``A X = B`` (see :func:`_trsm_small_metal`)."""
    batch, n, k = X.shape
    _check_tuning()
    if n > _TRSM_SMALL_MAX_N:
        raise ValueError(f"trsm_small solves systems of order at most {_TRSM_SMALL_MAX_N}, got {n}")
    a, ca, aoff, abs_, ars, acs = _kernel_strides(A, batch, upper, True)
    b, cb, boff, bbs, brs, bcs = _kernel_strides(B, batch, upper, False)
    x, _, xoff, xbs, xrs, xcs = _kernel_strides(X, batch, upper, False)
    if TUNING.small_mma and X.dtype == torch.float32:  # the matrix-unit variant: 64 columns a group
        name = kernel_name("trsm_small", X.dtype, _TRSM_SMALL_MAX_N, 2)
        ct, spg, group, ngroups = 64, 1, 64, batch * -(-k // 64)
    else:
        nmax, ct, spg, group, ngroups = _trsm_small_shape(batch, n, k, TUNING.small_cols)
        name = kernel_name("trsm_small", X.dtype, nmax, int(unit))  # the diagonal kind is compiled in
    flags = int(unit) | (int(ca) << 1) | (int(cb) << 2)
    prm = [n, k, batch, flags, ct, spg, -(-k // ct),
           *_index_map(aoff, abs_, ars, acs, n, n, "A"), *_index_map(boff, bbs, brs, bcs, n, k, "B"),
           *_index_map(xoff, xbs, xrs, xcs, n, k, "X")]
    return name, (_flat(a), _flat(b), _flat(x)), prm, ngroups * group, group


def _trsm_small_metal(A: torch.Tensor, B: torch.Tensor, X: torch.Tensor, upper: bool, unit: bool) -> None:
    """``X = A⁻¹ B`` for ``n <= 64`` with the fused ``trsm_small`` kernel (Metal or emulator).

    An upper triangle is the reversal ``J U J`` of a lower one (rows and columns of ``A``, rows of
    ``B`` and ``X`` reversed by index maps); transposed and conjugate views are index maps too.
    The launch shape (systems and columns per threadgroup, register variant) is
    :func:`_trsm_small_shape` with ``TUNING.small_cols`` columns per group.
    """
    name, tensors, prm, threads, group = _trsm_small_launch(A, B, X, upper, unit)
    lib = load_library("triangular", X.device)
    getattr(lib, name)(*tensors, prm, threads=threads, group_size=group)


def _trsm_small_triton(A: torch.Tensor, B: torch.Tensor, X: torch.Tensor, upper: bool, unit: bool) -> None:
    """``X = A⁻¹ B`` for ``n <= 64``, float32, by the one-launch Triton kernel (same index maps as
    :func:`_trsm_small_metal`)."""
    from . import triton as _triangular_triton

    batch, n, k = X.shape
    a, _, aoff, abs_, ars, acs = _kernel_strides(A, batch, upper, True)
    b, _, boff, bbs, brs, bcs = _kernel_strides(B, batch, upper, False)
    x, _, xoff, xbs, xrs, xcs = _kernel_strides(X, batch, upper, False)
    _triangular_triton.trsm_small(a, b, x, n, k, batch, (aoff, abs_, ars, acs), (boff, bbs, brs, bcs),
                                  (xoff, xbs, xrs, xcs), unit)


_triton_state: dict[str, object] = {}  # "ok": bool once probed; "error": why it was switched off


#: Triton reads TRITON_INTERPRET when it is imported; so do we (no environment read per call).
_TRITON_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def _use_triton(A: torch.Tensor, n: int) -> bool:
    """Whether the torch backend solves this system with the Triton kernel (``TUNING.triton_max``)."""
    if not (0 < n <= min(TUNING.triton_max, 64) and A.dtype == torch.float32):
        return False
    dev = A.device.type
    if dev != "cuda" and not (dev == "cpu" and _TRITON_INTERPRET):
        return False
    ok = _triton_state.get("ok")
    if ok is None:
        try:
            from . import triton  # noqa: F401
            ok = True
        except Exception as exc:  # noqa: BLE001 - no Triton: cuBLAS it is
            ok, _triton_state["error"] = False, repr(exc)
        _triton_state["ok"] = ok
    return bool(ok)


def _diag_blocks(A3: torch.Tensor, nb: int) -> torch.Tensor:
    """View of the full ``nb × nb`` diagonal blocks of ``A3`` as ``[batch, n // nb, nb, nb]``."""
    bsz, n, _ = A3.shape
    sb, sr, sc = A3.stride()
    return A3.as_strided((bsz, n // nb, nb, nb), (sb, nb * (sr + sc), sr, sc), A3.storage_offset())


def _clean_lower(blocks: torch.Tensor, unit: bool) -> torch.Tensor:
    """The lower triangle of ``blocks`` (a new tensor): zeros above, ones on a unit diagonal."""
    Tb = blocks.tril(-1 if unit else 0)
    if unit:
        Tb.diagonal(dim1=-2, dim2=-1).fill_(1)
    return Tb


def _inv_lower_trsm(Tb: torch.Tensor) -> torch.Tensor:
    m = Tb.shape[-1]
    eye = torch.eye(m, dtype=Tb.dtype, device=Tb.device).expand(Tb.shape)
    return torch.linalg.solve_triangular(Tb, eye, upper=False)


def _inv_blocks_doubling(blocks: torch.Tensor, upper: bool, unit: bool) -> torch.Tensor:
    """Invert lower (or upper) ``m × m`` triangles by recursive doubling, reading one triangle:
    ``inv([[A, 0], [C, D]]) = [[A⁻¹, 0], [-D⁻¹ C A⁻¹, D⁻¹]]``, log2(m) levels of batched products."""
    if upper:
        return _inv_blocks_doubling(blocks.mT, False, unit).mT
    lead = blocks.shape[:-2]
    m = blocks.shape[-1]
    L = blocks.reshape(-1, m, m)
    nmat = L.shape[0]
    W = torch.zeros((nmat, m, m), dtype=L.dtype, device=L.device)
    if unit:
        W.diagonal(dim1=-2, dim2=-1).fill_(1)
    else:
        torch.reciprocal(L.diagonal(dim1=-2, dim2=-1), out=W.diagonal(dim1=-2, dim2=-1))
    s = 1
    while s < m:
        npair = m // (2 * s)  # complete pairs of s-blocks along the diagonal
        if npair > 0:
            sw = W.stride()
            sl = L.stride()

            def sub(T, st, r, c, _s=s, _np=npair):
                # [nmat, npair, s, s] view of the (r, c) s-sub-block of every 2s-block
                return T.as_strided((nmat, _np, _s, _s), (st[0], 2 * _s * (st[1] + st[2]), st[1], st[2]),
                                    T.storage_offset() + _s * (r * st[1] + c * st[2]))

            Ainv = sub(W, sw, 0, 0)
            Dinv = sub(W, sw, 1, 1)
            C = sub(L, sl, 1, 0)
            sub(W, sw, 1, 0).copy_(torch.matmul(torch.matmul(Dinv, C), Ainv).neg_())
        tail = m - npair * 2 * s  # leftover rows: join the last partial block
        if tail > s:
            r0 = npair * 2 * s
            Ainv = W[:, r0:r0 + s, r0:r0 + s]
            Dinv = W[:, r0 + s:, r0 + s:]
            C = L[:, r0 + s:, r0:r0 + s]
            W[:, r0 + s:, r0:r0 + s] = torch.matmul(torch.matmul(Dinv, C), Ainv).neg_()
        s *= 2
    return W.reshape(*lead, m, m)


def _trtri_diag_torch(A3: torch.Tensor, nb: int, upper: bool, unit: bool,
                      method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch-op implementation of the ``trtri_diag`` contract (identical semantics)."""
    if upper:
        D, Tb = _trtri_diag_torch(A3.mT, nb, False, unit, method)
        return D.mT, Tb.mT
    bsz, n, _ = A3.shape
    nblk = -(-n // nb)
    nfull = n // nb
    if nfull == nblk:
        Tb = _clean_lower(_diag_blocks(A3, nb), unit)
    else:
        Tb = torch.zeros((bsz, nblk, nb, nb), dtype=A3.dtype, device=A3.device)
        if nfull:
            Tb[:, :nfull] = _clean_lower(_diag_blocks(A3, nb), unit)
        r0 = nfull * nb
        Tb[:, nfull, : n - r0, : n - r0] = _clean_lower(A3[:, r0:, r0:], unit)
        Tb[:, nfull].diagonal(dim1=-2, dim2=-1)[:, n - r0 :] = 1
    D = _inv_lower_trsm(Tb) if method == "trsm" else _inv_blocks_doubling(Tb, False, unit)
    return D, Tb


def _trtri_diag(A3: torch.Tensor, nb: int, upper: bool, unit: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverses and clean copies of the diagonal blocks of the logical triangles ``A3``."""
    if _uses_kernel(A3):
        return _trtri_diag_metal(A3, nb, upper, unit)
    return _trtri_diag_torch(A3, nb, upper, unit, TUNING.torch_inverse)


def _uses_kernel(A: torch.Tensor) -> bool:
    return A.dtype in E.GPU_DTYPES and backend_for(A.device) != "torch"
