"""``pinv`` on the CPU (issue 34.7): the matrices the QR route cannot serve take the SVD's pinv of
their own sub-batch, not the whole batch's; the result is the one the whole-batch form gives."""

import torch

import mpslinalg as M
from mpslinalg.svd import spectral


def test_only_the_rejected_matrices_take_the_svd(routing_table, monkeypatch):
    g = torch.Generator().manual_seed(3)
    A = torch.randn(64, 5, 5, generator=g)
    A[7, :, 0] = A[7, :, 1]  # singular: the QR's bound rejects it
    A[40, :, 2] = 0.0
    seen = []
    real = torch.linalg.pinv

    def spy(B, *args, **kwargs):
        seen.append(B.shape)
        return real(B, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "pinv", spy)
    X = M.pinv(A)
    assert seen == [torch.Size([2, 5, 5])]  # the two rejected matrices, once
    rtol = torch.finfo(A.dtype).eps * 5
    Q, ok = spectral._pinv_by_qr(A, 0.0, rtol)
    assert ok.sum() == 62 and not ok[7] and not ok[40]
    # the QR's matrices are the QR's, bit for bit; the rejected ones are the SVD's pinv V Σ⁺ Uᴴ of a
    # smaller batch: the same LAPACK SVD per matrix, the product's rounding may differ (gemm blocking
    # by batch), each entry within n u ‖Σ⁺‖₂ = n u ‖A⁺‖₂ (unitary factors), times the threshold 30
    assert torch.equal(X[ok], Q[ok])
    Xt = real(A)[~ok]
    bound = 30 * 5 * 2.0**-24 * torch.linalg.matrix_norm(Xt, ord=2)
    assert ((X[~ok] - Xt).abs().amax((-2, -1)) <= bound).all()
