"""``export``: trace a model, translate the calls with the emitter table, write the ONNX file."""

from __future__ import annotations

import os

from .._interop import np, to_host
from .._tensor import Tensor
from ..errors import LucidError
from ._emitters import TABLE
from ._graph import Graph, Site, UnsupportedOperatorError, Value, onnx_dtype
from ._trace import Call, Inplace, Tracer, _version

MIN_OPSET = 14  # Trilu (causal masks, tril/triu)


class _Missing:
    """An op output the emitter did not produce (an internal statistic); using it is an error."""

    def __init__(self, site: Site, k: int) -> None:
        self.site, self.k = site, k


def _flatten(obj, out: list) -> list:
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            _flatten(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _flatten(o, out)
    return out


def _same(a, b) -> bool:
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return a is b
    if hasattr(a, "dtype") and hasattr(a, "shape") and getattr(a, "ndim", 0):  # a backend array (an index)
        return type(a) is type(b) and a.shape == b.shape and bool((a == b).all())
    try:
        if bool(a == b):
            return True
    except (TypeError, ValueError):
        pass
    return repr(a) == repr(b)  # NaN scalars and tuples holding them


def _run(model, args, kwargs):
    from ..autograd import no_grad

    with no_grad(), Tracer(model) as tr:
        out = model(*args, **kwargs)
    return tr.events, out


def _grow(args, kwargs, dyn_inputs, growth):
    """The arguments of the second trace: every dynamic axis of an input grown by its name's step (the
    first slice along it repeated)."""
    from .. import cat
    from ..autograd import no_grad

    k = 0

    def grow(a):
        nonlocal k
        if not isinstance(a, Tensor):
            return a
        for ax, dim_name in dyn_inputs.get(k, {}).items():
            a = cat([a] + [a.narrow(ax, 0, 1)] * growth[dim_name], ax)
        k += 1
        return a

    with no_grad():
        return tuple(grow(a) for a in args), {key: grow(a) for key, a in kwargs.items()}


def _norm_dynamic_axes(dynamic_axes, names):
    out = {}
    for name, axes in (dynamic_axes or {}).items():
        if name not in names:
            raise ValueError(f"onnx.export: dynamic_axes names {name!r}, which is neither an input nor an output name "
                             f"(names: {sorted(names)})")
        if isinstance(axes, dict):
            out[name] = {int(a): str(n) for a, n in axes.items()}
        else:
            out[name] = {int(a): f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(axes)}
    return out


def export(model, args, f, *, input_names=None, output_names=None, dynamic_axes=None, opset_version: int = 17,
           export_params: bool = True, do_constant_folding: bool = True, verbose: bool = False):
    """Export ``model`` to ONNX by tracing it on ``args``, as ``torch.onnx.export`` (TorchScript-free).

    The model runs once (in eval mode, without gradients; its training flags are restored afterwards)
    and every op it applies is recorded and translated to ONNX nodes: Python control flow is frozen
    to the path taken for these inputs, as with ``torch.onnx``'s tracer. With ``dynamic_axes`` it runs
    a second time with those axes grown, and sizes that change become dynamic in the graph.

    Args:
        model: a ``pylucid.nn.Module`` (or any callable of tensors).
        args: a Tensor, or a tuple of the positional arguments (a trailing dict is passed as keyword
            arguments). Tensor arguments become the graph inputs, in order: the positional ones, then
            the keyword ones.
        f: a path (``str`` / ``os.PathLike``) or a binary file-like object to write the model to.
        input_names, output_names: names of the graph inputs and outputs (default ``input_0``, ...,
            ``output_0``, ...; a single one is ``input`` / ``output``; a keyword input is named by its key).
        dynamic_axes: ``{name: {axis: dim_name}}`` or ``{name: [axis, ...]}`` for inputs and outputs,
            as PyTorch's.
        opset_version: the ONNX opset (14 to the installed ``onnx``'s newest).
        export_params: parameters and buffers become initializers named by their module path
            (``fc1.weight``); with False they are extra graph inputs of those names.
        do_constant_folding: results computed only from tensors made inside ``forward`` are stored as
            constants instead of being recomputed in the graph.
        verbose: print the graph.

    Returns:
        The ``onnx.ModelProto`` (also written to ``f``), checked by ``onnx.checker.check_model``.

    Raises:
        UnsupportedOperatorError: an op with no ONNX mapping, naming the op and the module path.

    >>> import io
    >>> import pylucid as pl
    >>> model = pl.nn.Sequential(pl.nn.Linear(3, 2), pl.nn.ReLU())
    >>> proto = pl.onnx.export(model, pl.randn(4, 3), io.BytesIO(), input_names=["x"],
    ...                        dynamic_axes={"x": {0: "batch"}})
    >>> [n.op_type for n in proto.graph.node]
    ['Gemm', 'Relu', 'Identity']
    >>> sorted(t.name for t in proto.graph.initializer)
    ['0.bias', '0.weight']
    >>> proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    'batch'
    """
    try:
        import onnx
        from onnx import helper
    except ImportError:  # pragma: no cover - the optional dependency
        raise ImportError("pylucid.onnx.export needs the 'onnx' package: pip install 'pylucid[onnx]'") from None
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= int(opset_version) <= newest:
        raise ValueError(f"onnx.export: opset_version must be between {MIN_OPSET} and {newest} (the installed onnx's "
                         f"newest), got {opset_version}")
    opset = int(opset_version)
    if isinstance(args, Tensor):
        args = (args,)
    elif isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = {}
    if args and isinstance(args[-1], dict):
        args, kwargs = args[:-1], args[-1]
    # the graph inputs: the Tensor arguments, positional ones first, then keyword ones (named by their key)
    in_tensors = [a for a in args if isinstance(a, Tensor)]
    n_pos = len(in_tensors)
    kw_names = [key for key, a in kwargs.items() if isinstance(a, Tensor)]
    in_tensors += [kwargs[key] for key in kw_names]
    n_in = len(in_tensors)
    in_names = list(input_names or [])
    if len(in_names) > n_in:
        raise ValueError(f"onnx.export: {len(in_names)} input_names for {n_in} tensor inputs")
    in_names += ["input" if n_in == 1 else f"input_{i}" for i in range(len(in_names), n_pos)]
    in_names += kw_names[len(in_names) - n_pos:]

    modules = list(model.modules()) if hasattr(model, "modules") else []
    training = [m.training for m in modules]
    in_versions = [_version(t) for t in in_tensors]
    try:
        for m in modules:
            m.training = False
        events, out = _run(model, args, kwargs)
        outs = _flatten(out, [])
        if not outs:
            raise LucidError("onnx.export: the model returned no tensors")
        out_names = list(output_names or [])
        if len(out_names) > len(outs):
            raise ValueError(f"onnx.export: {len(out_names)} output_names for {len(outs)} tensor outputs")
        out_names += ["output" if len(outs) == 1 else f"output_{i}" for i in range(len(out_names), len(outs))]
        dyn = _norm_dynamic_axes(dynamic_axes, set(in_names) | set(out_names))
        dyn_inputs = {i: dyn[n] for i, n in enumerate(in_names) if n in dyn}
        growth: dict = {}
        for axes in dyn_inputs.values():
            for dim_name in axes.values():
                growth.setdefault(dim_name, len(growth) + 1)
        for i, axes in dyn_inputs.items():
            nd = in_tensors[i].ndim
            if any(not -nd <= a < nd for a in axes):
                raise ValueError(f"onnx.export: dynamic_axes of input {in_names[i]!r} name axes {sorted(axes)}, but it "
                                 f"has {nd} dimensions")
            dyn_inputs[i] = dyn[in_names[i]] = {a % nd: n for a, n in axes.items()}
        if dyn_inputs:
            args2, kwargs2 = _grow(args, kwargs, dyn_inputs, growth)
            try:
                events2, out2 = _run(model, args2, kwargs2)
            except (LucidError, ValueError, IndexError) as exc:
                raise LucidError(
                    "onnx.export: the model fails when run again with the dynamic axes grown (each name by its own "
                    f"step: {growth}); give axes that must stay equal the same name in dynamic_axes "
                    f"({type(exc).__name__}: {exc})") from exc
            outs2 = _flatten(out2, [])
            in2 = [a for a in args2 if isinstance(a, Tensor)] + [kwargs2[key] for key in kw_names]
        else:
            events2, outs2, in2 = events, outs, in_tensors
    finally:
        for m, t in zip(modules, training):
            m.training = t

    if len(events2) != len(events) or len(outs2) != len(outs) or any(
            type(a) is not type(b) or (isinstance(a, Call) and a.name != b.name) for a, b in zip(events, events2)):
        raise LucidError("onnx.export: the model applies different ops when the dynamic axes change size (Python "
                         "control flow over a dynamic size, e.g. a loop over the sequence): the traced graph "
                         "cannot be dynamic along those axes; export with fixed sizes there")

    g = Graph(opset)
    values: dict = {}  # id(tensor of trace 1) -> (Value | _Missing, version when bound, tensor)
    pair_names: dict = {}  # (size, grown size) -> dim name, for the graph inputs' and outputs' shapes

    def bind(t, v, version):
        values[id(t)] = (v, version, t)
        g.arrays[id(t._data)] = v
        if isinstance(v, Value):
            g.add_dim_sources(v)

    graph_inputs = []
    for i, (t1, t2, name) in enumerate(zip(in_tensors, in2, in_names)):
        axes = dyn_inputs.get(i, {})
        for ax, dim_name in axes.items():
            pair_names[(t1.shape[ax], t2.shape[ax])] = dim_name
        v = Value(name, t1.shape, t2.shape, t1.dtype)
        if id(t1) in values:
            raise ValueError("onnx.export: the same tensor is passed twice as an input; pass a clone")
        bind(t1, v, in_versions[i])
        dims = [axes.get(ax, d) for ax, d in enumerate(t1.shape)]
        graph_inputs.append(helper.make_tensor_value_info(name, onnx_dtype(t1.dtype), dims))

    param_names = {}
    if hasattr(model, "named_parameters"):
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            param_names.setdefault(id(p), name)
    param_inputs = []

    def resolve(t1, t2, site_name, version=None):
        got = values.get(id(t1))
        if got is not None:
            v, ver, _ = got
            if isinstance(v, _Missing):
                raise v.site.unsupported(f"its output {v.k} is used by op '{site_name}', and it has no ONNX mapping")
            now = _version(t1) if version is None else version
            if now[0] != ver[0]:
                # the counter was replaced, not bumped: the tensor became a view of its base after the op returned
                values[id(t1)] = (v, now, t1)
            elif now[1] != ver[1]:
                raise LucidError(f"onnx.export: a tensor used by op '{site_name}' was changed in place by a write that "
                                 "is not an op (e.g. x[i] = v under no_grad); write it out of place for export")
            return v
        pname = param_names.get(id(t1))
        if pname is not None:
            v = Value(pname, t1.shape, t1.shape, t1.dtype)
            if export_params:
                g.initializer(pname, to_host(t1))
            else:
                param_inputs.append(helper.make_tensor_value_info(pname, onnx_dtype(t1.dtype), list(t1.shape)))
            bind(t1, v, _version(t1) if version is None else version)
            return v
        # a tensor made inside forward (pl.zeros, pl.tensor, a mask): a constant
        a1 = to_host(t1)
        if tuple(t1.shape) == tuple(t2.shape):
            if t2 is not t1 and not np.array_equal(a1, to_host(t2), equal_nan=a1.dtype.kind in "fc"):
                raise LucidError(f"onnx.export: a tensor made inside forward and used by op '{site_name}' has other "
                                 "values when the dynamic axes change size; it cannot be a constant of the graph")
            v = Value(None, t1.shape, t1.shape, t1.dtype, const=a1.copy())
        else:
            flat1, flat2 = a1.reshape(-1), to_host(t2).reshape(-1)
            if not (flat1.size and flat2.size and (flat1 == flat1[0]).all() and (flat2 == flat1[0]).all()):
                raise LucidError(f"onnx.export: a tensor made inside forward and used by op '{site_name}' changes "
                                 "size with the dynamic axes and is not filled with one value: it cannot be exported")
            site = Site(g, site_name, "", [], {}, None, [t1], [t2])
            shape = g.shape_input(site, t1.shape, t2.shape)
            fill = onnx.numpy_helper.from_array(flat1[:1].copy())
            v = Value(g.node("ConstantOfShape", [shape], value=fill)[0], t1.shape, t2.shape, t1.dtype)
        bind(t1, v, _version(t1) if version is None else version)
        return v

    for e1, e2 in zip(events, events2):
        if isinstance(e1, Inplace):
            v = resolve(e1.source, e2.source, "in-place update", e1.source_version)
            values[id(e1.target)] = (v, e1.version, e1.target)
            continue
        ins = []
        for a1, a2, ver in zip(e1.args, e2.args, e1.versions):
            if isinstance(a1, Tensor):
                ins.append(resolve(a1, a2, e1.name, ver))
            else:
                if not _same(a1, a2):
                    raise LucidError(f"onnx.export: op '{e1.name}' gets the Python number {a1!r}, which changes with "
                                     f"the dynamic axes ({a2!r}); compute it with tensor ops to keep it dynamic")
                ins.append(a1)
        params2 = e2.params if e2 is not e1 else None
        site = Site(g, e1.name, e1.path, ins, e1.params, params2, e1.outs, e2.outs)
        tensor_ins = [v for v in ins if isinstance(v, Value)]
        if (do_constant_folding and tensor_ins and all(v.const is not None for v in tensor_ins)
                and all(tuple(o1.shape) == tuple(o2.shape) for o1, o2 in zip(e1.outs, e2.outs))):
            for o, ver in zip(e1.outs, e1.out_versions):
                bind(o, Value(None, o.shape, o.shape, o.dtype, const=to_host(o).copy()), ver)
            continue
        emitter = TABLE.get(e1.name)
        if emitter is None:
            raise site.unsupported("it has no ONNX mapping (pylucid.onnx.supported_ops() lists those that do)")
        if params2 is not None and e1.name not in _SIZE_PARAMS and not all(
                _same(e1.params.get(k), params2.get(k)) for k in e1.params):
            raise site.unsupported("its arguments change with the dynamic axes "
                                   f"({e1.params} vs {params2}); this cannot be expressed in the graph")
        names = emitter(site)
        for k, (o1, o2) in enumerate(zip(e1.outs, e2.outs)):
            if k < len(names):
                bind(o1, Value(names[k], o1.shape, o2.shape, o1.dtype), e1.out_versions[k])
            else:
                values[id(o1)] = (_Missing(site, k), e1.out_versions[k], o1)

    graph_outputs = []
    for i, (t1, t2, name) in enumerate(zip(outs, outs2, out_names)):
        v = resolve(t1, t2, "output")
        g.nodes.append(helper.make_node("Identity", [g.use(v)], [name], name=f"/output_{i}/Identity"))
        axes = {a % max(t1.ndim, 1): n for a, n in dyn.get(name, {}).items()}
        dims = []
        for ax, (a, b) in enumerate(zip(t1.shape, t2.shape)):
            if ax in axes:
                dims.append(axes[ax])
            elif a != b:
                dims.append(pair_names.get((a, b), f"{name}_dim_{ax}"))
            else:
                dims.append(a)
        graph_outputs.append(helper.make_tensor_value_info(name, onnx_dtype(t1.dtype), dims))

    nodes, inits = _prune(g.nodes, g.initializers, out_names)
    graph = helper.make_graph(nodes, "main_graph", graph_inputs + param_inputs, graph_outputs, initializer=inits)
    from .. import __version__

    opsets = [helper.make_opsetid("", opset)]
    model_proto = helper.make_model(graph, opset_imports=opsets, producer_name="pylucid", producer_version=__version__)
    model_proto.ir_version = helper.find_min_ir_version_for(opsets)
    onnx.checker.check_model(model_proto)
    if verbose:
        print(helper.printable_graph(model_proto.graph))
    data = model_proto.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)
    return model_proto


#: ops whose params hold sizes that may follow a dynamic axis; their emitters read the output shapes of
#: both traces instead, or check their params themselves
_SIZE_PARAMS = frozenset(("reshape", "view", "broadcast_to", "getitem", "conv_transpose1d", "conv_transpose2d",
                          "conv_transpose3d", "index_select", "gather"))


def _prune(nodes, initializers, outputs):
    """Only the nodes (and initializers) the outputs depend on."""
    needed = set(outputs)
    kept = []
    for n in reversed(nodes):
        if any(o in needed for o in n.output):
            kept.append(n)
            needed.update(i for i in n.input if i)
    kept.reverse()
    return kept, [t for t in initializers if t.name in needed]


def supported_ops() -> list[str]:
    """The names of the ops (``pylucid.ops.list_ops()``) the exporter maps to ONNX, sorted."""
    return sorted(TABLE)


__all__ = ["export", "supported_ops", "UnsupportedOperatorError"]
