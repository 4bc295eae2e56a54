"""Empty inputs to every QR-family op on every backend (issue 33, item 8: the emulator's ``qr`` and
``geqrf`` crashed on any empty matrix, "cannot reshape tensor of 0 elements").

Every shape with a zero dimension (rows, columns, both, batch) against torch: same shapes and
dtypes, and the same values, which are exact here (empty, or the identity that ``mode="complete"``
returns for ``m x 0`` matrices, or ``ormqr``'s ``other`` unchanged by an empty product).
"""

from __future__ import annotations

import pytest
import torch

import mpslinalg as LA

SHAPES = [(0, 3), (3, 0), (0, 0), (0, 3, 3), (0, 4, 2), (0, 2, 4), (2, 0, 3), (2, 3, 0), (2, 0, 0)]


def _same(ours, theirs):
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert (o.shape, o.dtype) == (t.shape, t.dtype)
        assert torch.equal(o.cpu(), t)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_qr_and_geqrf_of_empty_matrices(backend, backend_device, gpu_dtype, shape):
    A = torch.randn(shape, dtype=gpu_dtype)
    for mode in ("reduced", "complete", "r"):
        _same(tuple(LA.qr(A.to(backend_device), mode=mode)), tuple(torch.linalg.qr(A, mode=mode)))
    _same(tuple(LA.geqrf(A.to(backend_device))), tuple(torch.geqrf(A)))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reflector_products_of_empty_matrices(backend, backend_device, gpu_dtype, shape):
    A = torch.randn(shape, dtype=gpu_dtype)
    a, tau = torch.geqrf(A)
    d = backend_device
    if shape[-2] >= shape[-1]:
        _same(LA.householder_product(a.to(d), tau.to(d)), torch.linalg.householder_product(a, tau))
    m = shape[-2]
    for left, other_shape in ((True, (*shape[:-2], m, 2)), (False, (*shape[:-2], 2, m))):
        C = torch.randn(other_shape, dtype=gpu_dtype)
        for transpose in (False, True):
            _same(LA.ormqr(a.to(d), tau.to(d), C.to(d), left=left, transpose=transpose),
                  torch.ormqr(a, tau, C, left=left, transpose=transpose))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 4, 2), (2, 3, 0)], ids=str)
def test_qr_backward_of_empty_matrices(backend, backend_device, shape):
    A = torch.randn(shape, dtype=torch.float32, device=backend_device, requires_grad=True)
    Q, R = LA.qr(A)
    (g,) = torch.autograd.grad((Q.sum() + R.sum()), A, allow_unused=True, materialize_grads=True)
    assert g.shape == A.shape and g.numel() == 0
