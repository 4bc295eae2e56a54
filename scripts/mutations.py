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
        subsets=['ci'],
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
    # ---- mpslinalg/oplayer/derivatives.py ---------------------------------------------------------
    dict(
        id='deriv-inv-backward-conj-dropped',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='XH = X.mH',
        replacement='XH = X.mT',
        tests=['tests/test_lu_grad.py'],
        why='inv backward with the transpose instead of the conjugate transpose',
    ),
    dict(
        id='deriv-inv-jvp-sign',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='return -(X @ or_zeros(dA, X) @ X)',
        replacement='return X @ or_zeros(dA, X) @ X',
        tests=['tests/test_lu_grad.py'],
        why='inv forward-mode derivative with the wrong sign',
    ),
    dict(
        id='deriv-solve-backward-conj-dropped',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='gB_full = solve(A.mH, gX, left)',
        replacement='gB_full = solve(A.mT, gX, left)',
        tests=['tests/test_lu_grad.py'],
        why='solve backward solves with A^T, not A^H',
    ),
    dict(
        id='deriv-solve-backward-gA-conj-dropped',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='-(gB_full @ X.mH) if left',
        replacement='-(gB_full @ X.mT) if left',
        tests=['tests/test_lu_grad.py'],
        why='gA = -gB X^T (conjugate dropped)',
    ),
    dict(
        id='deriv-solve-jvp-sign',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='R = R - (dA @ X if left else X @ dA)',
        replacement='R = R + (dA @ X if left else X @ dA)',
        tests=['tests/test_lu_grad.py'],
        why='solve jvp: dX = A^-1 (dB + dA X)',
    ),
    dict(
        id='deriv-solve-jvp-right-order',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='R = R - (dA @ X if left else X @ dA)',
        replacement='R = R - (dA @ X if left else dA @ X)',
        tests=['tests/test_lu_grad.py'],
        why='solve jvp for left=False multiplies on the wrong side',
    ),
    dict(
        id='deriv-slogdet-cotangent-conj-dropped',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='g = g - 1j * (gsign.conj() * sign).imag',
        replacement='g = g - 1j * (gsign * sign).imag',
        tests=['tests/test_lu_grad.py'],
        why='complex slogdet backward: conj(g_sign) dropped',
    ),
    dict(
        id='deriv-slogdet-jvp-sign-real-part',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='return sign * (1j * t.imag), t.real.to(logabs.dtype)',
        replacement='return sign * (1j * t.real), t.real.to(logabs.dtype)',
        tests=['tests/test_lu_grad.py'],
        why='complex slogdet jvp: d sign from Re t',
    ),
    # ---- metal/lu.metal ---------------------------------------------------------------------------
    dict(
        id='lu-panel-tiny-pivot',
        file='metal/lu.metal',
        pattern='''      const bool use_recip = s_abs(pivot) >= S_SFMIN;
      const T rp = lu_recip(pivot);
      for (int r = col + 1 + t; r < m; r += nt) {''',
        replacement='''      const bool use_recip = true;
      const T rp = lu_recip(pivot);
      for (int r = col + 1 + t; r < m; r += nt) {''',
        tests=['tests/test_lu_kernels.py::test_subnormal_pivot_is_divided_not_inverted', 'tests/test_lu_kernels.py::test_subnormal_pivot_public_lu_factor_40'],
        why='issue 18 survivor: lu_panel always multiplies by the reciprocal (subnormal pivot -> inf)',
        subsets=['ci'],
    ),
    dict(
        id='lu-tile-tiny-pivot',
        file='metal/lu.metal',
        pattern='''      const bool use_recip = s_abs(pivot) >= S_SFMIN;
      const T rp = lu_recip(pivot);
      for (int r = j + 1 + t0; r < m; r += nt) {''',
        replacement='''      const bool use_recip = true;
      const T rp = lu_recip(pivot);
      for (int r = j + 1 + t0; r < m; r += nt) {''',
        tests=['tests/test_lu_kernels.py::test_subnormal_pivot_is_divided_not_inverted'],
        why='lu_small / lu_small_solve always multiply by the reciprocal',
    ),
    dict(
        id='lu-pivot-tie-flipped',
        file='metal/lu.metal',
        pattern='(v == bv && i < bi)',
        replacement='(v == bv && i > bi)',
        tests=['tests/test_lu_kernels.py'],
        why='ties go to the last row, not the first (i?amax)',
    ),
    dict(
        id='lu-pivot-nan-tie-flipped',
        file='metal/lu.metal',
        pattern='return vn ? i < bi :',
        replacement='return vn ? i > bi :',
        tests=['tests/test_lu_kernels.py'],
        why='between two NaNs the last wins (torch/MKL: the first)',
    ),
    dict(
        id='lu-pivot-nan-loses',
        file='metal/lu.metal',
        pattern='''  if (vn != bn) {
    return vn;''',
        replacement='''  if (vn != bn) {
    return bn;''',
        tests=['tests/test_lu_kernels.py'],
        why='a NaN never wins the pivot search (NaN hidden from the factor)',
    ),
    dict(
        id='lu-panel-barrier-after-reduction',
        file='metal/lu.metal',
        pattern='    threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);',
        replacement='    // barrier removed',
        tests=['tests/test_lu_kernels.py::test_lu_panel'],
        why='the pivot is read while another thread already swaps rows',
    ),
    dict(
        id='lu-panel-barrier-after-swap',
        file='metal/lu.metal',
        pattern='''      threadgroup_barrier(mem_flags::mem_device);
      // 3. scale the column''',
        replacement='      // 3. scale the column',
        tests=['tests/test_lu_kernels.py::test_lu_panel'],
        why='scaling reads rows another thread is still swapping',
    ),
    dict(
        id='lu-panel-reduction-stops-early',
        file='metal/lu.metal',
        pattern='for (uint s = ntg / 2; s > 0; s >>= 1)',
        replacement='for (uint s = ntg / 2; s > 1; s >>= 1)',
        tests=['tests/test_lu_kernels.py::test_lu_panel'],
        why='tree reduction skips its last level (off-by-one bound)',
        subsets=['ci'],
    ),
    dict(
        id='lu-panel-info-off-by-one',
        file='metal/lu.metal',
        pattern='info[b] = col + 1;',
        replacement='info[b] = col;',
        tests=['tests/test_lu_kernels.py::test_zero_pivot_sets_info_and_no_nan'],
        why='info 0-based (LAPACK: 1-based)',
    ),
    dict(
        id='lu-small-solve-backsub-bound',
        file='metal/lu.metal',
        pattern='for (int i = 0; i < j; ++i) {',
        replacement='for (int i = 1; i < j; ++i) {',
        tests=['tests/test_lu_kernels.py::test_lu_small_solve'],
        why='back substitution never updates row 0',
    ),
    dict(
        id='lu-laswp-reverse-ignored',
        file='metal/lu.metal',
        pattern='const int i = reverse != 0 ? lo + cnt - 1 - step : lo + step;',
        replacement='const int i = lo + step;',
        tests=['tests/test_lu_kernels.py::test_lu_laswp_exact'],
        why='reverse interchanges applied forward',
    ),
    dict(
        id='lu-small-tile-index-map',
        file='metal/lu.metal',
        pattern='    s[(t / n) * LU_SMALL_LD + t % n] = a[t];',
        replacement='    s[(t % n) * LU_SMALL_LD + t / n] = a[t];',
        tests=['tests/test_lu_kernels.py::test_lu_small'],
        why='tile loaded column-major (wrong index map)',
    ),
    # ---- metal/triangular.metal -------------------------------------------------------------------
    dict(
        id='tri-trtri-barrier-removed',
        file='metal/triangular.metal',
        pattern='''  threadgroup_barrier(mem_flags::mem_threadgroup);

  const int c = (int)tid;''',
        replacement='  const int c = (int)tid;',
        tests=['tests/test_triangular_kernels.py::test_trtri_diag_matches_contract'],
        why='substitution reads the tile before other threads staged it',
        subsets=['ci'],
    ),
    dict(
        id='tri-trsm-barrier-removed',
        file='metal/triangular.metal',
        pattern='''  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (c >= k) {''',
        replacement='  if (c >= k) {',
        tests=['tests/test_triangular_kernels.py::test_trsm_small_all_variants'],
        why='trsm_small reads the packed triangle before it is staged',
    ),
    dict(
        id='tri-trtri-conj-dropped',
        file='metal/triangular.metal',
        pattern='L[i * TRI_LD + j] = conj ? s_conj(v) : v;',
        replacement='L[i * TRI_LD + j] = v;',
        tests=['tests/test_triangular_kernels.py'],
        why='conj(A) flag ignored by trtri_diag',
    ),
    dict(
        id='tri-trsm-conj-b-dropped',
        file='metal/triangular.metal',
        pattern='s[r] = conj_b ? s_conj(bi) : bi;',
        replacement='s[r] = bi;',
        tests=['tests/test_triangular_kernels.py'],
        why='conj(B) flag ignored by trsm_small',
    ),
    dict(
        id='tri-trtri-unit-diagonal-read',
        file='metal/triangular.metal',
        pattern='''            if (!unit) {
              s[r] = s_div(s[r], L[row[r] + i0 + r]);''',
        replacement='''            if (true) {
              s[r] = s_div(s[r], L[row[r] + i0 + r]);''',
        tests=['tests/test_triangular_kernels.py'],
        why='unit diagonal read (and divided by) instead of taken as 1',
    ),
    # ---- mpslinalg/triangular ---------------------------------------------------------------------
    dict(
        id='tri-backward-conj-dropped',
        file='mpslinalg/triangular/api.py',
        pattern='gB_full = _solve(A.mH, gX, not upper, left, unit)',
        replacement='gB_full = _solve(A.mT, gX, not upper, left, unit)',
        tests=['tests/test_triangular_grad.py'],
        why='solve_triangular backward solves with A^T, not A^H',
    ),
    dict(
        id='tri-backward-gA-conj-dropped',
        file='mpslinalg/triangular/api.py',
        pattern='gA = -(gB_full @ X.mH) if left else -(X.mH @ gB_full)',
        replacement='gA = -(gB_full @ X.mT) if left else -(X.mH @ gB_full)',
        tests=['tests/test_triangular_grad.py'],
        why='gA = -gB X^T (conjugate dropped) for left=True',
    ),
    dict(
        id='tri-kernel-conj-flag-dropped',
        file='mpslinalg/triangular/kernels.py',
        pattern='flags = int(unit) | (int(conj) << 1)',
        replacement='flags = int(unit)',
        tests=['tests/test_triangular.py', 'tests/test_triangular_kernels.py'],
        why='a conjugate view of A reaches trtri_diag without its conj flag (Metal ignores conj bits)',
    ),
    dict(
        id='tri-kernel-broadcast-batch-stride',
        file='mpslinalg/triangular/kernels.py',
        pattern='if phys.shape[0] != batch:  # broadcast batch',
        replacement='if False:  # broadcast batch',
        tests=['tests/test_triangular.py', 'tests/test_triangular_kernels.py'],
        why='a broadcast A (batch 1) is indexed with its own batch stride (reads past its end)',
    ),
    dict(
        id='tri-kernel-reverse-offset-off-by-one',
        file='mpslinalg/triangular/kernels.py',
        pattern='off += (phys.shape[1] - 1) * rs',
        replacement='off += phys.shape[1] * rs',
        tests=['tests/test_triangular.py', 'tests/test_triangular_kernels.py'],
        why='the reversal index map of an upper triangle starts one row too far',
    ),
    # ---- mpslinalg/oplayer/checks.py ---------------------------------------------------------------
    dict(
        id='checks-resolved-keeps-conj-bit',
        file='mpslinalg/oplayer/checks.py',
        pattern='return x.resolve_conj().resolve_neg().contiguous()',
        replacement='return x.resolve_neg().contiguous()',
        tests=['tests/test_lu.py', 'tests/test_solve.py', 'tests/test_inv.py'],
        why='a conjugate view reaches a kernel unresolved (Metal binds storage: the conj bit is lost)',
    ),
    dict(
        id='checks-broadcast-accepts-mismatch',
        file='mpslinalg/oplayer/checks.py',
        pattern='if out[i] != 1 and out[i] != d:',
        replacement='if out[i] != 1 and out[i] > d:',
        tests=['tests/test_errors.py', 'tests/test_oplayer.py', 'tests/test_solve.py'],
        why='batch dimensions 3 and 2 broadcast silently',
    ),
    dict(
        id='checks-raise-for-info-last-element',
        file='mpslinalg/oplayer/checks.py',
        pattern='flat = int(torch.nonzero(info.reshape(-1) > 0)[0, 0])',
        replacement='flat = int(torch.nonzero(info.reshape(-1) > 0)[-1, 0])',
        tests=['tests/test_errors.py', 'tests/test_lu.py'],
        why='the error names the last failing batch element, not the first (torch: the first)',
    ),
    dict(
        id='checks-rhs-right-side-rows',
        file='mpslinalg/oplayer/checks.py',
        pattern='k = B.shape[-2] if left else B.shape[-1]',
        replacement='k = B.shape[-2]',
        tests=['tests/test_errors.py', 'tests/test_solve.py'],
        why='X A = B checked against the rows of B',
    ),
    # ---- mpslinalg/small.py ------------------------------------------------------------------------
    dict(
        id='small-pivot-tie-last',
        file='mpslinalg/small.py',
        pattern='gt = v > best',
        replacement='gt = v >= best',
        tests=['tests/test_small.py', 'tests/test_small_classes.py'],
        why='the unrolled GEPP takes the last of equal pivots (LAPACK: the first)',
    ),
    dict(
        id='small-column-equilibration-dropped',
        file='mpslinalg/small.py',
        pattern='c = [P.pow2(-e) for e in ec]',
        replacement='c = [P.pow2(0 * e) for e in ec]',
        tests=['tests/test_small.py', 'tests/test_small_classes.py'],
        why='one-sided equilibration dropped (overflow / underflow on badly scaled inputs)',
    ),
    dict(
        id='small-info-off-by-one',
        file='mpslinalg/small.py',
        pattern='info = P.where(zero & (info == 0), k + 1, info)',
        replacement='info = P.where(zero & (info == 0), k, info)',
        tests=['tests/test_small.py', 'tests/test_small_classes.py'],
        why='info 0-based in the n <= 4 program',
    ),
    dict(
        id='small-det-parity',
        file='mpslinalg/small.py',
        pattern='odd = odd ^ (p != k)',
        replacement='odd = odd ^ (p == k)',
        tests=['tests/test_small.py', 'tests/test_small_classes.py'],
        why='determinant sign from the wrong parity',
    ),
    dict(
        id='small-getri-interchange-order',
        file='mpslinalg/small.py',
        pattern='for j in range(n - 2, -1, -1):',
        replacement='for j in range(n - 1):',
        tests=['tests/test_small.py', 'tests/test_small_classes.py'],
        why='getri applies the column interchanges forward instead of in reverse',
    ),
    # ---- mpslinalg/lu -----------------------------------------------------------------------------
    dict(
        id='lu-torch-recursion-info-off-by-one',
        file='mpslinalg/lu/kernels.py',
        pattern='info.copy_(torch.where((info == 0) & (inf > 0), inf + o, info))',
        replacement='info.copy_(torch.where((info == 0) & (inf > 0), inf + o + 1, info))',
        tests=['tests/test_mutation_kills_lu.py', 'tests/test_lu.py', 'tests/test_lu_api.py'],
        why="issue 18 survivor: info off by one in the torch backend's recursion (n > 512 on the CPU)",
    ),
    dict(
        id='lu-getrf-host-sync',
        file='mpslinalg/lu/algorithm.py',
        pattern='''    if B > 0 and K > 0:
        kern = _kernels(LU)''',
        replacement='''    if B > 0 and K > 0 and not bool(info.any()):
        kern = _kernels(LU)''',
        tests=['tests/test_mutation_kills_lu.py', 'tests/test_lu.py', 'tests/test_lu_api.py'],
        why='issue 18 survivor: a host sync inside _getrf (lu_factor_ex must not synchronise)',
    ),
    dict(
        id='lu-float64-to-float32-kernels',
        file='mpslinalg/lu/kernels.py',
        pattern='return x.dtype in E.GPU_DTYPES and backend_for',
        replacement='return (x.dtype.is_floating_point or x.dtype.is_complex) and backend_for',
        tests=['tests/test_mutation_kills_lu.py', 'tests/test_lu.py', 'tests/test_lu_api.py'],
        why='issue 18 survivor: float64 sent to the float32 kernels on the emulator backend',
    ),
    dict(
        id='lu-getrs-transpose-conj',
        file='mpslinalg/lu/algorithm.py',
        pattern='op = (lambda t: t.mT) if trans == "T" else (lambda t: t.mH)',
        replacement='op = (lambda t: t.mT)',
        tests=['tests/test_lu_api.py', 'tests/test_solve.py'],
        why='adjoint solve on the kernels drops the conjugate',
    ),
    dict(
        id='lu-det-sign-parity',
        file='mpslinalg/lu/algorithm.py',
        pattern='odd = ((piv != ar).sum(-1) % 2)',
        replacement='odd = ((piv == ar).sum(-1) % 2)',
        tests=['tests/test_det.py'],
        why='permutation sign from the wrong count',
    ),
    dict(
        id='lu-slogdet-zero-phase',
        file='mpslinalg/lu/algorithm.py',
        pattern='phase = torch.where(absd == 0, torch.zeros_like(d), d / safe)',
        replacement='phase = d / safe',
        tests=['tests/test_det.py'],
        why='complex slogdet of a singular matrix gives a nonzero sign',
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
        tests=['tests/emulator/test_emulator_kernels.py'],
        why='a barrier releases the group before its last thread arrives',
        subsets=['ci'],
    ),
    dict(
        id='emu-reverse-order-is-inorder',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='perm[k] = (order == MPSLE_REVERSE) ? n - 1 - k : k;',
        replacement='perm[k] = k;',
        tests=['tests/emulator/test_emulator_kernels.py'],
        why="order='reverse' runs in order: a missing barrier goes unseen",
    ),
    dict(
        id='emu-barrier-no-restart',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='''    bar_gen++;
    restart_round = 1;''',
        replacement='''    bar_gen++;
    restart_round = 0;''',
        tests=['tests/emulator/test_emulator_kernels.py'],
        why='after a barrier the next phase continues mid-order (in-order is not in order)',
    ),
    dict(
        id='emu-fiber-stack-guard-dropped',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='for (int i = 0; i < MAXT; i++) mprotect(p + i * slot, page, PROT_NONE);',
        replacement='/* no guard pages below fiber stacks */',
        tests=['tests/emulator/test_mutation_kills_emulator.py', 'tests/emulator/test_emulator_faults.py'],
        why="a fiber's stack overflow silently corrupts its neighbour",
    ),
    dict(
        id='emu-buffer-upper-guard-dropped',
        file='mpslinalg/emulator/_cpu.py',
        pattern='''        for region in (self.low, self.guard):
            if _libc.mprotect(region, self.GUARD, 0) != 0:''',
        replacement='''        for region in (self.low,):
            if _libc.mprotect(region, self.GUARD, 0) != 0:''',
        tests=['tests/emulator/test_emulator_faults.py'],
        why='guard=True no longer protects the page after a buffer',
    ),
]
