"""What several SVD test modules share: the LAPACK-ratio assertion and the run of a Triton check in
the interpreter with the SVD's CUDA dispatch (seeded inputs: ``helpers.gaussian``).

Imported as ``svd.harness`` (``tests/`` is on the path both under pytest and in the interpreter's
subprocess).
"""

from __future__ import annotations

import helpers

from reference import metrics


def assert_svd_ratios(A, U, S, Vh, threshold: float, what=None) -> None:
    """LAPACK ``xDRVBD`` ratios of ``A = U diag(S) Vh`` below ``threshold``, ``S`` in order.

    The ratios are ``‖A − UΣVᴴ‖/(max(m,n)‖A‖u)``, ``‖I − UᴴU‖/(m u)`` and ``‖I − VᴴV‖/(n u)``
    (``reference.metrics.svd_ratios``); each must be below ``threshold`` (a NaN fails), and ``S``
    must be non-negative and non-increasing (order ratio exactly 0). ``what`` labels the failure.
    """
    r = metrics.svd_ratios(A, U, S, Vh)
    worst = {k: float(getattr(r, k).max()) for k in ("recon", "u_orth", "v_orth")}
    order = float(r.order.max())
    assert all(v < threshold for v in worst.values()) and order == 0, (what, worst, order)


def run_interpreted(module: str, code: str) -> None:
    """Run ``code`` under Triton's interpreter (:func:`helpers.run_interpreted`: a subprocess; skips
    without Triton) with ``module`` imported as ``t`` and the C kernel switched off
    (``svd_c.usable``), so that ``mpslinalg.svd`` dispatches as on CUDA."""
    helpers.run_interpreted("import warnings; warnings.simplefilter('ignore', RuntimeWarning)\n"
                            "from mpslinalg.svd import c as svd_c; svd_c.usable = lambda A: False\n"
                            f"import {module} as t\n" + code)
