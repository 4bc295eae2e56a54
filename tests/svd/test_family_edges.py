"""The SVD family at the edges found from outside (issues 33 and 34), on the torch and emulator backends.

* Scaling (issue 33.3): the family scales each matrix by a power of two (exact), so a matrix of
  any magnitude has the backward-stable SVD's accuracy: ``|σ̂_i − σ_i| <= 30·k·u·σ₁`` against
  float64 (Weyl), plus the one rounding of a subnormal result, at most ``2^-149`` (the scaling back
  is split in normal steps, the largest last). Subnormal matrices (max entry below ``2^-128``,
  whose scale ``2^128`` overflowed) are the class.
* Exactly rank-deficient matrices (issue 33.5): their noise columns (~1e-21 beside ~1 in float32)
  have squares below the normal range; the Jacobi must still converge (``info = 0``) with LAPACK's
  ratios below 30 (``xDRVBD``, ``u = 2^-24``), and the ops built on it must not fail.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

import mpslinalg as LA
from reference import metrics

U32 = 2.0**-24
THRESHOLD = 30.0  # LAPACK's test-ratio threshold


def _ratios_ok(A, U, S, Vh) -> bool:
    r = metrics.svd_ratios(A, U, S, Vh)
    return all(float(x.max()) < THRESHOLD for x in r[:3]) and float(r.order.max()) == 0


# ---- scaling: subnormal and tiny inputs ---------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_subnormal_matrices_scale_exactly(backend, dtype):
    """``svd_ex`` of ``[[2e-39, 0], [0, 1e-39]]`` was NaN with info 0 on the emulator (the scale
    ``2^128`` overflowed); now ``S`` is the diagonal exactly and ``U``, ``V`` orthonormal."""
    A = torch.tensor([[2e-39, 0], [0, 1e-39]], dtype=dtype)
    U, S, Vh, info = LA.svd_ex(A)
    assert int(info) == 0
    assert torch.equal(S, torch.tensor([2e-39, 1e-39]))
    assert _ratios_ok(A, U, S, Vh)
    g = torch.Generator().manual_seed(3)
    B = torch.randn(4, 5, 3, dtype=dtype, generator=g)
    for k in (-130, -140, -145, 100, 120):
        Bk = torch.ldexp(torch.ldexp(B, torch.tensor(k // 2)), torch.tensor(k - k // 2))  # rounded: the input
        U, S, Vh, info = LA.svd_ex(Bk)
        assert bool((info == 0).all())
        ref = torch.linalg.svdvals(Bk.to(torch.complex128 if dtype.is_complex else torch.float64))
        assert bool((S.double() - ref).abs().le(30 * 3 * U32 * ref[..., :1] + 2.0**-149).all()), k
        if k > 0:
            assert _ratios_ok(Bk, U, S, Vh)


@pytest.mark.parametrize("driver", ["gelsd", "gelss", "gels", "gelsy"])
def test_lstsq_of_subnormal_matrices(backend, driver):
    """``lstsq(gelsd)`` of a 5e-39 diagonal was [nan, inf] on the emulator; the solution ``1/d`` is a
    normal float. Also a tiny ``B`` whose solution is small but normal."""
    A = torch.diag(torch.tensor([5e-39, 2.5e-39]))
    B = torch.tensor([[1.0], [0.5]])
    X = LA.lstsq(A, B, driver=driver).solution
    want = torch.tensor([[2e38], [2e38]])
    assert bool(((X - want).abs() <= 4 * U32 * want).all()), X
    B = torch.tensor([[1e-38], [4e-39]])
    X = LA.lstsq(torch.eye(2) * 2.0**100, B, driver=driver).solution
    want = B.double() * 2.0**-100
    assert bool(((X.double() - want).abs() <= torch.maximum(4 * U32 * want.abs(), torch.tensor(2.0**-149))).all())


# ---- exactly rank-deficient matrices converge -----------------------------------------------------


def _rank_deficient():
    g = torch.Generator().manual_seed(7)
    alt = torch.ones(6, 6)
    alt[:, ::2] = -1
    low = torch.randn(10, 2, generator=g) @ torch.randn(2, 7, generator=g)  # rank 2
    return [torch.ones(9, 6), torch.ones(8, 8), torch.ones(33, 33), torch.ones(6, 9), 3 * alt, low]


@pytest.mark.parametrize("cplx", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("index", range(6))
def test_exactly_rank_deficient_matrices_converge(backend, index, cplx, request):
    """Issue 33.5: ``svd_ex`` reported info 2 (no convergence) for ``ones(9, 6)``, ``ones(8, 8)`` and
    ``ones(33, 33)`` on the emulator, so svdvals, matrix_rank, cond and matrix_norm raised and lstsq
    returned rank -1. The results were accurate: info must be 0, the ratios below 30."""
    if backend == "emulator" and index == 2 and cplx:
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "the QR family's emulator QR of this complex rank-1 33x33 matrix returns Q with "
            "|QᴴQ − I| = 0.77 (the SVD's U is that Q rotated); reported, not the SVD family's code")))
    A = _rank_deficient()[index]
    for M in ([A.to(torch.complex64) * (1 - 2j) / math.sqrt(5)] if cplx else [A]):
        U, S, Vh, info = LA.svd_ex(M)
        assert int(info) == 0
        assert _ratios_ok(M, U, S, Vh)
        rank = 2 if index == 5 else 1
        assert int(LA.matrix_rank(M)) == rank
        assert float(LA.matrix_norm(M, "nuc")) == pytest.approx(float(torch.linalg.matrix_norm(M, "nuc")), rel=1e-5)
        assert float(LA.cond(M)) > 1 / (THRESHOLD * max(M.shape) * U32)  # σ_min at rounding level
        B = torch.ones(M.shape[-2], 2, dtype=M.dtype)
        for driver in ("gelsd", "gelss", "gelsy"):
            assert int(LA.lstsq(M, B, driver=driver).rank) == rank


def test_graded_matrices_converge(backend):
    """Graded 6x6 matrices (κ up to ~1e3, the issue's member had κ = 14) converge with info 0."""
    g = torch.Generator().manual_seed(1)
    d = torch.logspace(0, -1.5, 6)
    A = d[:, None] * torch.randn(64, 6, 6, generator=g) * d[None, :]
    U, S, Vh, info = LA.svd_ex(A)
    assert bool((info == 0).all())
    assert _ratios_ok(A, U, S, Vh)


# ---- lstsq's right-hand sides, exactly as torch ---------------------------------------------------

_RHS_CASES = [((1, 3, 3), (3, 3)), ((1, 6, 4), (6, 2)), ((6, 4), (3, 6, 2)), ((2, 6, 4), (6,)), ((2, 6, 4), (2, 6)),
              ((2, 6, 4), (3, 6)), ((6, 4), (6,)), ((2, 6, 4), (5, 2, 6)), ((3, 1, 6, 4), (2, 6)), ((6, 4), (5, 6)),
              ((1, 6, 4), (1, 6)), ((2, 6, 4), (1, 6)), ((2, 6, 4), (6, 6)), ((2, 6, 4), (2, 6, 3)),
              ((1, 2, 6, 4), (2, 6, 3)), ((3, 6, 4), (6, 3)), ((3, 1, 6, 4), (2, 6, 1)), ((2, 1, 6, 4), (3, 6, 2))]


@pytest.mark.parametrize("a_shape,b_shape", _RHS_CASES)
def test_lstsq_reads_b_as_torch_does(backend, a_shape, b_shape):
    """Issue 33.4: a ``B`` with one dimension fewer than ``A`` was read as a batch of vectors whatever
    its shape; torch reads it as vectors only when it is ``A.shape[:-1]`` (or 1-D), else as matrices
    (broadcast with ``A``'s batch as if its batch were ``B.shape[:-1]``), or rejects it. The same
    shapes, the same solutions (gels of full-rank Gaussian systems: both backward stable, float64
    here, to ``30·m·n·κ·u`` with ``κ <= 100`` checked), the same error class and torch's words."""
    g = torch.Generator().manual_seed(sum(a_shape) * 7 + sum(b_shape))
    A = torch.randn(a_shape, dtype=torch.float64, generator=g)
    B = torch.randn(b_shape, dtype=torch.float64, generator=g)
    try:
        want = torch.linalg.lstsq(A, B, driver="gels").solution
    except RuntimeError as exc:
        words = str(exc).split(": ", 1)[-1].split(" (")[0][:40]  # torch's words, for its own checks
        phrase = re.escape(words) if "should match" in words or "dim()" in words else ""
        with pytest.raises(RuntimeError, match=phrase):
            LA.lstsq(A, B, driver="gels")
        return
    got = LA.lstsq(A, B, driver="gels").solution
    assert got.shape == want.shape
    m, n = a_shape[-2:]
    assert float(torch.linalg.cond(A).max()) < 100
    assert float((got - want).abs().max()) <= 30 * m * n * 100 * 2.0**-53 * max(1.0, float(want.abs().max()))


# ---- transforms and compilation -----------------------------------------------------------------


def test_vmap_of_svd_ex(backend):
    """Issue 33.7: ``torch.func.vmap(svd_ex)`` failed ("must only return Tensors, got SVDExResult"):
    the result is a pytree node, as torch's return types; its fields keep their names."""
    A = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(2))
    r = torch.func.vmap(LA.svd_ex)(A)
    assert type(r) is type(LA.svd_ex(A)) and r.S.shape == (4, 3) and r.info.shape == (4,)
    assert bool((r.info == 0).all()) and _ratios_ok(A, r.U, r.S, r.Vh)


def test_inductor_fullgraph_compiles_the_family(backend):
    """Issue 33.6: ``torch.compile(fullgraph=True)`` with the default inductor backend failed for
    lstsq (an "incorrect fake kernel": LAPACK's column-major solution against the fake's contiguous
    layout) and for matrix_rank, cond, matrix_norm (a ``ContextVar.get`` traced in the front door).
    One graph of every op (one inductor compile), compared with the eager calls: the same kernels
    run, so the results agree to the inductor's own rounding of the torch ops around them (the
    cond's division, ``30·u`` relative)."""
    g = torch.Generator().manual_seed(5)
    A = torch.randn(3, 5, 4, generator=g)
    B = torch.randn(3, 5, 2, generator=g)

    def every_op(A, B):
        return (LA.svd(A, full_matrices=False).S, LA.svd(A).U, LA.svd_ex(A).Vh, LA.svdvals(A), LA.pinv(A),
                LA.lstsq(A, B, driver="gels").solution, LA.lstsq(A, B, driver="gelsd").solution,
                LA.lstsq(A, B).solution, LA.matrix_rank(A), LA.cond(A), LA.cond(A[..., :4, :], "fro"),
                LA.matrix_norm(A, 2), LA.matrix_norm(A, "nuc"))

    torch._dynamo.reset()
    got = torch.compile(every_op, fullgraph=True)(A, B)
    want = every_op(A, B)
    for i, (x, y) in enumerate(zip(got, want)):
        assert x.shape == y.shape and x.dtype == y.dtype, i
        if x.dtype == torch.int64:
            assert torch.equal(x, y), i
        else:
            assert float((x - y).abs().max()) <= 30 * U32 * max(1.0, float(y.abs().max())), i
