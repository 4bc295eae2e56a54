"""Tests of the Metal lint (``mpslinalg.emulator.lint``, DESIGN.md §5 "Lint").

Two properties matter and both are asserted exactly (the lint's output is discrete, so every
assertion is an equality, not a tolerance):

* every rule catches a violating snippet, with the right rule name at the right line
  (``[(rule, line)] == expected``: a missed problem *and* any extra (false) problem fail);
* valid, realistic MSL -- barriers, simdgroup collectives, templates instantiated through
  ``[[host_name]]`` (directly and through macros), ``float2`` complex arithmetic, exactly 32 KiB
  of threadgroup memory, comments and strings that mention forbidden things -- gives no problem
  at all, because the emulator lints every source it compiles.
"""

from __future__ import annotations

import re

import pytest

from mpslinalg.emulator.lint import (
    RULES,
    THREADGROUP_MEMORY_LIMIT,
    LintProblem,
    MetalLintError,
    check_source,
    lint_file,
    lint_source,
)

MARK = "// <-"


def found(source: str, **kw) -> list[tuple[str, int]]:
    return [(p.rule, p.line) for p in lint_source(source, **kw)]


def marked(source: str) -> list[int]:
    """1-based numbers of the lines carrying the ``// <-`` marker."""
    return [i for i, line in enumerate(source.splitlines(), start=1) if MARK in line]


# A valid, realistic kernel file. Every construct here is legal MSL; the lint must accept it.
VALID = r"""
#include <metal_stdlib>
#include "complex.h"
using namespace metal;

// Words the lint must not see in comments: double, std::sqrt, printf("x"), malloc, goto, new.
/* A block comment too: long double, throw, (float2)x, texture2d, thread_local
   spanning lines */
constant constexpr int NB = 32;
constant int LD = NB + 1;
constant float SFMIN = 1.17549435e-38f;
constant float2 kUnits[2] = {float2(1.0f, 0.0f), float2(0.0f, 1.0f)};
#define TILE 16
#define TG_FLOATS (TILE * TILE)
enum { kWarp = 32, kMaxWarps = 1024 / kWarp };

#if 0
double this_is_compiled_out(double x) { return std::sqrt(x); }
#endif

struct Pivot {
  float value;
  int index;
};

// Overloads of the same arity calling each other are not recursion.
inline float abs1(float a) { return metal::abs(a); }
inline float abs1(float2 a) { return abs1(a.x) + abs1(a.y); }

inline float2 cmul2(float2 a, float2 b) {
  return float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// Compile-time recursion through a template argument terminates in the compiler.
template <int N>
inline float unrolled_sum(thread const float* v) {
  return v[N - 1] + unrolled_sum<N - 1>(v);
}
template <>
inline float unrolled_sum<0>(thread const float* v) {
  return 0.0f;
}

// A parenthesised declarator is a declaration, not a vector cast.
inline float trace4(thread float4 (&m)[4]) { return m[0].x + m[1].y + m[2].z + m[3].w; }

inline Pivot pick(Pivot a, Pivot b) { return (b.value > a.value) ? b : a; }

kernel void reduce_max(device const float* x [[buffer(0)]],
                       device float* out [[buffer(1)]],
                       constant long& n [[buffer(2)]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]],
                       uint warp [[simdgroup_index_in_threadgroup]],
                       uint ntg [[threads_per_threadgroup]]) {
  threadgroup float partial[kMaxWarps];
  const char* note = "strings may say double, std::, printf( and (float2)x";
  float std = 0.0f;            // a variable named std is fine
  float free = std;            // so is one named free
  float v = -INFINITY;
  for (long i = tid; i < n; i += ntg) {
    v = max(v, x[i]);
  }
  v = simd_max(v);
  if (lane == 0) {
    partial[warp] = v;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (warp == 0) {
    v = simd_max(lane < (ntg + 31) / 32 ? partial[lane] : -INFINITY);
    if (lane == 0) {
      out[0] = v + free;
    }
  }
}

template <typename T>
kernel void tile_kernel(device T* a [[buffer(0)]],
                        device int* info [[buffer(1)]],
                        constant long& n [[buffer(2)]],
                        uint2 tid [[thread_position_in_threadgroup]],
                        uint2 gid [[threadgroup_position_in_grid]]) {
  threadgroup T tile[NB * 128];          // float: 16 KiB, float2: 32 KiB
  const int m = 4;
  float local[m];                        // a const with a constant initializer
  int scratch[TG_FLOATS];                // a macro constant
  float4 acc = float4(0.0f);
  float f = (float)tid.x;                // a scalar C-style cast is a conversion, allowed
  uint bits = as_type<uint>(f);
  size_t words = sizeof(float2) - 1;     // sizeof(vector) is not a cast
  T z = static_cast<T>(f);
  for (int k = 0; k < m; ++k) {
    local[k] = float(k);
  }
  scratch[0] = int(bits + words);
  tile[tid.y * NB + tid.x] = z;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  a[gid.x] = tile[(tid.x + 1) % NB] + T(local[0] + acc.x + unrolled_sum<4>(local));
  info[gid.x] = scratch[0];
}

template [[host_name("tile_kernel_f32")]] kernel void tile_kernel<float>(
    device float*, device int*, constant long&, uint2, uint2);
template [[host_name("tile_kernel_c64")]] kernel void tile_kernel<float2>(
    device float2*, device int*, constant long&, uint2, uint2);

template <typename T, int N>
kernel void lu_small(device T* A [[buffer(0)]],
                     uint tid [[thread_index_in_threadgroup]]) {
  threadgroup T s[N * (N + 1)];
  threadgroup int pivot_row;
  s[tid] = A[tid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0) {
    pivot_row = 0;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  A[tid] = s[tid + pivot_row];
}

#define INSTANTIATE_LU(T, N)                                                \
  template [[host_name("lu_small_" #T "_" #N)]] kernel void lu_small<T, N>( \
      device T*, uint);
INSTANTIATE_LU(float, 32)
INSTANTIATE_LU(float2, 32)
INSTANTIATE_LU(float2, 63)

kernel void exactly_32k(device float2* x [[buffer(0)]],
                        uint t [[thread_position_in_grid]],
                        uint l [[thread_index_in_threadgroup]]) {
  threadgroup float2 big[NB * 120];      // 30720 B
  threadgroup float rest[2 * 256];       // 2048 B: total exactly 32768 B
  big[l] = x[t];
  rest[l] = x[t].x;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[t] = cmul2(big[l], kUnits[1]) + float2(rest[l], abs1(x[t]));
}
"""


def test_valid_realistic_source_has_no_problems():
    assert lint_source(VALID, headers=["complex.h"]) == []
    assert check_source(VALID, name="valid.metal", headers=["complex.h"]) is None


def test_exactly_32k_passes_and_one_more_element_fails():
    # NB * 120 float2 (8 B) + 512 float (4 B) = 30720 + 2048 = 32768 B = the limit: allowed.
    # One more float2 element is 8 B over the limit and must be reported at the kernel name.
    assert THREADGROUP_MEMORY_LIMIT == 32768
    bad = VALID.replace("threadgroup float2 big[NB * 120];", "threadgroup float2 big[NB * 120 + 1];")
    line = next(i for i, s in enumerate(bad.splitlines(), 1) if "kernel void exactly_32k" in s)
    assert found(bad, headers=["complex.h"]) == [("threadgroup-memory", line)]
    (p,) = lint_source(bad, headers=["complex.h"])
    assert "32776 bytes" in p.message and "exactly_32k" in p.message


def test_threadgroup_limit_is_checked_per_template_instantiation():
    # lu_small<float2, 63>: 63 * 64 * 8 B + 4 B = 32260 B (fine); <float2, 64> is 33284 B.
    bad = VALID + "INSTANTIATE_LU(float2, 64)  // <-\n"
    assert found(bad, headers=["complex.h"]) == [("threadgroup-memory", marked(bad)[0])]
    (p,) = lint_source(bad, headers=["complex.h"])
    assert 'host_name "lu_small_float2_64"' in p.message and "33284 bytes" in p.message
    # tile_kernel<float2> is exactly 32 KiB (NB * 128 * 8 B); <float4> doubles it.
    bad = VALID + (
        'template [[host_name("tile_kernel_c128")]] kernel void tile_kernel<float4>(  // <-\n'
        "    device float4*, device int*, constant long&, uint2, uint2);\n"
    )
    assert found(bad, headers=["complex.h"]) == [("threadgroup-memory", marked(bad)[0])]


# (rule, source) -- the source marks every offending line with `// <-`.
VIOLATIONS = [
    ("double", "kernel void k(device float* x [[buffer(0)]]) {\n  double d = x[0];  // <-\n  x[0] = d;\n}\n"),
    ("double", "inline long double twice(float x) { return x; }  // <-\n"),
    ("double", "kernel void k(device float* x [[buffer(0)]]) {\n  x[0] = 1.0L;  // <-\n}\n"),
    (
        "std-namespace",
        "kernel void k(device float* x [[buffer(0)]]) {\n  x[0] = std::sqrt(x[0]);  // <-\n}\n",
    ),
    ("std-namespace", "#include <metal_stdlib>\nusing namespace std;  // <-\n"),
    ("include", "#include <cmath>  // <-\n"),
    ("include", "#include <metal_stdlib>\n#include <c10/metal/utils.h>  // <-\n"),
    ("include", '#include "../outside/common.h"  // <-\n'),
    ("include", "#include <metal_math>  // <-\n"),
    ("include", "#define HDR <metal_stdlib>\n#include HDR  // <-\n"),
    ("host-function", 'kernel void k(device float* x [[buffer(0)]]) {\n  printf("%f", x[0]);  // <-\n}\n'),
    ("host-function", "kernel void k(device float* x [[buffer(0)]]) {\n  memcpy(x, x + 1, 4);  // <-\n}\n"),
    ("host-function", "kernel void k(device float* x [[buffer(0)]]) {\n  assert(x[0] > 0);  // <-\n}\n"),
    ("host-function", "kernel void k(device float* x [[buffer(0)]]) {\n  free(x);  // <-\n}\n"),
    # issue 14.15: a kernel could reach libc's system() through an extern declaration
    ("linkage", 'extern "C" int system(const char* cmd);  // <-\n'),
    ("linkage", 'extern "C" {  // <-\nint system(const char* cmd);\n}\n'),
    ("linkage", "extern float helper(float x);  // <-\n"),
    ("asm", 'kernel void k(device float* x [[buffer(0)]]) {\n  asm volatile("nop");  // <-\n}\n'),
    ("asm", 'inline void f() {\n  __asm__("int3");  // <-\n}\n'),
    (
        "function-pointer",
        "kernel void k(device float* x [[buffer(0)]]) {\n"
        "  void (*f)(mem_flags) = threadgroup_barrier;  // <-\n  f(mem_flags::mem_none);\n}\n",
    ),
    (
        "function-pointer",
        "kernel void k(device float* x [[buffer(0)]]) {\n  auto f = &metal::simd_sum<float>;  // <-\n"
        "  x[0] = f(x[0]);\n}\n",
    ),
    # issue 17.5: pointers and references need an address space (clang would read `thread`)
    ("address-space", "inline float first(float* p) {  // <-\n  return p[0];\n}\n"),
    ("address-space", "inline float sum4(const float (&a)[4]) {  // <-\n  return a[0] + a[3];\n}\n"),
    (
        "address-space",
        "kernel void k(device float* x [[buffer(0)]],\n              float& acc [[buffer(1)]]) {}  // <-\n",
    ),
    # issue 17.4: PyTorch encodes the source as ASCII (comments included)
    ("non-ascii", "// x \u2264 y  // <-\nconstant float A = 1.0f;\n"),
    ("non-ascii", "constant float A = 1.0f;  // \u00d7 twice on one line counts once  \u00d7 // <-\n"),
    (
        "dynamic-memory",
        "kernel void k(device float* x [[buffer(0)]]) {\n  thread float* p = new float[4];  // <-\n}\n",
    ),
    ("dynamic-memory", "inline void drop(thread float* p) {\n  delete p;  // <-\n}\n"),
    ("exceptions", "inline float f(float x) {\n  if (x < 0) throw 1;  // <-\n  return x;\n}\n"),
    ("virtual", "struct Op {\n  virtual float apply(float x) { return x; }  // <-\n};\n"),
    ("rtti", "struct A {};\ninline bool same(A a, A b) { return typeid(a) == typeid(b); }  // <- <-\n"),
    (
        "rtti",
        "struct B {};\nstruct D : B {};\n"
        "inline void f(thread B* b) {\n  dynamic_cast<thread D*>(b);  // <-\n}\n",
    ),
    (
        "host-function",
        '#define assert(x) ((void)0)\ninline void f(int n) { assert(n > 0); printf(""); }  // <-\n',
    ),
    ("goto", "inline float f(float x) {\n  if (x < 0) goto done;  // <-\n  x = 1;\ndone:\n  return x;\n}\n"),
    ("thread-local", "thread_local int counter = 0;  // <-\n"),
    (
        "vla",
        "kernel void k(device float* x [[buffer(0)]], constant long& n [[buffer(1)]]) {\n"
        "  float a[n];  // <-\n  a[0] = x[0];\n}\n",
    ),
    (
        "vla",
        "kernel void k(device float* x [[buffer(0)]]) {\n  int m = 4;\n  float a[m];  // <-\n"
        "  a[0] = x[0];\n}\n",
    ),
    (
        "vla",
        "kernel void k(device float* x [[buffer(0)]], constant long& n [[buffer(1)]]) {\n"
        "  const int c = n;\n  float a[4][c];  // <-\n  a[0][0] = x[0];\n}\n",
    ),
    (
        "vla",
        "struct C { float re; };\ninline C operator*(C a, C b) {\n  float t[a.re > 0 ? 2 : 3];  // <-\n"
        "  return b;\n}\n",
    ),
    ("vla", "inline float f(long n) {\n  float t[int(n) + 1];  // <-\n  return t[0];\n}\n"),
    (
        "vla",
        "inline float f(int n) {\n  for (int i = 0; i < n; ++i) {\n    float tmp[i + 1];  // <-\n"
        "    tmp[0] = 1;\n  }\n  return 0;\n}\n",
    ),
    ("recursion", "inline int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }  // <-\n"),
    (
        "recursion",
        "inline int pong(int n);\ninline int ping(int n) { return n ? pong(n - 1) : 0; }  // <-\n"
        "inline int pong(int n) { return ping(n); }\n",
    ),
    (
        "recursion",
        "template <typename T> T g(T x);\n"
        "template <typename T> T f(T x) { return g(x) + g<T>(x); }  // <-\n"
        "template <typename T> T g(T x) { return f(x); }\n",
    ),
    (
        "recursion",
        "namespace mp {\ninline int fact(int n) { return n ? n * mp::fact(n - 1) : 1; }  // <-\n}\n",
    ),
    ("recursion", "struct S {\n  static int g(int n) { return S::g(n); }  // <-\n};\n"),
    ("program-scope-variable", "float gscale = 2.0f;  // <-\n"),
    ("program-scope-variable", "constexpr int K = 3;  // <-\n"),
    ("program-scope-variable", "device float* gptr;  // <-\n"),
    ("program-scope-variable", "namespace detail {\nthreadgroup float shared[64];  // <-\n}\n"),
    ("program-scope-variable", "struct S { float a; } gs;  // <-\n"),
    (
        "vector-cast",
        "kernel void k(device float4* x [[buffer(0)]]) {\n  float2 v = (float2)x[0].xy;  // <-\n"
        "  x[0] = float4(v, v);\n}\n",
    ),
    ("vector-cast", "inline int2 f(int a, int b) {\n  return (int2)(a, b);  // <-\n}\n"),
    ("vector-cast", "inline float4 f(uint4 u) { return (metal::float4)u; }  // <-\n"),
    (
        "threadgroup-memory",
        "kernel void k(device float* x [[buffer(0)]], uint t [[thread_position_in_grid]]) {  // <-\n"
        "  threadgroup float a[8192];\n  threadgroup int extra;\n  a[t] = x[t];\n"
        "  extra = 0;\n}\n",
    ),
    (
        "threadgroup-memory",
        "constant int N = 64;\nconstant constexpr int M = N * 2;\n"
        "kernel void k(device float2* x [[buffer(0)]]) {  // <-\n"
        "  threadgroup float2 a[M][N / 2 + 1];\n  a[0][0] = x[0];\n}\n",
    ),
    (
        "unsupported",
        "kernel void k(texture2d<float> t [[texture(0)]],  // <- <-\n"
        "              device float* x [[buffer(0)]]) {}\n",
    ),
    ("unsupported", "kernel void k(device float* x [[buffer(0)]], sampler s) {}  // <-\n"),
    ("unsupported", "kernel void k(device float* x [[buffer(0)]]) {\n  simdgroup_float8x8 m;  // <-\n}\n"),
    (
        "unsupported",
        "struct V { float4 p [[position]]; };\nvertex V vs(V in [[stage_in]]) { return in; }  // <- <-\n",
    ),
    ("unsupported", "fragment float4 fs(float4 p) { return p; }  // <-\n"),
    (
        "unsupported",
        "kernel void k(device float* x [[buffer(0)]],\n"
        "              threadgroup float* s [[threadgroup(0)]]) {}  // <-\n",
    ),
]


@pytest.mark.parametrize(
    ("rule", "source"), VIOLATIONS, ids=[f"{r}-{i}" for i, (r, _s) in enumerate(VIOLATIONS)]
)
def test_rule_catches_violation_at_its_line(rule, source):
    expected = []
    for number, line in enumerate(source.splitlines(), start=1):
        expected += [(rule, number)] * line.count(MARK.split()[-1]) if MARK in line else []
    assert expected, "test case without a marked line"
    assert found(source) == expected
    assert rule in RULES


def test_every_rule_has_a_violation_test():
    assert {r for r, _s in VIOLATIONS} == set(RULES)


def test_columns_point_at_the_offending_token():
    src = "kernel void k(device float* x [[buffer(0)]]) {\n\tdouble d = x[0];\n  x[0] = d;\n}\n"
    (p,) = lint_source(src)
    assert (p.line, p.col, p.rule) == (2, 2, "double")  # a tab counts as one column, as in clang


# Valid constructs that resemble violations: each must give no problem.
NOT_VIOLATIONS = [
    "kernel void k(device float* x [[buffer(0)]]) { float std = x[0]; x[0] = std; }",
    "struct Pool { float free(float x) { return x; } };\n"
    "kernel void k(device float* x [[buffer(0)]]) { Pool p; x[0] = p.free(x[0]); }",
    "kernel void k(device float* x [[buffer(0)]]) { x[0] = float(sizeof(float4)) - 1.0f; }",
    "inline float f(float2 v) { return v.x; }\n"
    "kernel void k(device float2* x [[buffer(0)]]) { x[0].x = f(float2(x[0])); }",
    "kernel void k(device float* x [[buffer(0)]]) {\n"
    "  const int n = 8; float a[n * 2]; a[0] = x[0]; x[0] = a[0]; }",
    "constant constexpr int N = 4;\nkernel void k(device float* x [[buffer(0)]]) { float a[N][N + 1]; "
    "a[0][0] = x[0]; x[0] = a[0][0]; }",
    "template <typename T, int N> inline T first(thread T (&a)[N]) { return a[0]; }",
    "kernel void k(device float* x [[buffer(0)]], uint t [[thread_index_in_threadgroup]]) {\n"
    "  threadgroup float a[64];\n  threadgroup float* p = a;\n  threadgroup float& r = a[0];\n"
    "  p[t] = x[t]; r = 1; }",
    "static constant float kTable[3] = {1.0f, 2.0f, 3.0f};",
    "constant float2 kI = float2(0.0f, 1.0f);",
    "inline float f(float x);\ninline float g(float x) { return f(x) * 2.0f; }\n"
    "inline float f(float x) { return x + 1.0f; }",
    "kernel void k(device float* x [[buffer(0)]]) { x[0] = metal::numeric_limits<float>::infinity(); }",
    "kernel void k(device float* x [[buffer(0)]], uint3 g [[threadgroup_position_in_grid]],\n"
    "              uint s [[simdgroup_index_in_threadgroup]]) { x[g.x] = simd_sum(x[s]); }",
    "#define KERNEL_NAME(T) k_##T\nkernel void KERNEL_NAME(f32)(device float* x [[buffer(0)]]) { x[0] = 0; }",
    "#if 1\nconstant int A = 1;\n#else\ndouble unused;\n#endif",
    # `Op::apply` of a template parameter is not a call of Wrapper::apply (no self-recursion).
    "template <typename Op> struct Wrapper {\n"
    "  static float apply(float a, float b) { return Op::apply(a, b); }\n};",
    # operator functions, a variable called `sampler`, lambdas, switch/case, do/while
    "struct C { float re, im; };\n"
    "inline C operator*(C a, C b) { return C{a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }\n"
    "kernel void k(device float* x [[buffer(0)]], uint t [[thread_position_in_grid]]) {\n"
    "  float sampler = x[t];\n  auto sq = [&](float v) { return v * v; };\n"
    "  switch (t % 3) {\n    case 0: { float a[2] = {1, 2}; x[t] = a[1]; break; }\n    default: break;\n  }\n"
    "  int i = 0;\n  do { i++; } while (i < 3);\n"
    "  C z = C{sampler, 0} * C{1, 0};\n  x[t] = sq(z.re);\n}",
    # aliases, structs and atomics in threadgroup memory: exactly 32 KiB
    "typedef float2 cfloat;\nusing cplx = float2;\nstruct alignas(8) P { float v; int i; };\n"
    "kernel void k(device float* x [[buffer(0)]], uint t [[thread_index_in_threadgroup]]) {\n"
    "  threadgroup cfloat a[1024];\n  threadgroup cplx b[1024];\n  threadgroup P c[2047];\n"
    "  threadgroup atomic_uint counter;\n  threadgroup uint flag;\n"
    "  a[t] = b[t] = float2(x[t]);\n  c[t].v = x[t];\n  flag = 0;\n"
    "  atomic_store_explicit(&counter, 0u, memory_order_relaxed);\n}",
    # barriers and collectives called directly (also with explicit template arguments), and
    # member functions that happen to share their names
    "kernel void k(device float* x [[buffer(0)]]) {\n  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "  x[0] = metal::simd_sum<float>(x[0]) + simd_max(x[1]);\n}",
    "struct Q { float simd_sum; };\ninline float f(Q q) { return q.simd_sum; }",
    # address spaces given, or carried by a template parameter
    "inline float f(thread const float& r, device float* d, constant float* c, threadgroup float* t) {\n"
    "  return r + d[0] + c[0] + t[0]; }\n"
    "template <typename T> inline T g(T* p, thread T (&a)[4]) { return p[0] + a[0]; }",
    "[[kernel, max_total_threads_per_threadgroup(256)]] void k(device half4* x [[buffer(0)]]) {\n"
    "  x[0] = half4(1.0h) + half4(0x1p-3h);\n}",
]


@pytest.mark.parametrize("source", NOT_VIOLATIONS, ids=[str(i) for i in range(len(NOT_VIOLATIONS))])
def test_valid_lookalikes_are_accepted(source):
    assert lint_source(source) == []


def test_threadgroup_sizes_of_aliases_structs_and_atomics_are_counted():
    # The exactly-32-KiB look-alike above (8192 + 8192 + 8 * 2047 + 4 + 4 B) with one more struct
    # element is 8 B over: proves every declaration there was sized, none skipped as unknown.
    (src,) = [s for s in NOT_VIOLATIONS if "threadgroup P c[2047];" in s]
    bad = src.replace("threadgroup P c[2047];", "threadgroup P c[2048];")
    (p,) = lint_source(bad)
    assert p.rule == "threadgroup-memory" and "32776 bytes" in p.message


def test_struct_and_union_layouts_follow_metal_alignment():
    # Outer = float4 v[2] (32 B, align 16) + int (4 B) -> 36 B rounded up to 48 B (align 16);
    # 682 * 48 = 32736 B fits, 683 * 48 = 32784 B does not. A union is as large as its largest
    # member: U = 16 B, 2048 * 16 = 32768 B fits exactly.
    src = (
        "union U { float4 a; int b; };\n"
        "struct Outer { struct Inner { float x; }; float4 v[2]; int k; };\n"
        "kernel void k(device float* x [[buffer(0)]], uint t [[thread_index_in_threadgroup]]) {\n"
        "  threadgroup U u[2048];\n  threadgroup Outer o[N_OUTER];\n"
        "  x[t] = u[t].a.x + o[t].v[0].x;\n}\n"
    )
    assert found("#define N_OUTER 1\n" + src.replace("2048", "2045")) == []
    assert found("#define N_OUTER 682\n" + src.replace("2048", "0 + 2")) == []
    (p,) = lint_source("#define N_OUTER 683\n" + src.replace("2048", "0 + 2"))
    assert p.rule == "threadgroup-memory" and "`o` 32784 B" in p.message
    (p,) = lint_source("#define N_OUTER 1\n" + src.replace("2048", "2049"))
    assert "`u` 32784 B" in p.message


def test_quoted_includes_checked_against_known_headers():
    src = '#include "complex.h"\n#include "other.h"\n'
    assert found(src) == []  # any plain name.h when the header list is not known
    assert found(src, headers=["complex.h"]) == [("include", 2)]
    (p,) = lint_source(src, headers=["complex.h"])
    assert "other.h" in p.message and "complex.h" in p.message


def test_line_markers_map_problems_to_the_inlined_file():
    # The loader inlines headers with `#line N "file"`; problems must point into that file.
    src = (
        '#line 1 "lu.metal"\n#include <metal_stdlib>\n#line 1 "complex.h"\n'
        "inline float2 f(float2 a) { return a; }\nfloat bad_global = 1.0f;\n"
        '#line 3 "lu.metal"\nkernel void k(device float* x [[buffer(0)]]) {\n  double d = 0;\n}\n'
    )
    got = [(p.file, p.line, p.rule) for p in lint_source(src)]
    assert got == [("complex.h", 2, "program-scope-variable"), ("lu.metal", 4, "double")]
    with pytest.raises(MetalLintError) as e:
        check_source(src, name="lu (inlined)")
    assert "complex.h:2:7: [program-scope-variable]" in str(e.value)
    assert "lu.metal:4:3: [double]" in str(e.value)


def test_check_source_lists_every_problem():
    src = (
        "float g = 1.0f;\nkernel void k(device double* x [[buffer(0)]]) {\n"
        "  goto out;\nout:\n  x[0] = g;\n}\n"
    )
    with pytest.raises(MetalLintError) as e:
        check_source(src, name="bad.metal")
    err = e.value
    assert isinstance(err, ValueError)
    assert [(p.rule, p.line) for p in err.problems] == [
        ("program-scope-variable", 1),
        ("double", 2),
        ("goto", 3),
    ]
    lines = str(err).splitlines()
    assert lines[0] == "bad.metal: 3 Metal lint problems:"
    assert all(re.fullmatch(r"  bad\.metal:\d+:\d+: \[[a-z-]+\] .+", s) for s in lines[1:])
    assert len(lines) == 4
    assert lines[1].startswith("  bad.metal:1:7: [program-scope-variable]")


def test_problem_format_and_type():
    p = LintProblem(3, 5, "double", "msg")
    assert p.format("a.metal") == "a.metal:3:5: [double] msg"
    assert str(p) == "<source>:3:5: [double] msg"


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(TypeError, match="source must be a str"):
        lint_source(b"kernel void k() {}")
    with pytest.raises(TypeError, match="source must be a str"):
        check_source(None)
    with pytest.raises(TypeError, match="name must be a str"):
        lint_source("", name=3)


def test_positions_stay_right_in_a_long_file():
    # 1000+ lines of valid kernels followed by one violation: the problem is at the last line.
    body = "\n".join(
        f"kernel void k{i}(device float* x [[buffer(0)]], uint t [[thread_position_in_grid]]) {{\n"
        f"  threadgroup float s{i}[256];\n  s{i}[t % 256] = x[t];\n"
        f"  threadgroup_barrier(mem_flags::mem_threadgroup);\n  x[t] = s{i}[(t + 1) % 256];\n}}"
        for i in range(170)
    )
    src = "#include <metal_stdlib>\nusing namespace metal;\n" + body + "\nfloat oops = 1.0f;\n"
    n_lines = src.count("\n")
    assert n_lines > 1000
    assert found(src) == [("program-scope-variable", n_lines)]


def test_lint_file_uses_neighbouring_headers(tmp_path):
    (tmp_path / "common.h").write_text("inline float sq(float x) { return x * x; }\n")
    f = tmp_path / "fam.metal"
    f.write_text('#include <metal_stdlib>\n#include "common.h"\n#include "missing.h"\n')
    assert [(p.rule, p.line) for p in lint_file(f)] == [("include", 3)]


def test_malformed_sources_never_crash_the_lint():
    # The emulator lints every source before compiling it, including half-edited ones: the lint
    # must return problems (or none) for any text, never raise. Deterministic mutations of the
    # valid file: truncations, deleted slices and inserted brackets/quotes/comment starters.
    import random

    rng = random.Random(20261130)
    for _ in range(300):
        s = VALID
        op = rng.random()
        a = rng.randrange(len(s))
        if op < 0.4:
            s = s[:a] + s[a + rng.randrange(1, 40) :]
        elif op < 0.7:
            s = s[:a]
        else:
            s = s[:a] + "".join(rng.choice("(){}[]<>;,#\"'/*\\:=&") for _ in range(3)) + s[a:]
        n_lines = s.count("\n") + 1
        for p in lint_source(s, headers=["complex.h"]):
            assert p.rule in RULES and 1 <= p.line <= n_lines and p.col >= 1
