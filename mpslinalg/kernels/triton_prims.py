"""Triton helpers every family's CUDA kernels share: complex tiles loaded and stored as interleaved
float pairs (one 8-byte access an element), and tile extents. Imported only where Triton is (CUDA
paths): it imports ``triton``."""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["cload", "cstore", "pow2"]


@triton.jit
def cload(ptr, off, mask, COMPLEX: tl.constexpr):
    """``(re, im)`` of the 2-D tile of elements at float offsets ``off`` (``2 x`` the element index for
    complex64; ``im`` zero for float32): complex as one 8-byte load an element, not two 4-byte ones."""
    if COMPLEX:
        two = tl.arange(0, 2)[None, None, :]
        re, im = tl.split(tl.load(ptr + off[:, :, None] + two, mask=mask[:, :, None] & (two < 2), other=0.0))
    else:
        re = tl.load(ptr + off, mask=mask, other=0.0)
        im = tl.zeros_like(re)
    return re, im


@triton.jit
def cstore(ptr, off, re, im, mask, COMPLEX: tl.constexpr):
    """Store the 2-D tile ``re + i im`` (``re`` only for float32) at float offsets ``off`` (as :func:`cload`)."""
    if COMPLEX:
        two = tl.arange(0, 2)[None, None, :]
        tl.store(ptr + off[:, :, None] + two, tl.join(re, im), mask=mask[:, :, None] & (two < 2))
    else:
        tl.store(ptr + off, re, mask=mask)


def pow2(x: int) -> int:
    """The power of two >= ``x`` (at least 2): a Triton tile extent."""
    return max(2, 1 << (max(x, 1) - 1).bit_length())
