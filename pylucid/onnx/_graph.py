"""The graph builder: traced calls in, ONNX nodes, initializers and value infos out.

Each traced tensor becomes a ``Value``: its ONNX name, its shape in the trace (and in the second trace,
run with the dynamic axes grown, when ``dynamic_axes`` is given), its dtype, and, for a constant (a
tensor made inside ``forward`` or computed from such tensors only), its data. Sizes that differ between
the two traces are the dynamic ones; shape arguments (``reshape``'s target, a constant's size) that
contain them are rebuilt in the graph from ``Shape`` of a value that has the same size pair.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._interop import np
from ..errors import LucidError

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class UnsupportedOperatorError(LucidError):
    """An op met while tracing has no ONNX mapping (or a case of it, e.g. training-mode batch norm, has none)."""


def _onnx():
    import onnx

    return onnx


_ONNX_DTYPES = {"bool": "BOOL", "uint8": "UINT8", "int8": "INT8", "int16": "INT16", "int32": "INT32",
                "int64": "INT64", "float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT",
                "float64": "DOUBLE", "complex64": "COMPLEX64", "complex128": "COMPLEX128"}


def onnx_dtype(dt) -> int:
    """The ``TensorProto`` element type of a pylucid dtype."""
    return getattr(_onnx().TensorProto, _ONNX_DTYPES[dt.name])


class Value:
    """One traced tensor in the graph (see the module docstring)."""

    __slots__ = ("name", "shape", "shape2", "dtype", "const")

    def __init__(self, name, shape, shape2, dtype, const=None):
        self.name, self.shape, self.shape2, self.dtype, self.const = name, tuple(shape), tuple(shape2), dtype, const

    @property
    def rank(self) -> int:
        return len(self.shape)


class Site:
    """What an emitter sees of one call: inputs (``Value``, Python scalar or None), params, outputs' dtypes and
    shapes, and helpers that give ONNX names of inputs in a chosen dtype."""

    def __init__(self, g, name, path, ins, params, params2, outs, outs2):
        self.g, self.name, self.path, self.ins, self.params, self.params2 = g, name, path, ins, params, params2
        self.outs, self.outs2 = outs, outs2  # output Tensors of both traces

    def where(self) -> str:
        return f"op '{self.name}'" + (f" in module '{self.path}'" if self.path else " at the top level")

    def unsupported(self, why: str):
        return UnsupportedOperatorError(f"onnx.export: {self.where()}: {why}")

    def out_dtype(self, k: int = 0):
        return self.outs[k].dtype

    def out_shape(self, k: int = 0) -> tuple:
        return tuple(self.outs[k].shape)

    def out_shape2(self, k: int = 0) -> tuple:
        return tuple(self.outs2[k].shape)

    def value(self, i: int) -> Value:
        v = self.ins[i]
        if not isinstance(v, Value):
            raise self.unsupported(f"argument {i} must be a tensor, got {type(v).__name__}")
        return v

    def dtype(self, i: int):
        v = self.ins[i]
        return v.dtype if isinstance(v, Value) else None

    def x(self, i: int, dtype=None) -> str:
        """ONNX name of input ``i``, cast to ``dtype`` (default: the first output's); a Python scalar
        becomes a constant of that dtype."""
        dtype = self.out_dtype() if dtype is None else dtype
        v = self.ins[i]
        if v is None:
            return ""
        if isinstance(v, Value):
            return self.g.cast(self.g.use(v), v.dtype, dtype)
        return self.g.scalar(v, dtype)

    def common_dtype(self):
        """The promoted dtype of the inputs, by pylucid's rule (Python scalars are weak)."""
        dims, zdims, scal = [], [], []
        for v in self.ins:
            if isinstance(v, Value):
                (dims if v.rank else zdims).append(v.dtype)
            elif v is not None:
                scal.append(_dt.scalar_category(v))
        return _dt.result_type(dims, zdims, scal)

    def node(self, op_type: str, inputs, n_out: int = 1, **attrs) -> list[str]:
        return self.g.node(op_type, inputs, n_out, path=self.path, **attrs)

    def node1(self, op_type: str, inputs, **attrs) -> str:
        return self.g.node(op_type, inputs, 1, path=self.path, **attrs)[0]

    def index_param(self, key) -> str:
        """An index array that an op takes as a param (``index_select``, ``gather``), as an int64 graph value:
        the traced tensor it was read from when there is one (so an index computed from the inputs stays
        computed), else a constant."""
        return self.index_array(self.params[key], self.params2[key] if self.params2 is not None else None, key)

    def index_array(self, arr, arr2=None, what="index") -> str:
        """``index_param`` for an array ``arr`` (``arr2``: the same in the second trace)."""
        a = arr
        while a is not None:
            v = self.g.arrays.get(id(a))
            if v is not None:
                y = self.g.cast(self.g.use(v), v.dtype, _dt.int64)
                if tuple(arr.shape) != v.shape:
                    y = self.node1("Reshape", [y, self.g.shape_input(self, arr.shape, arr.shape if arr2 is None
                                                                     else arr2.shape, ref=v, infer=True)])
                return y
            a = getattr(a, "base", None)
        if arr2 is not None and not (arr.shape == arr2.shape and bool((arr == arr2).all())):
            raise self.unsupported(f"its {what} changes with the dynamic axes and is not traced to a tensor")
        host = self.outs[0]._device.backend.to_numpy(arr)
        return self.g.const(np.asarray(host, dtype=np.int64))

    def param(self, key):
        """``params[key]``, checked equal in both traces (else the value depends on a dynamic axis)."""
        p = self.params[key]
        if self.params2 is not None and self.params2[key] != p:
            raise self.unsupported(f"its argument {key}={p!r} changes with the dynamic axes ({self.params2[key]!r} "
                                   "in the second trace); this size cannot be expressed in the exported graph")
        return p


class Graph:
    """Collects nodes, initializers and the dynamic-size sources while the calls are translated."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self._init_names: set = set()
        self._count = 0
        self._scalars: dict = {}
        self._dim_src: dict = {}  # (size in trace 1, size in trace 2) -> (value name, axis)
        self._dims: dict = {}  # (value name, axis) -> name of a 1-element int64 tensor holding that size
        self._shapes: dict = {}
        self.arrays: dict = {}  # id(backend array of a traced tensor) -> its Value, for index arrays in params

    # -- names, nodes and initializers --------------------------------------------------------
    def fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def node(self, op_type: str, inputs, n_out: int = 1, path: str = "", **attrs) -> list[str]:
        helper = _onnx().helper
        scope = "/" + path.replace(".", "/") if path else ""
        base = self.fresh(f"{scope}/{op_type}")
        outs = [f"{base}_output_{k}" for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=base, **attrs))
        return outs

    def initializer(self, name: str, array) -> str:
        numpy_helper = _onnx().numpy_helper
        if name in self._init_names:
            raise LucidError(f"onnx.export: two initializers named {name!r}")
        self._init_names.add(name)
        # copy(order="C"), not ascontiguousarray: that makes a 0-d array 1-d
        self.initializers.append(numpy_helper.from_array(np.asarray(array).copy(order="C"), name))
        return name

    def const(self, array, stem: str = "onnx::Constant") -> str:
        return self.initializer(self.fresh(stem), array)

    def scalar(self, value, dtype) -> str:
        """A 0-d constant of ``dtype`` (cached)."""
        key = (repr(value), dtype.name)
        name = self._scalars.get(key)
        if name is None:
            name = self._scalars[key] = self.const(np.asarray(value, dtype=dtype.numpy_dtype))
        return name

    def int64s(self, values) -> str:
        key = ("int64s", tuple(int(v) for v in values))
        name = self._scalars.get(key)
        if name is None:
            name = self._scalars[key] = self.const(np.asarray(key[1], dtype=np.int64))
        return name

    def cast(self, name: str, frm, to) -> str:
        if frm is to or frm == to:
            return name
        return self.node("Cast", [name], to=onnx_dtype(to))[0]

    def use(self, v: Value) -> str:
        """The ONNX name of ``v``: a constant becomes an initializer the first time it is used."""
        if v.name is None:
            v.name = self.const(v.const)
        return v.name

    # -- dynamic sizes -------------------------------------------------------------------------
    def add_dim_sources(self, v: Value) -> None:
        for ax, (a, b) in enumerate(zip(v.shape, v.shape2)):
            if a != b:
                self._dim_src.setdefault((a, b), (v, ax))

    def dim(self, v: Value, ax: int) -> str:
        """A 1-element int64 tensor holding ``v``'s size along ``ax``."""
        key = (id(v), ax)
        name = self._dims.get(key)
        if name is None:
            shape = self._shapes.get(id(v))
            if shape is None:
                shape = self._shapes[id(v)] = self.node("Shape", [self.use(v)])[0]
            name = self._dims[key] = self.node("Slice", [shape, self.int64s([ax]), self.int64s([ax + 1])])[0]
        return name

    def shape_input(self, site: Site, dims1, dims2, ref: Value | None = None, infer: bool = False,
                    expand: Value | None = None) -> str:
        """An int64 shape tensor of sizes ``dims1`` (trace 1) / ``dims2`` (trace 2).

        A size equal in both traces is a constant; a dynamic one is read from ``ref`` (or any value
        traced so far) with the same pair of sizes. ``infer`` (Reshape) allows one unresolved size as
        ``-1``; ``expand`` (Expand) writes 1 where the expanded input already has the size.
        """
        dims1, dims2 = tuple(dims1), tuple(dims2)
        if dims1 == dims2:
            return self.int64s(dims1)
        parts: list = []
        statics: list = []
        unresolved = 0
        off = len(dims1) - expand.rank if expand is not None else 0
        for i, (a, b) in enumerate(zip(dims1, dims2)):
            if a == b:
                statics.append(a)
                continue
            if expand is not None and i >= off and (expand.shape[i - off], expand.shape2[i - off]) == (a, b):
                statics.append(1)
                continue
            src = None
            if ref is not None:
                for ax, pair in enumerate(zip(ref.shape, ref.shape2)):
                    if pair == (a, b):
                        src = (ref, ax)
                        break
            if src is None:
                src = self._dim_src.get((a, b))
            if src is None:
                if infer and not unresolved:
                    unresolved += 1
                    statics.append(-1)
                    continue
                raise site.unsupported(f"a size of its shape argument {dims1} follows the dynamic axes ({a} in the "
                                       f"trace, {b} with the axes grown) in a way the exporter cannot express")
            if statics:
                parts.append(self.int64s(statics))
                statics = []
            parts.append(self.dim(*src))
        if statics:
            parts.append(self.int64s(statics))
        return parts[0] if len(parts) == 1 else self.node("Concat", parts, axis=0)[0]

    # -- opset-dependent spellings ---------------------------------------------------------------
    def reduce(self, site: Site, op_type: str, x: str, axes, keepdims: bool) -> str:
        """``Reduce*``: axes as an input (ReduceSum from opset 13, the others from 18) or as an attribute."""
        kd = int(bool(keepdims))
        if axes is None:
            return site.node1(op_type, [x], keepdims=kd)
        axes = [int(a) for a in axes]
        if op_type == "ReduceSum" or self.opset >= 18:
            return site.node1(op_type, [x, self.int64s(axes)], keepdims=kd)
        return site.node1(op_type, [x], axes=axes, keepdims=kd)
