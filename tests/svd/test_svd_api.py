"""API parity of ``svd``/``svd_ex``/``svdvals`` with ``torch.linalg``: shapes (empty, wide, tall,
batched), ``out=``, errors, views, ``torch.compile``/``vmap``/meta tensors, and no host sync in
``svd_ex``.

Bounds: values are compared through invariants that do not depend on the singular vectors'
gauge: ``S`` against ``torch.linalg.svdvals`` in float64 to ``30 k u σ₁`` (both are backward
stable, Weyl's theorem), ``U diag(S) Vh`` against ``A`` at LAPACK's ratio.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from sync_check import no_cuda_sync, no_host_sync

import mpslinalg as LA
from reference import metrics

svd_mod = importlib.import_module("mpslinalg.svd")
U64 = 2.0**-53


def _close_S(S, A):
    ref = torch.linalg.svdvals(A)
    k = ref.shape[-1]
    scale = ref[..., :1] if k else ref
    return bool(((S - ref).abs() <= 30 * max(k, 1) * U64 * scale).all())


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (2, 0, 4), (0, 4, 3), (4, 4), (2, 3, 5, 2),
                                   (5, 1), (1, 1)])
@pytest.mark.parametrize("full", [True, False])
def test_shapes_match_torch(shape, full):
    A = torch.randn(shape, dtype=torch.float64)
    U, S, Vh = LA.svd(A, full_matrices=full)
    Ut, St, Vht = torch.linalg.svd(A, full_matrices=full)
    assert (U.shape, S.shape, Vh.shape) == (Ut.shape, St.shape, Vht.shape)
    assert (U.dtype, S.dtype, Vh.dtype) == (Ut.dtype, St.dtype, Vht.dtype)
    assert _close_S(S, A)
    if A.numel() == 0:  # torch's identity completions of empty matrices
        assert torch.equal(U, Ut) and torch.equal(Vh, Vht)
    else:
        assert float(metrics.svd_ratios(A, U, S, Vh).recon.max()) < 30
    assert LA.svdvals(A).shape == torch.linalg.svdvals(A).shape


@pytest.mark.parametrize("dtype", [torch.complex128, torch.float64])
def test_views_and_conj(dtype):
    A = torch.randn(3, 7, 5, dtype=dtype)
    for view in (A.mT, A.mH, A[:, ::2, 1:], A.conj(), A.transpose(0, 1)):
        assert _close_S(LA.svdvals(view), view.resolve_conj())
        U, S, Vh = LA.svd(view, full_matrices=False)
        assert float(metrics.svd_ratios(view.resolve_conj(), U, S, Vh).recon.max()) < 30
    B = torch.randn(1, 4, 4, dtype=dtype).expand(3, 4, 4)  # broadcast (stride-0) batch
    assert _close_S(LA.svdvals(B), B)


def test_errors_like_torch():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.svd(torch.ones(3))
    with pytest.raises(TypeError, match="floating point or complex"):
        LA.svdvals(torch.ones(3, 3, dtype=torch.int32))
    with pytest.raises(TypeError, match="torch.Tensor"):
        LA.svd([[1.0]])
    with pytest.raises(ValueError, match="driver"):
        LA.svd(torch.ones(3, 3), driver="gesdd")
    with pytest.raises(TypeError, match="full_matrices"):
        LA.svd(torch.ones(3, 3), full_matrices=1)
    U, S, Vh = LA.svd(torch.eye(3), driver="gesvdj")  # torch's CUDA driver names are accepted
    assert torch.equal(S, torch.ones(3))


def test_out():
    A = torch.randn(4, 3, dtype=torch.float64)
    out = tuple(torch.empty(0, dtype=torch.float64) for _ in range(3))
    res = LA.svd(A, full_matrices=False, out=out)
    assert res.U is out[0] and res.S is out[1] and res.Vh is out[2]
    assert out[0].shape == (4, 3)
    s = torch.empty(0, dtype=torch.float64)
    assert LA.svdvals(A, out=s) is s and _close_S(s, A)
    ex = LA.svd_ex(A, out=tuple(torch.empty(0, dtype=d) for d in (A.dtype,) * 3 + (torch.int32,)))
    assert ex.info.dtype == torch.int32 and ex.info.shape == ()
    with pytest.raises(RuntimeError, match="out="):
        LA.svdvals(A.requires_grad_(), out=torch.empty(0, dtype=torch.float64))


def test_svd_ex_fields_and_info_shape():
    res = LA.svd_ex(torch.randn(2, 3, 4, 4))
    assert res.info.shape == (2, 3) and res.info.dtype == torch.int32
    assert bool((res.info == 0).all())
    U, S, Vh, info = res
    assert U is res.U and S is res.S and Vh is res.Vh and info is res.info


def test_svd_ex_no_host_sync(monkeypatch):
    """The GPU schedule (fixed sweeps, no host-side skip of the completion) reads nothing on the
    host; checked on the CPU with the dispatch-level detector (``sync_check``)."""
    gpu = svd_mod.TUNING.sweeps(torch.device("cuda"), torch.float32)
    assert gpu[1] is False
    monkeypatch.setattr(svd_mod.TUNING, "sweeps", lambda device, dtype, n=32: gpu)
    A = torch.randn(3, 6, 5)
    A[1, :, 2:] = 0  # exercise the completion path too
    with no_host_sync():
        U, S, Vh, info = LA.svd_ex(A)
        LA.svd_ex(A.mT, full_matrices=False)
    assert float(metrics.svd_ratios(A, U, S, Vh).u_orth.max()) < 30


@pytest.mark.cuda
def test_svd_ex_no_sync_cuda():
    A = torch.randn(64, 9, 8, device="cuda")
    # run once unchecked first: one-time setup (the round-robin tables are copied to the device once)
    no_cuda_sync([lambda: LA.svd_ex(A)])


def test_compile_vmap_meta():
    A = torch.randn(2, 5, 4, dtype=torch.float64)
    c = torch.compile(LA.svd, fullgraph=True, backend="eager")
    assert torch.allclose(c(A).S, LA.svd(A).S, rtol=0, atol=30 * 5 * U64 * float(A.abs().max()) * 5)
    Sv = torch.vmap(LA.svdvals)(A)
    assert _close_S(Sv, A)
    M = torch.empty(2, 5, 4, device="meta")
    U, S, Vh = LA.svd(M)
    assert U.shape == (2, 5, 5) and S.shape == (2, 4) and Vh.shape == (2, 4, 4)


def test_svdvals_computes_vectors_only_for_gradients(monkeypatch):
    seen = []
    ops = importlib.import_module("mpslinalg.svd.ops")
    real = ops.svd_impl
    monkeypatch.setattr(ops, "svd_impl", lambda A, f, uv: (seen.append(uv), real(A, f, uv))[1])
    A = torch.randn(2, 4, 3, dtype=torch.float64)  # a batch: one CPU matrix takes svd_one (test_svd_one.py)
    LA.svdvals(A)
    LA.svdvals(A.requires_grad_()).sum().backward()
    assert seen == [False, True]
