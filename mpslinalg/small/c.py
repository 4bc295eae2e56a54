"""The small family's program printed as C: the CPU torch path.

One loop iteration per matrix, straight-line code with every entry in registers, and a second copy
of the same code on GCC/Clang vector types that handles 4 (SSE2/NEON) or 8 (AVX2) matrices per
iteration. Compiled once per (n, dtype) by the emulator's compiler (one discovery:
:func:`mpslinalg.emulator._toolchain.find_compiler`, C mode) into the emulator's cache directory,
called through ``ctypes`` over the batch split across torch's intra-op threads. This is what
inductor does for elementwise graphs, without the 40+ batch-sized temporaries it materialises for
this program (measured: scalar code, < 2x torch.linalg.inv after a ~25 s compile).

The program (:class:`mpslinalg.small.Program`) is run on symbolic values whose operators print C
into a :class:`CEmitter`, so the C performs exactly the operations of the torch program.
"""

from __future__ import annotations

import ctypes

import torch

from ..kernels.codegen import CLibraries, SymArith, lanes_and_flags

__all__ = ["CKernels", "c_source"]


class CEmitter:
    """Collects the C statements being generated: one typed local per value.

    ``vector`` switches to the multi-lane version (``lanes`` matrices per vector); ``prefix``
    names the locals of the current phase (distinct per phase: no shadowing in nested C blocks).
    """

    def __init__(self, vector: bool = False, lanes: int = 4, prefix: str = "t"):
        self.vector = vector
        self.lanes = lanes
        self.prefix = prefix
        self.lines: list[str] = []

    def ctype(self, ty: str) -> str:
        if self.vector:
            return "vf" if ty == "f" else "vi"
        return "float" if ty == "f" else "int32_t"

    def arg(self, x) -> tuple[str, str]:
        """(C expression, type tag) of a value: "f" float, "i" int32, "b" int used as a flag."""
        if isinstance(x, CSym):
            return x.name, x.ty
        if isinstance(x, bool):
            raise TypeError("boolean literal in the program")
        if isinstance(x, int):
            return (f"((vi){{}} + {x})" if self.vector else str(x)), "i"
        if isinstance(x, float):
            return (f"((vf){{}} + {x!r}f)" if self.vector else f"{x!r}f"), "f"
        raise TypeError(f"cannot emit {type(x).__name__}")

    def emit(self, expr: str, ty: str) -> CSym:
        name = f"{self.prefix}{len(self.lines)}"
        self.lines.append(f"      {self.ctype(ty)} {name} = {expr};")
        return CSym(self, name, ty)

    def load(self, n: int, w: int, pointer: str, prefix: str, out: list[str], stride: str = "1",
             lane_stride: int = 0):
        """Entries of an n×n matrix (or, with ``stride``, an n-vector) read from ``pointer`` into
        locals; declarations appended to ``out``. Lane ``l`` reads ``pointer[l * lane_stride + ...]``."""
        rows = []
        for i in range(n):
            row = []
            for j in range(n if stride == "1" else 1):
                parts = []
                for c in range(w):
                    name = f"{prefix}{i}_{j}_{c}"
                    idx = f"{(i * n + j) * w + c}" if stride == "1" else f"{i} * {stride} + {c}"
                    if self.vector:
                        lanes = ", ".join(f"{pointer}[{lane * lane_stride} + {idx}]" for lane in range(self.lanes))
                        out.append(f"      vf {name} = {{{lanes}}};")
                    else:
                        out.append(f"      float {name} = {pointer}[{idx}];")
                    parts.append(CSym(self, name, "f"))
                row.append(tuple(parts) if w == 2 else parts[0])
            rows.append(row)
        return rows

    def store(self, vals, w: int, pointer: str, index: str, lane_stride: int = 0) -> str:
        parts = vals if w == 2 else (vals,)
        out = []
        for c in range(w):
            v = self.arg(parts[c])[0]
            if self.vector:
                out += [f"      {pointer}[{lane * lane_stride} + {index} + {c}] = {v}[{lane}];"
                        for lane in range(self.lanes)]
            else:
                out.append(f"      {pointer}[{index} + {c}] = {v};")
        return "\n".join(out)

    def int_store(self, v, pointer: str) -> str:
        name = self.arg(v)[0]
        if self.vector:
            return "\n".join(f"      {pointer}[b + {lane}] = {name}[{lane}];" for lane in range(self.lanes))
        return f"      {pointer}[b] = {name};"


class CSym(SymArith):
    """A value of the C function being generated: a local variable and its type tag."""

    __slots__ = ("em", "name", "ty")

    def __init__(self, em: CEmitter, name: str, ty: str):
        self.em = em
        self.name = name
        self.ty = ty  # "f" float, "i" int32_t, "b" int used as a flag

    def _bin(self, op: str, other, rev: bool = False):
        o, oty = self.em.arg(other)
        a, b = (o, self.name) if rev else (self.name, o)
        if op in (">", ">=", "<", "==", "!="):
            ty = "b"
        elif op in ("&", "|", "^"):
            ty = "b" if self.ty == "b" and oty == "b" else "i"
        else:
            ty = "f" if "f" in (self.ty, oty) else "i"
        return self.em.emit(f"({a}) {op} ({b})", ty)

    def __neg__(self):
        return self.em.emit(f"-({self.name})", self.ty)


class CPrims:
    """The program's primitives (:class:`mpslinalg.kernels.prims.TorchPrims`), printed as calls of the
    ``sm_*`` helpers of :data:`PRELUDE` (scalar) or ``vsm_*`` of :data:`PRELUDE_VEC` (vectors:
    flags are 0/-1 masks)."""

    split_factor = 4097.0  # Dekker's split for float32 (2^12 + 1)
    emax = 126  # largest exponent of a normal float32 power of two

    def __init__(self, em: CEmitter):
        self.em = em
        self.pre = "vsm_" if em.vector else "sm_"

    def _call(self, fn: str, ty: str, *xs) -> CSym:
        return self.em.emit(f"{self.pre}{fn}({', '.join(self.em.arg(x)[0] for x in xs)})", ty)

    def where(self, c, a, b):
        is_f = "f" in (self.em.arg(a)[1], self.em.arg(b)[1])
        return self._call("where_f" if is_f else "where_i", "f" if is_f else "i", c, a, b)

    def maximum(self, a, b):  # NaN-propagating, like torch.maximum
        return self._call("max", "f", a, b)

    def imax(self, a, b):
        return self._call("imax", "i", a, b)

    def iclamp(self, x, lo: int, hi: int):
        return self._call("iclamp", "i", x, int(lo), int(hi))

    def abs(self, x):
        return self._call("abs", "f", x)

    def exponent(self, m):
        return self._call("exponent", "i", m)

    def pow2(self, e):
        return self._call("pow2", "f", e)

    def izeros(self, ref):
        return self.em.emit(self.em.arg(0)[0], "i")

    def bzeros(self, ref):
        return self.em.emit(self.em.arg(0)[0], "b")

    def iconst(self, ref, k: int):
        return self.em.emit(self.em.arg(int(k))[0], "i")

    def to_i32(self, x):
        name, ty = self.em.arg(x)
        return self._call("flag_to_int", "i", x) if ty == "b" else self.em.emit(name, "i")

    def zeros(self, ref):
        return self.em.emit(self.em.arg(0.0)[0], "f")

    def ones(self, ref):
        return self.em.emit(self.em.arg(1.0)[0], "f")

    def isfinite(self, x):
        return self._call("isfinite", "b", x)

    def nans(self, ref):
        return self._call("nan", "f")


PRELUDE = """/* Generated by mpslinalg.small.c: do not edit. */
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float sm_where_f(int32_t c, float a, float b) { return c ? a : b; }
static inline int32_t sm_where_i(int32_t c, int32_t a, int32_t b) { return c ? a : b; }
static inline float sm_abs(float x) { return fabsf(x); }
static inline float sm_max(float a, float b) { return (a != a || a > b) ? a : b; }
static inline int32_t sm_imax(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int32_t sm_iclamp(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : (x > hi ? hi : x); }
static inline int32_t sm_flag_to_int(int32_t c) { return c ? 1 : 0; }
static inline int32_t sm_isfinite(float x) { return fabsf(x) <= 3.40282346638528859812e+38f; }
static inline float sm_nan(void) { return NAN; }

static inline int32_t sm_exponent(float m) {
  int32_t b;
  memcpy(&b, &m, 4);
  b = ((b >> 23) & 255) - 127;
  return b < -126 ? -126 : (b > 126 ? 126 : b);
}

static inline float sm_pow2(int32_t e) {
  e = e < -126 ? -126 : (e > 126 ? 126 : e);
  int32_t b = (e + 127) << 23;
  float f;
  memcpy(&f, &b, 4);
  return f;
}
"""

PRELUDE_VEC = """
/* Multi-lane versions (GCC/Clang vector extensions; comparisons give 0/-1 masks, casts between
   same-size vector types reinterpret the bits). */
typedef float vf __attribute__((vector_size(VEC_BYTES)));
typedef int32_t vi __attribute__((vector_size(VEC_BYTES)));

static inline vf vsm_where_f(vi c, vf a, vf b) { return (vf)((c & (vi)a) | (~c & (vi)b)); }
static inline vi vsm_where_i(vi c, vi a, vi b) { return (c & a) | (~c & b); }
static inline vf vsm_abs(vf x) { return (vf)((vi)x & 0x7fffffff); }
static inline vf vsm_max(vf a, vf b) { return vsm_where_f((a != a) | (a > b), a, b); }
static inline vi vsm_imax(vi a, vi b) { return vsm_where_i(a > b, a, b); }
static inline vi vsm_iclamp(vi x, vi lo, vi hi) { return vsm_where_i(x < lo, lo, vsm_where_i(x > hi, hi, x)); }
static inline vi vsm_flag_to_int(vi c) { return c & 1; }
static inline vi vsm_isfinite(vf x) { return vsm_abs(x) <= ((vf){} + 3.40282346638528859812e+38f); }
static inline vf vsm_nan(void) { return (vf){} + NAN; }
static inline vi vsm_exponent(vf m) {
  vi b = (((vi)m >> 23) & 255) - 127;
  b = vsm_where_i(b < -126, (vi){} - 126, b);
  return vsm_where_i(b > 126, (vi){} + 126, b);
}
static inline vf vsm_pow2(vi e) {
  e = vsm_where_i(e < -126, (vi){} - 126, e);
  e = vsm_where_i(e > 126, (vi){} + 126, e);
  return (vf)((e + 127) << 23);
}
"""


def _inv_det(program, n: int, w: int, vector: bool, lanes: int, suffix: str) -> str:
    """``small_inv<suffix>`` and ``small_det<suffix>`` (one matrix, or ``lanes`` per iteration)."""
    nn = n * n * w
    step = lanes if vector else 1
    ls = nn if vector else 0
    is_complex = w == 2
    em = CEmitter(vector, lanes)
    loads: list[str] = []
    a = em.load(n, w, "p", "a", loads, lane_stride=ls)
    x, info = program.inv(program.ops(CPrims(em), is_complex), a)
    stores = [em.store(x[i][j], w, "q", str((i * n + j) * w), ls) for i in range(n) for j in range(n)]
    stores.append(em.int_store(info, "info"))
    inv = (f"""
static void small_inv{suffix}(const float *A, float *X, int32_t *info, int64_t b0, int64_t b1) {{
  for (int64_t b = b0; b < b1; b += {step}) {{
    const float *p = A + b * {nn};
    float *q = X + b * {nn};
    {{
""" + "\n".join(loads + em.lines + stores) + "\n    }\n  }\n}\n")
    em = CEmitter(vector, lanes)
    loads = []
    a = em.load(n, w, "p", "a", loads, lane_stride=ls)
    mant, expo, info = program.det(program.ops(CPrims(em), is_complex), a)
    stores = [em.store(mant, w, "mant", f"b * {w}", w), em.int_store(expo, "expo"), em.int_store(info, "info")]
    det = (f"""
static void small_det{suffix}(const float *A, float *mant, int32_t *expo, int32_t *info, int64_t b0,
                              int64_t b1) {{
  for (int64_t b = b0; b < b1; b += {step}) {{
    const float *p = A + b * {nn};
    {{
""" + "\n".join(loads + em.lines + stores) + "\n    }\n  }\n}\n")
    return inv + det


def c_source(program, n: int, is_complex: bool, lanes: int = 4) -> str:
    """C source of ``small_inv``, ``small_det`` and ``small_solve`` for n×n float32/complex64.

    Parameters
    ----------
    program
        The family's program (:class:`mpslinalg.small.Program`).
    n : int
        Matrix order.
    is_complex : bool
        complex64 (interleaved pairs) instead of float32.
    lanes : int
        Matrices per vector iteration of ``small_inv``/``small_det`` (4: SSE2/NEON, 8: AVX2).
    """
    w = 2 if is_complex else 1
    nn = n * n * w
    funcs = [_inv_det(program, n, w, False, lanes, "_1"), _inv_det(program, n, w, True, lanes, "_v")]
    funcs.append(f"""
void small_inv(const float *A, float *X, int32_t *info, int64_t b0, int64_t b1) {{
  int64_t mid = b0 + (b1 - b0) / {lanes} * {lanes};
  small_inv_v(A, X, info, b0, mid);
  small_inv_1(A, X, info, mid, b1);
}}

void small_det(const float *A, float *mant, int32_t *expo, int32_t *info, int64_t b0, int64_t b1) {{
  int64_t mid = b0 + (b1 - b0) / {lanes} * {lanes};
  small_det_v(A, mant, expo, info, b0, mid);
  small_det_1(A, mant, expo, info, mid, b1);
}}
""")
    # solve (scalar): factor once per matrix, then a run-time loop over the k columns
    em = CEmitter()
    ops = program.ops(CPrims(em), is_complex)
    loads: list[str] = []
    a = em.load(n, w, "p", "a", loads)
    state, info = program.solve_factor(ops, a)
    head = loads + em.lines + [f"      info[b] = {em.arg(info)[0]};"]
    em.lines, em.prefix = [], "u"  # the column phase: new locals, the factors' names stay valid
    col_loads: list[str] = []
    bcol = em.load(n, w, "rhs", "r", col_loads, stride=f"k * {w}")
    xs = program.solve_rhs(ops, state, [bcol[i][0] for i in range(n)], lambda t: t)
    col_stores = [em.store(xs[i], w, "out", f"{i} * k * {w}") for i in range(n)]
    funcs.append(f"""
void small_solve(const float *A, const float *B, float *X, int32_t *info, int64_t k, int64_t b0,
                 int64_t b1) {{
  for (int64_t b = b0; b < b1; ++b) {{
    const float *p = A + b * {nn};
    {{
""" + "\n".join(head) + f"""
      for (int64_t col = 0; col < k; ++col) {{
      const float *rhs = B + (b * {n} * k + col) * {w};
      float *out = X + (b * {n} * k + col) * {w};
""" + "\n".join(col_loads + em.lines + col_stores) + "\n      }\n    }\n  }\n}\n")
    return PRELUDE + PRELUDE_VEC.replace("VEC_BYTES", str(4 * lanes)) + "".join(funcs)


FLAGS = ["-x", "c", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-Wno-psabi"]


class CKernels(CLibraries):
    """The generated C of one program: built once per (n, complex), cached on disk, run in parallel
    (the shared build machinery: :class:`mpslinalg.kernels.codegen.CLibraries`)."""

    def __init__(self, program, tag: str = "small"):
        super().__init__(tag, fallback="torch.linalg (slower for large batches; see mpslinalg.small.cpu_path())")
        self.program = program

    def source(self, n: int, is_complex: bool) -> tuple[str, list[str], str]:
        lanes, extra = lanes_and_flags()
        return (c_source(self.program, n, is_complex, lanes), FLAGS + extra,
                f"{self.tag}_c_{n}_{'c' if is_complex else 'f'}")

    def bind(self, lib: ctypes.CDLL, n: int, is_complex: bool) -> None:
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        lib.small_inv.argtypes = [vp, vp, vp, i64, i64]
        lib.small_det.argtypes = [vp, vp, vp, vp, i64, i64]
        lib.small_solve.argtypes = [vp, vp, vp, vp, i64, i64, i64]

    def run(self, name: str, A: torch.Tensor, *args: torch.Tensor):
        """Run ``name`` ("inv", "det", or "solve" with ``B``) on contiguous CPU (batch, n, n) ``A``."""
        n, batch = A.shape[-1], A.shape[0]
        lib = self.library(n, A.is_complex())
        info = torch.empty(batch, dtype=torch.int32)
        if name == "inv":
            X = torch.empty_like(A)
            self._parallel(lib.small_inv, batch, A.data_ptr(), X.data_ptr(), info.data_ptr())
            return X, info
        if name == "det":
            mant = torch.empty(batch, dtype=A.dtype)
            expo = torch.empty(batch, dtype=torch.int32)
            self._parallel(lib.small_det, batch, A.data_ptr(), mant.data_ptr(), expo.data_ptr(), info.data_ptr())
            return mant, expo, info
        B = args[0]
        X = torch.empty_like(B)
        self._parallel(lib.small_solve, batch, A.data_ptr(), B.data_ptr(), X.data_ptr(), info.data_ptr(),
                       B.shape[-1])
        return X, info
