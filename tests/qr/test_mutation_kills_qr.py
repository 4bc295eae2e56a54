"""Kills the mutation gate's ``qr-*-larfg-zero-sign`` entries (issue 33: a survivor): the sign of
``R``'s diagonal when a column's leading entry ``alpha`` is zero.

LAPACK's ``larfg`` takes ``beta = -sign(Re alpha) ||[alpha; x]||`` with ``sign(+0) = +1``, so a
column whose leading entry is (exactly, positively) zero gets a negative diagonal entry of ``R``.
A generator testing ``alpha > 0`` instead of ``alpha >= 0`` flips that sign (and the reflector):
still a valid QR factorisation, so the xQRT01 ratios pass, but ``Q`` and ``R`` no longer equal
torch's/SciPy's, which the QR family promises (``qr``'s docstring). The inputs keep the leading
entries exactly zero at every step: permutation matrices (the cyclic shift: every column's pivot
entry is 0 when it is reduced, as Householder QR of a permutation only permutes and negates rows),
the reversal, and a random matrix with a zero leading entry (the first column's ``alpha``; later
columns' leading entries are generic). Not a permutation times a triangle: there the later leading
entries are zero only in exact arithmetic, and rounding decides their signs (LAPACK's own float32
and float64 signs differ there).

Pass marks: the diagonal signs equal LAPACK's exactly (where ``|R_jj|`` is far above rounding:
the permutations' are 1, the random matrix's are of order 1, κ <= 1e3); ``R`` equals LAPACK's
within the perturbation bound ``2·√2 κ₂ · 30 m u √n ‖A‖`` of two backward-stable Householder
factorisations (``test_qr_kernels.py``); the xQRT01 ratios stay below 30.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import gaussian

import mpslinalg as LA
from mpslinalg.qr import kernels as qrkern
from reference import metrics


def _shift(n: int, dtype: torch.dtype) -> torch.Tensor:
    """The cyclic shift ``P e_i = e_{i+1 mod n}``: a zero on every diagonal entry."""
    return torch.roll(torch.eye(n, dtype=dtype), 1, dims=0)


def _inputs(n: int, dtype: torch.dtype) -> torch.Tensor:
    A = gaussian((4, n, n), dtype, seed=n)
    A[0] = _shift(n, dtype)
    A[1] = _shift(n, dtype).mT
    A[2] = torch.eye(n, dtype=dtype).flip(0)  # the reversal: zero leading entries in the first half
    A[3, 0, 0] = 0  # the first column's leading entry

    return A


def _check(A: torch.Tensor) -> None:
    Q, R = LA.qr(A)
    Qr, Rr = torch.linalg.qr(_wide := A.to(torch.complex128 if A.is_complex() else torch.float64))
    d, dr = R.diagonal(dim1=-2, dim2=-1).cpu(), Rr.diagonal(dim1=-2, dim2=-1)
    assert bool((dr.abs() > 1e-3).all())  # far above rounding: the sign is well defined
    assert torch.equal(torch.sgn(d.real).double(), torch.sgn(dr.real)), (d, dr)  # real diagonal, LAPACK's signs
    m, n = A.shape[-2], A.shape[-1]
    kappa = torch.linalg.cond(_wide)
    bound = 2 * math.sqrt(2) * kappa * 30 * m * metrics.unit_roundoff(A.dtype) * math.sqrt(n)
    err = torch.linalg.matrix_norm(R.cpu().to(Rr.dtype) - Rr, 2) / torch.linalg.matrix_norm(_wide, 2)
    assert bool((err <= bound).all()), err / bound
    recon, orth = metrics.qr_ratios(A, Q.cpu(), R.cpu())
    assert float(recon.max()) < 30 and float(orth.max()) < 30


@pytest.mark.parametrize("n", [5, 40], ids=["small", "blocked"])
def test_zero_leading_entries_give_lapacks_signs(backend, backend_device, gpu_dtype, n):
    _check(_inputs(n, gpu_dtype).to(backend_device))


@pytest.mark.parametrize("n", [5, 40], ids=["small", "blocked"])
def test_zero_leading_entries_torch_kernels(monkeypatch, gpu_dtype, n):
    # the torch backend's own geqr2 (batched small matrices; the CPU hands single ones to LAPACK)
    monkeypatch.setitem(qrkern.TUNING.torch_batch_min, "cpu", 1)
    monkeypatch.setattr(qrkern.TUNING, "torch_blocked", True)
    with LA.use_backend("torch"):
        _check(_inputs(n, gpu_dtype))
