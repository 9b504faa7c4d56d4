"""Custom differentiable functions: ``pylucid.autograd.Function`` with ``ctx``.

>>> import pylucid
>>> class Cube(pylucid.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x * x
...     @staticmethod
...     def backward(ctx, g):
...         (x,) = ctx.saved_tensors
...         return 3 * x * x * g
>>> x = pylucid.tensor(2.0, requires_grad=True)
>>> Cube.apply(x).backward(); x.grad
tensor(12.)
"""

from __future__ import annotations

from .._state import state
from .._tensor import Tensor, _new_tensor
from ..errors import VersionMismatch
from .graph import Node, grad_accumulator


class FunctionCtx:
    """The ``ctx`` passed to ``forward`` and ``backward``."""

    def __init__(self) -> None:
        self._saved = ()
        self._saved_versions = ()
        self.needs_input_grad = ()
        self._non_differentiable = set()
        self._dirty = set()
        self.materialize_grads = True
        self._freed = False

    def save_for_backward(self, *tensors) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward: expected Tensors or None, got {type(t).__name__}")
        self._saved = tensors
        self._saved_versions = tuple(t._version[0] if t is not None else None for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            raise RuntimeError(
                "saved_tensors: trying to backward through the graph a second time; the saved tensors were freed. "
                "Pass retain_graph=True to the first backward call."
            )
        for i, (t, v) in enumerate(zip(self._saved, self._saved_versions)):
            if t is not None and t._version[0] != v:
                raise VersionMismatch(
                    f"{self._name}: saved tensor {i} was modified in place: saved at version {v}, now {t._version[0]}"
                )
        return self._saved

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class BackwardFunction(Node):
    __slots__ = ("ctx", "fn_cls", "device", "out_meta", "n_out")

    @property
    def n_outputs(self):  # type: ignore[override]
        return self.n_out

    def name(self) -> str:
        return self.fn_cls.__name__ + "Backward"

    def _check_freed(self) -> None:
        if self.ctx._freed:
            self.ctx.saved_tensors  # raises with the retain_graph advice

    def release(self) -> None:
        if self.ctx._saved:
            self.ctx._saved = ()
            self.ctx._freed = True

    backward_fast = None

    def backward(self, *grads):
        ctx = self.ctx
        res = self.fn_cls.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self.next_edges)
        if len(res) > n:
            if any(r is not None for r in res[n:]):
                raise RuntimeError(
                    f"{self.fn_cls.__name__}.backward returned {len(res)} gradients, but forward had {n} inputs"
                )
            res = res[:n]
        elif len(res) < n:
            raise RuntimeError(f"{self.fn_cls.__name__}.backward returned {len(res)} gradients, expected {n}")
        fixed = []
        for r in res:
            if r is not None and not isinstance(r, Tensor):
                from ..creation import tensor

                r = tensor(r, device=self.device)
            fixed.append(r)
        return tuple(fixed)


class Function:
    """Base class for custom ops: define static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``.

    ``backward`` is written in pylucid ops, so with ``create_graph=True`` it is
    recorded and can be differentiated again.
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("this Function does not implement backward")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx._name = cls.__name__
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        prev = state.grad_enabled
        state.grad_enabled = False
        try:
            out = cls.forward(ctx, *args, **kwargs)
        finally:
            state.grad_enabled = prev
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        if not (prev and any(t._requires_grad for t in tensor_args)):
            return out
        node = object.__new__(BackwardFunction)
        node.ctx = ctx
        node.fn_cls = cls
        node.device = tensor_args[0]._device
        node._pre_hooks = None
        node._hooks = None
        node._trace = None
        node.n_out = len(outs)
        edges = []
        for a in args:
            if isinstance(a, Tensor) and a._requires_grad:
                edges.append((a.grad_fn, a._output_nr) if a.grad_fn is not None else (grad_accumulator(a), 0))
            else:
                edges.append(None)
        node.next_edges = tuple(edges)
        node.out_meta = tuple((o._data.shape, o._data.dtype) if isinstance(o, Tensor) else None for o in outs)
        result = []
        input_ids = {id(a) for a in tensor_args}
        for k, o in enumerate(outs):
            if not isinstance(o, Tensor):
                result.append(o)
                continue
            if id(o) in input_ids and id(o) not in ctx._dirty:
                o = o.detach()  # returning an input unchanged: give a fresh view, as PyTorch does
            if id(o) not in ctx._non_differentiable and o.dtype.category >= 2:
                if o._base is not None and id(o) not in ctx._dirty:
                    o = _new_tensor(o._data, o._device)
                o.grad_fn = node
                o._output_nr = k
                o._requires_grad = True
            result.append(o)
        return result[0] if single else tuple(result)


def once_differentiable(fn):
    """Mark a ``backward`` first-order only: under ``create_graph=True`` it raises rather than give a wrong result."""
    import functools

    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        if state.grad_enabled and any(isinstance(g, Tensor) and g._requires_grad for g in grads):
            raise RuntimeError(f"{fn.__qualname__} is marked once_differentiable: it has no second derivative")
        prev = state.grad_enabled
        state.grad_enabled = False
        try:
            return fn(ctx, *grads)
        finally:
            state.grad_enabled = prev

    return wrapper
