"""The SVD family's declaration (``svd``, ``svdvals``, ``pinv``, ``lstsq``, ``matrix_rank``, ``cond``,
``matrix_norm``), until ``svd.py``, ``spectral.py`` and ``lstsq.py`` are one package ``svd/`` that
declares it in its ``__init__.py``."""

from __future__ import annotations

from .lstsq import lstsq
from .oplayer.family import Family, Route, takes
from .spectral import cond, matrix_norm, matrix_rank, pinv
from .svd import svd, svd_ex, svdvals

__all__ = ["FAMILY", "cond", "lstsq", "matrix_norm", "matrix_rank", "pinv", "svd", "svd_ex", "svdvals"]


def _route_svd(op, A, full_matrices=True, driver=None):
    return op(A, full_matrices=full_matrices) if driver is None and takes(A) else None


def _route_svdvals(op, A, driver=None):
    return op(A) if driver is None and takes(A) else None


def _route_lstsq(op, A, B, rcond=None, driver=None):
    return op(A, B, rcond=rcond) if driver is None and takes(A, B) else None


def _route_pinv(op, A, atol=None, rtol=None, hermitian=False):
    return op(A, atol=atol, rtol=rtol, hermitian=hermitian) if takes(A) else None


FAMILY = Family(
    name="svd",
    order=50,
    ops=("svd", "svd_ex", "svdvals", "pinv", "lstsq", "matrix_rank", "cond", "matrix_norm"),
    routes=(
        Route("svd", "linalg_svd", _route_svd),
        Route("svdvals", "linalg_svdvals", _route_svdvals),
        Route("pinv", "linalg_pinv.atol_rtol_tensor", _route_pinv),
        Route("lstsq", "linalg_lstsq", _route_lstsq),
    ),
    metal=("svd",),
    workloads="mpslinalg.svd_workloads",
)
