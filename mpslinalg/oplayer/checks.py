"""Input checks and error types shared by every family.

The rules follow ``torch.linalg``: the same conditions, messages in the same spirit (they name the
op, the argument, what it got and what was expected). Where torch is silent or wrong we are strict:
mixed dtypes raise instead of silently dropping an imaginary part.

Error classes derive from both the exception torch raises (``RuntimeError``) and the Python one
that fits the mistake (``ValueError`` for shapes, ``TypeError`` for dtypes), so callers written
against either convention catch them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

LinAlgError = torch.linalg.LinAlgError

#: dtypes every backend supports (the Apple GPU has no float64).
GPU_DTYPES = (torch.float32, torch.complex64)
#: dtypes of CPU/CUDA tensors.
HOST_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
_HOST_ONLY_DTYPES = (torch.float64, torch.complex128)


class ShapeError(RuntimeError, ValueError):
    """An argument has the wrong rank or shape."""


class DTypeError(RuntimeError, TypeError):
    """An argument has an unsupported dtype, or arguments disagree on dtype."""


class UnsupportedDTypeError(DTypeError, NotImplementedError):
    """An argument's dtype is one the op does not implement (integer, half, float64 on mps): also a
    ``NotImplementedError``, torch's class for it in ``lu_factor``, ``solve_triangular``, ``geqrf``."""


class DeviceError(RuntimeError, ValueError):
    """Arguments live on different devices."""


class OptionError(RuntimeError, ValueError):
    """A string option (e.g. ``qr``'s ``mode``) has a value outside the accepted ones (torch raises
    ``RuntimeError``)."""


def _describe(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}, dtype {t.dtype}, device {t.device}"


def supported_dtypes(device: torch.device | str) -> tuple[torch.dtype, ...]:
    """The floating/complex dtypes our ops accept on ``device``."""
    # a torch.device is used as is (building one again costs ~1 us, on every call's path)
    kind = device.type if isinstance(device, torch.device) else torch.device(device).type
    return GPU_DTYPES if kind == "mps" else HOST_DTYPES


def check_tensor(op: str, name: str, x: object) -> torch.Tensor:
    """``x`` must be a tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{op}: expected {name} to be a torch.Tensor, got {type(x).__name__}")
    return x


def check_dtype(op: str, name: str, x: torch.Tensor) -> None:
    """``x`` must be float32/complex64 (anywhere) or float64/complex128 (CPU/CUDA)."""
    # the accepted cases first, by C-level attributes (x.device.type costs ten times x.is_mps)
    dtype = x.dtype
    if dtype in GPU_DTYPES or (dtype in _HOST_ONLY_DTYPES and not x.is_mps):
        return
    allowed = supported_dtypes(x.device)
    if x.device.type == "mps" and x.dtype in (torch.float64, torch.complex128):
        raise UnsupportedDTypeError(
            f"{op}: {name} has dtype {x.dtype} on mps, but Apple GPUs have no float64; "
            "use float32/complex64 on mps, or compute on the CPU"
        )
    names = ", ".join(str(d).replace("torch.", "") for d in allowed)
    raise UnsupportedDTypeError(
        f"{op}: expected {name} to be a floating point or complex tensor ({names} on "
        f"{x.device.type}), got {x.dtype}"
    )


def check_matrix(op: str, name: str, x: object, *, square: bool = False) -> torch.Tensor:
    """``x`` is a tensor of supported dtype with ``ndim >= 2`` (and square trailing dims if asked)."""
    if not isinstance(x, torch.Tensor):
        check_tensor(op, name, x)  # raises
    if x.ndim < 2:
        raise ShapeError(f"{op}: {name} must have at least 2 dimensions, got {_describe(x)}")
    check_dtype(op, name, x)
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(
            f"{op}: {name} must be batches of square matrices, but they are "
            f"{x.shape[-2]} by {x.shape[-1]} matrices"
        )
    return x


def check_same(op: str, names: Sequence[str], *xs: torch.Tensor) -> None:
    """All ``xs`` share one device and one dtype (no silent casts: complex B with real A raises)."""
    first = xs[0]
    for name, x in zip(names[1:], xs[1:]):
        if x.device != first.device:
            raise DeviceError(
                f"{op}: expected all tensors on one device, but {names[0]} is on {first.device} "
                f"and {name} is on {x.device}"
            )
        if x.dtype != first.dtype:
            raise DTypeError(
                f"{op}: expected {names[0]} and {name} to have the same dtype, but {names[0]} is "
                f"{first.dtype} and {name} is {x.dtype} (mpslinalg never casts silently: convert one "
                "of them explicitly)"
            )


def broadcast_shapes(*shapes: Sequence[int]) -> torch.Size:
    """``torch.broadcast_shapes`` of concrete shapes without its ~20 µs a call (most of a small
    op's host time); mismatches fall through to torch's own (its error). Use torch's in fake
    implementations (symbolic shapes)."""
    first = shapes[0]
    if all(s == first for s in shapes[1:]):
        return torch.Size(first)
    n = max(len(s) for s in shapes)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s, n - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    return torch.broadcast_shapes(*shapes)
                out[i] = d
    return torch.Size(out)


def broadcast_batch(op: str, names: Sequence[str], *xs: torch.Tensor) -> torch.Size:
    """The broadcast batch shape (all dims but the last two) of matrices ``xs``."""
    if len(xs) == 2:  # every front door's case: equal batches need no broadcasting pass
        first, second = xs[0].shape[:-2], xs[1].shape[:-2]
        if first == second:
            return first
    try:
        return broadcast_shapes(*(x.shape[:-2] for x in xs))
    except RuntimeError:
        shapes = ", ".join(f"{n} {tuple(x.shape)}" for n, x in zip(names, xs))
        raise ShapeError(f"{op}: incompatible batch dimensions of {shapes} (they must broadcast)") from None


def check_rhs(op: str, A: torch.Tensor, B: torch.Tensor, *, left: bool = True, a_name: str = "A",
              b_name: str = "B") -> None:
    """``B`` is a compatible right-hand side of square ``A`` (``AX = B`` if ``left`` else ``XA = B``)."""
    n = A.shape[-1]
    k = B.shape[-2] if left else B.shape[-1]
    if k != n:
        eq = "A X = B" if left else "X A = B"
        dim = "rows" if left else "columns"
        raise ShapeError(
            f"{op}: incompatible shapes of {a_name} {tuple(A.shape)} and {b_name} {tuple(B.shape)} "
            f"for the equation {eq}: {b_name} must have {n} {dim}, got {k}"
        )


def resolved(x: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor with conj/neg bits materialised (Metal ignores strides and those bits)."""
    return x.resolve_conj().resolve_neg().contiguous()


_is_compiling = torch.compiler.is_compiling
_is_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
# raise_for_info's check under compile is aten._linalg_check_errors, an op without outputs: torch.fx's
# dead-code elimination keeps it only if it is registered as side-effectful, and torch < 2.13 drops it
# (a singular batch compiled with torch 2.11 returned inf silently instead of raising LinAlgError)
if hasattr(torch.fx.node, "has_side_effect"):
    torch.fx.node.has_side_effect(torch.ops.aten._linalg_check_errors.default)


def traced(x: torch.Tensor) -> bool:
    """Whether a compile traces ``x``, so its values can't be read on the host: under
    ``torch.compile``, or ``x`` is a fake or functional tensor (any tensor subclass). torch < 2.13
    leaves ``is_compiling()`` false while Dynamo and AOTAutograd run our Python on those."""
    return _is_compiling() or type(x) is not torch.Tensor


def raise_for_info(op: str, info: torch.Tensor, message: str) -> None:
    """Raise :class:`torch.linalg.LinAlgError` for the first batch element with ``info > 0``.

    ``message`` is formatted with ``{info}`` (LAPACK's 1-based index). This synchronises with the
    device, so only non-``_ex`` ops call it. Under ``torch.compile`` (and for any tensor subclass,
    such as compile's fake tensors) torch's own check runs at run time (a data-dependent Python
    branch would break the graph): the same ``LinAlgError`` with torch's wording and the batch
    element. On meta tensors there is nothing to check; under
    ``torch.func`` every element is checked.
    """
    if traced(info):
        torch._linalg_check_errors(info, op, is_matrix=info.ndim == 0)
        return
    if info.is_meta:
        return
    while _is_wrapped(info):
        info = torch._C._functorch.get_unwrapped(info)
    n = info.numel()
    if n == 0 or (info.item() if n == 1 else info.max().item()) <= 0:  # one read on the common path
        return
    flat = int(torch.nonzero(info.reshape(-1) > 0)[0, 0])
    value = int(info.reshape(-1)[flat])
    text = message.format(info=value)
    if info.ndim > 0:
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), info.shape))
        where = index[0] if len(index) == 1 else index
        raise LinAlgError(f"{op}: (Batch element {where}): {text}")
    raise LinAlgError(f"{op}: {text}")


def _store_one(op: str, out: object, result: torch.Tensor, name: str) -> torch.Tensor:
    out = check_tensor(op, name, out)
    if out.dtype != result.dtype or out.device != result.device:
        raise DTypeError(
            f"{op}: {name} has dtype {out.dtype} on {out.device}, expected {result.dtype} on {result.device}"
        )
    return out


def _write(out: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    if out.shape != result.shape:
        if out.numel() != 0:  # torch's deprecation warning for resizing a non-empty out
            warnings.warn(
                f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                f"which does not match the required output shape {list(result.shape)}. This behavior is "
                "deprecated, and in a future PyTorch release outputs will not be resized unless they "
                "have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, "
                "to zero elements with t.resize_(0).",
                UserWarning, stacklevel=4)
        out.resize_(result.shape)
    return out.copy_(result)


def store(op: str, out: object, result, *inputs: torch.Tensor, kind=None):
    """``result`` (a tensor, or a tuple returned as the named tuple ``kind``), written into the
    user's ``out=`` (a tensor, or a tuple of as many tensors) as ``torch.linalg`` does.

    Every output is checked before any is written (a bad ``out[1]`` leaves ``out[0]`` untouched);
    ``out=`` is refused while autograd would have to track an input (functions with ``out=`` are
    not differentiable); a non-empty ``out`` of another shape is resized with torch's warning.
    """
    if out is None:
        return result if kind is None else kind(result)
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs):
        raise RuntimeError(
            f"{op}(): functions with out=... arguments don't support automatic differentiation, "
            "but one of the arguments requires grad."
        )
    if kind is None:
        return _write(_store_one(op, out, result, "out"), result)
    if not isinstance(out, (tuple, list)) or len(out) != len(result):
        raise TypeError(f"{op}: expected out to be a tuple of {len(result)} tensors, got "
                        f"{type(out).__name__}")
    outs = [_store_one(op, o, r, f"out[{i}]") for i, (o, r) in enumerate(zip(out, result))]
    return kind(tuple(_write(o, r) for o, r in zip(outs, result)))


def check_bool(op: str, name: str, value: object) -> bool:
    """A flag argument must be a Python ``bool`` (torch's bindings raise ``TypeError`` for
    ``left=1``, ``pivot="yes"``, ``check_errors=None``: truthiness would hide mistakes)."""
    if not isinstance(value, bool):
        raise TypeError(f"{op}: argument '{name}' must be bool, not {type(value).__name__}")
    return value
