"""``torch.func`` support for the families' custom ops (shared; first used by ``mpslinalg.lu``).

A ``torch.library.custom_op`` with ``register_autograd`` cannot run under ``torch.func`` transforms
(``vmap``, ``grad``, ``jacrev``, ``jacfwd``, ``jvp``, ``hessian``): its autograd is a generated
``torch.autograd.Function`` without ``setup_context`` ("In order to use an autograd.Function with
functorch transforms ... it must override the setup_context staticmethod"). So each op is also
registered as an equivalent ``autograd.Function`` in the ``setup_context`` style — the same
forward (the op's Python body), the same ``setup_context`` and backward, a generated vmap rule and
an optional forward-mode ``jvp`` — and :func:`apply` calls that one while a transform is active::

    @torch.library.custom_op("mpslinalg::foo", mutates_args=())
    def _foo_op(A: torch.Tensor) -> torch.Tensor: ...

    register_autograd(_foo_op, _foo_backward, _foo_setup, _foo_jvp)   # instead of
                                                                      # _foo_op.register_autograd
    X = apply(_foo_op, A)                  # in the public wrapper and in other ops' backwards

The forward must then be vmap-friendly torch ops (no raw-buffer kernels, no in-place writes of
batched values into fresh tensors, no data-dependent host branches): check
:func:`functorch_active` in the implementation and take the torch-op path.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["apply", "functorch_active", "needs_custom_op", "register_autograd"]

#: custom op -> its autograd.Function (what runs under torch.func transforms).
FUNCTIONS: dict = {}


def functorch_active() -> bool:
    """A ``torch.func`` transform is active (custom-op autograd and raw-buffer kernels can't run)."""
    return torch._C._are_functorch_transforms_active()


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def needs_custom_op(*args) -> bool:
    """Whether a public op must dispatch through its ``torch.library`` custom op.

    Needed under ``torch.compile`` and JIT tracing (the fake implementation keeps the graph
    whole), for tensor subclasses and meta tensors (fake/functional tensors), and when autograd
    records (the op's backward formula). Elsewhere the families call their implementation directly:
    the same computation without the custom op's dispatch (~60 µs a call, as much as a whole small
    solve). ``torch.func`` transforms are decided by each family (see :func:`apply`).
    """
    if torch.compiler.is_compiling() or torch._C._get_tracing_state() is not None:
        return True
    grad = torch.is_grad_enabled()
    for a in args:
        if isinstance(a, torch.Tensor) and (
            type(a) not in _PLAIN or a.device.type == "meta" or (grad and a.requires_grad)
        ):
            return True
    return False


def apply(op, *args):
    """Call the custom op ``op``, or its autograd.Function under ``torch.func`` transforms."""
    if functorch_active():
        return FUNCTIONS[op].apply(*args)
    return op(*args)


class _SavingCtx:
    """A ``ctx`` proxy for ``setup_context``: attributes go to ``ctx``; ``save_for_backward`` is
    recorded (saved later together with the forward-mode tensors)."""

    def __init__(self, ctx) -> None:
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "saved", ())

    def save_for_backward(self, *tensors) -> None:
        object.__setattr__(self, "saved", tensors)

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def __setattr__(self, name, value) -> None:
        setattr(self._ctx, name, value)


class _BackwardCtx:
    """A ``ctx`` proxy for the backward: ``saved_tensors`` are the first ``ctx.n_saved``."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx

    @property
    def saved_tensors(self):
        return self._ctx.saved_tensors[: self._ctx.n_saved]

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def register_autograd(op, backward: Callable, setup_context: Callable, jvp: Callable | None = None) -> None:
    """``op.register_autograd(backward, setup_context=...)`` and the equivalent autograd.Function.

    ``jvp(inputs, outputs, tangents)`` is the forward-mode derivative: ``inputs`` and ``outputs``
    as the op takes and returns them (a tuple each), one tangent per input (``None`` for
    non-tensors and zero tangents); it returns one tangent per output (``None`` for integer ones).
    Without it, forward mode raises torch's error. Integer outputs are non-differentiable.

    The Function saves one list of tensors for both modes (the backward's, then the inputs and
    outputs): torch.func's generated vmap rule keeps one record of the saved tensors' batch
    dimensions, so ``save_for_backward`` and ``save_for_forward`` must save the same tensors.
    """
    op.register_autograd(backward, setup_context=setup_context)

    def setup(ctx, inputs, output):
        outs = output if isinstance(output, tuple) else (output,)
        ints = [o for o in outs if not (o.is_floating_point() or o.is_complex())]
        if ints:
            ctx.mark_non_differentiable(*ints)
        proxy = _SavingCtx(ctx)
        setup_context(proxy, inputs, output)
        values = (*inputs, *outs)
        ctx.n_saved = len(proxy.saved)
        ctx.fw_layout = (len(inputs), isinstance(output, tuple),
                         [None if isinstance(v, torch.Tensor) else v for v in values])
        both = (*proxy.saved, *(v for v in values if isinstance(v, torch.Tensor)))
        ctx.save_for_backward(*both)
        ctx.save_for_forward(*both)

    def backward_(ctx, *grads):
        return backward(_BackwardCtx(ctx), *grads)

    body = {
        "generate_vmap_rule": True,
        "forward": staticmethod(op._init_fn),
        "setup_context": staticmethod(setup),
        "backward": staticmethod(backward_),
    }
    if jvp is not None:
        def forward_ad(ctx, *tangents):
            n_in, multi, layout = ctx.fw_layout
            saved = iter(ctx.saved_tensors[ctx.n_saved:])
            values = [next(saved) if v is None else v for v in layout]
            out = jvp(values[:n_in], values[n_in:], tangents)
            return out if multi else out[0]

        body["jvp"] = staticmethod(forward_ad)
    FUNCTIONS[op] = type(f"_{op._name.split('::')[-1]}_function", (torch.autograd.Function,), body)
