"""Scaling and squaring with the optimized Taylor approximants of Bader, Blanes and Casas (2019).

``exp(A) = T_m(2^-s A)^(2^s)``: ``T_m`` is a degree-``m`` approximant of the Taylor polynomial
(``m`` in 1, 2, 4, 8, 12, 18) evaluated with 0, 1, 2, 3, 4 and 5 matrix products; ``m`` and ``s``
are chosen from the matrix 1-norm so that the approximant's backward error is below the unit
roundoff of the dtype (the ``THETAS`` table: the largest norm each degree serves). Without
scaling (``s = 0``) the smallest degree whose ``θ`` bounds the norm is used; above ``θ_12``,
degree 18 with ``s = max(0, ceil(log2(‖A‖₁ / θ_18)))``. This is the algorithm and table of
``torch.linalg.matrix_exp`` (ATen's ``mexp``), so results agree with torch's to rounding.

Batches: the whole batch is evaluated with the largest degree any of its matrices needs (a higher
degree only lowers the backward error of a matrix of smaller norm), and the squarings are masked
per matrix (``X <- where(k < s, X X, X)``), so matrices of different norms share every product.
The one host read of a call is two integers: the batch's degree and its largest ``s`` (the
number of products to issue). Non-finite norms take degree 18 with ``s = 0`` (the result is NaN,
as torch's).
"""

from __future__ import annotations

import math

import torch

__all__ = ["THETAS", "DEGREES", "matrix_exp_impl", "taylor_approximant"]

#: The degrees of the approximants and, per precision, the largest 1-norm each serves with backward
#: error below u (Bader, Blanes, Casas 2019, Table 1; the values ATen's mexp uses).
DEGREES = (1, 2, 4, 8, 12, 18)
THETAS = {
    "single": (1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02,
               5.800524627688768e-01, 1.461661507209034e+00, 3.010066362817634e+00),
    "double": (2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04,
               4.991228871115323e-02, 2.996158913811580e-01, 1.090863719290036e+00),
}

# Degree 8 (the paper's eq. (11)): A4 = A2 (x1 A + x2 A2), A8 = (x3 A2 + A4)(x4 I + x5 A + x6 A2 + x7 A4),
# T8 = I + A + y2 A2 + A8. x7 has x3 squared in its denominator: with x3 once (as ATen's compute_T8 has it,
# torch 2.13) T8 agrees with the Taylor series only to degree 4 (the A^5 coefficient is 0.00752, not 1/120;
# tests/matrix_exp/test_matrix_exp_accuracy.py checks every coefficient up to the degree).
_S177 = math.sqrt(177.0)
_X3 = 2.0 / 3.0
_T8 = dict(x1=_X3 * (1 + _S177) / 88, x2=_X3 * (1 + _S177) / 352, x3=_X3,
           x4=(-271 + 29 * _S177) / (315 * _X3), x5=(-11 + 11 * _S177) / (1260 * _X3),
           x6=(-99 + 11 * _S177) / (5040 * _X3), x7=(89 - _S177) / (5040 * _X3 * _X3), y2=(857 - 58 * _S177) / 630)
# Degree 12: B_i = sum_j c[i][j] A^j over (I, A, A^2, A^3); A6 = B_2 + B_3^2; T12 = B_0 + (B_1 + A6) A6.
_C12 = ((9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
        (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
        (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
        (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359))
# Degree 18: B_i = sum_j c[i][j] A^j over (I, A, A^2, A^3, A^6); A9 = B_0 B_4 + B_3;
# T18 = B_1 + (B_2 + A9) A9.
_C18 = ((0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0),
        (0.0, 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
         -6.37898194594723280150e-04),
        (-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
         -6.98210122488052056106e-03, 3.34975017086070470649e-05),
        (-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
         2.95552570429315521194e-02, -1.39180257516060693404e-05),
        (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05))


def _combine(coeffs, powers):
    """``sum_j coeffs[j] * powers[j]`` (Python floats times matrices)."""
    out = powers[0] * coeffs[0]
    for c, P in zip(coeffs[1:], powers[1:]):
        out = out + P * c
    return out


def taylor_approximant(A: torch.Tensor, degree: int) -> torch.Tensor:
    """The degree-``degree`` approximant ``T_m(A)`` of ``exp(A)`` (``degree`` in :data:`DEGREES`).

    Parameters
    ----------
    A : torch.Tensor
        ``(*, n, n)``.
    degree : int

    Returns
    -------
    torch.Tensor
        ``T_m(A)``, fresh, same shape and dtype.
    """
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape)
    if degree == 1:
        return eye + A
    A2 = A @ A
    if degree == 2:
        return eye + A + A2 * 0.5
    if degree == 4:
        return eye + A + A2 @ (eye * 0.5 + A * (1 / 6) + A2 * (1 / 24))
    if degree == 8:
        k = _T8
        A4 = A2 @ (A * k["x1"] + A2 * k["x2"])
        A8 = (A2 * k["x3"] + A4) @ (eye * k["x4"] + A * k["x5"] + A2 * k["x6"] + A4 * k["x7"])
        return eye + A + A2 * k["y2"] + A8
    A3 = A2 @ A
    if degree == 12:
        powers = (eye, A, A2, A3)
        B = [_combine(row, powers) for row in _C12]
        A6 = B[2] + B[3] @ B[3]
        return B[0] + (B[1] + A6) @ A6
    if degree == 18:
        powers = (eye, A, A2, A3, A3 @ A3)
        B = [_combine(row, powers) for row in _C18]
        A9 = B[0] @ B[4] + B[3]
        return B[1] + (B[2] + A9) @ A9
    raise ValueError(f"no Taylor approximant of degree {degree}; expected one of {DEGREES}")


def _thetas(dtype: torch.dtype) -> tuple[float, ...]:
    return THETAS["double" if dtype in (torch.float64, torch.complex128) else "single"]


def degree_and_scaling(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per matrix of ``A (B, n, n)``: the index into :data:`DEGREES` and the squaring count ``s``
    (both int64 tensors on ``A``'s device; no host read)."""
    thetas = _thetas(A.dtype)
    norm = A.abs().sum(-2).amax(-1)  # the 1-norm: largest column sum of |a_ij|
    bounds = torch.tensor(thetas[:-1], dtype=norm.dtype, device=norm.device)
    finite = torch.isfinite(norm)
    # the smallest degree whose θ bounds the norm: count the θs the norm exceeds (NaN exceeds none)
    index = (norm[:, None] > bounds).sum(-1)
    index = torch.where(finite, index, torch.full_like(index, len(thetas) - 1))
    ratio = torch.where(finite, norm, torch.zeros_like(norm)) / thetas[-1]
    s = torch.ceil(torch.log2(ratio)).clamp_min(0)
    s = torch.where(index == len(thetas) - 1, s, torch.zeros_like(s)).nan_to_num(0.0)
    return index, s.to(torch.int64)


def matrix_exp_impl(A: torch.Tensor) -> torch.Tensor:
    """``exp(A)`` of every matrix of ``A (*, n, n)`` without checks (a fresh tensor).

    See the module docstring: degree by the batch's largest 1-norm, masked squarings; one host read
    of two integers (degree, largest squaring count) per call.
    """
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    if n == 1:
        return A.exp()
    X = A.reshape(-1, n, n)
    index, s = degree_and_scaling(X)
    top, s_max = torch.stack([index.max(), s.max()]).tolist()  # the one host read
    if s_max > 0:
        real = X.real.dtype if X.is_complex() else X.dtype
        half = s // 2  # 2^-s in two factors: each stays a normal number of the dtype (s <= 2 * 127 + log2 n)
        for part in (half, s - half):
            X = X * torch.pow(2.0, -part.to(torch.float64)).to(real)[:, None, None]
    E = taylor_approximant(X, DEGREES[top])
    for k in range(s_max):
        E = torch.where((k < s)[:, None, None], E @ E, E)
    return E.reshape(A.shape)
