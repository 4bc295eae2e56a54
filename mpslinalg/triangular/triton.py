"""CUDA (Triton) kernel for batches of small float32 triangular solves (``n <= 64``): one launch.

Imported lazily by :mod:`mpslinalg.triangular` (Triton ships with CUDA builds of torch; without it
this module is never imported). Opt-in through ``TUNING.triton_max`` until measured on the H200.

Why: cuBLAS's batched ``trsm`` on batches of 64×64 systems is several times slower than a bmm of
the same shape, and every torch-op replacement issues more launches than that (measurements in
docs/ops/triangular.md).

Algorithm: blocked forward substitution, exactly LAPACK's blocked ``trsm`` (backward stable,
no explicit inverse): one program per (matrix, tile of ``BK`` right-hand sides); the rows are taken
in blocks of ``NB = 16``; for block row ``j``, ``R = B_j - sum_{i<j} L_ji X_i`` by ``tl.dot`` in IEEE
float32 (never TF32), then column-oriented substitution inside the 16×16 diagonal block with
correctly rounded divisions, and ``X_j`` is stored (and read back by the later block rows of the same program after
a barrier). Only the strictly lower part of each diagonal block and the blocks below it are read
(and the diagonal unless ``UNIT``): the other triangle may hold anything, NaN included.

Every variant arrives as a logical *lower* left solve through index maps (the caller's
``_kernel_strides``): an upper triangle is the reversal ``J U J`` (negative strides and an
offset), a right solve the transposed strides, a broadcast batch stride 0 — no copies.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["trsm_small"]

NB = 16


@triton.jit
def _trsm_small_kernel(A, B, X, n, k,
                       a_off, a_bs, a_rs, a_cs,
                       b_off, b_bs, b_rs, b_cs,
                       x_off, x_bs, x_rs, x_cs,
                       UNIT: tl.constexpr, NB: tl.constexpr, NBLK: tl.constexpr, BK: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1)
    cols = t * BK + tl.arange(0, BK)
    cmask = cols < k
    rid = tl.arange(0, NB)
    Ab = A + a_off + m * a_bs
    Bb = B + b_off + m * b_bs
    Xb = X + x_off + m * x_bs
    for j in tl.static_range(NBLK):
        r = j * NB + rid
        rmask = r < n
        R = tl.load(Bb + r[:, None] * b_rs + cols[None, :] * b_cs,
                    mask=rmask[:, None] & cmask[None, :], other=0.0)
        for i in tl.static_range(j):
            c = i * NB + rid
            Lji = tl.load(Ab + r[:, None] * a_rs + c[None, :] * a_cs,
                          mask=rmask[:, None] & (c < n)[None, :], other=0.0)
            Xi = tl.load(Xb + c[:, None] * x_rs + cols[None, :] * x_cs,
                         mask=(c < n)[:, None] & cmask[None, :], other=0.0)
            R -= tl.dot(Lji, Xi, input_precision="ieee")
        # the diagonal block, column-oriented substitution: x_s = R[s] / L[s, s], then
        # R[s+1:] -= L[s+1:, s] x_s (an outer product: one reduction per step, to read row s of R).
        # Only the strictly lower part of the block is read, and the diagonal unless UNIT.
        Y = tl.zeros([NB, BK], dtype=tl.float32)
        for s in tl.static_range(NB):
            row = rid == s
            g = tl.full([], j * NB + s, tl.int32)  # global row/column index of step s
            ys = tl.sum(tl.where(row[:, None], R, 0.0), axis=0)  # R[s, :]
            if not UNIT:
                ds = tl.load(Ab + g * (a_rs + a_cs), mask=g < n, other=1.0)
                ys = tl.math.div_rn(ys, tl.zeros_like(ys) + ds)
            Y = tl.where(row[:, None], ys[None, :], Y)
            lcol = tl.load(Ab + r * a_rs + g * a_cs, mask=(rid > s) & rmask, other=0.0)  # rows > g, so g < n
            R = R - lcol[:, None] * ys[None, :]
        tl.store(Xb + r[:, None] * x_rs + cols[None, :] * x_cs, Y, mask=rmask[:, None] & cmask[None, :])
        tl.debug_barrier()  # X_j visible to every thread of the program before the next block row


def trsm_small(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, n: int, k: int, batch: int,
               a_map: tuple[int, int, int, int], b_map: tuple[int, int, int, int],
               x_map: tuple[int, int, int, int], unit: bool) -> None:
    """``X = L⁻¹ B`` for ``batch`` logical lower ``n × n`` triangles (``n <= 64``), float32.

    ``a``, ``b``, ``x`` are the physical tensors; each ``*_map`` is (offset, batch stride, row
    stride, column stride) in elements of the logical matrix within it (strides may be negative
    or 0). ``x`` is written; nothing else is.
    """
    if not 0 < n <= 64:
        raise ValueError(f"trsm_small: n must be in 1..64, got {n}")
    nblk = -(-n // NB)
    bk = 64 if k > 32 else (32 if k > 16 else 16)
    grid = (batch, -(-k // bk))
    _trsm_small_kernel[grid](a, b, x, n, k, *a_map, *b_map, *x_map,
                             UNIT=bool(unit), NB=NB, NBLK=nblk, BK=bk, num_warps=4)
