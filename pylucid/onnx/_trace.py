"""The tracer: run a model once and record every op application.

Recording goes through the dispatch hook that ``pylucid.ops._op.apply`` already reads
(``_transform_hook``, the one ``pylucid.func`` installs for vmap/jvp), so tracing adds no work to the
hot path when nothing is exported. Composites are seen as the primitive ops they call, since every op
call passes through ``apply``. The hook calls ``apply`` again for the real result; that inner call
finds the tracer busy and lets the op run as usual.

In-place updates (``x.add_(y)``, ``masked_fill_``) write an op's output into an existing tensor through
``commit_inplace``; while tracing, that function is wrapped so the trace records "``x`` now holds
that output", and the in-place arithmetic methods that skip the op when no graph is recorded
(``add_``, ``mul_``, ``+=``, ...) are their generic variants, which run it. Any other change of a
tensor's data (a write under ``no_grad``) is caught by its version counter when the tensor is next used.
"""

from __future__ import annotations

import sys
import threading

from .._tensor import Tensor
from ..ops import _op

# modules that bind ``commit_inplace`` by name at import time (the others import it when called)
_COMMIT_MODULES = ("pylucid.ops._op", "pylucid.ops.conversion", "pylucid.ops.indexing", "pylucid.ops.activation")
# in-place arithmetic that, with no graph to record, writes straight into storage without an op (the optimizers'
# fast path); while tracing, these Tensor methods are the generic in-place variants, which run the op
_DIRECT_INPLACE = ("add_", "sub_", "subtract_", "mul_", "multiply_", "div_", "divide_", "true_divide_", "addcmul_",
                   "addcdiv_")
_INPLACE_DUNDERS = {"__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_"}


def _version(t) -> tuple:
    """A tensor's version: its counter (a view shares its base's, set when the view is made) and the count."""
    return id(t._version), t._version[0]


class Call:
    """One op application: the op's registry name, its arguments (Tensors kept alive, so their ``id`` stays
    unique during the trace), params, output Tensors, and the dotted path of the module that ran it."""

    __slots__ = ("name", "op", "args", "versions", "params", "outs", "out_versions", "path")

    def __init__(self, name, op, args, versions, params, outs, path):
        self.name, self.op, self.args, self.params, self.outs, self.path = name, op, args, params, outs, path
        self.versions = versions  # of the Tensor arguments when the op read them (None for the others)
        self.out_versions = tuple(_version(o) for o in outs)


class Inplace:
    """``target`` (a Tensor) now holds the value of ``source``, the output of the op just recorded."""

    __slots__ = ("target", "source", "version", "source_version")

    def __init__(self, target, source):
        self.target, self.source, self.version = target, source, _version(target)
        self.source_version = _version(source)


class Tracer:
    """Context manager: while open, op calls from this thread are appended to ``self.events``."""

    def __init__(self, model=None) -> None:
        self.events: list = []
        self.path: list[str] = []
        self._tid = threading.get_ident()
        self._busy = False
        self._model = model
        self._handles: list = []
        self._saved_commit: dict = {}
        self._saved_methods: dict = {}
        self._installed = None

    # -- the dispatch hook ----------------------------------------------------------------
    def _hook(self, op, args, params):
        if self._busy or threading.get_ident() != self._tid:
            return NotImplemented
        versions = tuple(_version(a) if isinstance(a, Tensor) else None for a in args)
        self._busy = True
        try:
            out = _op.apply(op, args, params)
        finally:
            self._busy = False
        outs = out if out.__class__ is tuple else (out,)
        if op.hidden_outputs:  # the outputs after the first stay with the op's node (None here)
            outs = outs[:1]
        self.events.append(Call(op.schema.name, op, args, versions, params, outs, ".".join(p for p in self.path if p)))
        return out

    def _commit(self, x, out, op_name):
        res = self._saved_commit["pylucid.ops._op"](x, out, op_name)
        if threading.get_ident() == self._tid:
            self.events.append(Inplace(x, out))
        return res

    # -- module paths, for the names of nodes and errors -------------------------------------
    def _push(self, name):
        def pre(module, args):
            self.path.append(name)

        def post(module, args, output):
            self.path.pop()

        return pre, post

    def __enter__(self) -> Tracer:
        if _op._transform_hook is not None:
            from ..errors import LucidError

            raise LucidError("onnx.export: cannot trace inside a function transform (vmap, jvp, ...) or another "
                             "export; call export outside it")
        if self._model is not None and hasattr(self._model, "named_modules"):
            for name, m in self._model.named_modules():
                pre, post = self._push(name)
                self._handles.append(m.register_forward_pre_hook(pre))
                self._handles.append(m.register_forward_hook(post))
        for mod in _COMMIT_MODULES:
            m = sys.modules[mod]
            self._saved_commit[mod] = m.commit_inplace
        for mod in _COMMIT_MODULES:
            sys.modules[mod].commit_inplace = self._commit
        self._patch_inplace_methods()
        self._installed = self._hook  # one bound-method object, to tell later whether it was replaced
        from ..func import _core as _func_core

        self._transforms = _func_core.ENTERED[0]  # a transform run inside the model bypasses this hook
        _op._transform_hook = self._installed
        return self

    def _patch_inplace_methods(self) -> None:
        from ..ops import registry

        generic = {}
        for decl in registry._ALL:
            for n in decl.inplace:
                if n in _DIRECT_INPLACE:
                    generic[n] = _op.inplace_variant(decl.fn, n)
        for dunder, n in _INPLACE_DUNDERS.items():
            if n in generic:
                generic[dunder] = generic[n]
        for n, meth in generic.items():
            self._saved_methods[n] = Tensor.__dict__[n]
            setattr(Tensor, n, meth)

    def __exit__(self, exc_type, exc, tb) -> None:
        from ..func import _core as _func_core

        replaced = _op._transform_hook is not self._installed or _func_core.ENTERED[0] != self._transforms
        _op._transform_hook = None
        for mod, fn in self._saved_commit.items():
            sys.modules[mod].commit_inplace = fn
        for name, meth in self._saved_methods.items():
            setattr(Tensor, name, meth)
        self._saved_methods.clear()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if replaced and exc_type is None:
            from ..errors import LucidError

            # pylucid.func's transforms install their own hook while they run: the ops under it were not
            # recorded
            raise LucidError("onnx.export: the model runs a function transform (vmap, grad, jvp, ...); it cannot "
                             "be traced for export")
