"""The eig family's op declarations: implementations, fakes and derivatives (PyTorch's
``linalg_eig_backward`` and ``linalg_eig_jvp``, ``FunctionsManual.cpp``).

With ``A V = V diag(L)``, ``V`` of unit columns, ``E_ij = L_j - L_i`` (``i != j``):

* backward: ``gA = V^{-H} (diag(gL) + (VᴴgV - Vᴴ V diag(Re diag(VᴴgV))) / conj(E)) Vᴴ``; first the
  check that the loss does not depend on the eigenvectors' phases (``Im diag(VᴴgV) = 0``), with
  torch's message; only ``gL``: ``gA = V^{-H} diag(gL) Vᴴ``; real ``A``: the real part;
* forward: ``dP = V⁻¹ dA V``, ``dL = diag(dP)``, ``dX = dP / E`` (zero diagonal),
  ``dV = V (dX - diag(Re diag(Vᴴ V dX)))``.

Both call our ``solve`` and this family's ops, so they are differentiable again.
"""

from __future__ import annotations

import torch

from ..lu import solve
from ..oplayer import checks as E
from ..oplayer import defop
from ..oplayer import functorch_active as _functorch
from .algorithm import _complex_dtype, eig_impl

PHASE_MESSAGE = ("linalg_eig_backward: The eigenvectors in the complex case are specified up to multiplication by "
                 "e^{i phi}. The specified loss function depends on this quantity, so it is ill-defined.")


def _fresh(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a tensor of its own (a custom op returns no views: a compiled graph that got a view of
    an internal buffer read it with the fake's strides from the buffer's start)."""
    return x.clone() if x._base is not None else x


def _eig_ex_impl(A: torch.Tensor, sync: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(L, V, info)``; ``sync=False`` (``eig_ex``): no host read."""
    if _functorch():  # vmap-friendly: torch's (our impl reads the convergence flag on the host)
        w, V = torch.linalg.eig(A)
        return w, V, torch.zeros(A.shape[:-2], dtype=torch.int32, device=A.device)
    w, V, info = eig_impl(A, True, sync)
    return _fresh(w), _fresh(V), _fresh(info)


def _eigvals_ex_impl(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if _functorch():
        return torch.linalg.eigvals(A), torch.zeros(A.shape[:-2], dtype=torch.int32, device=A.device)
    w, _, info = eig_impl(A, False)
    return _fresh(w), _fresh(info)


def _eig_shape(A, sync):
    ct = _complex_dtype(A.dtype)
    return [(A.shape[-1:], ct), (A.shape[-2:], ct), ((), torch.int32)]


def _eigvals_shape(A):
    return [(A.shape[-1:], _complex_dtype(A.dtype)), ((), torch.int32)]


def _differences(L: torch.Tensor) -> torch.Tensor:
    """``E_ij = L_j - L_i`` with ones on the diagonal."""
    D = L[..., None, :] - L[..., :, None]
    return D + torch.diag_embed(torch.ones_like(L))


def eig_backward(gL, gV, L, V, real_input: bool):
    """``linalg_eig_backward`` (module docstring)."""
    Vh = V.mH
    if gV is None:
        gA = solve(Vh, gL[..., :, None] * Vh)
    else:
        VhgV = Vh @ gV
        diag = VhgV.diagonal(0, -2, -1)
        if not E.traced(diag) and not torch.allclose(diag.imag, torch.zeros_like(diag.imag), rtol=1e-2, atol=1e-2):
            raise RuntimeError(PHASE_MESSAGE)
        VhgV = VhgV - Vh @ (V * diag.real[..., None, :])
        inner = VhgV / _differences(L).conj()
        if gL is not None:
            inner = inner + torch.diag_embed(gL)
        gA = solve(Vh, inner @ Vh)
    return gA.real if real_input else gA


def eig_jvp(dA, L, V):
    """``linalg_eig_jvp``: ``(dL, dV)`` (module docstring)."""
    dA = dA.to(V.dtype)
    dP = solve(V, dA @ V)
    dL = dP.diagonal(0, -2, -1).clone()
    dX = dP / _differences(L)
    dX = dX - torch.diag_embed(dX.diagonal(0, -2, -1))
    VdX = V @ dX
    dV = VdX - V * (V.mH @ VdX).diagonal(0, -2, -1).real[..., None, :]
    return dL, dV


def _eig_setup(ctx, inputs, output):
    ctx.real_input = not inputs[0].is_complex()
    ctx.save_for_backward(output[0], output[1])


def _eig_bwd(ctx, gL, gV, _ginfo):
    L, V = ctx.saved_tensors
    return eig_backward(gL, gV, L, V, ctx.real_input), None


def _eig_jvp(inputs, outputs, tangents):
    dA = tangents[0]
    L, V, _ = outputs
    if dA is None:
        return torch.zeros_like(L), torch.zeros_like(V), None
    dL, dV = eig_jvp(dA, L, V)
    return dL, dV, None


def _eigvals_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _eigvals_bwd(ctx, gL, _ginfo):
    (A,) = ctx.saved_tensors
    L, V, _ = _eig_ex(A, True)
    return (eig_backward(gL, None, L, V, not A.is_complex()),)


def _eigvals_jvp(inputs, outputs, tangents):
    (A,) = inputs
    (dA,) = tangents
    if dA is None:
        return torch.zeros_like(outputs[0]), None
    L, V, _ = _eig_ex(A, True)
    return eig_jvp(dA, L, V)[0], None


_eig_ex = defop("eig_ex", impl=_eig_ex_impl, shape=_eig_shape, setup=_eig_setup, backward=_eig_bwd, jvp=_eig_jvp,
                 ranks=(2,))
_eigvals_ex = defop("eigvals_ex", impl=_eigvals_ex_impl, shape=_eigvals_shape, setup=_eigvals_setup,
                    backward=_eigvals_bwd, jvp=_eigvals_jvp, ranks=(2,))
