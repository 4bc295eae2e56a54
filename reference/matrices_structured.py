"""Structured hard matrices: Kahan's triangular, Wilkinson's growth matrix, Hilbert/Cauchy-like.

Split from :mod:`reference.matrices` (which re-exports them, so callers write
``matrices.kahan``); they share its plumbing (seeding, batch and dtype checks, unitary phases).
"""

from __future__ import annotations

import math

import torch

from ._generators import Batch, _batch, _dtype, _phases, _rng, _size

__all__ = ["hilbert_like", "kahan", "wilkinson_growth"]


def kahan(
    n: int,
    theta: float = 1.2,
    *,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Kahan's upper-triangular matrix ``K = diag(1, s, …, s^{n−1}) (I − c·N)``, ``N`` the strictly
    upper all-ones matrix, ``s = sin θ``, ``c = cos θ`` (Higham, *Accuracy and Stability*, §8.3).

    No diagonal entry is small (``>= s^{n−1}``), yet ``K`` is nearly singular: its inverse is
    known in closed form, ``(K⁻¹)_ij = c(1+c)^{j−i−1}/s^{j−1}`` for ``j > i`` and ``1/s^{i−1}`` on
    the diagonal, so ``‖K⁻¹‖ >= c(1+c)^{n−2}/s^{n−1}`` grows exponentially with ``n``. Classic
    trap for rank-revealing QR and for condition estimators.

    Complex variants are ``D K Dᴴ`` with a random unitary diagonal ``D`` (same singular values,
    still upper triangular with positive real diagonal). Real variants ignore the RNG.

    Parameters
    ----------
    n : int
        Order.
    theta : float
        Angle in ``(0, π/2)``; smaller ``θ`` is worse conditioned.

    Returns
    -------
    torch.Tensor
        ``batch + (n, n)``, upper triangular.
    """
    _size("n", n)
    if not 0.0 < theta < math.pi / 2:
        raise ValueError(f"theta must be in (0, pi/2), got {theta}")
    dt = _dtype(dtype)
    s, c = math.sin(theta), math.cos(theta)
    U = torch.eye(n, dtype=torch.float64) - c * torch.ones(n, n, dtype=torch.float64).triu(1)
    K = (s ** torch.arange(n, dtype=torch.float64)).unsqueeze(-1) * U
    b = _batch(batch)
    K = K.expand(*b, n, n).clone()
    if dt.is_complex:
        D = _phases((*b, n), _rng(generator, seed))
        K = D.unsqueeze(-1) * K * D.conj().unsqueeze(-2)
    return K.to(dt)


def wilkinson_growth(
    n: int,
    *,
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Wilkinson's matrix with growth factor ``2^{n−1}`` under partial pivoting.

    ``W_ii = 1``, ``W_ij = −1`` for ``i > j``, last column all ones. Partial pivoting picks the
    diagonal at every step (all candidates tie at modulus 1, and LAPACK takes the first), the
    last column doubles at every step, and ``U_nn = 2^{n−1}``, so
    ``max|U|/max|A| = 2^{n−1}``. Every entry of ``L`` and ``U`` is ``0, ±1`` or a power of two: the
    LU is exact in floating point while ``2^{n−1}`` is representable. A backward-stable LU still
    has ``‖A − LU‖ = 0`` here, but solving with ``W`` loses up to ``n−1`` bits.

    Complex variants scale column ``j`` by a random ``d_j ∈ {(±1 ± i)/2}``: the ties (all entries
    of a column have equal ``|Re|+|Im|``, LAPACK's ``icamax`` measure) and hence the pivots and
    the growth are unchanged, ``U_nn = 2^{n−1} d_n``; and since ``|d_j|² = 1/2`` is a power of two,
    every multiplier ``(−d_j)/d_j = −1`` and every update stays exact in complex arithmetic too
    (a general unit-modulus ``d_j`` would round). Real variants ignore the RNG.

    Parameters
    ----------
    n : int
        Order (``n <= 128`` for float32: ``2^{n−1}`` must not overflow).

    Returns
    -------
    torch.Tensor
        ``batch + (n, n)``.
    """
    _size("n", n)
    dt = _dtype(dtype)
    W = torch.eye(n, dtype=torch.float64) - torch.ones(n, n, dtype=torch.float64).tril(-1)
    if n:
        W[:, -1] = 1.0
    b = _batch(batch)
    W = W.expand(*b, n, n).clone()
    if dt.is_complex:
        g = _rng(generator, seed)
        re = torch.randint(0, 2, (*b, n), generator=g).to(torch.float64) - 0.5
        im = torch.randint(0, 2, (*b, n), generator=g).to(torch.float64) - 0.5
        W = W * torch.complex(re, im).unsqueeze(-2)
    return W.to(dt)


def hilbert_like(
    n: int,
    *,
    kind: str = "hilbert",
    batch: Batch = (),
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Hilbert or random Cauchy matrix: symmetric/positive, famously ill-conditioned.

    ``kind="hilbert"``: ``H_ij = 1/(i + j + 1)`` (0-based), ``κ₂(H_n) ≈ e^{3.5 n}`` (``H_8``:
    1.5e10). Its entries are not representable, so the rounded matrix is a relative perturbation
    ``|ΔH| <= u|H|`` of the exact ``H``; reference answers must be computed from the *rounded*
    matrix. ``kind="cauchy"``: ``C_ij = 1/(x_i + y_j)`` with ``x, y`` uniform in ``[0.5, 1.5]``
    (random; totally positive when sorted, here unsorted).

    Complex variants are ``D₁ A D₂`` with random unitary diagonals (same singular values). The
    real Hilbert matrix ignores the RNG.

    Parameters
    ----------
    n : int
        Order.
    kind : {"hilbert", "cauchy"}

    Returns
    -------
    torch.Tensor
        ``batch + (n, n)``.
    """
    _size("n", n)
    dt = _dtype(dtype)
    g = _rng(generator, seed)
    b = _batch(batch)
    i = torch.arange(n, dtype=torch.float64)
    if kind == "hilbert":
        A = (1.0 / (i.unsqueeze(-1) + i + 1.0)).expand(*b, n, n).clone()
    elif kind == "cauchy":
        x = 0.5 + torch.rand((*b, n), dtype=torch.float64, generator=g)
        y = 0.5 + torch.rand((*b, n), dtype=torch.float64, generator=g)
        A = 1.0 / (x.unsqueeze(-1) + y.unsqueeze(-2))
    else:
        raise ValueError(f"kind must be 'hilbert' or 'cauchy', got {kind!r}")
    if dt.is_complex:
        d1, d2 = _phases((*b, n), g), _phases((*b, n), g)
        A = d1.unsqueeze(-1) * A * d2.unsqueeze(-2)
    return A.to(dt)
