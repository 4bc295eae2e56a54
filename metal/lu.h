// lu.h - what the LU family's kernel groups share: the pivot order and the scalar rules of
// LAPACK's getf2, float32 and complex64 (float2). Everything else in the LU algorithm (TRSM, GEMM
// updates) is matrix products issued from Python (mpslinalg/lu/). One file per kernel group, each
// compiled into its own library on the first call that needs it (mpslinalg/lu/kernels.py,
// KERNEL_SOURCES):
//
//   lu_panel.metal        lu_panel_{f32,c64}: factor the m x w panel A[o:M, o:o+w] of every matrix
//                         in place (one threadgroup per matrix, in device memory, any M);
//                         lu_panel_tall: the same body, up to 1024 threads (tall panels, one
//                         dispatch); lu_panel_step: a tall panel shared by several threadgroups;
//   lu_look.metal         lu_panel_look: a tall panel, several columns per dispatch, in registers;
//                         lu_panel_regs: a whole panel in one threadgroup's registers;
//   lu_small.metal        lu_small_{f32,c64}_W_S: whole matrices with M, N <= W (8, 16, 32) in
//                         registers, 32 / W matrices per simdgroup (RANSAC 9x9, VMC 32x32);
//                         lu_small_f32_32_S_2: two rows per lane (TUNING.small_rows);
//   lu_small_solve.metal  lu_small_solve_{f32,c64}_W_KC_S: factor and solve A X = B for n <= W,
//                         k <= KC (1, 8) in one dispatch, as lu_small (RANSAC);
//   lu_swap.metal         lu_laswp_{f32,c64}: the row interchanges piv[k1:k2] on the columns
//                         [c0, c0 + nc) of every matrix, forward or reverse (no barriers);
//                         lu_laswp_block: at most 64 interchanges as one permutation gather on the
//                         columns left and right of a panel (the blocked LU's per block);
//   lu_small.h            the register-row helpers lu_small and lu_small_solve share.
//
// LAPACK semantics (getf2 / getrf2):
//   * the pivot of column j is the FIRST row of largest |Re| + |Im| (i?amax) among rows j..M-1;
//     a NaN entry beats every number (the first NaN wins), as torch's CPU LAPACK (MKL) does for
//     n >= 17 and as propagating NaN requires: a skipped NaN could leave a finite-looking factor
//     of a matrix holding NaN (see lu_pivot_beats);
//   * pivots are 1-based absolute row indices, int32;
//   * a zero pivot column is not scaled (no division by zero, no NaN from it); info (zero-initialised
//     by the caller) becomes the 1-based index of the first zero pivot; elimination continues;
//   * below the diagonal: multiply by 1/pivot when |pivot| >= the smallest normal float, else
//     divide by the pivot (LAPACK's sfmin rule); a complex inf pivot gives NaN multipliers (lu_recip).
//
// Layout: A is a contiguous [batch, M, N] row-major buffer (the Python side passes resolved,
// contiguous tensors: Metal ignores strides and conjugate bits); piv is [batch, K] int32 with
// K = min(M, N) (lu_laswp: K = number of pivots per matrix); info is [batch] int32.
// Sizes arrive as 8-byte longs (torch.mps.compile_shader binds a Python int as long). Indexing:
// 64-bit only for a matrix's base offset; inside a matrix 32-bit (the host checks M * N < 2^31),
// Apple GPUs have no native 64-bit multiply or divide.
#include "scalar.h"

// Threads per threadgroup of the panel kernels (lu_panel, lu_panel_step, lu_panel_look,
// lu_panel_regs): a power of two in [SIMD_WIDTH, LU_PANEL_MAX_THREADS] (the reduction arrays'
// size; the host checks TUNING.panel_threads against both).
constant constexpr uint LU_PANEL_MAX_THREADS = 256;

// ---- LU-specific scalar rules --------------------------------------------------------------------

// The reciprocal of a pivot. Complex: a non-finite pivot gives NaN multipliers, as LAPACK's
// complex getf2 does in practice (MKL/OpenBLAS form 1/p from |p|^2, so 1/(inf + 0i) = inf/inf =
// NaN, and the NaN then spreads through the trailing matrix). Robust division (crecip) alone would
// give 1/inf = 0 and a finite, plausible-looking factorisation of a matrix holding inf.
inline float lu_recip(float a) { return 1.0f / a; }
inline float2 lu_recip(float2 a) { return s_isfinite(a) ? crecip(a) : s_nan<float2>(); }

// The sfmin rule's test |pivot| >= S_SFMIN. Complex: the modulus (a division and a square root)
// only when max(|Re|, |Im|) < S_SFMIN; above, cmodulus(a) >= that max, so the answer is the same.
inline bool lu_use_recip(float a) { return fabs(a) >= S_SFMIN; }
inline bool lu_use_recip(float2 a) { return max(fabs(a.x), fabs(a.y)) >= S_SFMIN || cmodulus(a) >= S_SFMIN; }

// x / pivot by LAPACK's sfmin rule: times the reciprocal rp when |pivot| >= the smallest normal,
// else a true division (1 / pivot would overflow for a subnormal pivot).
template <typename T>
inline T lu_scale(T x, T pivot, T rp, bool use_recip) {
  return use_recip ? s_mul(x, rp) : s_div(x, pivot);
}

// Pivot order: does candidate (v = |Re| + |Im| of row i) beat the best so far (bv of row bi)?
// NaN beats every number; between equals, or two NaNs, the smaller row wins.
inline bool lu_pivot_beats(float v, int i, float bv, int bi) {
  const bool vn = isnan(v), bn = isnan(bv);
  if (vn != bn) {
    return vn;
  }
  return vn ? i < bi : (v > bv || (v == bv && i < bi));
}

// The simdgroup's winner by butterflies (every lane ends with it; no barrier).
inline void lu_pivot_simd(thread float& v, thread int& i) {
  for (ushort d = SIMD_WIDTH / 2; d > 0; d >>= 1) {
    const float v2 = simd_shuffle_xor(v, d);
    const int i2 = simd_shuffle_xor(i, d);
    if (lu_pivot_beats(v2, i2, v, i)) {
      v = v2;
      i = i2;
    }
  }
}

// Threadgroup-wide winner of every thread's candidate (v, i) by lu_pivot_beats (a total order: the
// result is the sequential scan's), by simdgroup butterflies (no barrier) and one threadgroup
// round: every thread ends with the winner in (v, i). red_v / red_i need ntg / 32 entries; the leading barrier lets a
// caller reduce again right after a previous reduction.
inline void lu_pivot_reduce(threadgroup float* red_v, threadgroup int* red_i, thread float& v,
                                 thread int& i, uint tid, uint ntg) {
  lu_pivot_simd(v, i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid % SIMD_WIDTH == 0) {
    red_v[tid / SIMD_WIDTH] = v;
    red_i[tid / SIMD_WIDTH] = i;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  v = red_v[0];
  i = red_i[0];
  for (uint q = 1; q < ntg / SIMD_WIDTH; ++q) {
    if (lu_pivot_beats(red_v[q], red_i[q], v, i)) {
      v = red_v[q];
      i = red_i[q];
    }
  }
}
