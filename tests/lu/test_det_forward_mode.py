"""Forward-mode ``det`` at and near singular matrices (issue 33, item 2), every backend and order.

The tangent of ``det`` along ``T`` is ``tr(adj(A) T) = Σ conj(G*) ⊙ T`` with ``G* = adj(A)ᴴ``, the
reverse-mode gradient at ``g = 1``; the forward mode computes it from the same adjugate as the
reverse mode (``lu.ops._det_adjugate_h``). Before, it was ``det · tr(A⁻¹ T)``: NaN at singular
matrices (n >= 5, where the LU family serves det), zero from torch.linalg.det's own forward mode
on the torch backend, and inconsistent with the reverse mode near singularity.

Truth: ``adj(A)`` by cofactors in float64/complex128 (``helpers.adjugate``) of the exactly
representable input.

Pass mark (derived from ``test_det_adjugate.py``'s bound on the gradient): the gradient ``G`` has
``‖G − G*‖₁ <= 2 · 30 · n² u κ̃ ‖G*‖₁`` with ``κ̃ = max(σ₁/σ_{n−1}, κ₂(M'))`` (``M'``: ``Aᵀ`` with its
smallest pivot replaced, the rank-1 formula's matrix; on the path without a negligible pivot the
bound ``c n κ₂(A) u`` is smaller than this one only when ``σ_n`` is not tiny, and then κ₂(A) <=
σ₁/σ_{n−1} · σ_{n−1}/σ_n is covered by the test's choice of inputs: ``σ_n`` is either 0 or at
least 1e-3 of ``σ_{n−1}``, or a rounding-level pivot that the formula treats as zero). The
tangent is ``Σ conj(G) ⊙ T``, so ``|t − t*| <= max|T| · Σ|G − G*| <= max|T| · n ‖G − G*‖₁``, plus
the sum's own rounding ``n² u Σ|G||T|`` (absorbed: it is below the first term's factor 2).
The consistency check against the reverse mode computed by the same backend is tighter: both
contract one adjugate, so they differ by the two sums' rounding, ``2 n² u Σ|G||T|``.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from helpers import adjugate, gaussian

import mpslinalg as LA
from mpslinalg.oplayer import derivatives as D
from reference import metrics


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def _jvp(A: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    with fwAD.dual_level():
        return fwAD.unpack_dual(LA.det(fwAD.make_dual(A, T))).tangent


def _inputs(n: int, dtype: torch.dtype) -> torch.Tensor:
    """Exactly singular (rank n − 1, several shapes of singularity), near singular (σ_n from a
    rounding-level perturbation to 1e-3 σ_{n−1}), rank n − 2, and one well-conditioned matrix."""
    base = gaussian((9, n, n), dtype, seed=11 + n)
    A = base.clone()
    A[0, -1] = A[0, 0]                       # two equal rows
    A[1, :, 1] = 0                           # a zero column
    A[2, n // 2] = 2 * A[2, 0] - A[2, 1]     # a combination of rows (rounded: rounding-level pivot)
    A[3] = torch.eye(n, dtype=dtype)         # the reproducer: eye with A[-1, -1] = 0
    A[3, -1, -1] = 0
    A[4, :, 0] = A[4, :, 2]                  # equal columns, then perturbed below: near singular
    A[5] = A[4]
    A[6] = A[4]
    A[4, 0, 0] += 1e-6 * A[4, 0, 0].abs()
    A[5, 1, 0] += 1e-3
    A[6, :, 1] = 0                           # rank n − 2
    A[6, :, n - 1] = 0
    return A                                 # A[7], A[8]: Gaussian


def _kappa(A: torch.Tensor) -> torch.Tensor:
    """κ̃ = max(σ₁/σ_{n−1}, κ₂(M')), M' from the LU of Aᵀ (partial pivoting, as every backend)."""
    Aw = _wide(A)
    s = torch.linalg.svdvals(Aw)
    LU, piv, _ = torch.linalg.lu_factor_ex(Aw.mT)
    onehot, t = D.det_pivot_replacement(LU)
    P, L, U = torch.lu_unpack(LU + torch.diag_embed(t * onehot), piv)
    return torch.maximum(s[..., 0] / s[..., -2], torch.linalg.cond(P @ L @ U))


@pytest.mark.parametrize("n", [3, 5, 8])
def test_det_tangent_is_tr_adjugate_dA(backend, backend_device, gpu_dtype, n):
    A = _inputs(n, gpu_dtype).to(backend_device)
    T = gaussian(A.shape, gpu_dtype, seed=3).to(backend_device)
    t = _jvp(A, T).cpu()
    G_ref = adjugate(A.cpu()).mH
    t_ref = (G_ref.conj() * _wide(T.cpu())).sum((-2, -1))
    u = metrics.unit_roundoff(gpu_dtype)
    bound = 2 * 30 * n**3 * u * _kappa(A.cpu()) * metrics.norm1(G_ref) * T.abs().amax((-2, -1)).cpu()
    # rank <= n − 2: G* = 0, and the computed adjugate's entries are products of n − 1 singular
    # values of which one is rounding-level (<= c n u σ₁): |t| <= 2 · 30 · n³ u σ₁^{n−1} max|T|
    low = metrics.norm1(G_ref) == 0
    s1 = torch.linalg.matrix_norm(_wide(A.cpu()), 2)
    bound = torch.where(low, 2 * 30 * n**3 * u * s1 ** (n - 1) * T.abs().amax((-2, -1)).cpu(), bound)
    err = (_wide(t) - t_ref).abs()
    assert bool(torch.isfinite(t).all()), t
    assert bool((err <= bound).all()), {"err/bound": err / bound}
    assert float((t[3] - 1 * T[3, -1, -1].cpu()).abs()) <= 2 * n * u * float(T[3].abs().max())  # exact case


@pytest.mark.parametrize("n", [3, 5, 8])
def test_det_tangent_agrees_with_reverse_mode(backend, backend_device, gpu_dtype, n):
    A = _inputs(n, gpu_dtype).to(backend_device)
    T = gaussian(A.shape, gpu_dtype, seed=4).to(backend_device)
    t = _jvp(A, T)
    Ar = A.clone().requires_grad_()
    (G,) = torch.autograd.grad(LA.det(Ar).real.sum() if gpu_dtype.is_complex else LA.det(Ar).sum(), Ar)
    if gpu_dtype.is_complex:  # grad of Re det: conj-Wirtinger cotangent g = 1 (real part only)
        (G,) = torch.autograd.grad(LA.det(Ar), Ar, torch.ones(A.shape[0], dtype=gpu_dtype, device=backend_device))
    t_rev = (G.conj() * T).sum((-2, -1))
    u = metrics.unit_roundoff(gpu_dtype)
    scale = (G.abs() * T.abs()).sum((-2, -1))
    assert bool(((t - t_rev).abs() <= 2 * n * n * u * scale).all()), (t, t_rev)


def test_det_tangent_under_jacfwd_at_singular_matrices(backend, backend_device):
    # torch.func's forward mode (its own path through the op's autograd.Function)
    n = 5
    A = _inputs(n, torch.float32)[:4].to(backend_device)
    J = torch.func.vmap(torch.func.jacfwd(LA.det))(A).cpu()
    G_ref = adjugate(A.cpu()).mH  # d det / dA_ij = adj(A)_ji for real A
    bound = 2 * 30 * n**3 * metrics.unit_roundoff(torch.float32) * _kappa(A.cpu()) * metrics.norm1(G_ref)
    err = metrics.norm1(_wide(J) - G_ref)
    assert not bool((metrics.norm1(G_ref) == 0).any())  # rank n − 1 or more only (κ̃ finite)
    assert bool((err <= bound).all()), {"err/bound": err / bound}


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float64])
def test_det_tangent_outside_the_table_is_ours(routing_table, dtype):
    # the torch backend's front door hands a plain det outside routing.WHEN to torch.linalg.det,
    # whose forward mode is 0 at a singular matrix: a dual A must take our op
    n = 6
    A = torch.eye(n, dtype=dtype)
    A[-1, -1] = 0
    T = torch.zeros(n, n, dtype=dtype)
    T[-1, -1] = 1
    assert _jvp(A, T) == 1  # tr(adj(A) T) = adj(A)[n-1, n-1] = 1, exactly (products of ones)
