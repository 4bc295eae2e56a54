"""``det``'s backward from the forward's LU by a rank-1 pivot replacement (``oplayer.derivatives``,
"det: the adjugate from the forward's LU"): the formula the CPU uses at rank n − 1, forced here for
every element, against the float64 cofactor adjugate; the CPU's choice of formula; CUDA's SVD path.

Truth: ``G* = g · adj(A)ᴴ`` by cofactors in float64/complex128 of the (exactly representable) input.

Pass marks (derived):

* nonsingular ``A``: the formula solves ``M'ᴴ X = K^H`` with one backward-stable getrs and gets
  ``x = U'⁻¹ e_k`` from one triangular solve, so ``‖X̂ − X‖/‖X‖ <= c n κ₂(M') u`` and ``x``'s error
  is of the same order; ``det`` adds ``c n² κ₂(A) u`` (``test_det.py``). With ``κ̃ = max(κ₂(A),
  κ₂(M'))`` the ratio ``‖G − G*‖₁ / (‖G*‖₁ n κ̃ u)`` is at most ``c n``; the LAPACK pass mark 30
  (the main job's ``det fwd+bwd`` check, ``mainjob.workloads._grad_ratio``) applies.
* rank ``n − 1``: the computed LU is the exact LU of ``M + E``, ``‖E‖ <= c n u ‖M‖``, and the formula
  is an identity, so it returns ``adj(M + E)`` up to the solves' ``c n κ₂(M') u``. At rank
  ``n − 1``, ``adj(A) = (∏_{i<n} σ_i) · v_n u_nᴴ`` (up to phase); ``E`` moves the product by a
  relative ``<= (n − 1)‖E‖/σ_{n−1}`` and the singular vectors by ``<= ‖E‖/σ_{n−1}``, so
  ``‖G − G*‖ <= c n² u (σ₁/σ_{n−1}) ‖G*‖``. Pass: ``2 · 30 · n² u κ̃ ‖G*‖`` with
  ``κ̃ = max(σ₁/σ_{n−1}, κ₂(M'))`` (the factor 2 for second-order terms, as in ``test_det.py``).
* rank ``<= n − 2`` with exactly zero pivots: ``det(M) = det(M') = 0`` exactly, so ``G = 0`` exactly.
"""

from __future__ import annotations

import pytest
import torch
from helpers import adjugate

import mpslinalg as LA
from mpslinalg.lu import ops as lu_ops
from mpslinalg.lu.algorithm import _det_parts, _lu_solve_left, _trsm
from mpslinalg.oplayer import derivatives as D
from reference import matrices as mx
from reference import metrics

N = 8


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def _rank1_gradient(A: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rank-1 formula for every element, and ``κ₂(M')`` of each element."""
    d, LU_t, piv = lu_ops._det_op_impl(A)
    LU = LU_t.mT
    G = D.det_backward_lu(g, d, LU, piv, lu_solve_adjoint=lambda F, p, B: _lu_solve_left(F, p, B, "C"),
                          solve_upper=lambda U, B: _trsm(U, B, upper=True, left=True, unitriangular=False),
                          sign=_det_parts(LU, piv)[1].to(d.dtype))
    onehot, t = D.det_pivot_replacement(LU)
    LUp = _wide(LU) + torch.diag_embed(_wide(t * onehot))
    P, L, U = torch.lu_unpack(LUp, piv)
    return G, torch.linalg.cond(P @ L @ U)


def _ratio(G: torch.Tensor, G_ref: torch.Tensor, n: int, kappa: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    num = metrics.norm1(_wide(G) - G_ref)
    return num / (metrics.norm1(G_ref) * n * kappa * metrics.unit_roundoff(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float64])
def test_rank1_formula_nonsingular(dtype):
    A = torch.cat([mx.with_condition(N, kappa, batch=(4,), dtype=dtype, seed=i)
                   for i, kappa in enumerate((10.0, 1e3, 1e5))])
    A = torch.cat([A, mx.graded(N, decades=4.0, side="rows", batch=(2,), dtype=dtype, seed=9)])
    g = torch.randn(A.shape[0], dtype=dtype, generator=torch.Generator().manual_seed(1))
    G, kappa_p = _rank1_gradient(A, g)
    G_ref = g.to(_wide(A).dtype)[:, None, None] * adjugate(A).mH
    kappa = torch.maximum(torch.linalg.cond(_wide(A)), kappa_p)
    ratio = _ratio(G, G_ref, N, kappa, dtype)
    assert float(ratio.max()) <= 30, ratio


def _singular_batch(dtype: torch.dtype) -> torch.Tensor:
    """Rank n − 1 in the input's own precision: the singularities VMC and geometry meet."""
    A = mx.random(N, N, batch=(6,), dtype=dtype, seed=3)
    A[0, 5] = A[0, 2]          # two equal rows (electrons at one position)
    A[1, :, 6] = A[1, :, 1]    # two equal columns
    A[2, 4] = 0                # a zero row
    A[3, :, 0] = 0             # a zero column
    A[4, 7] = 2 * A[4, 0] - A[4, 3]  # a combination of two rows (rounded: a rounding-level pivot)
    A[5, 3] = A[5, 6] * 1e-3   # equal rows up to scale, in a matrix scaled by 1e-3
    A[5] = A[5] * 1e-3
    return A


def _check_rank_n_minus_1(A: torch.Tensor, G: torch.Tensor, kappa_p: torch.Tensor, dtype: torch.dtype) -> None:
    """``G = adj(A)ᴴ`` (g = 1) within ``2 · 30 · n² u κ̃ ‖G*‖``, κ̃ = max(σ₁/σ_{n−1}, κ₂(M'))."""
    G_ref = adjugate(A).mH
    s = torch.linalg.svdvals(_wide(A))
    kappa = torch.maximum(s[..., 0] / s[..., -2], kappa_p)
    bound = 2 * 30 * N * N * metrics.unit_roundoff(dtype) * kappa * metrics.norm1(G_ref)
    err = metrics.norm1(_wide(G) - G_ref)
    assert bool((err <= bound).all()), {"err/bound": err / bound, "kappa": kappa}
    assert bool((metrics.norm1(G_ref) > 1e-6 * metrics.norm1(_wide(A)) ** (N - 1)).all())  # not 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float64, torch.complex128])
def test_rank1_formula_at_rank_n_minus_1(dtype):
    # (torch.linalg.det's gradient is 0 at the exactly singular ones)
    A = _singular_batch(dtype)
    G, kappa_p = _rank1_gradient(A, torch.ones(A.shape[0], dtype=dtype))
    _check_rank_n_minus_1(A, G, kappa_p, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_rank1_formula_exact_zero_below_rank_n_minus_1(dtype):
    A = mx.random(N, N, batch=(3,), dtype=dtype, seed=5)
    A[0] = 0                               # the zero matrix (padding in a batch)
    A[1, :, 2] = 0
    A[1, :, 5] = 0                         # two zero columns: rank n − 2
    A[2, 1] = 0
    A[2, 6] = 0                            # two zero rows
    G, _ = _rank1_gradient(A, torch.ones(3, dtype=dtype))
    assert torch.equal(G, torch.zeros_like(G))


def test_cpu_takes_the_svd_where_lu_does_not_reveal_the_rank():
    # A (lower) nilpotent Jordan block has rank n - 1, but partial pivoting of Aᵀ (the upper shift)
    # leaves every pivot zero: the
    # rank-1 formula alone would give 0 (its value on GPUs); the CPU reads the pivot count and
    # uses the SVD adjugate for it, next to a nonsingular and a rank n - 1 element.
    dtype = torch.complex64
    A = mx.random(N, N, batch=(3,), dtype=dtype, seed=7)
    A[0] = torch.diag(torch.ones(N - 1, dtype=dtype), -1)
    A[2, 3] = A[2, 4]
    X = A.clone().requires_grad_()
    (G,) = torch.autograd.grad(LA.det(X).real.sum(), X)
    G_ref = adjugate(A).mH
    s = torch.linalg.svdvals(_wide(A))
    bound = 2 * 30 * N * N * metrics.unit_roundoff(dtype) * (s[..., 0] / s[..., -2]) * metrics.norm1(G_ref)
    assert bool((metrics.norm1(_wide(G) - G_ref) <= bound).all())
    assert float(metrics.norm1(G_ref[0])) == 1.0  # adj of the Jordan block: one entry ±1


def test_cpu_formula_choice_by_pivot_count():
    # count 0 -> torch's formula, 1 -> the rank-1 formula, >= 2 -> plus the SVD (counted calls)
    calls = {"rank1": 0, "svd": 0}
    rank1, svd = D.det_backward_lu, lu_ops.svd

    def spy_rank1(*args, **kw):
        calls["rank1"] += "solve_upper" in kw
        return rank1(*args, **kw)

    def spy_svd(A):
        calls["svd"] += 1
        return svd(A)

    A = mx.random(N, N, batch=(2,), dtype=torch.float32, seed=2)
    cases = [(A, 0, 0), (torch.stack([A[0], A[0].index_fill(0, torch.tensor([3]), 0)]), 1, 0),
             (torch.stack([A[0], torch.diag(torch.ones(N - 1), -1)]), 1, 1)]
    try:
        D.det_backward_lu, lu_ops.svd = spy_rank1, spy_svd
        for X, want_rank1, want_svd in cases:
            calls.update(rank1=0, svd=0)
            X = X.clone().requires_grad_()
            torch.autograd.grad(LA.det(X).sum(), X)
            assert calls == {"rank1": want_rank1, "svd": want_svd}
    finally:
        D.det_backward_lu, lu_ops.svd = rank1, svd


def test_cpu_outside_the_table_is_torch_unless_a_pivot_is_negligible(routing_table):
    # With autograd recording, det on the CPU outside routing.WHEN is torch's own call (its graph,
    # its gradient, bit for bit) when no pivot is negligible; a batch with a singular element runs
    # our op (the adjugate; bound of _check_rank_n_minus_1 with κ₂(M') from the same factors).
    from mpslinalg import routing

    A = mx.random(N, N, batch=(3,), dtype=torch.complex64, seed=11)
    X, Y = A.clone().requires_grad_(), A.clone().requires_grad_()
    routing.reset_decisions()
    d = LA.det(X)
    assert "mpslinalg" not in type(d.grad_fn).__name__
    assert routing.decisions() == {"det": {"ours": 0, "torch": 1}}
    (G,) = torch.autograd.grad(d.real.sum(), X)
    (G_torch,) = torch.autograd.grad(torch.linalg.det(Y).real.sum(), Y)
    assert torch.equal(G, G_torch)

    S = A.clone()
    S[1, 2] = S[1, 5]  # two equal rows: torch's gradient of this element would be 0
    Z = S.clone().requires_grad_()
    d = LA.det(Z)
    assert "mpslinalg" in type(d.grad_fn).__name__
    (G,) = torch.autograd.grad(d.real.sum(), Z)
    _check_rank_n_minus_1(S[1:2], G[1:2], _rank1_gradient(S[1:2], torch.ones(1, dtype=S.dtype))[1], S.dtype)


@pytest.mark.cuda
def test_det_gradient_at_rank_n_minus_1_on_cuda():
    # GPUs send every element with a negligible pivot to the SVD adjugate (one host read). The
    # sync-free rank-1 formula was wrong on the H200 where cuBLAS's small getrf met an exactly zero
    # pivot before the last column (evening rounds 1-2: element 2, a zero row of A, err/bound 219
    # with κ₂(M') of the device's own factors, 63.6). Bound: _check_rank_n_minus_1 with
    # κ̃ = σ₁/σ_{n−1}, the SVD adjugate's perturbation bound (no M' is involved).
    A = _singular_batch(torch.complex64).cuda()
    X = A.clone().requires_grad_()
    (G,) = torch.autograd.grad(LA.det(X).real.sum(), X)
    _check_rank_n_minus_1(A.cpu(), G.cpu(), torch.zeros(A.shape[0], dtype=torch.float64), torch.complex64)
