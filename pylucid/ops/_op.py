"""``Op``: the base class of every registered op, and ``apply``: the one dispatch path.

An op subclass declares a ``schema`` (it registers itself), a ``forward`` on
raw backend arrays, a ``backward`` written in pylucid ops (the graph-mode
formula, giving first and higher derivatives) and, optionally, a
``backward_fast`` on raw arrays for first-order gradients of hot ops. The
generic tests check the fast path against the graph formula.
"""

from __future__ import annotations

import traceback

from .. import dtypes as _dt
from .._state import flags, state
from .._tensor import _TENSOR_TYPES as _TT
from .._tensor import Tensor, _new_tensor
from ..autograd.graph import Node, grad_accumulator
from ..errors import DeviceMismatch, NonDeterministicError, VersionMismatch
from . import registry
from ._utils import camel
from .schema import AmpPolicy, OpSchema
from .validation import check_dtypes, rejected_dtypes

_FROM_NP = _dt._FROM_NP
_PROMOTE = AmpPolicy.PROMOTE
_FORCE_FP32 = AmpPolicy.FORCE_FP32
_KEEP_INPUT = AmpPolicy.KEEP_INPUT
_FLOAT = _dt.FLOAT
_EMPTY: dict = {}
_BF16 = _dt.bfloat16.numpy_dtype
_F32_NP = _dt.float32.numpy_dtype
#: the tensor dtypes autocast casts to its dtype (float64 is not autocast's to change, as in PyTorch)
_AMP_CASTABLE = frozenset(d.numpy_dtype for d in (_dt.float16, _dt.bfloat16, _dt.float32))
_HALF_NP = frozenset(d.numpy_dtype for d in (_dt.float16, _dt.bfloat16))
_GRAD_NP_DTYPES = frozenset(d.numpy_dtype for d in _dt.ALL_DTYPES if d.category >= _dt.FLOAT)
# dtypes a Python float/int scalar never changes (NumPy's weak-scalar rule keeps
# them, matching PyTorch); bfloat16 is excluded: NumPy's rule does not reach it
_FAST_FLOAT = frozenset(d.numpy_dtype for d in (_dt.float16, _dt.float32, _dt.float64, _dt.complex64,
                                                 _dt.complex128))
_FAST_INT_OK = _FAST_FLOAT | frozenset(d.numpy_dtype for d in (_dt.int64, _dt.int32, _dt.int16))
_new = object.__new__
#: set by pylucid.func while a function transform (vmap, jvp) is active: ``hook(op, args, params)`` returns
#: the transformed result, or NotImplemented to let the call run as usual
_transform_hook = None


def transform_active() -> bool:
    """Whether a hook intercepts op calls: a function transform of ``pylucid.func`` (vmap, jvp, ...) or the ONNX
    tracer. Code with a fused fast path such a hook has no rule for (the one-op LSTM/GRU layers) takes its plain
    ops while this is True."""
    return _transform_hook is not None


class Op(Node):
    """A registered op; instances are the autograd nodes of its calls."""

    __slots__ = ("params", "saved", "saved_versions", "_out", "shapes", "out_meta", "device", "extra")

    schema: OpSchema
    #: positions of the arguments that take part in type promotion (None: all)
    promote_args: tuple | None = None
    #: positions of the arguments a ForceFP32 op reads in their half dtype under CUDA autocast: a float16/bfloat16
    #: tensor there is passed uncast (the CUDA kernels widen it on load) and ``forward`` gets ``float_out=True``;
    #: the results are the float32 of the policy and the backward gives those inputs' gradients in their dtype
    amp_half_args: tuple = ()
    #: a Promote op whose result is a selection of input 0's values (a gather): under autocast it computes in that
    #: input's dtype and ``forward`` gets ``amp_dtype``, to round the selection to (the values of casting input 0
    #: first, without converting what is not selected); the backward returns input 0's gradient in its dtype
    amp_gathers = False
    #: the output shares memory with input 0 (reshape, transpose, slicing ...)
    is_view = False
    n_outputs = 1
    #: per output, whether it carries a gradient (None: every floating output)
    differentiable_outputs: tuple | None = None
    #: the outputs after the first carry no gradient and are only for the node (``save_extra``: a norm's statistics,
    #: attention's log-sum-exp): ``apply`` makes a Tensor of output 0 alone and returns None in their places
    hidden_outputs = False
    backward_fast = None
    #: the input (its position) whose pending gradient ``backward_fast_accumulate(be, g, pending)`` can
    #: add into that input's gradient as it writes it (a residual stream's gradient summed inside a
    #: normalisation's backward kernel instead of by a separate add); None: no such fast path
    accumulates_into: int | None = None
    #: optional ``save_extra(self, arrays, out)``: derived data kept for backward
    save_extra = None
    #: the NumPy dtypes the schema's ``accepts`` refuses (None: every dtype is accepted)
    _rejects = None
    #: the refused NumPy dtypes when one set covers every input (None otherwise): a one-array call tests it inline
    _rejects_all = None
    #: the schema's AMP policy (None on a class without a schema)
    _amp_policy = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        s = cls.__dict__.get("schema")
        if s is not None:
            registry.register(cls)
            # schema facts resolved once, at class creation (DESIGN.md §7)
            cls._saves_input = s.saves_input
            cls._saves_output = s.saves_output
            cls._real_valued = s.real_valued
            cls._differentiable = s.differentiable
            # a seeded op (random only through pylucid's generator) is reproducible: the gate lets it run
            cls._deterministic = s.deterministic or s.seeded
            cls._node_name = camel(s.name) + "Backward"
            cls._amp_policy = s.amp_policy
            cls._rejects = rejected_dtypes(s.accepts)
            cls._rejects_all = cls._rejects[0] if cls._rejects is not None and len(cls._rejects) == 1 else None

    # -- the three parts of an op -----------------------------------------
    @staticmethod
    def forward(be, *arrays, **params):  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, *grad_outputs):  # pragma: no cover - abstract
        raise NotImplementedError(f"{self.name()}: no backward formula")

    # -- node interface ------------------------------------------------------
    def name(self) -> str:
        return self._node_name

    @property
    def needs_input_grad(self) -> tuple:
        return tuple(e is not None for e in self.next_edges)

    def _check_freed(self) -> None:
        if self._freed:
            raise RuntimeError(
                f"{self.name()}: trying to backward through the graph a second time (or to read saved tensors after "
                "they were freed). Saved tensors are freed when you call .backward() or autograd.grad(); "
                "pass retain_graph=True to the first call if you need to backward through the graph again."
            )

    def input(self, i: int):
        """Saved input ``i`` as a Tensor, checked against in-place modification."""
        self._check_freed()
        t = self.saved[i]
        v = self.saved_versions[i]
        if v is not None and t._version[0] != v:
            raise VersionMismatch(
                f"{self.name()}: input {i} saved for backward was modified by an in-place operation: it was at "
                f"version {v} when saved and is now at version {t._version[0]}. Use an out-of-place op or clone() "
                "the tensor before modifying it."
            )
        return t

    @property
    def inputs(self) -> tuple:
        return tuple(self.input(i) for i in range(len(self.saved)))

    def output_array(self, k: int = 0):
        self._check_freed()
        data, version, v = self._out[k]
        if version[0] != v:
            raise VersionMismatch(
                f"{self.name()}: its output {k}, saved for backward, was modified by an in-place operation: it was "
                f"at version {v} when saved and is now at version {version[0]}."
            )
        return data

    def output(self, k: int = 0):
        """Saved output ``k`` rebuilt as a Tensor whose grad_fn is this node.

        The node holds the output's array and version counter, never the
        output Tensor, so there is no reference cycle; rebuilding it with this
        node as grad_fn lets graph-mode formulas that use the output (sqrt's
        ``g / (2*y)``) differentiate through it again.
        """
        data = self.output_array(k)
        t = _new_tensor(data, self.device)
        t._version = self._out[k][1]
        t.grad_fn = self
        t._output_nr = k
        t._requires_grad = True
        return t

    def release(self) -> None:
        if self.saved is not None or self._out is not None:
            self.saved = None
            self._out = None
            self._freed = True


def _operand_error(op, a):
    return TypeError(
        f"{op.schema.name}: expected Tensor or Python number arguments, got {type(a).__name__}; "
        "convert it with pylucid.tensor(...) first"
    )


def apply(op, args: tuple, params: dict = _EMPTY):
    """Run ``op`` on ``args`` (Tensors and Python scalars): DESIGN.md §3, steps 1-6.

    The common calls take a short path that makes exactly the decisions of the
    general path below, without its loops: ops that promote nothing (shape and
    indexing ops, casts: autocast does not touch them either), and, with no
    autocast, one tensor, two tensors of one dtype and device, a tensor and a
    Python scalar that does not change its dtype kind, or three or more tensors
    of one dtype and device; under autocast, ``KeepInput`` ops take the same short path (autocast does
    not touch them) and the others :func:`_autocast_plain`. Ops that promote only some of their
    arguments take :func:`_promoted_plain` where nothing would be cast. The profiler and anomaly mode
    take the general path.
    """
    st = state
    if _transform_hook is not None:
        res = _transform_hook(op, args, params)
        if res is not NotImplemented:
            return res
    if st.profiler is None and not st.anomaly:
        pa = op.promote_args
        if pa is not None:
            # no type promotion at all (no compute dtype, so no AMP policy): the arrays go as they are
            if not pa:
                if len(args) == 1:  # getitem, transpose, casts ...: one Tensor, its array as it is
                    a = args[0]
                    if a.__class__ in _TT:
                        return _finish(op, args, (a._data,), params, a._device, a._requires_grad, st)
                got = _plain_args(args)
                if got is not None:
                    return _finish(op, args, got[0], params, got[1], got[2], st)
            else:
                got = _promoted_plain(op, args, st)
                if got is not None:
                    return _finish(op, args, got[0], params, got[1], got[2], st)
            return _apply_general(op, args, params, st)
        # a KeepInput op computes in its inputs' dtype with or without autocast: the short path below serves it
        if st.autocast is not None and op._amp_policy is not _KEEP_INPUT:
            if op.amp_half_args:
                got = _autocast_half_kept(op, args, params, st)
                if got is not None:
                    return _finish(op, args, got[0], got[3], got[1], got[2], st)
                return _apply_general(op, args, params, st)
            got = _autocast_plain(op, args, st)
            if got is not None:
                return _finish(op, got[0], got[1], params, got[2], got[3], st)
            return _apply_general(op, args, params, st)
        n = len(args)
        if n == 1:
            a = args[0]
            if a.__class__ in _TT:
                data = a._data
                if not op._real_valued or data.dtype in _GRAD_NP_DTYPES:
                    return _finish(op, args, (data,), params, a._device, a._requires_grad, st)
        elif n == 2:
            a, b = args
            ca, cb = a.__class__, b.__class__
            if ca in _TT:
                da = a._data
                if cb in _TT:
                    db = b._data
                    if b._device is a._device and (db.dtype is da.dtype or db.dtype == da.dtype) and (
                            not op._real_valued or da.dtype in _GRAD_NP_DTYPES):
                        return _finish(op, args, (da, db), params, a._device,
                                       a._requires_grad or b._requires_grad, st)
                    got = _float_promoted(op, args, st)
                    if got is not None:
                        return _finish(op, got[0], got[1], params, got[2], got[3], st)
                elif (cb is float and da.dtype in _FAST_FLOAT) or (cb is int and (
                        da.dtype in _FAST_FLOAT if op._real_valued else da.dtype in _FAST_INT_OK)):
                    return _finish(op, args, (da, b), params, a._device, a._requires_grad, st)
            elif cb in _TT:
                db = b._data
                if (ca is float and db.dtype in _FAST_FLOAT) or (ca is int and (
                        db.dtype in _FAST_FLOAT if op._real_valued else db.dtype in _FAST_INT_OK)):
                    return _finish(op, args, (a, db), params, b._device, b._requires_grad, st)
        else:
            # three or more operands (linear, layer_norm, addcmul, ...): Tensors (or None) of one dtype
            # and one device promote to that dtype, so the general path would change nothing
            got = _plain_args(args, same_dtype=True)
            if got is not None and (not op._real_valued or got[3] in _GRAD_NP_DTYPES):
                return _finish(op, args, got[0], params, got[1], got[2], st)
    return _apply_general(op, args, params, st)


def _promoted_plain(op, args, st):
    """``(arrays, device, requires_grad)`` for an op with ``promote_args`` (only those arguments take part
    in promotion: batch norm's input, attention's q, k, v and mask, ...) when the general path would cast
    nothing, else None (the general path).

    That is: every Tensor on one device; the promoted arguments that are not None Tensors of one dtype
    (no Python scalar among them), a floating dtype for a ``real_valued`` op; and autocast leaves that
    dtype as it is: no autocast, a ``KeepInput`` op, or a ``Promote`` op (without ``amp_gathers``) whose
    promoted Tensors have the autocast dtype already or a dtype autocast does not change (float64).
    """
    got = _plain_args(args)
    if got is None:
        return None
    n = len(args)
    dt = None
    for i in op.promote_args:
        if i < n:
            a = args[i]
            if a.__class__ in _TT:
                d = a._data.dtype
                if dt is None:
                    dt = d
                elif d != dt:
                    return None
            elif a is not None:
                return None  # a Python scalar takes part in promotion
    if dt is None or (op._real_valued and dt not in _GRAD_NP_DTYPES):
        return None
    ac = st.autocast
    if ac is not None and op._amp_policy is not _KEEP_INPUT:
        if op._amp_policy is not _PROMOTE or op.amp_gathers:
            return None
        adt = ac.get(got[1].type)
        if adt is not None and dt in _AMP_CASTABLE and dt != adt.numpy_dtype:
            return None
    return got


def _autocast_plain(op, args, st):
    """``(args, arrays, device, requires_grad)`` for the common autocast calls, else None (the general path).

    That is: a ``Promote`` or ``ForceFP32`` op whose Tensor arguments are all on one device and of float16,
    bfloat16 or float32 (one dtype or several), with Python float/int scalars at most. The general path would
    compute in the policy's dtype (the autocast dtype, or float32) and cast each Tensor of another dtype to it,
    as done here (:func:`_cast_to`: a cast of a Tensor that needs a gradient is a recorded cast op, and the
    recorded call's arguments are the cast Tensors). A call whose Tensors all have that dtype already casts
    nothing. Scalars become bfloat16 values for a bfloat16 compute dtype, as in the general path.
    """
    pol = op._amp_policy
    if pol is not _PROMOTE and pol is not _FORCE_FP32 or op.amp_half_args:
        return None  # (the general path keeps the half arguments of amp_half_args)
    dev = dt = None
    req = scal = mixed = False
    arrays = []
    for a in args:
        c = a.__class__
        if c in _TT:
            d = a._data
            if dev is None:
                dev, dt = a._device, d.dtype
            elif a._device is not dev:
                return None
            elif d.dtype != dt:
                mixed = True
            if a._requires_grad:
                req = True
            arrays.append(d)
        elif c is float or c is int:
            scal = True
            arrays.append(a)
        elif a is None:
            arrays.append(None)
        else:
            return None
    if dev is None:
        return None
    adt = st.autocast.get(dev.type)
    if adt is None:
        return None
    if pol is _PROMOTE:
        target, tdt = adt.numpy_dtype, adt
    else:
        target, tdt = _F32_NP, _dt.float32
    if mixed or dt != target:
        # float64 (and integer Tensors) are not autocast's to change: the general path words what happens
        if op.is_view or any(d.__class__ is not float and d.__class__ is not int and d is not None
                             and d.dtype not in _AMP_CASTABLE for d in arrays):
            return None
        args = _cast_to(args, arrays, dev, target, tdt, req and st.grad_enabled and op._differentiable, st)
    if scal and target is _BF16:
        arrays = [_BF16.type(a) if a.__class__ is float or a.__class__ is int else a for a in arrays]
    return args, arrays, dev, req


def _cast_to(args, arrays, dev, target, tdt, recorded, st):
    """Cast each Tensor of ``args`` whose array (in ``arrays``, updated in place) is not of NumPy dtype ``target``
    to it (``tdt``, the pylucid dtype), as the general path does; returns the arguments the call records.

    For a ``recorded`` call the cast of a Tensor that requires grad is a :class:`~pylucid.ops.conversion.Cast` node
    (so its gradient reaches the original dtype), and every cast Tensor replaces its argument, since the node
    saves its inputs; an unrecorded call keeps ``args`` and casts arrays only. A float32 Tensor whose kernel also
    wrote its rounding to ``target`` (:func:`amp_rounding`) takes that copy instead of a cast kernel.
    """
    be = dev.backend
    new_args = list(args) if recorded else None
    for i, a in enumerate(args):
        if a.__class__ in _TT:
            d = arrays[i]
            if d.dtype != target:
                if recorded:
                    t = new_args[i] = _cast_tensor(a, target, tdt, a._requires_grad, st)
                    arrays[i] = t._data
                else:
                    r = None if be.amp_rounded is None else amp_rounding(a, target)
                    arrays[i] = be.astype(d, target) if r is None else r
    return tuple(new_args) if recorded else args


def _cast_tensor(a, target, tdt, record, st):
    """Tensor ``a`` cast to NumPy dtype ``target`` (``tdt``, the pylucid dtype) for a call's arguments: a recorded
    :class:`~pylucid.ops.conversion.Cast` node where ``record`` (so the gradient reaches ``a``'s dtype), else a
    plain Tensor. A float32 ``a`` whose kernel also wrote its rounding to ``target`` (:func:`amp_rounding`) gives
    that copy instead of a cast kernel."""
    be = a._device.backend
    d = a._data
    r = None if be.amp_rounded is None else amp_rounding(a, target)
    if not record:
        return _new_tensor(be.astype(d, target) if r is None else r, a._device)
    from .conversion import Cast

    p = {"dtype": tdt, "in_dtype": _FROM_NP[d.dtype]}
    if r is not None:
        p["rounded"] = r
    if _transform_hook is not None or st.profiler is not None or st.anomaly:
        return apply(Cast, (a,), p)  # (the hook may take it; the profiler and anomaly mode see the cast op)
    return _finish(Cast, (a,), (d,), p, a._device, True, st)  # a cast promotes nothing: apply's short path


def _float_promoted(op, args, st):
    """``(args, arrays, device, requires_grad)`` for a two-Tensor call of an op that promotes all its arguments
    (no autocast, or a ``KeepInput`` op) whose Tensors are floating, of two dtypes, on one device and not 0-d:
    the promoted dtype is the wider one (float32 for float16 with bfloat16), as the general path computes, and
    the other Tensor is cast to it (:func:`_cast_to`). Else None (the general path, which also words the
    errors)."""
    a, b = args
    da, db = a._data, b._data
    key = (da.dtype, db.dtype)
    got = _FLOAT_PAIRS.get(key)
    if got is None:
        fa, fb = _FROM_NP.get(key[0]), _FROM_NP.get(key[1])
        if fa is None or fb is None or fa.category != _FLOAT or fb.category != _FLOAT:
            return None
        tdt = _dt.result_type([fa, fb], (), ())
        got = _FLOAT_PAIRS[key] = (tdt.numpy_dtype, tdt)
    if b._device is not a._device or not da.ndim or not db.ndim or op.is_view:
        return None
    dev = a._device
    req = a._requires_grad or b._requires_grad
    arrays = [da, db]
    args = _cast_to(args, arrays, dev, got[0], got[1], req and st.grad_enabled and op._differentiable, st)
    return args, arrays, dev, req


#: (dtype, dtype) -> (NumPy, pylucid) promoted dtype, for the float pairs :func:`_float_promoted` has met
_FLOAT_PAIRS: dict = {}


def _autocast_half_kept(op, args, params, st):
    """``(arrays, device, requires_grad, params)`` for a ``ForceFP32`` op with ``amp_half_args`` (layer norm,
    gelu) under CUDA autocast when the general path would cast nothing: every Tensor on one CUDA device, the
    ``amp_half_args`` Tensors float16/bfloat16 (read as they are: ``float_out``) or float32, every other Tensor
    float32, no Python scalar among the arguments; else None (the general path). The general path gives the
    same arrays and parameters: the promoted dtype is a float below float64, the policy makes it float32, the
    half arguments are kept and every other argument has that dtype already."""
    if op._amp_policy is not _FORCE_FP32 or op.promote_args is not None:
        return None
    dev = None
    req = kept = False
    arrays = []
    half_args = op.amp_half_args
    for i, a in enumerate(args):
        if a.__class__ in _TT:
            d = a._data
            if dev is None:
                dev = a._device
            elif a._device is not dev:
                return None
            dt = d.dtype
            if dt in _HALF_NP and i in half_args:
                kept = True
            elif dt != _F32_NP:
                return None
            if a._requires_grad:
                req = True
            arrays.append(d)
        elif a is None:
            arrays.append(None)
        else:
            return None
    if dev is None or dev.type != "cuda" or st.autocast.get("cuda") is None:
        return None
    return arrays, dev, req, ({**params, "float_out": True} if kept else params)


def _plain_args(args, same_dtype=False):
    """``(arrays, device, requires_grad, dtype)`` when every Tensor argument is on one device (and, with
    ``same_dtype``, every argument is a Tensor of one dtype or None); None sends the call to the
    general path, which also words the errors."""
    dev = dt = None
    req = False
    arrays = []
    for a in args:
        if a.__class__ in _TT:
            d = a._data
            if dev is None:
                dev, dt = a._device, d.dtype
            elif a._device is not dev or (same_dtype and d.dtype != dt):
                return None
            if a._requires_grad:
                req = True
            arrays.append(d)
        elif a is None or not same_dtype:
            arrays.append(a)
        else:
            return None
    if dev is None:
        return None
    return arrays, dev, req, dt


def _finish(op, args, arrays, params, dev, req, st, prof=None):
    """Steps 3-5, shared by both paths: determinism gate, backend call, wrapping, graph.

    ``req``: an argument requires grad; ``prof``: the profiler (the general path's; the short
    path runs without one).
    """
    if op._rejects is not None:
        rej = op._rejects_all
        # one array of an accepted dtype (relu, exp, ...) passes here; check_dtypes decides every other call
        if rej is None or len(arrays) != 1 or arrays[0].dtype in rej:
            check_dtypes(op, arrays)
    if not op._deterministic and flags.deterministic:
        _nondeterministic(op)
    be = dev.backend
    if be._multi:
        with be.cuda_device:
            out = op.forward(be, *arrays, **params) if prof is None else prof.run(op, be, arrays, params, dev)
    elif prof is None:
        # a plain call for the common arities without params: cheaper than building *args and **params
        n = len(arrays)
        if params:
            out = op.forward(be, *arrays, **params)
        elif n == 2:
            out = op.forward(be, arrays[0], arrays[1])
        elif n == 1:
            out = op.forward(be, arrays[0])
        else:
            out = op.forward(be, *arrays)
    else:
        out = prof.run(op, be, arrays, params, dev)
    if op.n_outputs != 1:
        if op.hidden_outputs:
            y = out[0]
            t = _new_tensor(y if y.__class__ is be.ndarray else be.asarray(y), dev)
            if req and st.grad_enabled and op._differentiable and t._data.dtype in _GRAD_NP_DTYPES:
                _record(op, args, arrays, params, dev, out, t, None)
            return (t,) + _NONE_TAILS[op.n_outputs]
        outs = tuple(_new_tensor(o if o.__class__ is be.ndarray else be.asarray(o), dev) for o in out)
        if req and st.grad_enabled and op._differentiable:
            _record(op, args, arrays, params, dev, out, None, outs)
        if op.is_view:
            for o in outs:
                _mark_view(o, args[0])
        return outs
    if out.__class__ is not be.ndarray:
        out = be.asarray(out)
    # _new_tensor() inlined: this is the hottest allocation in the framework
    # (one per op call), and the saved call is measurable in the per-op benchmark
    t = _new(Tensor)
    t._data = out
    t._device = dev
    t.grad = None
    t._output_nr = 0
    t._version = [0]
    t._base = None
    t._hooks = None
    t._retains_grad = False
    t._grad_acc = None
    if req and st.grad_enabled and op._differentiable and out.dtype in _GRAD_NP_DTYPES:
        _record(op, args, arrays, params, dev, out, t, None)
    else:
        t.grad_fn = None
        t._requires_grad = False
    if op.is_view:
        _mark_view(t, args[0])
    return t


#: what ``apply`` returns in the places of a ``hidden_outputs`` op's outputs after the first, per ``n_outputs``
_NONE_TAILS = tuple((None,) * (n - 1) if n else () for n in range(9))


def _nondeterministic(op) -> None:
    msg = (f"{op.schema.name} is not deterministic ({op.schema.deterministic_note}) and "
           "pylucid.use_deterministic_algorithms(True) is set")
    if flags.deterministic_warn_only:
        import warnings

        warnings.warn(msg, UserWarning, stacklevel=4)
        return
    raise NonDeterministicError(msg)


def amp_rounding(t, np_dtype):
    """The rounding of ``t``'s float32 values to ``np_dtype`` that the kernel which made ``t`` also wrote (a float_out
    op under autocast: ``ArrayBackend.amp_rounded``), to take instead of a cast kernel; None when there is none or
    ``t`` may have changed since (modified in place: version above 0; or a view). Taken once."""
    be = t._device.backend
    r = be.amp_rounded
    if r is not None and r[0] is t._data and r[1].dtype == np_dtype and t._version[0] == 0 and t._base is None:
        be.amp_rounded = None
        return r[1]
    return None


def _half_kept(op, args):
    """The positions of ``op.amp_half_args`` holding a float16/bfloat16 Tensor (kept uncast under autocast)."""
    return frozenset(i for i in op.amp_half_args if i < len(args) and isinstance(args[i], Tensor)
                     and args[i]._data.dtype in _HALF_NP)


def _apply_general(op, args, params, st):
    dev = None
    keep = None
    req = False
    promote = op.promote_args
    dims = []
    zdims = None
    scal = None
    # 1. devices agree; collect the dtypes that take part in promotion
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            d = a._device
            if dev is None:
                dev = d
            elif d is not dev:
                raise DeviceMismatch(
                    f"{op.schema.name}: expected all tensors on one device, got {dev} and {d}; "
                    "move them with .to(device) first"
                )
            if a._requires_grad:
                req = True
            if promote is None or i in promote:
                data = a._data
                if data.ndim:
                    dims.append(_FROM_NP[data.dtype])
                else:
                    if zdims is None:
                        zdims = []
                    zdims.append(_FROM_NP[data.dtype])
        elif a is not None and (promote is None or i in promote):
            if scal is None:
                scal = []
            try:
                scal.append(_dt.scalar_category(a))
            except TypeError:
                raise _operand_error(op, a) from None
    # 2. compute dtype: promotion, then the AMP policy, then real_valued
    if scal is None and zdims is None and len(dims) == 1:
        cdt = dims[0]
    elif dims or zdims or scal:
        cdt = _dt.result_type(dims, zdims or (), scal or ())
    else:
        cdt = None
    if cdt is not None:
        ac = st.autocast
        # float64 is not autocast's to change (as PyTorch: only float32 and half inputs are eligible)
        if ac is not None and cdt.category == _FLOAT and dev is not None and cdt is not _dt.float64:
            adt = ac.get(dev.type)
            if adt is not None:
                pol = op.schema.amp_policy
                if pol is _PROMOTE:
                    if op.amp_gathers and cdt is not adt:
                        params = {**params, "amp_dtype": adt}
                    else:
                        cdt = adt
                elif pol is _FORCE_FP32:
                    cdt = _dt.float32
                    if op.amp_half_args and dev.type == "cuda":
                        keep = _half_kept(op, args)
                        if keep:
                            params = {**params, "float_out": True}
        if op._real_valued and cdt.category < _FLOAT:
            cdt = _dt.get_default_dtype()
    grad_on = req and st.grad_enabled and op._differentiable
    # cast inputs to the compute dtype; casts of tensors that need a gradient
    # are recorded (a differentiable cast op), so gradients reach the original
    # dtype: a float32 leaf gets a float32 .grad under float16 autocast.
    arrays = []
    new_args = None
    np_cdt = cdt.numpy_dtype if cdt is not None else None
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            data = a._data
            if np_cdt is not None and data.dtype != np_cdt and (promote is None or i in promote) and (
                    keep is None or i not in keep):
                a = _cast_tensor(a, np_cdt, cdt, grad_on and a._requires_grad, st)
                if new_args is None:
                    new_args = list(args)
                new_args[i] = a
                data = a._data
            arrays.append(data)
        elif a is not None and np_cdt is _BF16 and (promote is None or i in promote):
            # NumPy's weak-scalar rule does not reach ml_dtypes' bfloat16: give
            # the scalar the compute dtype so the result stays bfloat16
            arrays.append(_BF16.type(a))
        else:
            arrays.append(a)
    if new_args is not None:
        args = tuple(new_args)
    if dev is None:
        raise TypeError(
            f"{op.schema.name}: expected at least one Tensor argument, got "
            f"({', '.join(type(a).__name__ for a in args)}); convert with pylucid.tensor(...)"
        )
    # 3-5. determinism gate, the backend call, outputs and graph
    result = _finish(op, args, arrays, params, dev, req, st, st.profiler)
    if st.anomaly:
        _trace_nodes(result)
    return result


def _mark_view(t, base):
    if t._data.base is not None:
        t._base = base._base if base._base is not None else base
        t._version = base._version


def _record(op, args, arrays, params, dev, out, t, outs):
    """Step 5's graph, the one place it is recorded: a node of ``op`` with its edges, input shapes and
    what the schema saves (inputs with their versions, outputs, ``save_extra``), linked to its outputs.

    ``out`` is what ``forward`` returned; ``t`` the output Tensor of a one-output op, or ``outs`` the
    output Tensors of a multi-output op (those of a floating dtype among ``differentiable_outputs``
    get the node); neither for an output the caller links itself (``to_device``). Returns the node.
    The anomaly-mode trace is left to the callers: the short path never runs under anomaly mode, so
    the switch is not read here.
    """
    node = _new(op)
    node.device = dev
    edges = []
    shapes = []
    saves = op._saves_input
    versions = [] if saves else None
    # one pass over the arguments: edges, input shapes and (when inputs are saved) their versions
    for a in args:
        if a.__class__ in _TT:
            shapes.append(a._data.shape)
            if saves:
                versions.append(a._version[0])
            if a._requires_grad:
                fn = a.grad_fn
                if fn is not None:
                    edges.append((fn, a._output_nr))
                else:
                    # grad_accumulator() inlined for its common case: the leaf's node is alive
                    ref = a._grad_acc
                    acc = ref() if ref is not None else None
                    edges.append((acc if acc is not None else grad_accumulator(a), 0))
                continue
        else:
            shapes.append(None)
            if saves:
                versions.append(None)
        edges.append(None)
    node.next_edges = edges
    node.params = params
    node.shapes = shapes
    node._pre_hooks = None
    node._hooks = None
    node._freed = False
    node.extra = None
    node.saved = args if saves else None
    node.saved_versions = versions
    node._trace = None
    if t is not None:
        t.grad_fn = node
        t._requires_grad = True
        # (a hidden_outputs op passes all its outputs as ``out``, for save_extra; only the first is a Tensor)
        node._out = (((out[0] if op.hidden_outputs else out), t._version, 0),) if op._saves_output else None
        node.out_meta = None
    elif outs is not None:
        diff = op.differentiable_outputs
        node.out_meta = tuple((o._data.shape, o._data.dtype) for o in outs)
        for k, o in enumerate(outs):
            if (diff is None or diff[k]) and o._data.dtype in _GRAD_NP_DTYPES:
                o.grad_fn = node
                o._output_nr = k
                o._requires_grad = True
        node._out = tuple((o._data, o._version, 0) for o in outs) if op._saves_output else None
    else:
        node._out = None
        node.out_meta = None
    if op.save_extra is not None:
        node.save_extra(arrays, out)
    return node


def _trace_nodes(result) -> None:
    """Anomaly mode: the forward stack of the call that made ``result``, on its node(s)."""
    stack = traceback.format_stack()[:-3]  # without this function, _apply_general and apply
    for o in result if result.__class__ is tuple else (result,):
        if o is not None and o.grad_fn is not None:  # (None: a hidden output)
            o.grad_fn._trace = stack


def _make_node(op, args, params, st, dev):
    """A node for an output the caller links itself (``to_device``)."""
    node = _record(op, args, None, params, dev, None, None, None)
    if st.anomaly:
        node._trace = traceback.format_stack()[:-3]  # without this function, to_device and its caller
    return node


def operand(op_name: str, x):
    """Normalise one operand: Tensors pass, Python and NumPy scalars become Python scalars."""
    if isinstance(x, Tensor) or isinstance(x, (bool, int, float, complex)):
        return x
    item = getattr(x, "item", None)
    if item is not None and getattr(x, "ndim", None) == 0:
        return item()
    raise TypeError(
        f"{op_name}: expected a Tensor or a Python number, got {type(x).__name__}; convert it with pylucid.tensor(...)"
    )


def commit_inplace(x: Tensor, out: Tensor, op_name: str) -> Tensor:
    """Write ``out`` into ``x``'s storage (views of ``x`` see it), bump the version
    and move ``x``'s history onto ``out``'s node.

    If the node that produced ``out`` saved ``x`` itself for backward (``mul_``
    needs the old ``x``), that saved reference is replaced by a snapshot of the
    old values first, so the backward stays exact.
    """
    from ..errors import DtypeMismatch, LucidError, ShapeMismatch

    if out._data.shape != x._data.shape:
        raise ShapeMismatch(
            f"{op_name}: the result of shape {tuple(out.shape)} cannot be written in place into a tensor of shape "
            f"{tuple(x.shape)}"
        )
    xd, od = _FROM_NP[x._data.dtype], _FROM_NP[out._data.dtype]
    if od.category > xd.category:
        raise DtypeMismatch(f"{op_name}: result type {od.name} can't be cast to the in-place output type {xd.name}")
    node = out.grad_fn
    if node is not None:
        if x._base is not None and (x._base._requires_grad or x._base.grad_fn is not None):
            raise LucidError(
                f"{op_name}: in-place modification of a view of a tensor that requires grad is not supported "
                "by pylucid's autograd; use an out-of-place op (or clone() the view first)"
            )
        saved = getattr(node, "saved", None)
        if saved and any(s is x for s in saved):
            snap = _new_tensor(x._data.copy(), x._device)
            snap.grad_fn, snap._output_nr, snap._requires_grad = x.grad_fn, x._output_nr, x._requires_grad
            snap._grad_acc = x._grad_acc
            snap._version = [x._version[0]]
            node.saved = tuple(snap if s is x else s for s in saved)
    try:
        with x._device.backend.device_ctx():
            x._data[...] = out._data
    except ValueError as exc:
        if "read-only" in str(exc):
            raise LucidError(
                f"{op_name}: cannot write in place into an expanded tensor (several elements share one memory "
                "location); clone() it first"
            ) from None
        raise
    x._version[0] += 1
    if node is not None:
        x.grad_fn = node
        x._output_nr = out._output_nr
        x._requires_grad = True
        if getattr(node, "_out", None):
            node._out = ((x._data, x._version, x._version[0]),)
    return x


def check_inplace_leaf(x: Tensor, op_name: str) -> None:
    try:
        leaf = x.grad_fn is None
    except AttributeError:
        raise TypeError(f"{op_name}: expected a Tensor to update in place, got {type(x).__name__}") from None
    if leaf and x._requires_grad and state.grad_enabled:
        raise RuntimeError(
            f"{op_name}: a leaf tensor that requires grad is being used in an in-place operation; wrap the update "
            "in pylucid.no_grad() (as optimizers do) or work on a clone()"
        )


def inplace_variant(fn, name: str):
    """Build ``Tensor.<name>`` (e.g. ``add_``) from the out-of-place ``fn``."""

    def method(self, *args, **kwargs):
        check_inplace_leaf(self, name)
        return commit_inplace(self, fn(self, *args, **kwargs), name)

    method.__name__ = name
    method.__doc__ = f"In-place version of ``{fn.__name__}``: writes into this tensor and bumps its version."
    return method
