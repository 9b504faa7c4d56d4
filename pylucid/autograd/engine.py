"""The backward engine: iterative, dependency-counted, no recursion.

1. Walk the graph from the roots (an explicit stack) and count, for every
   node, how many edges of the reachable graph point at it.
2. Run nodes whose count reached zero; each one receives the sum of the
   gradients sent to each of its outputs, so every node runs exactly once.
3. First-order passes keep raw backend arrays in the buffers and use an op's
   fast path when it has one; ``create_graph=True`` passes keep Tensors and
   run the graph-mode formulas with recording on, so the gradient is itself
   differentiable.
"""

from __future__ import annotations

from .._state import state
from .._tensor import Tensor, _new_tensor
from ..backend.base import SCALAR_TYPES as _SCALAR_TYPES
from ..errors import LucidError
from .graph import AccumulateGrad, grad_accumulator


def _root_edge(t: Tensor):
    if t.grad_fn is not None:
        return t.grad_fn, t._output_nr
    if not t._requires_grad:
        return None
    return grad_accumulator(t), 0


def _make_root_grads(tensors, grad_tensors, create_graph):
    grads = []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward: expected Tensors as outputs, got {type(t).__name__} at position {i}")
        g = None if grad_tensors is None else grad_tensors[i]
        if g is None:
            if t._data.size != 1:
                raise RuntimeError(
                    f"backward: grad can be implicitly created only for scalar outputs; output {i} has shape "
                    f"{tuple(t.shape)}. Pass gradient= (a tensor of that shape) to backward()."
                )
            g = _new_tensor(t._device.backend.ones_like(t._data), t._device)
        elif not isinstance(g, Tensor):
            from ..creation import tensor as _tensor

            g = _tensor(g, dtype=t.dtype, device=t._device)
        if g.shape != t.shape:
            raise RuntimeError(
                f"backward: gradient for output {i} has shape {tuple(g.shape)} but the output has shape "
                f"{tuple(t.shape)}"
            )
        grads.append(g if create_graph else g._data)
    return grads


def _add(a, b, create_graph):
    if create_graph:
        from ..ops.elementwise import add

        return add(a, b)
    return a + b


def run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs=None, accumulate=True,
                 allow_unused=False):
    """Shared core of ``Tensor.backward`` and ``autograd.grad``.

    With ``accumulate=False`` the gradients w.r.t. ``inputs`` are returned and
    no ``.grad`` is touched (``autograd.grad``); with ``accumulate=True`` and
    ``inputs`` given, only those leaves accumulate.
    """
    if retain_graph is None:
        retain_graph = create_graph
    root_grads = _make_root_grads(tensors, grad_tensors, create_graph)
    buffers: dict = {}
    roots = []
    for i, t in enumerate(tensors):
        edge = _root_edge(t)
        if edge is None:
            raise RuntimeError(
                f"backward: element {i} of the outputs does not require grad and has no grad_fn; "
                "did you compute it under no_grad() or from tensors without requires_grad=True?"
            )
        node, nr = edge
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.n_outputs
        buf[nr] = root_grads[i] if buf[nr] is None else _add(buf[nr], root_grads[i], create_graph)
        roots.append(node)

    # capture targets (autograd.grad, or backward(inputs=...))
    captures = None
    if inputs is not None:
        captures = {}
        for k, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError(f"grad: inputs must be Tensors, got {type(t).__name__} at position {k}")
            if not t._requires_grad:
                raise RuntimeError(f"grad: input {k} does not require grad")
            key = (t.grad_fn, t._output_nr) if t.grad_fn is not None else (grad_accumulator(t), 0)
            captures.setdefault(key[0], []).append((key[1], k))

    # 1. dependency counts over the reachable graph (explicit stack)
    deps: dict = {}
    order = []
    seen = set(roots)
    stack = list(dict.fromkeys(roots))
    while stack:
        node = stack.pop()
        order.append(node)
        for e in node.next_edges:
            if e is not None:
                child = e[0]
                deps[child] = deps.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append(child)

    # with capture targets, run only the nodes that lead to one of them
    needed = None
    if captures is not None:
        needed = set(captures)
        changed = True
        # reverse reachability: iterate in reverse discovery order until stable
        while changed:
            changed = False
            for node in reversed(order):
                if node not in needed:
                    for e in node.next_edges:
                        if e is not None and e[0] in needed:
                            needed.add(node)
                            changed = True
                            break

    results = [None] * len(inputs) if inputs is not None else None
    ready = [n for n in dict.fromkeys(roots) if deps.get(n, 0) == 0]
    force_graph = state.force_graph_backward
    anomaly = state.anomaly
    prev_grad = state.grad_enabled
    state.grad_enabled = bool(create_graph)
    acc_type = AccumulateGrad
    owned = None  # ids of leaf-bound gradient arrays that no one else references (see _accumulate)
    last_dev = last_be = last_nd = None  # the backend of the last node's device (graphs are mostly one device)
    # with several GPUs, raw array work (fast paths, accumulation) must run with the graph's device current
    ctx = tensors[0]._device.backend.device_ctx()
    ctx.__enter__()
    try:
        if captures is None and not create_graph and not force_graph and not anomaly:
            _run_first_order(ready, buffers, deps, retain_graph, accumulate)
            ready = ()
        while ready:
            node = ready.pop()
            grads = buffers.pop(node, None)
            if node.__class__ is acc_type:
                if grads is not None:
                    if captures is not None and node in captures:
                        for nr, k in captures[node]:
                            results[k] = _leaf_hooks(node.variable, grads[0], create_graph)
                    if accumulate and (needed is None or node in needed):
                        g0 = grads[0]
                        mine = owned is not None and id(g0) in owned and (captures is None or node not in captures)
                        _accumulate(node.variable, g0, create_graph, mine)
                continue
            in_grads = None
            if grads is not None:
                if node._pre_hooks:
                    grads = _run_pre_hooks(node, node._pre_hooks, grads, create_graph)
                if captures is not None and node in captures:
                    for nr, k in captures[node]:
                        results[k] = grads[nr]
                if needed is None or node in needed:
                    if len(grads) > 1 and any(g is None for g in grads):
                        grads = _fill_missing(node, grads, create_graph)
                    fast = node.backward_fast
                    if not create_graph and fast is not None and not force_graph:
                        if node._freed:
                            node._check_freed()
                        if node.device is not last_dev:
                            last_dev = node.device
                            last_be = last_dev.backend
                            last_nd = last_be.ndarray
                        in_grads = fast(last_be, *grads)
                        if in_grads.__class__ is not tuple:
                            in_grads = (in_grads,)
                    else:
                        in_grads = _call_backward(node, grads, create_graph)
                    if node._hooks:
                        in_grads = _run_post_hooks(node, in_grads, grads, create_graph)
                    if anomaly:
                        _check_anomaly(node, in_grads, create_graph)
                    if not retain_graph:
                        node.release()
            edges = node.next_edges
            if in_grads is not None and len(in_grads) != len(edges):
                raise LucidError(f"{node.name()}: backward returned {len(in_grads)} gradients for {len(edges)} inputs")
            if create_graph or in_grads is None:
                nd = None
            else:
                if node.device is not last_dev:
                    last_dev = node.device
                    last_be = last_dev.backend
                    last_nd = last_be.ndarray
                nd = last_nd
            # (_run_first_order inlines the same push for the common pass: keep the two in step)
            for i, e in enumerate(edges):
                if e is None:
                    continue
                child, nr = e
                if in_grads is not None:
                    g = in_grads[i]
                    if g is not None:
                        if nd is not None and g.__class__ is not nd and isinstance(g, _SCALAR_TYPES):
                            # NumPy returns scalars, not 0-d arrays, from 0-d arithmetic (a
                            # device copy's gradient is an array of another device: left alone)
                            g = last_be.asarray(g)
                        buf = buffers.get(child)
                        if buf is None:
                            buf = buffers[child] = [None] * child.n_outputs
                            buf[nr] = g
                            old = None
                        else:
                            old = buf[nr]
                            buf[nr] = g if old is None else _add(old, g, create_graph)
                        if child.__class__ is acc_type and nd is not None:
                            # a leaf may keep this array as its .grad without a copy when nothing else
                            # can hold it: a sum made here, or a fresh array (not a view, not one of
                            # the incoming gradients passed through, not handed to two inputs)
                            if old is not None or _fresh(g, grads, in_grads):
                                if owned is None:
                                    owned = set()
                                owned.add(id(buf[nr]))
                left = deps[child] - 1
                deps[child] = left
                if left == 0:
                    ready.append(child)
    finally:
        state.grad_enabled = prev_grad
        ctx.__exit__(None, None, None)

    if inputs is None:
        return None
    out = []
    for k, g in enumerate(results):
        t = inputs[k]
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"grad: input {k} does not appear in the graph of the outputs (or no gradient flows to it); "
                    "pass allow_unused=True if this is expected"
                )
            out.append(None)
            continue
        if not create_graph:
            g = _new_tensor(g, t._device)
        if g.dtype is not t.dtype:
            g = g.to(t.dtype)
        out.append(g)
    return tuple(out)


def _run_first_order(ready, buffers, deps, retain_graph, accumulate):
    """The loop of :func:`run_backward` for the common pass: first order, no capture targets, no
    anomaly mode, fast paths allowed. It makes the general loop's decisions with fewer tests per
    node (this loop runs once per recorded op, so its cost is part of every op's overhead).
    Nodes with hooks, without a fast path, or with some outputs missing a gradient go through
    :func:`_node_general`."""
    acc_type = AccumulateGrad
    owned = None  # ids of leaf-bound gradient arrays that no one else references (see _accumulate)
    last_dev = last_be = nd = None
    while ready:
        node = ready.pop()
        grads = buffers.pop(node, None)
        if node.__class__ is acc_type:
            if grads is not None and accumulate:
                g0 = grads[0]
                _accumulate(node.variable, g0, False, owned is not None and id(g0) in owned)
            continue
        edges = node.next_edges
        if grads is None:
            # nothing reached this node: release its children's dependency counts only
            for e in edges:
                if e is not None:
                    child = e[0]
                    left = deps[child] - 1
                    deps[child] = left
                    if left == 0:
                        ready.append(child)
            continue
        dev = node.device
        if dev is not last_dev:
            last_dev = dev
            last_be = dev.backend
            nd = last_be.ndarray
        fast = node.backward_fast
        if fast is None or node._pre_hooks or node._hooks or (len(grads) > 1 and any(g is None for g in grads)):
            in_grads = _node_general(node, grads)
        else:
            if node._freed:
                node._check_freed()
            in_grads = fast(last_be, *grads)
            if in_grads.__class__ is not tuple:
                in_grads = (in_grads,)
        if not retain_graph:
            node.release()
        if len(in_grads) != len(edges):
            raise LucidError(f"{node.name()}: backward returned {len(in_grads)} gradients for {len(edges)} inputs")
        for e, g in zip(edges, in_grads):
            if e is None:
                continue
            child, nr = e
            if g is not None:
                if g.__class__ is not nd and isinstance(g, _SCALAR_TYPES):
                    g = last_be.asarray(g)  # NumPy returns scalars from 0-d arithmetic
                buf = buffers.get(child)
                if buf is None:
                    buf = buffers[child] = [None] * child.n_outputs
                    buf[nr] = g
                    old = None
                else:
                    old = buf[nr]
                    # the backend's add (CUDA: the vector kernel) for its own arrays; a device copy's
                    # gradient belongs to the other device, so plain + there
                    buf[nr] = g if old is None else last_be.add(old, g) if (
                        g.__class__ is nd and old.__class__ is nd) else old + g
                if child.__class__ is acc_type and (old is not None or _fresh(g, grads, in_grads)):
                    if owned is None:
                        owned = set()
                    owned.add(id(buf[nr]))
            left = deps[child] - 1
            deps[child] = left
            if left == 0:
                ready.append(child)


def _fresh(g, grads, in_grads):
    """Whether a leaf may keep ``g`` as its ``.grad`` without a copy: a fresh array (not a view, not
    one of the incoming gradients passed through, not handed to two inputs)."""
    return (g.base is None and g.flags.c_contiguous and not any(g is x for x in grads)
            and sum(x is g for x in in_grads) == 1)


def _node_general(node, grads):
    """One node of the first-order loop with its hooks, missing gradients and graph-mode formula."""
    if node._pre_hooks:
        grads = _run_pre_hooks(node, node._pre_hooks, grads, False)
    if len(grads) > 1 and any(g is None for g in grads):
        grads = _fill_missing(node, grads, False)
    fast = node.backward_fast
    if fast is not None:
        if node._freed:
            node._check_freed()
        in_grads = fast(node.device.backend, *grads)
        if in_grads.__class__ is not tuple:
            in_grads = (in_grads,)
    else:
        in_grads = _call_backward(node, grads, False)
    if node._hooks:
        in_grads = _run_post_hooks(node, in_grads, grads, False)
    return in_grads


def _call_backward(node, grads, create_graph):
    """Run the graph-mode formula: on Tensors (create_graph) or wrapping raw arrays (first order)."""
    node._check_freed()
    if create_graph:
        res = node.backward(*grads)
        return res if res.__class__ is tuple else (res,)
    dev = node.device
    res = node.backward(*[_new_tensor(g, dev) for g in grads])
    if res.__class__ is not tuple:
        res = (res,)
    return tuple(None if r is None else r._data for r in res)


def _fill_missing(node, grads, create_graph):
    meta = node.out_meta
    be = node.device.backend
    out = list(grads)
    for k, g in enumerate(out):
        if g is None:
            shape, dt = meta[k] if meta is not None else (None, None)
            z = be.zeros(shape, dtype=dt)
            out[k] = _new_tensor(z, node.device) if create_graph else z
    return out


def _wrap(g, dev, create_graph):
    return g if create_graph else _new_tensor(g, dev)


def _unwrap(t, create_graph):
    return t if create_graph else t._data


def _run_pre_hooks(node, hooks, grads, create_graph):
    grads = list(grads)
    for nr, fn in list(hooks.values()):
        if nr is None:
            res = fn(tuple(_wrap(g, node.device, create_graph) if g is not None else None for g in grads))
            if res is not None:
                grads = [_unwrap(r, create_graph) if r is not None else None for r in res]
        elif grads[nr] is not None:
            res = fn(_wrap(grads[nr], node.device, create_graph))
            if res is not None:
                grads[nr] = _unwrap(res, create_graph)
    return grads


def _run_post_hooks(node, in_grads, grads, create_graph):
    for fn in list(node._hooks.values()):
        gi = tuple(_wrap(g, node.device, create_graph) if g is not None else None for g in in_grads)
        go = tuple(_wrap(g, node.device, create_graph) if g is not None else None for g in grads)
        res = fn(gi, go)
        if res is not None:
            in_grads = tuple(_unwrap(r, create_graph) if r is not None else None for r in res)
    return in_grads


def _leaf_hooks(var, g, create_graph):
    if var._hooks:
        for fn in list(var._hooks.values()):
            res = fn(_wrap(g, var._device, create_graph))
            if res is not None:
                g = _unwrap(res, create_graph)
    return g


def _accumulate(var, g, create_graph, owned=False):
    if var._hooks:
        g0 = g
        g = _leaf_hooks(var, g, create_graph)
        owned = owned and g is g0  # a hook's result may be referenced elsewhere
    if create_graph:
        if g.dtype is not var.dtype:
            g = g.to(var.dtype)
        var.grad = g if var.grad is None else _add(var.grad, g, True)
        return
    if g.shape != var._data.shape:
        raise LucidError(f"gradient of shape {g.shape} reached a leaf of shape {var._data.shape}")
    if var.grad is None:
        # copy unless the engine made this array for this leaf alone: a fast path may hand the
        # same array to several inputs (add's g, g), or pass a view of another gradient
        arr = g.astype(var._data.dtype) if g.dtype != var._data.dtype else (g if owned else g.copy())
        var.grad = _new_tensor(arr, var._device)
    elif var.grad.grad_fn is None and not var.grad._requires_grad:
        var.grad._data += g
    else:
        from ..ops.elementwise import add

        var.grad = add(var.grad.detach(), _new_tensor(g, var._device))


def _check_anomaly(node, in_grads, create_graph):
    for i, g in enumerate(in_grads):
        if g is None:
            continue
        arr = g._data if create_graph else g
        be = node.device.backend
        if arr.dtype.kind in "fc" or arr.dtype.kind == "V":
            bad = be.isnan(arr).any()
            kind = "nan"
            if not bad:
                bad = be.isinf(arr).any()
                kind = "inf"
            if bad:
                missing = ["(forward trace not recorded: enable detect_anomaly before the forward)"]
                where = "".join(node._trace or missing)
                raise LucidError(
                    f"Function '{node.name()}' returned {kind} values in its gradient for input {i}. "
                    f"The forward call that created it was:\n{where}"
                )


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """``pylucid.autograd.backward``: accumulate gradients of ``tensors`` into the leaves' ``.grad``."""
    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    if isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,)
    if inputs is not None and isinstance(inputs, Tensor):
        inputs = (inputs,)
    if inputs is not None:
        grads = run_backward(tuple(tensors), grad_tensors, retain_graph, create_graph, inputs=tuple(inputs),
                             accumulate=False, allow_unused=True)
        for t, g in zip(inputs, grads):
            if g is not None:
                _accumulate(t, g if create_graph else g._data, create_graph)
        return
    run_backward(tuple(tensors), grad_tensors, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False,
         materialize_grads=False):
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``.

    >>> import pylucid
    >>> x = pylucid.tensor(3.0, requires_grad=True)
    >>> (g,) = pylucid.autograd.grad(x ** 3, x, create_graph=True)
    >>> g, pylucid.autograd.grad(g, x)[0]
    (tensor(27., grad_fn=<MulBackward>), tensor(18.))
    """
    single = isinstance(inputs, Tensor)
    if single:
        inputs = (inputs,)
    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    if isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    if materialize_grads:
        allow_unused = True
    res = run_backward(tuple(outputs), grad_outputs, retain_graph, create_graph, inputs=tuple(inputs),
                       accumulate=False, allow_unused=allow_unused)
    if materialize_grads:
        from ..creation import zeros_like

        res = tuple(zeros_like(t) if g is None else g for g, t in zip(res, inputs))
    return res
