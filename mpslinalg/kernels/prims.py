"""Primitive element operations and scalar arithmetic on "structure of arrays" matrix entries.

A family's elementwise program (``mpslinalg.small.Program``) is written once over these. An entry
is a tensor of shape (batch,) (real) or a pair (re, im) of such tensors (complex); complex
arithmetic is spelled out on real values, exactly as ``metal/complex.h`` does on float2, so the
torch program, the Metal kernel and the generated C/Triton perform the same operations.

:class:`TorchPrims` implements the primitive set on torch tensors; :mod:`mpslinalg.small.c` and
:mod:`mpslinalg.small.triton` implement it on symbolic values that print code. :class:`RealOps` /
:class:`ComplexOps` are the scalar arithmetic over any of them. Also here: exact powers of two by
bit manipulation and doubled-precision dot products (error-free transformations).
"""

from __future__ import annotations

import torch

__all__ = ["FMT", "ComplexOps", "RealOps", "TorchPrims", "dot2", "exponent", "pow2"]

# ---------------------------------------------------------------------------------------------
# Scalar arithmetic on "structure of arrays" entries.
#
# A matrix entry is a tensor of shape (batch,) (real) or a pair (re, im) of such tensors (complex).
# Complex arithmetic is spelled out on real tensors — exactly as metal/complex.h does on float2 —
# so the torch program, the Metal kernel and a torch.compile'd graph (inductor handles real
# tensors best) perform the same operations.
# ---------------------------------------------------------------------------------------------


class TorchPrims:
    """Primitive element operations on torch tensors (the C and Triton versions print code:
    :mod:`mpslinalg.small.c`, :mod:`mpslinalg.small.triton`)."""

    def __init__(self, real_dtype: torch.dtype):
        self.real_dtype = real_dtype
        self.split_factor = FMT[real_dtype][3]  # Dekker's split constant of the dtype
        self.emax = FMT[real_dtype][2] - 1  # largest exponent of a normal power of two

    @staticmethod
    def imax(a, b):
        return torch.maximum(a, b)

    @staticmethod
    def iclamp(x, lo: int, hi: int):
        return x.clamp(lo, hi)

    where = staticmethod(torch.where)
    maximum = staticmethod(torch.maximum)

    @staticmethod
    def abs(x):
        return x.abs()

    def exponent(self, m):
        return exponent(m)

    def pow2(self, e):
        return pow2(e, self.real_dtype)

    @staticmethod
    def izeros(ref):
        return torch.zeros_like(ref, dtype=torch.int32)

    @staticmethod
    def bzeros(ref):
        return torch.zeros_like(ref, dtype=torch.bool)

    @staticmethod
    def iconst(ref, k: int):
        return torch.full_like(ref, k, dtype=torch.int32)

    @staticmethod
    def to_i32(x):
        return x.to(torch.int32)

    @staticmethod
    def zeros(ref):
        return torch.zeros_like(ref)

    @staticmethod
    def ones(ref):
        return torch.ones_like(ref)

    @staticmethod
    def isfinite(x):
        return torch.isfinite(x)

    @staticmethod
    def nans(ref):
        return torch.full_like(ref, float("nan"))


class RealOps:
    """Scalar arithmetic on real entries, over primitives ``P`` (torch or symbolic Triton)."""

    complex = False

    def __init__(self, P):
        self.P = P

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        return a / b

    def neg(self, a):
        return -a

    def abs1(self, a):
        return self.P.abs(a)

    def scale(self, a, s):
        """``a * s`` for a real ``s`` (a power of two)."""
        return a * s

    def is_zero(self, a):
        return a == 0.0

    def where(self, c, a, b):
        return self.P.where(c, a, b)

    def zero_like(self, a):
        return self.P.zeros(a)

    def one_like(self, a):
        return self.P.ones(a)

    def unsqueeze(self, a):
        return a.unsqueeze(-1)

    def ref(self, a):
        """A real tensor of the batch shape, to create index/flag tensors like."""
        return a


class ComplexOps(RealOps):
    """Complex arithmetic on (re, im) pairs of real entries, as metal/complex.h does on float2."""

    complex = True

    def add(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def sub(self, a, b):
        return (a[0] - b[0], a[1] - b[1])

    def mul(self, a, b):  # cmul
        return (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0])

    def div(self, a, b):  # cdiv: Smith's algorithm, both branches evaluated, one selected
        br, bi = b
        big_r = self.P.abs(br) >= self.P.abs(bi)
        r1 = bi / br
        d1 = br + bi * r1
        x1 = (a[0] + a[1] * r1) / d1
        y1 = (a[1] - a[0] * r1) / d1
        r2 = br / bi
        d2 = br * r2 + bi
        x2 = (a[0] * r2 + a[1]) / d2
        y2 = (a[1] * r2 - a[0]) / d2
        return (self.P.where(big_r, x1, x2), self.P.where(big_r, y1, y2))

    def neg(self, a):
        return (-a[0], -a[1])

    def abs1(self, a):
        return self.P.abs(a[0]) + self.P.abs(a[1])

    def scale(self, a, s):
        return (a[0] * s, a[1] * s)

    def is_zero(self, a):
        return (a[0] == 0.0) & (a[1] == 0.0)

    def where(self, c, a, b):
        return (self.P.where(c, a[0], b[0]), self.P.where(c, a[1], b[1]))

    def zero_like(self, a):
        return (self.P.zeros(a[0]), self.P.zeros(a[0]))

    def one_like(self, a):
        return (self.P.ones(a[0]), self.P.zeros(a[0]))

    def unsqueeze(self, a):
        return (a[0].unsqueeze(-1), a[1].unsqueeze(-1))

    def ref(self, a):
        return a[0]


# ---------------------------------------------------------------------------------------------
# Powers of two, by bit manipulation (exact; the same integer arithmetic as the Metal kernel)
# ---------------------------------------------------------------------------------------------

FMT = {  # real dtype -> (int dtype, mantissa bits, exponent bias, Dekker split factor)
    torch.float32: (torch.int32, 23, 127, 4097.0),
    torch.float64: (torch.int64, 52, 1023, 134217729.0),
}
# Exponents are clamped to [-(bias - 1), bias - 1] so that 2^e is a normal number.


def exponent(m: torch.Tensor) -> torch.Tensor:
    """``e`` (int32) with ``2^e <= m < 2^(e+1)`` for normal ``m >= 0``, clamped to ``[-emax, emax]``.

    Zero and subnormal ``m`` give ``-emax``; Inf/NaN give ``emax``.
    """
    idt, mbits, bias, _ = FMT[m.dtype]
    biased = (m.view(idt) >> mbits) & (2 * bias + 1)
    emax = bias - 1
    return (biased - bias).clamp(-emax, emax).to(torch.int32)


def pow2(e: torch.Tensor, real_dtype: torch.dtype) -> torch.Tensor:
    """``2^e`` exactly, for integer ``e`` (clamped to ``[-emax, emax]``)."""
    idt, mbits, bias, _ = FMT[real_dtype]
    emax = bias - 1
    return ((e.clamp(-emax, emax).to(idt) + bias) << mbits).view(real_dtype)


# ---------------------------------------------------------------------------------------------
# Doubled-precision dot products (error-free transformations: Dekker's TwoProduct without FMA,
# Knuth's TwoSum). The Metal kernel uses fma() for TwoProduct; both are exact.
# ---------------------------------------------------------------------------------------------


def _split(a: torch.Tensor, factor: float):
    c = a * factor
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a: torch.Tensor, b: torch.Tensor, factor: float):
    p = a * b
    ah, al = _split(a, factor)
    bh, bl = _split(b, factor)
    err = al * bl - (((p - ah * bh) - al * bh) - ah * bl)
    return p, err


def dot2(terms, factor: float) -> torch.Tensor:
    """``sum(sign * a * b for sign, a, b in terms)`` as if in doubled precision (Ogita–Rump–Oishi)."""
    s = None
    c = None
    for sign, a, b in terms:
        p, e = _two_prod(a, b, factor)
        if sign < 0:
            p, e = -p, -e
        if s is None:
            s, c = p, e
            continue
        t = s + p
        bb = t - s
        q = (s - (t - bb)) + (p - bb)
        s = t
        c = c + (q + e)
    return s + c
