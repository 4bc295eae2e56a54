"""The mutation gate's list (issue 18): realistic single-line bugs, one at a time.

Run with ``scripts/mutation_gate.py``; ``docs/testing.md`` ("Mutation gate") explains it. Fields:

* ``id``: unique name; ``file``: the file mutated (relative to the repository root);
* ``pattern``: text that must occur EXACTLY ONCE in the file (the gate refuses otherwise, so this
  list stays in step with the code: update the entry when the code moves); ``replacement``;
* ``tests``: pytest paths / node ids, run with ``-x`` (the family's own tests, as a reviewer would);
* ``why``: the bug it stands for;
* ``equivalent`` (optional): why the mutation preserves behaviour; it is then not run;
* ``subsets`` (optional): e.g. ``["ci"]``, the fast subset ``tests/test_mutation_gate.py`` runs;
* ``timeout`` (optional): seconds, default 600.
"""

# ruff: noqa: E501  (patterns are verbatim source lines)

import runpy
from pathlib import Path

#: Entries kept in files of their own beside this one (each a ``MUTATIONS`` list), appended below.
PARTS = ("mutations_oplayer_triangular.py", "mutations_recent.py")

MUTATIONS = [
    # ---- sanity: the copy is what runs ------------------------------------------------------------
    dict(
        id='sanity-import-breaks',
        file='mpslinalg/__init__.py',
        pattern='from .kernels import BackendUnavailableError, use_backend',
        replacement='raise ImportError("mutation gate sanity: the mutated copy is imported")',
        tests=['tests/reference/test_ref_metrics.py::test_unit_roundoff'],
        why='proves the tests import the temporary copy, not the editable install',
        subsets=['ci'],
    ),
    # ---- reference/metrics.py: normalisations -----------------------------------------------------
    dict(
        id='metrics-svd-uorth-norm-dropped',
        file='reference/metrics.py',
        pattern='u_orth = _ratio(_amax(_colnorms1(GU), -1), torch.tensor(m * uu,',
        replacement='u_orth = _ratio(_amax(_colnorms1(GU), -1), torch.tensor(uu,',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="issue 18 survivor: the SVD orthogonality metric's m dropped",
        subsets=['ci'],
    ),
    dict(
        id='metrics-svd-vorth-norm-dropped',
        file='reference/metrics.py',
        pattern='v_orth = _ratio(_amax(_colnorms1(GV), -1), torch.tensor(n * uu,',
        replacement='v_orth = _ratio(_amax(_colnorms1(GV), -1), torch.tensor(uu,',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="v_orth's n dropped",
    ),
    dict(
        id='metrics-svd-recon-norm-dropped',
        file='reference/metrics.py',
        pattern='recon = _ratio(_amax(_colnorms1(E), -1), max(m, n) * _amax(',
        replacement='recon = _ratio(_amax(_colnorms1(E), -1), _amax(',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="SVD reconstruction ratio's max(m, n) dropped",
    ),
    dict(
        id='metrics-qr-orth-norm-dropped',
        file='reference/metrics.py',
        pattern='orth = _ratio(_amax(_colnorms1(G), -1), torch.tensor(m * uu,',
        replacement='orth = _ratio(_amax(_colnorms1(G), -1), torch.tensor(uu,',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="QR orthogonality ratio's m dropped",
    ),
    dict(
        id='metrics-qr-recon-norm-dropped',
        file='reference/metrics.py',
        pattern='recon = _ratio(_amax(_colnorms1(E), -1), m * _amax(',
        replacement='recon = _ratio(_amax(_colnorms1(E), -1), _amax(',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="QR reconstruction ratio's m dropped",
    ),
    dict(
        id='metrics-orthogonality-norm-dropped',
        file='reference/metrics.py',
        pattern='torch.tensor(max(m, 1) * uu,',
        replacement='torch.tensor(max(k, 1) * uu,',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why='orthogonality_ratio normalised by the column count instead of the row count',
    ),
    dict(
        id='metrics-inverse-n-dropped',
        file='reference/metrics.py',
        pattern='den = n * _amax(_colnorms1(A64), -1) * _amax(_colnorms1(X64), -1) * uu',
        replacement='den = _amax(_colnorms1(A64), -1) * _amax(_colnorms1(X64), -1) * uu',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="xGET03's n dropped",
    ),
    dict(
        id='metrics-lu-n-dropped',
        file='reference/metrics.py',
        pattern='''    den = n * _amax(_colnorms1(A64), -1) * uu
    return _ratio(num, den)''',
        replacement='''    den = _amax(_colnorms1(A64), -1) * uu
    return _ratio(num, den)''',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="xGET01's n dropped",
    ),
    dict(
        id='metrics-solve-xnorm-dropped',
        file='reference/metrics.py',
        pattern='den = anorm.unsqueeze(-1) * _colnorms1(X64) * uu',
        replacement='den = anorm.unsqueeze(-1) * uu',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why='solve ratio without ||x||',
    ),
    dict(
        id='metrics-lstsq-dim-dropped',
        file='reference/metrics.py',
        pattern='return _ratio(num, max(m, n, k, 1) * an * scale * uu)',
        replacement='return _ratio(num, an * scale * uu)',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="lstsq ratio's max(m, n, k) dropped",
    ),
    dict(
        id='metrics-colnorm-wrong-axis',
        file='reference/metrics.py',
        pattern='return M.abs().sum(-2)',
        replacement='return M.abs().sum(-1)',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why='1-norm computed as the inf-norm (wrong index map)',
    ),
    dict(
        id='metrics-growth-full-U',
        file='reference/metrics.py',
        pattern='_amax(_wide(U).triu().abs(), (-2, -1))',
        replacement='_amax(_wide(U).abs(), (-2, -1))',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why="growth factor reads L's multipliers stored below U",
    ),
    dict(
        id='metrics-forward-error-wrong-denominator',
        file='reference/metrics.py',
        pattern='return _ratio(_amax((a - b).abs(), dim), _amax(b.abs(), dim))',
        replacement='return _ratio(_amax((a - b).abs(), dim), _amax(a.abs(), dim))',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why='forward error relative to the computed value instead of the reference',
    ),
    dict(
        id='metrics-relative-error-equal-infs',
        file='reference/metrics.py',
        pattern='    return torch.where(eq, torch.zeros_like(out), out)',
        replacement='    return out',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why='equal infinities give NaN instead of 0',
    ),
    dict(
        id='metrics-svd-order-ties-rejected',
        file='reference/metrics.py',
        pattern='(S64[..., 1:] > S64[..., :-1])',
        replacement='(S64[..., 1:] >= S64[..., :-1])',
        tests=['tests/reference/test_metrics_exact.py', 'tests/reference/test_ref_metrics.py'],
        why='repeated singular values flagged as out of order',
    ),
    # ---- metal/lu_*.metal, lu.h, lu_small.h ------------------------------------------------------
    dict(
        id='lu-panel-tiny-pivot',
        file='metal/lu_panel.metal',
        pattern='''      const bool use_recip = s_abs(pivot) >= S_SFMIN;
      const T rp = lu_recip(pivot);
      for (int r = col + 1 + t; r < m; r += nt) {''',
        replacement='''      const bool use_recip = true;
      const T rp = lu_recip(pivot);
      for (int r = col + 1 + t; r < m; r += nt) {''',
        tests=['tests/lu/test_lu_kernels.py::test_subnormal_pivot_is_divided_not_inverted', 'tests/lu/test_lu_kernels.py::test_subnormal_pivot_public_lu_factor_40',
               'tests/lu/test_lu_panel_tall.py::test_subnormal_pivot_is_divided_not_inverted'],
        why='issue 18 survivor: lu_panel always multiplies by the reciprocal (subnormal pivot -> inf)',
        subsets=['ci'],
    ),
    dict(
        id='lu-tile-tiny-pivot',
        file='metal/lu_small.h',
        pattern='prow[W + KC + 1] = lu_use_recip(a[j]) ? s_one<T>() : s_zero<T>();',
        replacement='prow[W + KC + 1] = s_one<T>();',
        tests=['tests/lu/test_lu_kernels.py::test_subnormal_pivot_is_divided_not_inverted',
               'tests/lu/test_lu_small_kernels.py::test_lu_small_specials_match_sequential_getf2'],
        why='lu_small / lu_small_solve always multiply by the reciprocal',
    ),
    dict(
        id='lu-pivot-tie-flipped',
        file='metal/lu.h',
        pattern='(v == bv && i < bi)',
        replacement='(v == bv && i > bi)',
        tests=['tests/lu/test_mutation_kills_lu.py::test_pivot_ties_go_to_the_first_row_in_every_kernel', 'tests/lu/test_lu_kernels.py'],
        why='ties go to the last row, not the first (i?amax)',
    ),
    dict(
        id='lu-pivot-nan-tie-flipped',
        file='metal/lu.h',
        pattern='return vn ? i < bi :',
        replacement='return vn ? i > bi :',
        tests=['tests/lu/test_lu_kernels.py'],
        why='between two NaNs the last wins (torch/MKL: the first)',
    ),
    dict(
        id='lu-pivot-nan-loses',
        file='metal/lu.h',
        pattern='''  if (vn != bn) {
    return vn;''',
        replacement='''  if (vn != bn) {
    return bn;''',
        tests=['tests/lu/test_lu_kernels.py'],
        why='a NaN never wins the pivot search (NaN hidden from the factor)',
    ),
    dict(
        id='lu-panel-barrier-after-reduction',
        file='metal/lu_panel.metal',
        pattern='    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);',
        replacement='    // barrier removed',
        tests=['tests/lu/test_lu_kernels.py::test_lu_panel'],
        why='the pivot is read while another thread already swaps rows',
    ),
    dict(
        id='lu-panel-barrier-after-swap',
        file='metal/lu_panel.metal',
        pattern='''      threadgroup_barrier(mem_flags::mem_device);
      // 3. scale the column''',
        replacement='      // 3. scale the column',
        tests=['tests/lu/test_lu_kernels.py::test_lu_panel'],
        why='scaling reads rows another thread is still swapping',
    ),
    dict(
        id='lu-panel-reduction-stops-early',
        file='metal/lu.h',
        pattern='for (ushort d = SIMD_WIDTH / 2; d > 0; d >>= 1)',
        replacement='for (ushort d = SIMD_WIDTH / 2; d > 1; d >>= 1)',
        tests=['tests/lu/test_lu_kernels.py::test_lu_panel'],
        why='the pivot reduction (simdgroup butterfly) skips its last level (off-by-one bound)',
    ),
    dict(
        id='lu-panel-info-off-by-one',
        file='metal/lu_panel.metal',
        pattern='info[b] = col + 1;',
        replacement='info[b] = col;',
        tests=['tests/lu/test_lu_kernels.py::test_zero_pivot_sets_info_and_no_nan',
               'tests/lu/test_lu_panel_tall.py::test_zero_columns_set_info_and_stay_finite'],
        why='info 0-based (LAPACK: 1-based)',
    ),
    dict(
        id='lu-small-solve-backsub-bound',
        file='metal/lu_small_solve.metal',
        pattern='} else if (pos[0] < j) {',
        replacement='} else if (pos[0] < j && pos[0] > 0) {',
        tests=['tests/lu/test_lu_kernels.py::test_lu_small_solve'],
        why='back substitution never updates row 0',
    ),
    dict(
        id='lu-laswp-reverse-ignored',
        file='metal/lu_swap.metal',
        pattern='const int i = reverse != 0 ? lo + cnt - 1 - step : lo + step;',
        replacement='const int i = lo + step;',
        tests=['tests/lu/test_lu_kernels.py::test_lu_laswp_exact'],
        why='reverse interchanges applied forward',
    ),
    dict(
        id='lu-small-pivot-tie-last',
        file='metal/lu_small.h',
        pattern='const uint ni = cand ? ~(uint)(pos * SIMD_WIDTH + s) : 0u;',
        replacement='const uint ni = cand ? (uint)(pos * SIMD_WIDTH + s) : 0u;',
        tests=['tests/lu/test_mutation_kills_lu.py::test_pivot_ties_go_to_the_first_row_in_every_kernel',
               'tests/lu/test_lu_small_kernels.py'],
        why='lu_small: ties go to the last position, not the first (i?amax)',
    ),
    dict(
        id='lu-small-pivot-tie-last-w32',
        file='metal/lu_small.h',
        pattern='return simd_min((nidx != 0u && key == best) ? ~nidx : ~0u);',
        replacement='return simd_max((nidx != 0u && key == best) ? ~nidx : 0u);',
        tests=['tests/lu/test_lu_small_kernels.py'],
        why='lu_small, 32 lanes per matrix: ties go to the last position, not the first (i?amax)',
    ),
    dict(
        id='lu-small-bcast-barrier-removed',
        file='metal/lu_small.h',
        pattern='''    simdgroup_barrier(mem_flags::mem_threadgroup);
    const T pivot = prow[j];
    if (s_is_zero(pivot) && info == 0) {
      info = j + 1;  // a zero pivot''',
        replacement='''    const T pivot = prow[j];
    if (s_is_zero(pivot) && info == 0) {
      info = j + 1;  // a zero pivot''',
        tests=['tests/lu/test_lu_small_kernels.py'],
        why='lu_small: the other lanes read the published pivot row before its lane wrote it',
    ),
    dict(
        id='lu-small-two-rows-tie-last',
        file='metal/lu_small.h',
        pattern='if (kk > key || (kk == key && ni > nidx)) {',
        replacement='if (kk > key || (kk == key && ni < nidx)) {',
        tests=['tests/lu/test_lu_small_kernels.py::test_lu_small_specials_match_sequential_getf2'],
        why="lu_small: a tie between a lane's own two rows goes to the later one (and a zero entry never bids)",
    ),
    dict(
        id='lu-small-pivot-nan-loses',
        file='metal/lu_small.h',
        pattern='return isnan(v) ? 0x7FC00000u : as_type<uint>(v);',
        replacement='return isnan(v) ? 0u : as_type<uint>(v);',
        tests=['tests/lu/test_lu_small_kernels.py'],
        why='lu_small: a NaN never wins the pivot search (NaN hidden from the factor)',
    ),
    dict(
        id='lu-small-tile-index-map',
        file='metal/lu_small.h',
        pattern='    tl[R * LU_SMALL_LD + c] = src[t];',
        replacement='    tl[c * LU_SMALL_LD + R] = src[t];',
        tests=['tests/lu/test_lu_kernels.py::test_lu_small'],
        why='tile loaded column-major (wrong index map)',
    ),
    dict(
        id='lu-small-free-finished-rows-store',
        file='metal/lu_small.metal',
        pattern='      if (FREE && below) {',
        replacement='      if (FREE) {',
        tests=['tests/lu/test_lu_small_kernels.py::test_lu_small_rolled_equals_unrolled'],
        why="lu_small FREE: a finished row's junk overwrites its U row in the tile",
    ),
    dict(
        id='lu-small-rcp1-conjugate-lost',
        file='metal/lu_small.metal',
        pattern='float2(x * id * k, -y * id * k)',
        replacement='float2(x * id * k, y * id * k)',
        tests=['tests/lu/test_lu_small_kernels.py::test_lu_small_rolled_one_division_reciprocal'],
        why='lu_small RCP1: 1 / p without the conjugate (p / |p|^2)',
    ),
    # ---- mpslinalg/small/ ----------------------------------------------------------------------------
    dict(
        id='small-pivot-tie-last',
        file='mpslinalg/small/program.py',
        pattern='gt = v > best',
        replacement='gt = v >= best',
        tests=['tests/small/test_mutation_kills_small.py', 'tests/small/test_small.py', 'tests/small/test_small_classes.py'],
        why='the unrolled GEPP takes the last of equal pivots (LAPACK: the first)',
    ),
    dict(
        id='small-column-equilibration-dropped',
        file='mpslinalg/small/program.py',
        pattern='c = [P.pow2(-e) for e in ec]',
        replacement='c = [P.pow2(0 * e) for e in ec]',
        tests=['tests/small/test_small.py', 'tests/small/test_small_classes.py'],
        why='one-sided equilibration dropped (overflow / underflow on badly scaled inputs)',
    ),
    dict(
        id='small-info-off-by-one',
        file='mpslinalg/small/program.py',
        pattern='info = P.where(zero & (info == 0), k + 1, info)',
        replacement='info = P.where(zero & (info == 0), k, info)',
        tests=['tests/small/test_small.py', 'tests/small/test_small_classes.py'],
        why='info 0-based in the n <= 4 program',
    ),
    dict(
        id='small-det-parity',
        file='mpslinalg/small/program.py',
        pattern='odd = odd ^ (p != k)',
        replacement='odd = odd ^ (p == k)',
        tests=['tests/small/test_small.py', 'tests/small/test_small_classes.py'],
        why='determinant sign from the wrong parity',
    ),
    dict(
        id='small-getri-interchange-order',
        file='mpslinalg/small/program.py',
        pattern='for j in range(n - 2, -1, -1):',
        replacement='for j in range(n - 1):',
        tests=['tests/small/test_small.py', 'tests/small/test_small_classes.py'],
        why='getri applies the column interchanges forward instead of in reverse',
    ),
    # ---- metal/small.metal -------------------------------------------------------------------------
    dict(
        id='small-metal-pivot-tie-last',
        file='metal/small.metal',
        pattern='if (v > best) {',
        replacement='if (v >= best) {',
        tests=['tests/small/test_mutation_kills_small.py', 'tests/small/test_small.py::test_kernels_all_orders', 'tests/small/test_small.py::test_emulator_equals_torch_program', 'tests/small/test_small_classes.py'],
        why='the Metal n <= 4 elimination takes the last of equal pivots',
    ),
    dict(
        id='small-metal-info-off-by-one',
        file='metal/small.metal',
        pattern='if (zero && info == 0) info = k + 1;',
        replacement='if (zero && info == 0) info = k;',
        tests=['tests/small/test_small.py::test_kernels_all_orders', 'tests/small/test_small.py::test_emulator_equals_torch_program', 'tests/small/test_small.py::test_singular_info_det_slogdet', 'tests/small/test_small_classes.py'],
        why='info 0-based in the Metal n <= 4 kernels',
    ),
    dict(
        id='small-metal-adjugate-unscale-index-map',
        file='metal/small.metal',
        pattern='a[i][j] = scale_exp(a[i][j], -ec[i] - er[j]);',
        replacement='a[i][j] = scale_exp(a[i][j], -ec[j] - er[i]);',
        tests=['tests/small/test_small.py::test_kernels_all_orders', 'tests/small/test_small.py::test_emulator_equals_torch_program', 'tests/small/test_small_classes.py'],
        why='inv(A) = C inv(A_s) R unscaled with the row and column exponents swapped',
    ),
    # ---- metal/qr.metal ----------------------------------------------------------------------------
    dict(
        id='qr-metal-small-vH-conj-dropped',
        file='metal/qr.metal',
        pattern='w += s_mul(s_conj(s[r * n + j]), s[r * n + c]);',
        replacement='w += s_mul(s[r * n + j], s[r * n + c]);',
        tests=['tests/qr/test_qr_kernels.py'],
        why='qr_small applies H with v^T instead of v^H (complex)',
    ),
    dict(
        id='qr-metal-small-alpha-barrier-removed',
        file='metal/qr.metal',
        pattern='    threadgroup_barrier(mem_flags::mem_threadgroup);  // alpha read by all before it is replaced',
        replacement='    // barrier removed',
        tests=['tests/qr/test_qr_kernels.py'],
        why='alpha overwritten before every thread has read it (qr_small)',
    ),
    dict(
        id='qr-metal-larft-sign',
        file='metal/qr.metal',
        pattern='tf[tid * w + j] = -s_mul(h.tau, sum);',
        replacement='tf[tid * w + j] = s_mul(h.tau, sum);',
        tests=['tests/qr/test_qr_kernels.py'],
        why='T of the compact WY form with the wrong sign off the diagonal',
    ),
    dict(
        id='qr-metal-larfg-zero-sign',
        file='metal/qr.metal',
        pattern='const float b = ar >= 0.0f ? -mag : mag;',
        replacement='const float b = ar > 0.0f ? -mag : mag;',
        tests=['tests/qr/test_mutation_kills_qr.py', 'tests/qr/test_qr_kernels.py'],
        why=("issue 33 survivor: larfg's sign(0) = -1 (alpha > 0 for alpha >= 0): a zero leading entry "
             "flips R's diagonal sign and the reflector, a valid QR but not LAPACK's (emulator)"),
    ),
    dict(
        id='qr-metal-larfg-unscaled',
        file='metal/qr.metal',
        pattern='    frexp(top, h.shift);  // top * 2^-shift in [1/2, 1)',
        replacement='    // no scaling',
        tests=['tests/qr/test_qr_rank_deficient.py', 'tests/qr/test_qr_kernels.py'],
        why=("larfg on the unscaled column: a subnormal column (the noise below the diagonal of an exactly "
             "rank-deficient matrix) gives beta, tau, alpha - beta of a few bits and a non-unitary H "
             "(complex ones(33, 33): |I - Q^H Q| = 0.77)"),
    ),
    # ---- mpslinalg/qr/ ---------------------------------------------------------------------------
    dict(
        id='qr-torch-larfg-unscaled',
        file='mpslinalg/qr/kernels.py',
        pattern='e = torch.where(ok, torch.frexp(torch.where(ok, top, torch.ones_like(top))).exponent, 0)',
        replacement='e = torch.zeros_like(top, dtype=torch.int32)',
        tests=['tests/qr/test_qr_rank_deficient.py', 'tests/qr/test_qr_kernels.py'],
        why="the torch kernels' larfg on the unscaled column: non-unitary reflectors of subnormal columns",
    ),
    dict(
        id='qr-torch-larfg-zero-sign',
        file='mpslinalg/qr/kernels.py',
        pattern='beta_s = torch.where(re_s >= 0, -mag, mag)',
        replacement='beta_s = torch.where(re_s > 0, -mag, mag)',
        tests=['tests/qr/test_mutation_kills_qr.py', 'tests/qr/test_qr_kernels.py'],
        why="the torch backend's larfg with sign(0) = -1 (its batched geqr2): R's signs differ from LAPACK's",
    ),
    dict(
        id='qr-torch-geqr2-conj-tau-dropped',
        file='mpslinalg/qr/kernels.py',
        pattern='C.sub_((t.conj()[:, None, None] * v[:, :, None]) * w)',
        replacement='C.sub_((t[:, None, None] * v[:, :, None]) * w)',
        tests=['tests/qr/test_qr_kernels.py', 'tests/qr/test_qr_api.py', 'tests/qr/test_qr_accuracy.py'],
        why='the torch geqr2 applies H instead of H^H (complex)',
    ),
    dict(
        id='qr-larft-diagonal-kept',
        file='mpslinalg/qr/kernels.py',
        pattern='G = torch.matmul(V.mH, V).triu(1)',
        replacement='G = torch.matmul(V.mH, V).triu(0)',
        tests=['tests/qr/test_qr_kernels.py', 'tests/qr/test_qr_api.py', 'tests/qr/test_qr_accuracy.py'],
        why='larft uses the diagonal of V^H V (off by one in the triangle)',
        equivalent=('the diagonal of M is never read: _trsm solves unit-triangular (the diagonal is '
                    'taken as 1), so keeping the diagonal of V^H V in G changes nothing'),
    ),
    dict(
        id='qr-backward-conj-dropped',
        file='mpslinalg/qr/ops.py',
        pattern='gA = gR @ R.mH if gR is not None else None',
        replacement='gA = gR @ R.mT if gR is not None else None',
        tests=['tests/qr/test_qr_grad.py'],
        why='qr backward with R^T instead of R^H',
    ),
    # ---- metal/svd.metal / mpslinalg/svd/ --------------------------------------------------------------
    dict(
        id='svd-metal-rotation-conj-dropped',
        file='metal/svd.metal',
        pattern='xp = svd_scale(c, p) - s_mul(s_conj(se), q);',
        replacement='xp = svd_scale(c, p) - s_mul(se, q);',
        tests=['tests/svd/test_svd_kernels.py'],
        why='the complex Jacobi rotation is not unitary',
    ),
    dict(
        id='svd-metal-gram-conj-dropped',
        file='metal/svd.metal',
        pattern=';\n          g += s_mul(s_conj(xp), xq);',  # the unscaled loop (the scaled one is indented deeper)
        replacement=';\n          g += s_mul(xp, xq);',
        tests=['tests/svd/test_svd_kernels.py'],
        why='svd_jacobi_small: the Gram entry x_p^T x_q instead of x_p^H x_q',
    ),
    dict(
        id='svd-metal-huge-zeta-overflow',
        file='metal/svd.metal',
        pattern='float t = az < 1.0e18f ? 1.0f / (az + sqrt(1.0f + az * az)) : 0.5f / az;',
        replacement='float t = 1.0f / (az + sqrt(1.0f + az * az));',
        tests=['tests/svd/test_mutation_kills_svd.py', 'tests/svd/test_svd_kernels.py', 'tests/svd/test_svd_accuracy.py'],
        why='1 + zeta^2 overflows: t = 0 for |zeta| > 1.8e19 (the pair is never rotated)',
    ),
    dict(
        id='svd-torch-rotation-conj-dropped',
        file='mpslinalg/svd/kernels.py',
        pattern='new_p = c * yp - se.conj() * yq',
        replacement='new_p = c * yp - se * yq',
        tests=['tests/svd/test_svd_api.py', 'tests/svd/test_svd_accuracy.py', 'tests/svd/test_svd_c.py'],
        why='the torch-op Jacobi rotation is not unitary (complex)',
    ),
    dict(
        id='svd-values-ascending',
        file='mpslinalg/svd/algorithm.py',
        pattern='S, order = S.sort(dim=-1, descending=True, stable=True)',
        replacement='S, order = S.sort(dim=-1, descending=False, stable=True)',
        tests=['tests/svd/test_svd_api.py', 'tests/svd/test_svd_accuracy.py', 'tests/svd/test_svd_c.py'],
        why='singular values returned in ascending order',
    ),
    dict(
        id='svd-row-sort-ascending',
        file='mpslinalg/svd/algorithm.py',
        pattern='rperm = As.abs().amax(-1).argsort(dim=-1, descending=True, stable=True)',
        replacement='rperm = As.abs().amax(-1).argsort(dim=-1, descending=False, stable=True)',
        tests=['tests/svd/test_svd_accuracy.py', 'tests/svd/test_svd_c.py'],
        why='the row-sorting preconditioner sorts the wrong way (graded accuracy lost)',
    ),
    dict(
        id='svd-jacobi-tol-100x',
        file='mpslinalg/svd/kernels.py',
        pattern='return math.sqrt(n) * u, 2 * n * u',
        replacement='return 100 * math.sqrt(n) * u, 2 * n * u',
        tests=['tests/svd/test_svd_accuracy.py', 'tests/svd/test_svd_api.py', 'tests/svd/test_svd_c.py'],
        why="issue 33 survivor: the Jacobi's rotation threshold 100x looser (pairs left at |cos| up to 100·√n·u)",
    ),
    dict(
        id='svd-jacobi-ctol-100x',
        file='mpslinalg/svd/kernels.py',
        pattern='return math.sqrt(n) * u, 2 * n * u',
        replacement='return math.sqrt(n) * u, 200 * n * u',
        tests=['tests/svd/test_svd_accuracy.py', 'tests/svd/test_svd_api.py', 'tests/svd/test_svd_c.py'],
        why="the Jacobi's convergence threshold 100x looser (a matrix stopped by the sweep bound reported converged)",
    ),
    # ---- mpslinalg/svd/spectral.py, lstsq.py --------------------------------------------------------
    dict(
        id='spectral-default-rtol-min-dim',
        file='mpslinalg/svd/spectral.py',
        pattern='default = torch.finfo(A.dtype).eps * max(A.shape[-2], A.shape[-1])',
        replacement='default = torch.finfo(A.dtype).eps * min(A.shape[-2], A.shape[-1])',
        tests=['tests/svd/test_mutation_kills_svd.py', 'tests/svd/test_rank_cond_norm.py', 'tests/svd/test_pinv.py'],
        why="rtol's default eps * min(m, n) instead of torch's eps * max(m, n)",
    ),
    dict(
        id='spectral-keep-at-threshold',
        file='mpslinalg/svd/spectral.py',
        pattern='    return S > tol',
        replacement='    return S >= tol',
        tests=['tests/svd/test_mutation_kills_svd.py', 'tests/svd/test_rank_cond_norm.py', 'tests/svd/test_pinv.py'],
        why='a singular value equal to the threshold counts (torch: strictly greater)',
    ),
    dict(
        id='spectral-atol-given-keeps-default-rtol',
        file='mpslinalg/svd/spectral.py',
        pattern='return atol_t, _tol_tensor(op, "rtol", 0.0 if atol > 0 else default, A)',
        replacement='return atol_t, _tol_tensor(op, "rtol", default, A)',
        tests=['tests/svd/test_mutation_kills_svd.py', 'tests/svd/test_rank_cond_norm.py', 'tests/svd/test_pinv.py'],
        why='with atol > 0 given, rtol keeps its default (torch: 0)',
    ),
    dict(
        id='spectral-pinv-backward-sign',
        file='mpslinalg/svd/spectral.py',
        pattern='return -(P @ K).mH + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)',
        replacement='return (P @ K).mH + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)',
        tests=['tests/svd/test_pinv.py'],
        why='pinv backward (m <= n) with a flipped term',
    ),
    dict(
        id='spectral-rank-legacy-tol-as-rtol',
        file='mpslinalg/svd/spectral.py',
        pattern='atol, rtol = tol, 0.0',
        replacement='atol, rtol = 0.0, tol',
        tests=['tests/svd/test_rank_cond_norm.py'],
        why="issue 33 survivor: matrix_rank's legacy tol= read as a relative tolerance (torch: atol = tol, rtol = 0)",
    ),
    dict(
        id='lstsq-gelss-rcond-zero-as-eps',
        file='mpslinalg/svd/lstsq.py',
        pattern='thr = torch.maximum((eps if rcond < 0 else rcond) * S[..., :1], _gelss_floor(A).unsqueeze(-1))',
        replacement='thr = torch.maximum((eps if rcond <= 0 else rcond) * S[..., :1], _gelss_floor(A).unsqueeze(-1))',
        tests=['tests/svd/test_lstsq.py'],
        why="issue 33 survivor: gelss with rcond=0 on the kernel path cuts at eps·σ₁ (xgelss: only rcond < 0 means eps)",
    ),
    dict(
        id='lstsq-gelsd-rcond-ge-1',
        file='mpslinalg/svd/lstsq.py',
        pattern='thr = (eps / 2 if rcond <= 0 or rcond >= 1 else rcond) * S[..., :1]',
        replacement='thr = (eps / 2 if rcond <= 0 else rcond) * S[..., :1]',
        tests=['tests/svd/test_mutation_kills_svd.py', 'tests/svd/test_lstsq.py'],
        why='gelsd with rcond >= 1 drops every singular value (LAPACK: rcond means u there)',
    ),
    dict(
        id='lstsq-min-norm-conj-dropped',
        file='mpslinalg/svd/lstsq.py',
        pattern='return Q @ solve_triangular(R.mH, B, upper=False)',
        replacement='return Q @ solve_triangular(R.mT, B, upper=False)',
        tests=['tests/svd/test_lstsq.py'],
        why='underdetermined complex least squares with R^T instead of R^H',
    ),
    dict(
        id='lstsq-gelsy-rank-at-threshold',
        file='mpslinalg/svd/lstsq.py',
        pattern='keep = ((d > rcond * d[..., :1]) & (d[..., :1] > 0))',
        replacement='keep = ((d >= rcond * d[..., :1]) & (d[..., :1] > 0))',
        tests=['tests/svd/test_mutation_kills_svd.py', 'tests/svd/test_lstsq.py'],
        why='gelsy counts a pivot equal to rcond * |r_11| (LAPACK: strictly greater)',
    ),
    dict(
        id='lstsq-qr-route-margin-inverted',
        file='mpslinalg/svd/lstsq.py',
        pattern='_QR_ROUTE_MARGIN = 32.0',
        replacement='_QR_ROUTE_MARGIN = 1 / 32',
        tests=['tests/svd/test_lstsq.py::test_gelsy_route_never_changes_the_rank',
               'tests/svd/test_lstsq.py::test_gelsy_kept_cases_are_the_pivoted_qr'],
        why="the CPU gelsy's QR-route gate 1024x too loose (c inverted): tall matrices near rank "
            "deficiency take the unpivoted QR with rank n where the pivoted QR's rank test drops a pivot",
    ),
    dict(
        id='lstsq-qr-route-margin-never',
        file='mpslinalg/svd/lstsq.py',
        pattern='_QR_ROUTE_MARGIN = 32.0',
        replacement='_QR_ROUTE_MARGIN = 32.0e6',
        tests=['tests/svd/test_lstsq.py::test_gelsy_routed_matrices_are_lapack_gels_bits'],
        why="the QR-route gate so tight that no matrix takes LAPACK's QR (the route's speed lost "
            "silently: its results are still right)",
    ),
    # ---- host synchronisation inside no-sync ops -----------------------------------------------------
    dict(
        id='lstsq-gelsy-host-sync',
        file='mpslinalg/svd/lstsq.py',
        pattern='T = R * keep.unsqueeze(-1)',
        replacement='T = R * keep.unsqueeze(-1) if bool(keep.any()) else R * 0',
        tests=['tests/svd/test_lstsq.py::test_no_host_sync'],
        why='a host read inside gelsy (same values: an early-out being written)',
    ),
    dict(
        id='tri-solve-host-sync',
        file='mpslinalg/triangular/algorithm.py',
        pattern='''    kernel = _uses_kernel(A)
    n = A.shape[-1]
    triton = not kernel and _use_triton(A, n)''',
        replacement='''    kernel = _uses_kernel(A)
    n = A.shape[-1] + 0 * int(A.isfinite().all())
    triton = not kernel and _use_triton(A, n)''',
        tests=['tests/oplayer/test_oplayer.py::test_ex_ops_never_read_back'],
        why='solve_triangular reads a value back (an input finiteness check)',
    ),
    # ---- mpslinalg/lu -----------------------------------------------------------------------------
    dict(
        id='lu-torch-recursion-info-off-by-one',
        file='mpslinalg/lu/kernels.py',
        pattern='info.copy_(torch.where((info == 0) & (inf > 0), inf + o, info))',
        replacement='info.copy_(torch.where((info == 0) & (inf > 0), inf + o + 1, info))',
        tests=['tests/lu/test_mutation_kills_lu.py', 'tests/lu/test_lu.py', 'tests/lu/test_lu_api.py'],
        why="issue 18 survivor: info off by one in the torch backend's recursion (n > 512 on the CPU)",
    ),
    dict(
        id='lu-getrf-host-sync',
        file='mpslinalg/lu/algorithm.py',
        pattern='''    if B > 0 and K > 0:
        kern = _kernels(LU)''',
        replacement='''    if B > 0 and K > 0 and not bool(info.any()):
        kern = _kernels(LU)''',
        tests=['tests/lu/test_mutation_kills_lu.py', 'tests/lu/test_lu.py', 'tests/lu/test_lu_api.py'],
        why='issue 18 survivor: a host sync inside _getrf (lu_factor_ex must not synchronise)',
    ),
    dict(
        id='lu-float64-to-float32-kernels',
        file='mpslinalg/lu/kernels.py',
        pattern='return x.dtype in E.GPU_DTYPES and backend_for',
        replacement='return (x.dtype.is_floating_point or x.dtype.is_complex) and backend_for',
        tests=['tests/lu/test_mutation_kills_lu.py', 'tests/lu/test_lu.py', 'tests/lu/test_lu_api.py'],
        why='issue 18 survivor: float64 sent to the float32 kernels on the emulator backend',
    ),
    dict(
        id='lu-getrs-transpose-conj',
        file='mpslinalg/lu/algorithm.py',
        pattern='op = (lambda t: t.mT) if trans == "T" else (lambda t: t.mH)',
        replacement='op = (lambda t: t.mT)',
        tests=['tests/lu/test_lu_api.py', 'tests/lu/test_solve.py'],
        why='adjoint solve on the kernels drops the conjugate',
    ),
    dict(
        id='lu-det-sign-parity',
        file='mpslinalg/lu/algorithm.py',
        pattern='odd = ((piv != ar).sum(-1) % 2)',
        replacement='odd = ((piv == ar).sum(-1) % 2)',
        tests=['tests/lu/test_mutation_kills_lu.py::test_det_sign_at_odd_and_even_orders', 'tests/lu/test_det.py'],
        why='permutation sign from the wrong count',
    ),
    dict(
        id='lu-slogdet-zero-phase',
        file='mpslinalg/lu/algorithm.py',
        pattern='phase = torch.where(absd == 0, torch.zeros_like(d), d / safe)',
        replacement='phase = d / safe',
        tests=['tests/lu/test_det.py'],
        why='complex slogdet of a singular matrix gives a nonzero sign',
        equivalent=('where |d| = 0, safe = 1 and d / safe = d = 0 exactly: the where selects the same '
                    'zero (its sign bit may differ, -0.0 == 0.0; the phase product is 0 either way)'),
    ),
    # ---- emulator runtime -------------------------------------------------------------------------
    dict(
        id='emu-tg-poison-per-group-dropped',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='if (tg_used) memset(tg_mem, 0xFF, tg_used); /* poison threadgroup memory */',
        replacement='/* poison dropped */',
        tests=['tests/emulator/test_mutation_kills_emulator.py', 'tests/emulator/test_emulator_faults.py'],
        why="threadgroup memory keeps the previous group's values (an uninitialised read looks fine)",
    ),
    dict(
        id='emu-tg-poison-at-load-dropped',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='memset(tg_arena, 0xFF, sizeof tg_arena);',
        replacement='/* arena not poisoned */',
        tests=['tests/emulator/test_mutation_kills_emulator.py', 'tests/emulator/test_emulator_faults.py'],
        why="the first launch's threadgroup memory is zero, not poison",
    ),
    dict(
        id='emu-barrier-releases-early',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='if (++bar_arrived == (unsigned)nthreads) {',
        replacement='if (++bar_arrived >= (unsigned)nthreads - 1) {',
        tests=['tests/emulator/test_emulator_kernels.py::test_block_reduce', 'tests/emulator/test_emulator_kernels.py'],
        why='a barrier releases the group before its last thread arrives',
        subsets=['ci'],
    ),
    dict(
        id='emu-reverse-order-is-inorder',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='perm[k] = (order == MPSLE_REVERSE) ? n - 1 - k : k;',
        replacement='perm[k] = k;',
        tests=['tests/emulator/test_mutation_kills_emulator.py', 'tests/emulator/test_emulator_kernels.py'],
        why="order='reverse' runs in order: a missing barrier goes unseen",
    ),
]

for _part in PARTS:
    MUTATIONS += runpy.run_path(str(Path(__file__).with_name(_part)))["MUTATIONS"]
