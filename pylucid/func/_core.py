"""The machinery under ``pylucid.func``: transform levels, the two wrapper tensors and the dispatch hook.

A transform (``vmap``, ``jvp``) opens a *level*: an integer, higher for inner transforms. Its inputs are
wrapped in a tensor of that level: ``BatchedTensor`` (``vmap``: a value with one extra, batch, dimension
``bdim``) or ``DualTensor`` (``jvp``: a primal and its tangent). Every op call goes through
:func:`pylucid.ops._op.apply`, which, while a transform is active, first hands the call to
:func:`dispatch`: the wrapper of the highest level among the arguments is unwrapped, the op's rule for
that kind of level runs on the unwrapped values (calling ``apply`` again, so lower levels see their own
wrappers), and the result is wrapped back at that level.

The wrappers are ``Tensor`` subclasses and carry their own autograd fields: when an op's logical
arguments require grad, a node of the op is recorded on the *logical* values (the wrappers), so
``grad`` taken inside a ``vmap`` differentiates each sample's function (per-sample gradients), and the
backward formulas themselves run on wrappers, through the same rules. The unwrapped values keep their
own graph for transforms outside (``grad`` of ``vmap``). Wrappers carry no array: their ``_data`` is a
:class:`Meta` with the logical shape and dtype, so code that reads metadata works and code that reads
the array raises a clear error.
"""

from __future__ import annotations

import threading

from .._state import state
from .._tensor import Tensor
from ..autograd.graph import grad_accumulator
from ..errors import LucidError
from ..ops import _op

_new = object.__new__


_VALUE_READS = frozenset(("min", "max", "any", "all"))


class _Flags:
    # a wrapper has no memory layout of its own: public functions take their general path (a
    # ``contiguous()`` first, say), whose ops lay the physical values out as they need
    c_contiguous = False
    f_contiguous = False
    writeable = False


class Meta:
    """Shape and dtype of a wrapper tensor, standing in for its array (``Tensor._data``)."""

    __slots__ = ("shape", "dtype", "ndim", "size", "owner")
    base = None
    flags = _Flags()
    _c_contiguous = False  # (the flag as CuPy names it, which pylucid._interop.c_contiguous reads first)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        # no layout (see _Flags): strides that match no contiguous array
        return (0,) * self.ndim

    def __init__(self, shape, dtype, owner) -> None:
        self.shape = shape
        self.dtype = dtype
        self.ndim = len(shape)
        n = 1
        for s in shape:
            n *= s
        self.size = n
        self.owner = owner

    def __getattr__(self, name):
        # argument validation may scan integer/bool values (index bounds): it sees every sample's at once
        if name in _VALUE_READS and self.dtype.kind in "biu" and self.owner is not None:
            inner = self.owner._inner()
            if inner is not None:
                return getattr(inner._data, name)
        kind = type(self.owner).__name__ if self.owner is not None else "wrapped"
        raise LucidError(
            f"pylucid.func: an operation read the raw array ({name!r}) of a {kind} inside a function transform; "
            "only registered ops (those with a batching or forward rule) can run on transformed tensors"
        )

    def __setitem__(self, key, value):
        raise LucidError("pylucid.func: in-place operations on tensors inside vmap/jvp are not supported; "
                         "use the out-of-place op")

    def __len__(self) -> int:
        return self.shape[0]


class Wrapper(Tensor):
    """Base of the transform wrappers; ``_level`` is the transform level that owns it."""

    __slots__ = ("_level",)

    def _init_autograd(self, meta_shape, np_dtype, dev) -> None:
        self._data = Meta(meta_shape, np_dtype, self)
        self._device = dev
        self._requires_grad = False
        self.grad = None
        self.grad_fn = None
        self._output_nr = 0
        self._version = [0]
        self._base = None
        self._hooks = None
        self._retains_grad = False
        self._grad_acc = None

    # Methods of Tensor that read the array directly, answered at the logical level.
    def detach(self):
        """Cut this level's graph; the wrapped value (and the graph of outer levels) is kept."""
        return self._rewrap()

    def numpy(self, *, force: bool = False):
        raise LucidError(f"pylucid.func: {type(self).__name__}.numpy() inside a transform is not supported")

    def item(self):
        raise LucidError(
            f"pylucid.func: .item() on a {type(self).__name__} inside a transform is not supported (its value "
            "differs per sample/tangent); return the tensor instead"
        )

    def tolist(self):
        self.item()

    def __bool__(self) -> bool:
        raise LucidError(f"pylucid.func: data-dependent control flow on a {type(self).__name__} is not supported")

    def __array__(self, dtype=None, copy=None):
        # integer and bool tensors (class targets, indices) may be read by argument validation: it sees
        # every sample's values at once; floating values would silently lose the batch structure
        inner = self._inner()
        if self._data.dtype.kind in "biu" and inner is not None and not isinstance(inner, Wrapper):
            return inner.__array__(dtype, copy)
        raise LucidError(f"pylucid.func: a {type(self).__name__} cannot be converted to a NumPy array")

    def _inner(self):
        return None

    def is_contiguous(self) -> bool:
        return True

    def stride(self, dim=None):
        raise LucidError(f"pylucid.func: stride() of a {type(self).__name__} is not defined")


class BatchedTensor(Wrapper):
    """``vmap``'s wrapper: ``_value`` holds the batch in dimension ``_bdim``; its logical shape lacks it."""

    __slots__ = ("_value", "_bdim")

    def _rewrap(self):
        return make_batched(self._value, self._bdim, self._level)

    def _inner(self):
        return self._value

    def __repr__(self) -> str:
        return f"BatchedTensor(lvl={self._level}, bdim={self._bdim}, value={self._value!r})"


class DualTensor(Wrapper):
    """``jvp``'s wrapper: a primal and its tangent (None: a zero tangent)."""

    __slots__ = ("_primal", "_tangent")

    def _rewrap(self):
        return make_dual(self._primal, self._tangent, self._level)

    def _inner(self):
        return self._primal

    # the primal is the same for every tangent: reading its value (validation, control flow) is exact
    def item(self):
        return self._primal.item()

    def tolist(self):
        return self._primal.tolist()

    def __bool__(self) -> bool:
        return bool(self._primal)

    def __array__(self, dtype=None, copy=None):
        return self._primal.__array__(dtype, copy)

    def __repr__(self) -> str:
        return f"DualTensor(lvl={self._level}, primal={self._primal!r}, tangent={self._tangent!r})"


def make_batched(value, bdim: int, level: int) -> BatchedTensor:
    t = _new(BatchedTensor)
    t._value = value
    t._bdim = bdim
    t._level = level
    s = value._data.shape
    t._init_autograd(tuple(s[:bdim]) + tuple(s[bdim + 1:]), value._data.dtype, value._device)
    return t


def make_dual(primal, tangent, level: int) -> DualTensor:
    t = _new(DualTensor)
    t._primal = primal
    t._tangent = tangent
    t._level = level
    t._init_autograd(tuple(primal._data.shape), primal._data.dtype, primal._device)
    return t


# ------------------------------------------------------------------ levels
class Level:
    """One active transform: its kind (``"vmap"``, ``"jvp"``, ``"grad"``), its number and its options."""

    __slots__ = ("kind", "level", "size", "randomness")

    def __init__(self, kind, level, size=None, randomness="error") -> None:
        self.kind = kind
        self.level = level
        self.size = size
        self.randomness = randomness


class _Stack(threading.local):
    def __init__(self) -> None:
        self.levels: list = []
        self.counter = 0


_tls = _Stack()
_active = [0]  # transforms active in any thread: the dispatch hook is installed while this is > 0
_hook_lock = threading.Lock()


class push_level:
    """Context manager: open a transform level (and install the dispatch hook while any is open)."""

    def __init__(self, kind, size=None, randomness="error") -> None:
        _tls.counter += 1
        self.lv = Level(kind, _tls.counter, size, randomness)

    def __enter__(self) -> Level:
        _tls.levels.append(self.lv)
        with _hook_lock:
            ENTERED[0] += 1
            if _active[0] == 0:
                _outer_hook[0] = _op._transform_hook  # another user's hook (the ONNX tracer): given back at the end
            _active[0] += 1
            _op._transform_hook = dispatch
        return self.lv

    def __exit__(self, *exc) -> None:
        _tls.levels.pop()
        with _hook_lock:
            _active[0] -= 1
            if _active[0] == 0:
                _op._transform_hook, _outer_hook[0] = _outer_hook[0], None


_outer_hook: list = [None]
#: transforms entered so far in this process (a tracer that watches the dispatch hook tells from it whether ops
#: ran through a transform's hook instead of its own)
ENTERED = [0]


def current_levels() -> list:
    return _tls.levels


def find_level(level: int) -> Level | None:
    for lv in reversed(_tls.levels):
        if lv.level == level:
            return lv
    return None


def has_outer(kind_set, skip_innermost: bool = False) -> bool:
    """Whether a level of a kind in ``kind_set`` is open (not counting the innermost with ``skip_innermost``)."""
    levels = _tls.levels[:-1] if skip_innermost else _tls.levels
    return any(lv.kind in kind_set for lv in levels)


# ------------------------------------------------------------------ dispatch
def _top_wrapper(args, params):
    top = None
    for a in args:
        if isinstance(a, Wrapper) and (top is None or a._level > top._level):
            top = a
    if params:
        for v in params.values():
            if v.__class__ is Meta and v.owner is not None and (top is None or v.owner._level > top._level):
                top = v.owner
    return top


def dispatch(op, args, params):
    """The hook ``apply`` calls while a transform is active; NotImplemented sends the call on as usual."""
    if not _tls.levels:
        return NotImplemented
    top = _top_wrapper(args, params)
    if top is None:
        return NotImplemented
    lv = find_level(top._level)
    if lv is None:
        raise LucidError(
            f"pylucid.func: {op.schema.name} got a tensor of a transform that has already returned (level "
            f"{top._level}); return such tensors from the transformed function instead of keeping them"
        )
    if _RULES[0] is None:
        # the rule modules import this one: bound on first use
        from ._batching import batched_apply
        from ._forward import dual_apply

        _RULES[:] = [batched_apply, dual_apply]
    return (_RULES[0] if lv.kind == "vmap" else _RULES[1])(op, args, params, lv)


_RULES: list = [None, None]


# ------------------------------------------------------------------ logical autograd nodes
_LOGICAL: dict = {}
_NO_EXTRA = object()


def _logical_output(self, k: int = 0):
    self._check_freed()
    w = self._out[k]._rewrap()
    w.grad_fn = self
    w._output_nr = k
    w._requires_grad = True
    return w


def _logical_output_array(self, k: int = 0):
    raise NotImplementedError(
        f"pylucid.func: the gradient of op '{self.schema.name}' cannot be taken inside a transform (its backward "
        "reads the raw arrays of its outputs)"
    )


def _logical_input(self, i: int):
    self._check_freed()
    return self.saved[i]


def _logical_backward(self, *grads):
    if self.extra is _NO_EXTRA:
        raise NotImplementedError(
            f"pylucid.func: the gradient of op '{self.schema.name}' cannot be taken inside a transform (its "
            "backward needs data computed from the raw arrays of the forward)"
        )
    return type(self).__mro__[1].backward(self, *grads)


def _logical_cls(op):
    c = _LOGICAL.get(op)
    if c is None:
        c = type(op.__name__, (op,), {"__slots__": (), "output": _logical_output, "input": _logical_input,
                                      "output_array": _logical_output_array,
                                      "backward": _logical_backward, "backward_fast": None,
                                      "__module__": op.__module__})
        _LOGICAL[op] = c
    return c


def needs_logical_node(op, args) -> bool:
    if not (state.grad_enabled and op._differentiable):
        return False
    for a in args:
        if isinstance(a, Tensor) and a._requires_grad:
            return True
    return False


def record_logical(op, args, params, outs) -> None:
    """A node of ``op`` over the logical arguments ``args`` (wrappers and plain tensors), linked to the
    logical outputs ``outs`` (a tuple; the floating ones among ``differentiable_outputs`` get the node)."""
    node = _new(_logical_cls(op))
    dev = None
    edges = []
    shapes = []
    for a in args:
        if isinstance(a, Tensor):
            if dev is None:
                dev = a._device
            shapes.append(tuple(a._data.shape))
            if a._requires_grad:
                fn = a.grad_fn
                edges.append((fn, a._output_nr) if fn is not None else (grad_accumulator(a), 0))
                continue
        else:
            shapes.append(None)
        edges.append(None)
    node.device = dev
    node.next_edges = edges
    node.params = params
    node.shapes = shapes
    node._pre_hooks = None
    node._hooks = None
    node._freed = False
    node.extra = None
    node.saved = tuple(args) if op._saves_input else None
    node.saved_versions = None
    node._trace = None
    multi = op.n_outputs != 1
    node.out_meta = tuple((tuple(o._data.shape), o._data.dtype) for o in outs) if multi else None
    diff = op.differentiable_outputs
    for k, o in enumerate(outs):
        if isinstance(o, Tensor) and (diff is None or diff[k]) and o._data.dtype.kind in "fcV":
            o.grad_fn = node
            o._output_nr = k
            o._requires_grad = True
    node._out = tuple(o._rewrap() if isinstance(o, Wrapper) else _PlainOut(o) for o in outs) \
        if op._saves_output else None
    if op.save_extra is not None:
        try:
            node.save_extra([a._data if isinstance(a, Tensor) else a for a in args],
                            tuple(o._data for o in outs) if multi else outs[0]._data)
        except LucidError:
            node.extra = _NO_EXTRA
        else:
            if _holds_meta(node.extra):
                node.extra = _NO_EXTRA


def _holds_meta(x) -> bool:
    if x.__class__ is Meta:
        return True
    if isinstance(x, (tuple, list)):
        return any(_holds_meta(v) for v in x)
    return False


class _PlainOut:
    """A plain output saved by a logical node (an op of mixed arguments whose result is unbatched)."""

    __slots__ = ("t",)

    def __init__(self, t) -> None:
        self.t = t

    def _rewrap(self):
        return self.t.detach()


# ------------------------------------------------------------------ pytrees
def tree_flatten(tree):
    """``(leaves, spec)`` for nested tuples, lists and dicts (anything else is a leaf)."""
    leaves: list = []
    spec = _flatten(tree, leaves)
    return leaves, spec


def _flatten(t, leaves):
    if isinstance(t, tuple) and hasattr(t, "_fields"):
        return ("namedtuple", type(t), [_flatten(x, leaves) for x in t])
    if isinstance(t, (tuple, list)):
        return (type(t).__name__, None, [_flatten(x, leaves) for x in t])
    if isinstance(t, dict):
        keys = list(t)
        return ("dict", keys, [_flatten(t[k], leaves) for k in keys])
    leaves.append(t)
    return None


def tree_unflatten(leaves, spec):
    it = iter(leaves)
    return _unflatten(spec, it)


def _unflatten(spec, it):
    if spec is None:
        return next(it)
    kind, meta, kids = spec
    vals = [_unflatten(k, it) for k in kids]
    if kind == "namedtuple":
        return meta(*vals)
    if kind == "tuple":
        return tuple(vals)
    if kind == "list":
        return vals
    return dict(zip(meta, vals))


def broadcast_prefix(prefix, tree, what: str):
    """Leaves of ``prefix`` (e.g. ``in_dims``) repeated over the matching subtrees of ``tree``."""
    out: list = []
    _bp(prefix, tree, out, what)
    return out


def _bp(p, t, out, what):
    if isinstance(p, (tuple, list)) and not (isinstance(p, tuple) and hasattr(p, "_fields") and False):
        if not isinstance(t, (tuple, list)) or len(p) != len(t):
            raise ValueError(f"vmap: {what}={p!r} does not match the structure of the inputs/outputs")
        for a, b in zip(p, t):
            _bp(a, b, out, what)
        return
    if isinstance(p, dict):
        if not isinstance(t, dict) or set(p) != set(t):
            raise ValueError(f"vmap: {what} keys {sorted(p)} do not match the structure of the inputs/outputs")
        for k in t:
            _bp(p[k], t[k], out, what)
        return
    n = len(tree_flatten(t)[0])
    out.extend([p] * n)
