"""The mutation gate's entries for the operation layer (``mpslinalg/oplayer``) and the triangular
family (``metal/triangular.metal``, ``mpslinalg/triangular``): part of ``MUTATIONS`` in
``scripts/mutations.py``, which documents the fields.
"""

# ruff: noqa: E501  (patterns are verbatim source lines)

MUTATIONS = [
    # ---- mpslinalg/oplayer/derivatives.py ---------------------------------------------------------
    dict(
        id='deriv-inv-backward-conj-dropped',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='XH = X.mH',
        replacement='XH = X.mT',
        tests=['tests/lu/test_lu_grad.py'],
        why='inv backward with the transpose instead of the conjugate transpose',
    ),
    dict(
        id='deriv-inv-jvp-sign',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='return -(X @ or_zeros(dA, X) @ X)',
        replacement='return X @ or_zeros(dA, X) @ X',
        tests=['tests/oplayer/test_mutation_kills_derivatives.py', 'tests/lu/test_lu_grad.py'],
        why='inv forward-mode derivative with the wrong sign',
    ),
    dict(
        id='deriv-solve-backward-conj-dropped',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='gB_full = solve(A.mH, gX, left)',
        replacement='gB_full = solve(A.mT, gX, left)',
        tests=['tests/lu/test_lu_grad.py'],
        why='solve backward solves with A^T, not A^H',
    ),
    dict(
        id='deriv-solve-backward-gA-conj-dropped',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='-(gB_full @ X.mH) if left',
        replacement='-(gB_full @ X.mT) if left',
        tests=['tests/lu/test_lu_grad.py'],
        why='gA = -gB X^T (conjugate dropped)',
    ),
    dict(
        id='deriv-solve-jvp-sign',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='R = R - (dA @ X if left else X @ dA)',
        replacement='R = R + (dA @ X if left else X @ dA)',
        tests=['tests/oplayer/test_mutation_kills_derivatives.py', 'tests/lu/test_lu_grad.py'],
        why='solve jvp: dX = A^-1 (dB + dA X)',
    ),
    dict(
        id='deriv-solve-jvp-right-order',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='R = R - (dA @ X if left else X @ dA)',
        replacement='R = R - (dA @ X if left else dA @ X)',
        tests=['tests/oplayer/test_mutation_kills_derivatives.py', 'tests/lu/test_lu_grad.py'],
        why='solve jvp for left=False multiplies on the wrong side',
    ),
    dict(
        id='deriv-slogdet-cotangent-conj-dropped',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='g = g - 1j * (gsign.conj() * sign).imag',
        replacement='g = g - 1j * (gsign * sign).imag',
        tests=['tests/lu/test_lu_grad.py'],
        why='complex slogdet backward: conj(g_sign) dropped',
    ),
    dict(
        id='deriv-slogdet-jvp-sign-real-part',
        file='mpslinalg/oplayer/derivatives.py',
        pattern='return sign * (1j * t.imag), t.real.to(logabs.dtype)',
        replacement='return sign * (1j * t.real), t.real.to(logabs.dtype)',
        tests=['tests/oplayer/test_mutation_kills_derivatives.py', 'tests/lu/test_lu_grad.py'],
        why='complex slogdet jvp: d sign from Re t',
    ),
    # ---- metal/triangular.metal -------------------------------------------------------------------
    dict(
        id='tri-trtri-barrier-removed',
        file='metal/triangular.metal',
        pattern='''  threadgroup_barrier(mem_flags::mem_threadgroup);

  const int c = (int)tid;''',
        replacement='  const int c = (int)tid;',
        tests=['tests/triangular/test_triangular_kernels.py::test_trtri_diag_matches_contract'],
        why='substitution reads the tile before other threads staged it',
        subsets=['ci'],
    ),
    dict(
        id='tri-trsm-barrier-removed',
        file='metal/triangular.metal',
        pattern='''  threadgroup_barrier(mem_flags::mem_threadgroup);

  const int s = (int)tid / ct;''',
        replacement='  const int s = (int)tid / ct;',
        tests=['tests/triangular/test_triangular_kernels.py::test_trsm_small_all_variants'],
        why='trsm_small reads the packed triangle before it is staged',
    ),
    dict(
        id='tri-trtri-conj-dropped',
        file='metal/triangular.metal',
        pattern='L[i * TRI_LD + j] = conj ? s_conj(v) : v;',
        replacement='L[i * TRI_LD + j] = v;',
        tests=['tests/triangular/test_triangular_kernels.py'],
        why='conj(A) flag ignored by trtri_diag',
    ),
    dict(
        id='tri-trsm-conj-b-dropped',
        file='metal/triangular.metal',
        pattern='x[I][ii] = conj_b ? s_conj(v) : v;',
        replacement='x[I][ii] = v;',
        tests=['tests/triangular/test_mutation_kills_triangular.py', 'tests/triangular/test_triangular_kernels.py'],
        why='conj(B) flag ignored by trsm_small',
    ),
    dict(
        id='tri-trtri-unit-diagonal-read',
        file='metal/triangular.metal',
        pattern='''            if (!unit) {
              s[r] = s_div(s[r], L[row[r] + i0 + r]);''',
        replacement='''            if (true) {
              s[r] = s_div(s[r], L[row[r] + i0 + r]);''',
        tests=['tests/triangular/test_triangular_kernels.py'],
        why='unit diagonal read (and divided by) instead of taken as 1',
    ),
    dict(
        id='tri-trsm-unit-diagonal-read',
        file='metal/triangular.metal',
        pattern='''        if (!UNIT) {
          x[jj] = s_div(x[jj], quad_get(l, jj % 4));''',
        replacement='''        if (true) {
          x[jj] = s_div(x[jj], quad_get(l, jj % 4));''',
        tests=['tests/triangular/test_triangular_kernels.py::test_trsm_small_all_variants'],
        why='trsm_small divides by the unit diagonal (not staged: zero) instead of taking it as 1',
    ),
    dict(
        id='tri-trsm-mma-simdgroup-barrier-removed',
        file='metal/triangular.metal',
        pattern="    simdgroup_barrier(mem_flags::mem_threadgroup);  // the lanes' stores before the matrix loads\n",
        replacement='',
        tests=['tests/triangular/test_triangular_kernels.py::test_trsm_small_matrix_unit_variant'],
        why="trsm_small_mma loads X tiles before the lanes' substitution results are ordered",
    ),
    dict(
        id='tri-trsm-small-group-overfills-threadgroup-memory',
        file='mpslinalg/triangular/kernels.py',
        pattern='spg = max(1, min(cols // ct, _TRSM_SMALL_QUADS // quads, nmat))',
        replacement='spg = max(1, min(cols // ct, nmat))',
        tests=['tests/triangular/test_triangular_kernels.py::test_trsm_small_launch_shapes_fit_the_kernel'],
        why='more systems per threadgroup than their triangles fit in trsm_small threadgroup memory',
    ),
    # ---- mpslinalg/triangular ---------------------------------------------------------------------
    dict(
        id='tri-backward-conj-dropped',
        file='mpslinalg/triangular/api.py',
        pattern='gB_full = _solve(A.mH, gX, not upper, left, unit)',
        replacement='gB_full = _solve(A.mT, gX, not upper, left, unit)',
        tests=['tests/triangular/test_triangular_grad.py'],
        why='solve_triangular backward solves with A^T, not A^H',
    ),
    dict(
        id='tri-backward-gA-conj-dropped',
        file='mpslinalg/triangular/api.py',
        pattern='gA = -(gB_full @ X.mH) if left else -(X.mH @ gB_full)',
        replacement='gA = -(gB_full @ X.mT) if left else -(X.mH @ gB_full)',
        tests=['tests/triangular/test_triangular_grad.py'],
        why='gA = -gB X^T (conjugate dropped) for left=True',
    ),
    dict(
        id='tri-kernel-conj-flag-dropped',
        file='mpslinalg/triangular/kernels.py',
        pattern='flags = int(unit) | (int(conj) << 1)',
        replacement='flags = int(unit)',
        tests=['tests/triangular/test_triangular.py', 'tests/triangular/test_triangular_kernels.py'],
        why='a conjugate view of A reaches trtri_diag without its conj flag (Metal ignores conj bits)',
    ),
    dict(
        id='tri-kernel-broadcast-batch-stride',
        file='mpslinalg/triangular/kernels.py',
        pattern='if phys.shape[0] != batch:  # broadcast batch',
        replacement='if False:  # broadcast batch',
        tests=['tests/triangular/test_triangular.py', 'tests/triangular/test_triangular_kernels.py'],
        why='a broadcast A (batch 1) is indexed with its own batch stride (reads past its end)',
    ),
    dict(
        id='tri-kernel-reverse-offset-off-by-one',
        file='mpslinalg/triangular/kernels.py',
        pattern='off += (phys.shape[1] - 1) * rs',
        replacement='off += phys.shape[1] * rs',
        tests=['tests/triangular/test_triangular.py', 'tests/triangular/test_triangular_kernels.py'],
        why='the reversal index map of an upper triangle starts one row too far',
    ),
    # ---- mpslinalg/oplayer/op.py -------------------------------------------------------------------
    dict(
        id='op-path-direct-while-recording',
        file='mpslinalg/oplayer/op.py',
        pattern='(type(a) not in _PLAIN or a.is_meta or (grad and a.requires_grad))',
        replacement='(type(a) not in _PLAIN or a.is_meta)',
        tests=['tests/oplayer/test_overhead.py'],
        why='a call that autograd records runs the impl directly: no backward, gradients silently missing',
    ),
    dict(
        id='checks-dtype-float64-on-mps-accepted',
        file='mpslinalg/oplayer/checks.py',
        pattern='if dtype in GPU_DTYPES or (dtype in _HOST_ONLY_DTYPES and not x.is_mps):',
        replacement='if dtype in GPU_DTYPES or dtype in _HOST_ONLY_DTYPES:',
        tests=['tests/oplayer/test_errors.py'],
        why='the fast dtype check accepts float64 on mps (Apple GPUs have none)',
    ),
    # ---- mpslinalg/oplayer/checks.py ---------------------------------------------------------------
    dict(
        id='checks-resolved-keeps-conj-bit',
        file='mpslinalg/oplayer/checks.py',
        pattern='return x.resolve_conj().resolve_neg().contiguous()',
        replacement='return x.resolve_neg().contiguous()',
        tests=['tests/lu/test_lu.py', 'tests/lu/test_solve.py', 'tests/lu/test_inv.py'],
        why='a conjugate view reaches a kernel unresolved (Metal binds storage: the conj bit is lost)',
        equivalent=('kernels/loader.BoundLibrary resolves the conj/neg bits of every tensor bound to a '
                    'kernel (the one place, issue 17.1), so a conj bit left by resolved() is resolved '
                    'there; the binding-level mutation below is the one that changes behaviour'),
    ),
    dict(
        id='loader-binding-keeps-bits',
        file='mpslinalg/kernels/loader.py',
        pattern='        a = a.resolve_conj().resolve_neg()',
        replacement='        pass',
        tests=['tests/oplayer/test_oplayer.py::test_negative_bit_views'],
        why='a neg-bit view is bound as raw storage (what a Mac does): the kernel reads the wrong sign',
    ),
    dict(
        id='checks-broadcast-accepts-mismatch',
        file='mpslinalg/oplayer/checks.py',
        pattern='if out[i] != 1 and out[i] != d:',
        replacement='if out[i] != 1 and out[i] > d:',
        tests=['tests/oplayer/test_errors.py', 'tests/oplayer/test_oplayer.py', 'tests/lu/test_solve.py'],
        why='batch dimensions 3 and 2 broadcast silently',
    ),
    dict(
        id='checks-raise-for-info-last-element',
        file='mpslinalg/oplayer/checks.py',
        pattern='flat = int(torch.nonzero(info.reshape(-1) > 0)[0, 0])',
        replacement='flat = int(torch.nonzero(info.reshape(-1) > 0)[-1, 0])',
        tests=['tests/oplayer/test_errors.py', 'tests/lu/test_lu.py'],
        why='the error names the last failing batch element, not the first (torch: the first)',
    ),
    dict(
        id='checks-rhs-right-side-rows',
        file='mpslinalg/oplayer/checks.py',
        pattern='k = B.shape[-2] if left else B.shape[-1]',
        replacement='k = B.shape[-2]',
        tests=['tests/oplayer/test_errors.py', 'tests/lu/test_solve.py'],
        why='X A = B checked against the rows of B',
    ),
]
