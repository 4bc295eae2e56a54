"""The op factory: one declaration per op, everything else generated (JAX's ``linalg_primitive`` model).

A family declares each op once::

    _qr = defop("qr", impl=_qr_impl, shape=_qr_shape, ranks=(2,),
                setup=_qr_setup, backward=_qr_backward, jvp=_qr_jvp)
    Q, R = _qr(A, mode)

and gets:

* the ``torch.library`` custom op ``mpslinalg::<name>`` (schema from ``impl``'s annotations) with
  its fake implementation (the shape rule ``shape`` over the batch the core ``ranks`` imply), so
  ``torch.compile(fullgraph=True)`` and ``torch.export`` see one node;
* reverse-mode autograd on it (``setup`` + ``backward``, the ``torch.library`` conventions);
* an equivalent ``torch.autograd.Function`` in the ``setup_context`` style (same forward, backward,
  the batching rule of ``ranks`` and the forward-mode ``jvp``): what runs under ``torch.func`` transforms and
  for forward-mode dual tensors (``torch.autograd.forward_ad``), which a custom op's autograd cannot
  serve (it returns no tangent, silently);
* the eager fast path: when nothing needs the custom op (no autograd, compile, tracing, tensor
  subclass or meta tensor) :meth:`Op.__call__` runs ``impl`` directly, without the dispatcher's
  ~60 µs per call (as much as a whole small solve).

``impl`` takes tensors and Python scalars and returns fresh tensors (never views of its inputs, as
custom ops require). Under :func:`functorch_active` it must use vmap-friendly torch ops only (no
raw-buffer kernels, no in-place writes of batched values into fresh tensors, no data-dependent host
branches). Backward formulas call Ops (not impls), so double backward works.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.autograd.forward_ad as _fwad

from . import table

__all__ = ["Op", "declared", "defop", "functorch_active", "needs_custom_op"]

_PLAIN = (torch.Tensor, torch.nn.Parameter)

# Every public call asks the questions below, most of them twice (the front door's route, then the
# op): bound once here, C-level checks first (each Python-level call or ``A.device.type`` costs about
# as much as all the C-level ones together; issue 13's "host overhead <= torch.linalg + 5 us").
_transforms_active = torch._C._are_functorch_transforms_active
_is_compiling = torch.compiler.is_compiling
_tracing_state = torch._C._get_tracing_state
_grad_enabled = torch.is_grad_enabled
_unpack_dual = _fwad.unpack_dual
#: What :meth:`Op.__call__` runs (:func:`_path`).
_DIRECT, _CUSTOM, _FUNCTION = range(3)


def functorch_active() -> bool:
    """A ``torch.func`` transform is active (custom-op autograd and raw-buffer kernels can't run)."""
    return _transforms_active()


def _dual(args) -> bool:
    """Some argument carries a forward-mode tangent (only possible inside a dual level)."""
    if _fwad._current_level < 0:
        return False
    return any(isinstance(a, torch.Tensor) and _unpack_dual(a).tangent is not None for a in args)


def _custom(args) -> bool:
    """The body of :func:`needs_custom_op`, taking the argument tuple as is (no ``*args`` repacking
    on :meth:`Op.__call__`'s path)."""
    if _is_compiling() or _tracing_state() is not None:
        return True
    grad = _grad_enabled()
    for a in args:
        # is_meta, not device.type == "meta": a tenth of the cost
        if isinstance(a, torch.Tensor) and (type(a) not in _PLAIN or a.is_meta or (grad and a.requires_grad)):
            return True
    return False


def _path(args) -> int:
    """Which of the op's routes a call with ``args`` takes: ``_FUNCTION`` under ``torch.func``
    transforms and for dual tensors, ``_CUSTOM`` when :func:`needs_custom_op`, else ``_DIRECT``."""
    if _transforms_active() or (_fwad._current_level >= 0 and _dual(args)):
        return _FUNCTION
    return _CUSTOM if _custom(args) else _DIRECT


def needs_custom_op(*args) -> bool:
    """Whether a call must dispatch through its ``torch.library`` custom op.

    Needed under ``torch.compile`` and JIT tracing (the fake implementation keeps the graph
    whole), for tensor subclasses and meta tensors (fake/functional tensors), and when autograd
    records (the op's backward formula).
    """
    return _custom(args)


class _SavingCtx:
    """A ``ctx`` proxy for ``setup``: attributes go to ``ctx``; ``save_for_backward`` is recorded
    (saved later together with the forward-mode tensors)."""

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
    """A ``ctx`` proxy for ``backward``: ``saved_tensors`` are the first ``ctx.n_saved``."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx

    @property
    def saved_tensors(self):
        return self._ctx.saved_tensors[: self._ctx.n_saved]

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def _internal(backward: Callable) -> Callable:
    """``backward`` run as mpslinalg's own computation for the drop-in routing: its calls into
    ``torch.linalg`` (the torch backend's leaves, a front door's table decision) are internal and go
    to torch's kernels, as inside a routed call. Without it, a backward under
    ``enable(when="always")`` (outside the routed call that recorded it) sent each such call
    through the dispatcher back into our front door: two passes (issue 33)."""
    local = table._local

    def run(ctx, *grads):
        before = local.inside
        local.inside = True
        try:
            return backward(ctx, *grads)
        finally:
            local.inside = before

    return run


def _no_setup(ctx, inputs, output) -> None:
    """The default ``setup`` (torch calls it with these keyword names)."""


def _no_backward(ctx, *grads):
    raise RuntimeError(f"{ctx.op_name}: this op is not differentiable")


class Op:
    """One declared op. Call it like its ``impl``; see the module docstring for what it runs."""

    def __init__(self, name: str, impl: Callable, fake: Callable | None, setup: Callable | None,
                 backward: Callable | None, jvp: Callable | None, ranks: tuple[int, ...] | None = None,
                 shape: Callable | None = None) -> None:
        self.name = name
        self.impl = impl
        self.ranks = ranks
        self.shape = shape
        self.custom = torch.library.custom_op(f"mpslinalg::{name}", mutates_args=())(impl)
        self.custom.register_fake(fake if shape is None else self._fake_from_shape)
        self.differentiable = backward is not None
        if backward is not None:
            backward = _internal(backward)
            self.custom.register_autograd(backward, setup_context=setup or _no_setup)
        self.function = self._function(setup, backward, jvp)
        _DECLARED[name] = self

    def _function(self, setup, backward, jvp) -> type:
        """The ``setup_context``-style autograd.Function equivalent to the custom op.

        It saves one list of tensors for both modes (the backward's, then the inputs and outputs):
        torch.func's generated vmap rule keeps one record of the saved tensors' batch dimensions, so
        ``save_for_backward`` and ``save_for_forward`` must save the same tensors.
        """
        op_name = self.name

        def setup_(ctx, inputs, output):
            outs = output if isinstance(output, tuple) else (output,)
            ints = [o for o in outs if not (o.is_floating_point() or o.is_complex())]
            if ints:
                ctx.mark_non_differentiable(*ints)
            proxy = _SavingCtx(ctx)
            if setup is not None:
                setup(proxy, inputs, output)
            values = (*inputs, *outs)
            ctx.op_name = op_name
            ctx.n_saved = len(proxy.saved)
            ctx.fw_layout = (len(inputs), isinstance(output, tuple),
                             [None if isinstance(v, torch.Tensor) else v for v in values])
            both = (*proxy.saved, *(v for v in values if isinstance(v, torch.Tensor)))
            ctx.save_for_backward(*both)
            ctx.save_for_forward(*both)

        def backward_(ctx, *grads):
            return (backward or _no_backward)(_BackwardCtx(ctx), *grads)

        body = {
            "forward": staticmethod(self.impl),
            "setup_context": staticmethod(setup_),
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
        if self.ranks is None:
            body["generate_vmap_rule"] = True
        else:
            body["vmap"] = staticmethod(self._vmap_rule())
        return type(f"_{self.name}_function", (torch.autograd.Function,), body)

    def batch_shape(self, *args) -> torch.Size:
        """The broadcast batch shape of the tensor arguments: each one's dimensions before its
        declared core rank (``ranks``)."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        return torch.broadcast_shapes(*(t.shape[: t.dim() - r] for t, r in zip(tensors, self.ranks)))

    def _fake_from_shape(self, *args):
        """The fake implementation the declaration implies: every output is the batch shape
        followed by the core shape the ``shape`` rule gives (core ``None``: an empty placeholder of
        shape ``(0,)``, as torch returns for outputs not asked for)."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        batch = self.batch_shape(*args)
        cores = self.shape(*args)

        def lead(c):  # (core, dtype[, k]): the batch of every argument, or of tensor argument k only
            return batch if len(c) < 3 else tensors[c[2]].shape[: tensors[c[2]].dim() - self.ranks[c[2]]]

        outs = tuple(tensors[0].new_empty(0 if c[0] is None else (*lead(c), *c[0]), dtype=c[1])
                     for c in (cores if isinstance(cores, list) else [cores]))
        return outs if isinstance(cores, list) else outs[0]

    def _vmap_rule(self) -> Callable:
        """The batching rule of the declared ``ranks``: ``vmap`` of an op whose tensor arguments carry
        leading batch dimensions is the op on one more batch dimension. Each tensor argument gets the
        mapped dimension first and every argument the common batch shape (``expand``: a view), then
        the op runs once on plain tensors, below the ``vmap`` level, so our kernels serve it (no
        per-example loop, no fallback); every output's first dimension is the mapped one."""
        ranks, op = self.ranks, self

        def rule(info, in_dims, *args):
            size = info.batch_size
            moved, batches = [], []
            k = 0
            for a, d in zip(args, in_dims):
                if isinstance(a, torch.Tensor):
                    r = ranks[k]
                    k += 1
                    if d is not None:
                        a = a.movedim(d, 0)
                    batch = a.shape[1 if d is not None else 0: a.dim() - r]
                    batches.append(batch)
                    moved.append((a, d is not None, r, batch))
                else:
                    moved.append((a, None, None, None))
            common = torch.broadcast_shapes(*batches) if batches else torch.Size()
            call = []
            for a, batched, r, batch in moved:
                if batched is None:
                    call.append(a)
                    continue
                core = a.shape[a.dim() - r:]
                if batched:
                    a = a.reshape(size, *(1,) * (len(common) - len(batch)), *batch, *core)
                call.append(a.expand(size, *common, *core))
            out = op(*call)
            outs = out if isinstance(out, tuple) else (out,)
            if op.shape is not None:  # the placeholders the declaration names are not batched
                cores = op.shape(*call)
                cores = cores if isinstance(cores, list) else [cores]
                dims = tuple(None if c[0] is None else 0 for c in cores)
            else:
                dims = tuple(0 if o.dim() > 0 and o.shape[0] == size and not (o.dim() == 1 and o.numel() == 0)
                             else None for o in outs)
            return out, dims if isinstance(out, tuple) else dims[0]

        return rule

    def __call__(self, *args):
        path = _path(args)
        if path == _DIRECT:
            return self.impl(*args)
        if path == _CUSTOM:
            return self.custom(*args)
        return self.function.apply(*args)

    @staticmethod
    def direct(*args) -> bool:
        """Whether a call with ``args`` would run ``impl`` directly (no autograd, compile,
        tracing, subclass, meta tensor, ``torch.func`` transform or dual tensor needs the op):
        for callers with a cheaper variant of the impl on that path."""
        return _path(args) == _DIRECT

    def __repr__(self) -> str:
        return f"<mpslinalg op {self.name}>"


#: Every declared op by name (:func:`declared`).
_DECLARED: dict[str, Op] = {}


def declared(name: str) -> Op:
    """The op declared as ``name``, looked up when called: how a family uses another family's op
    when an import would close a circle (the SVD family's ``cond`` calls the LU family's
    ``inv_ex`` while LU's ``det`` imports the public SVD). The declaring family must be imported
    (the package root imports every family).

    Raises
    ------
    LookupError
        No op of that name has been declared.
    """
    try:
        return _DECLARED[name]
    except KeyError:
        raise LookupError(f"mpslinalg: no op named {name!r} is declared (is its family imported?)") from None


def defop(name: str, *, impl: Callable, fake: Callable | None = None, setup: Callable | None = None,
          backward: Callable | None = None, jvp: Callable | None = None, ranks: tuple[int, ...] | None = None,
          shape: Callable | None = None) -> Op:
    """Declare the op ``mpslinalg::<name>``.

    Parameters
    ----------
    name : str
        The op's name (``torch.ops.mpslinalg.<name>``).
    impl : callable
        The computation, annotated (the custom op's schema is inferred from it): tensors and
        Python scalars in, fresh tensors out.
    fake : callable, optional
        Same arguments; returns empty tensors of the outputs' shapes and dtypes (meta / compile).
        Only for an op whose outputs are not "batch + core" (give ``shape`` and ``ranks`` instead).
    setup : callable, optional
        ``setup(ctx, inputs, output)``: saves what the derivatives need (``ctx.save_for_backward``,
        attributes on ``ctx``).
    backward : callable, optional
        ``backward(ctx, *grads)``: one gradient per input (``None`` for non-tensors). Without it
        the op is not differentiable.
    jvp : callable, optional
        ``jvp(inputs, outputs, tangents)``: forward mode; one tangent per output (``None`` for
        integer outputs); input tangents may be ``None`` (zero). Without it forward mode raises.
    ranks : tuple of int, optional
        The core rank of each tensor argument, in order (2 for a matrix, 1 for pivots or ``tau``,
        0 for a per-matrix scalar): the dimensions before them are batch dimensions, broadcast
        together, and lead every output. The batching rule (``torch.func.vmap``) comes from it and
        runs ``impl`` once on the batched tensors; without it torch's generated rule runs the
        ``torch.func`` path of ``impl`` (torch ops only).
    shape : callable, optional
        The shape rule: ``shape(*args)`` (the ``impl``'s arguments) gives each output's core
        ``(shape, dtype)`` — a list for several outputs, one pair for one; shape ``None`` for an
        empty placeholder; a third entry ``k`` when the output has the batch of tensor argument
        ``k`` alone (``solve_ex``'s ``info``: one per ``A``) — read from the core dimensions only.
        With ``ranks`` it is the whole fake implementation (batch shape broadcast from the
        arguments, then the core), so no fake writes batch arithmetic by hand; the batching rule
        reads the placeholders from it.

    Returns
    -------
    Op
        Callable like ``impl``.
    """
    if (fake is None) == (shape is None):
        raise TypeError(f"defop({name!r}): give exactly one of fake= and shape=")
    if shape is not None and ranks is None:
        raise TypeError(f"defop({name!r}): a shape rule needs ranks= (the core rank of each tensor argument)")
    return Op(name, impl, fake, setup, backward, jvp, ranks, shape)
