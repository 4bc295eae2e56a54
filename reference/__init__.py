"""Oracles for mpslinalg's tests and benchmarks (DESIGN §8).

This package is *not* part of the library's runtime; it is what every test and benchmark measures
the library against:

``reference.metrics``
    LAPACK's test ratios (``‖PA − LU‖/(n‖A‖u)``, ``‖B − AX‖/(‖A‖‖X‖u)``, …), the unit roundoff
    ``u`` and the pass mark ``PASS_RATIO = 30`` of LAPACK's ``TESTING/ctest.in`` (the
    Bunch–Kaufman ones are written in ``reference.metrics_ldl``, re-exported by ``reference.metrics``).
``reference.lapack``
    SciPy/LAPACK references in float64/complex128 of the (rounded) input, with ``torch.linalg``'s
    conventions and batching, plus ``getrf_pivots`` in the input's own precision (the QR/SVD ones are written in
    ``reference.lapack_orthogonal``, re-exported by ``reference.lapack``).
``reference.mp``
    mpmath references at arbitrary precision, with the working precision raised until the answer
    is correct to the requested digits (slow: small matrices only).
``reference.spectra``
    The general eigenproblem and the matrix exponential: SciPy's ``expm`` and ``geev``, the
    scaled forward error of an exponential, eigenpair residual ratios, eigenvalue matching.
``reference.matrices``
    Generators of hard matrices: prescribed condition number and singular-value profile, graded,
    Kahan, Wilkinson growth, near-singular, rank-deficient, extreme scales, Hilbert/Cauchy,
    triangular (Gaussian, well-conditioned, Gated-DeltaNet-like), real and complex (Kahan, Wilkinson
    and Hilbert are written in ``reference.matrices_structured``, re-exported by ``reference.matrices``;
    the seeding and argument plumbing of both in ``reference._generators``).

All functions take and return torch tensors on the CPU.
"""

import importlib
from types import ModuleType

__all__ = ["lapack", "matrices", "metrics", "mp", "spectra"]


def __getattr__(name: str) -> ModuleType:
    # Lazy: ``import reference`` stays cheap; SciPy/mpmath load on first use of their module.
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
