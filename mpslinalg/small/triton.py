"""The small family's program printed as one Triton kernel per (op, n, dtype): the CUDA torch path.

One lane per matrix, every entry in registers. The program (:class:`mpslinalg.small.Program`) is run
once on symbolic values whose operators print Triton code into a :class:`TritonEmitter`, so the
kernel performs exactly the operations of the torch program and of ``metal/small.metal``.
float32 and complex64 (as interleaved float32 pairs).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import torch

from ..kernels.codegen import SymArith, load_generated, warn_once

__all__ = ["TritonKernels", "triton_source"]

BLOCK = 128  # matrices per Triton program


class TritonEmitter:
    """Collects the lines of the kernel body being generated; every value is a new local."""

    def __init__(self):
        self.lines: list[str] = []

    def emit(self, expr: str) -> TSym:
        name = f"t{len(self.lines)}"
        self.lines.append(f"    {name} = {expr}")
        return TSym(self, name)

    @staticmethod
    def arg(x) -> str:
        if isinstance(x, TSym):
            return x.name
        if isinstance(x, bool):
            return "True" if x else "False"
        if isinstance(x, (int, float)):
            return repr(x)
        raise TypeError(f"cannot emit {type(x).__name__}")


class TSym(SymArith):
    """A value of the Triton kernel being generated: the name of a local variable."""

    __slots__ = ("em", "name")

    def __init__(self, em: TritonEmitter, name: str):
        self.em = em
        self.name = name

    def _bin(self, op: str, other, rev: bool = False):
        a, b = (self.em.arg(other), self.name) if rev else (self.name, self.em.arg(other))
        return self.em.emit(f"({a}) {op} ({b})")

    # Triton's "/" on float32 is an approximate division (2 ulp); div_rn rounds correctly, as
    # torch and Metal (no fast math) do.
    def __truediv__(self, o):
        return self.em.emit(f"tl.math.div_rn({self.name}, {self.em.arg(o)})")

    def __rtruediv__(self, o):
        return self.em.emit(f"tl.math.div_rn({self.em.arg(o)}, {self.name})")

    def __neg__(self):
        return self.em.emit(f"-({self.name})")


class TritonPrims:
    """The program's primitives (:class:`mpslinalg.kernels.prims.TorchPrims`), printed as Triton (float32)."""

    split_factor = 4097.0  # Dekker's split for float32 (2^12 + 1)
    emax = 126  # largest exponent of a normal float32 power of two

    def __init__(self, em: TritonEmitter):
        self.em = em

    def _call(self, fmt: str, *xs) -> TSym:
        return self.em.emit(fmt.format(*(self.em.arg(x) for x in xs)))

    def where(self, c, a, b):
        return self._call("tl.where({}, {}, {})", c, a, b)

    def maximum(self, a, b):  # NaN-propagating, like torch.maximum
        return self._call("tl.where(({0} != {0}) | ({0} > {1}), {0}, {1})", a, b)

    def imax(self, a, b):
        return self._call("tl.maximum({}, {})", a, b)

    def iclamp(self, x, lo: int, hi: int):
        return self._call(f"tl.minimum(tl.maximum({{}}, {int(lo)}), {int(hi)})", x)

    def abs(self, x):
        return self._call("tl.abs({})", x)

    def exponent(self, m):
        return self._call("tl.minimum(tl.maximum((({}.to(tl.int32, bitcast=True) >> 23) & 255) - 127, -126), 126)", m)

    def pow2(self, e):
        return self._call("((tl.minimum(tl.maximum({}, -126), 126) + 127) << 23).to(tl.float32, bitcast=True)", e)

    def izeros(self, ref):
        return self.em.emit("tl.zeros([BLOCK], dtype=tl.int32)")

    def bzeros(self, ref):
        return self.em.emit("tl.zeros([BLOCK], dtype=tl.int1)")

    def iconst(self, ref, k: int):
        return self.em.emit(f"tl.full([BLOCK], {int(k)}, tl.int32)")

    def to_i32(self, x):
        return self._call("({}).to(tl.int32)", x)

    def zeros(self, ref):
        return self.em.emit("tl.zeros([BLOCK], dtype=tl.float32)")

    def ones(self, ref):
        return self.em.emit("tl.full([BLOCK], 1.0, tl.float32)")

    def isfinite(self, x):
        return self._call("tl.abs({}) <= 3.4028234663852886e+38", x)

    def nans(self, ref):
        return self.em.emit("tl.full([BLOCK], 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)")


def triton_source(program, kind: str, n: int, is_complex: bool) -> str:
    """Source of the Triton kernel ``kind`` ("inv", "det", "solve") for n×n float32/complex64.

    Parameters
    ----------
    program
        The family's program (:class:`mpslinalg.small.Program`): ``ops``, ``inv``, ``det``,
        ``solve_factor``, ``solve_rhs``.
    kind : str
        Which kernel contract to print.
    n : int
        Matrix order.
    is_complex : bool
        complex64 (interleaved pairs) instead of float32.
    """
    w = 2 if is_complex else 1
    em = TritonEmitter()
    ops = program.ops(TritonPrims(em), is_complex)

    def entry(names):
        syms = [TSym(em, s) for s in names]
        return tuple(syms) if is_complex else syms[0]

    loads = []
    a = []
    for i in range(n):
        row = []
        for j in range(n):
            names = [f"a{i}_{j}_{c}" for c in range(w)]
            loads += [f"    {s} = tl.load(A + base + {(i * n + j) * w + c}, mask=mask, other=0.0)"
                      for c, s in enumerate(names)]
            row.append(entry(names))
        a.append(row)

    def parts(v):
        return v if is_complex else (v,)

    stores = []
    if kind == "inv":
        x, info = program.inv(ops, a)
        for i in range(n):
            for j in range(n):
                stores += [f"    tl.store(OUT0 + base + {(i * n + j) * w + c}, {em.arg(v)}, mask=mask)"
                           for c, v in enumerate(parts(x[i][j]))]
        stores.append(f"    tl.store(OUT1 + offs, {em.arg(info)}, mask=mask)")
        outs = "OUT0, OUT1"
    elif kind == "det":
        mant, expo, info = program.det(ops, a)
        stores += [f"    tl.store(OUT0 + offs * {w} + {c}, {em.arg(v)}, mask=mask)" for c, v in enumerate(parts(mant))]
        stores.append(f"    tl.store(OUT1 + offs, {em.arg(expo)}, mask=mask)")
        stores.append(f"    tl.store(OUT2 + offs, {em.arg(info)}, mask=mask)")
        outs = "OUT0, OUT1, OUT2"
    elif kind == "solve":  # program (i, c) handles right-hand-side column c of matrix block i
        state, info = program.solve_factor(ops, a)
        # masks are block-shaped (offs * 0 + col): Triton's interpreter rejects scalar ones
        loads += ["    col = tl.program_id(1)", "    cmask = mask & ((offs * 0 + col) < K)",
                  f"    rbase = (offs * {n} * K + col) * {w}"]
        b = []
        for i in range(n):
            names = [f"r{i}_{c}" for c in range(w)]
            loads += [f"    {s} = tl.load(RHS + rbase + {i} * K * {w} + {c}, mask=cmask, other=0.0)"
                      for c, s in enumerate(names)]
            b.append(entry(names))
        xs = program.solve_rhs(ops, state, b, lambda t: t)
        for i in range(n):
            stores += [f"    tl.store(OUT0 + rbase + {i} * K * {w} + {c}, {em.arg(v)}, mask=cmask)"
                       for c, v in enumerate(parts(xs[i]))]
        stores.append(f"    tl.store(OUT1 + offs, {em.arg(info)}, mask=mask & ((offs * 0 + col) == 0))")
        outs = "RHS, OUT0, OUT1, K"
    else:
        raise ValueError(f"triton_source: kind must be 'inv', 'det' or 'solve', got {kind!r}")
    head = [
        "# Generated by mpslinalg.small.triton: do not edit.",
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        f"def kernel(A, {outs}, B, BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < B",
        f"    base = offs * {n * n * w}",
    ]
    return "\n".join(head + loads + em.lines + stores) + "\n"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class TritonKernels:
    """The generated Triton kernels of one program: compiled on first use, cached per process.

    A kernel that fails to build or launch (an old Triton, a compiler error) is not tried again;
    the first such failure warns once per process and the caller falls back to the next path.
    """

    def __init__(self, program):
        self.program = program
        self.kernels: dict[tuple[str, int, bool], Callable] = {}
        self.failed: set[tuple[str, int, bool]] = set()

    @staticmethod
    def available() -> bool:
        """Triton is importable (it ships with CUDA builds of torch)."""
        return importlib.util.find_spec("triton") is not None

    def usable(self, name: str, A: torch.Tensor) -> bool:
        """Whether ``run(name, A, ...)`` is worth trying for this input (CUDA, float32/complex64)."""
        return (A.device.type == "cuda" and A.dtype in (torch.float32, torch.complex64)
                and (name, A.shape[-1], A.is_complex()) not in self.failed and self.available())

    def kernel(self, kind: str, n: int, is_complex: bool) -> Callable:
        """The generated kernel (Triton compiles it on its first launch)."""
        key = (kind, n, is_complex)
        fn = self.kernels.get(key)
        if fn is None:
            source = triton_source(self.program, kind, n, is_complex)
            fn = load_generated(source, f"small_{kind}_{n}_{'c' if is_complex else 'f'}").kernel
            self.kernels[key] = fn
        return fn

    def try_run(self, name: str, *args: torch.Tensor):
        """:meth:`run`, or None after recording (and warning once about) a failure."""
        key = (name, args[0].shape[-1], args[0].is_complex())
        try:
            return self.run(name, *args)
        except Exception as exc:  # noqa: BLE001 - any failure of generated code falls back
            self.failed.add(key)
            warn_once(f"triton:{name}", f"mpslinalg: the generated Triton kernel for {name} (n = {key[1]}) "
                      f"failed ({type(exc).__name__}: {exc}); using the torch-op program instead "
                      "(same results, slower)")
            return None

    def run(self, name: str, A: torch.Tensor, *args: torch.Tensor):
        """Run kernel ``name`` ("inv", "det", or "solve" with right-hand sides ``B``) on contiguous
        (batch, n, n) ``A`` (and (batch, n, k) ``B``); returns the contract's outputs."""
        n, batch = A.shape[-1], A.shape[0]
        cplx = A.is_complex()
        kern = self.kernel(name, n, cplx)
        grid = (_cdiv(batch, BLOCK),)
        view = torch.view_as_real if cplx else (lambda t: t)
        info = torch.empty(batch, dtype=torch.int32, device=A.device)
        if name == "inv":
            X = torch.empty_like(A)
            kern[grid](view(A), view(X), info, batch, BLOCK=BLOCK)
            return X, info
        if name == "solve":
            B = args[0]
            X = torch.empty_like(B)
            k = B.shape[-1]
            grid2 = (grid[0], max(k, 1))  # k = 0: one column of programs that only writes info
            kern[grid2](view(A), view(B), view(X), info, k, batch, BLOCK=BLOCK)
            return X, info
        mant = torch.empty(batch, dtype=A.dtype, device=A.device)
        expo = torch.empty(batch, dtype=torch.int32, device=A.device)
        kern[grid](view(A), view(mant), expo, info, batch, BLOCK=BLOCK)
        return mant, expo, info
