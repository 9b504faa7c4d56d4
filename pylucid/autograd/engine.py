"""The backward engine: one iterative, dependency-counted loop, no recursion.

A pass has four steps, each a function below:

1. Roots (:func:`_seed_roots`): the outputs' gradients (given, or ones for a
   one-element output) go into the gradient buffers of the outputs' nodes.
2. Dependency counting (:func:`_count_dependencies`): an explicit stack walks
   the graph reachable from the roots and counts, per node, the edges that
   point at it.
3. Pruning (:func:`_nodes_leading_to`), only when ``inputs`` are given
   (``autograd.grad``, ``backward(inputs=...)``): only the nodes from which an
   input can be reached run their backward; the others only count their
   children down.
4. Execution (:func:`_execute`): a node runs once its count reaches zero, on
   the sum of the gradients sent to each of its outputs, so it runs exactly
   once; what it returns is pushed along its edges (``push``, the one place
   where gradients are summed), and leaves take theirs into ``.grad``
   (``leaf``: hooks, then :func:`_accumulate`, in the leaf's dtype).

First-order passes keep raw backend arrays in the buffers and use an op's fast
path (``backward_fast``) when it has one; ``create_graph=True`` passes keep
Tensors and run the graph-mode formulas with recording on, so the gradient is
itself differentiable.
"""

from __future__ import annotations

from .._interop import c_contiguous
from .._state import state
from .._tensor import Tensor, _new_tensor
from ..backend.base import _NULL_CTX
from ..backend.base import SCALAR_TYPES as _SCALAR_TYPES
from ..errors import LucidError
from .graph import AccumulateGrad, grad_accumulator


def run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs=None, accumulate=True,
                 allow_unused=False):
    """Shared core of ``Tensor.backward`` and ``autograd.grad``.

    With ``accumulate=False`` the gradients w.r.t. ``inputs`` are returned and
    no ``.grad`` is touched (``autograd.grad``); with ``accumulate=True`` and
    ``inputs`` given, only those tensors accumulate into their ``.grad``
    (``backward(inputs=...)``).
    """
    if retain_graph is None:
        retain_graph = create_graph
    buffers, roots = _seed_roots(tensors, grad_tensors, create_graph)
    captures = None if inputs is None else _capture_targets(inputs)
    deps = _count_dependencies(roots)
    needed = None if captures is None else _nodes_leading_to(captures, roots, accumulate)
    results = [None] * len(inputs) if inputs is not None and not accumulate else None
    ready = [n for n in roots if n not in deps]
    st = state
    prev_grad = st.grad_enabled
    st.grad_enabled = bool(create_graph)
    # with several GPUs, raw array work (fast paths, sums) must run with the graph's device current
    ctx = tensors[0]._device.backend.device_ctx()
    if ctx is not _NULL_CTX:
        ctx.__enter__()
    try:
        if not create_graph and captures is None and not st.anomaly and not st.force_graph_backward:
            _execute_lean(ready, buffers, deps, retain_graph, accumulate)
        else:
            _execute(ready, buffers, deps, retain_graph, create_graph, accumulate, captures, needed, inputs, results)
    finally:
        st.grad_enabled = prev_grad
        if ctx is not _NULL_CTX:
            ctx.__exit__(None, None, None)
    if results is None:
        return None
    return _input_grads(results, inputs, create_graph, allow_unused)


# -- 1. roots ---------------------------------------------------------------------------------------------------------
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
            one = t._device.backend.ones_like(t._data)
            grads.append(_new_tensor(one, t._device) if create_graph else one)  # of the output's shape
            continue
        if not isinstance(g, Tensor):
            from ..creation import tensor as _tensor

            g = _tensor(g, dtype=t.dtype, device=t._device)
        if g._data.shape != t._data.shape:
            raise RuntimeError(
                f"backward: gradient for output {i} has shape {tuple(g.shape)} but the output has shape "
                f"{tuple(t.shape)}"
            )
        grads.append(g if create_graph else g._data)
    return grads


def _no_graph(i):
    return RuntimeError(
        f"backward: element {i} of the outputs does not require grad and has no grad_fn; "
        "did you compute it under no_grad() or from tensors without requires_grad=True?"
    )


def _seed_roots(tensors, grad_tensors, create_graph):
    """``(buffers, roots)``: each output's gradient in its node's buffer; the root nodes, once each, in order."""
    root_grads = _make_root_grads(tensors, grad_tensors, create_graph)
    if len(tensors) == 1:  # the common call, loss.backward(): one root
        t = tensors[0]
        node = t.grad_fn
        if node is not None:
            nr = t._output_nr
        else:
            edge = _root_edge(t)
            if edge is None:
                raise _no_graph(0)
            node, nr = edge
        buf = [None] * node.n_outputs
        buf[nr] = root_grads[0]
        return {node: buf}, {node: None}
    buffers: dict = {}
    roots: dict = {}
    for i, t in enumerate(tensors):
        edge = _root_edge(t)
        if edge is None:
            raise _no_graph(i)
        node, nr = edge
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.n_outputs
        # the same output twice: its gradients add (Tensors under create_graph, arrays otherwise)
        buf[nr] = root_grads[i] if buf[nr] is None else buf[nr] + root_grads[i]
        roots[node] = None
    return buffers, roots


# -- 2. dependency counting -------------------------------------------------------------------------------------------
def _count_dependencies(roots) -> dict:
    """Per node reachable from ``roots``, the number of edges of the reachable graph that point at it.

    A node enters the dict at its first incoming edge, which is when it is first seen: so it goes on the
    stack exactly then (roots are on it from the start). Roots nobody points at are absent.
    """
    deps: dict = {}
    stack = list(roots)
    pop, push = stack.pop, stack.append
    get = deps.get
    acc = AccumulateGrad
    while stack:
        for e in pop().next_edges:
            if e is not None:
                child = e[0]
                n = get(child)
                if n is None:
                    deps[child] = 1
                    # a leaf's node has no edges: nothing to walk below it
                    if child.__class__ is not acc and child not in roots:
                        push(child)
                else:
                    deps[child] = n + 1
    return deps


# -- 3. pruning for inputs= -------------------------------------------------------------------------------------------
def _capture_targets(inputs) -> dict:
    """``{node: [(output_nr, k), ...]}``: where the gradient of ``inputs[k]`` arrives."""
    captures: dict = {}
    for k, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad: inputs must be Tensors, got {type(t).__name__} at position {k}")
        if not t._requires_grad:
            raise RuntimeError(f"grad: input {k} does not require grad")
        node, nr = (t.grad_fn, t._output_nr) if t.grad_fn is not None else (grad_accumulator(t), 0)
        captures.setdefault(node, []).append((nr, k))
    return captures


def _nodes_leading_to(captures, roots, targets_run) -> set:
    """The nodes with a path to a capture target: the only ones whose backward has to run.

    A target's gradient is taken as it arrives, so for ``autograd.grad`` a target itself runs only
    when another target lies below it (``grad(loss, hidden)`` stops at ``hidden``); with
    ``targets_run`` (``backward(inputs=...)``) the targets run too, as in PyTorch, where a non-leaf
    input's node and its hooks run.
    """
    parents: dict = {}
    seen = set(roots)
    stack = list(roots)
    while stack:
        node = stack.pop()
        for e in node.next_edges:
            if e is not None:
                child = e[0]
                ps = parents.get(child)
                if ps is None:
                    parents[child] = [node]
                else:
                    ps.append(node)
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
    needed: set = set(captures) if targets_run else set()
    stack = list(captures)
    while stack:
        for p in parents.get(stack.pop(), ()):
            if p not in needed:
                needed.add(p)
                stack.append(p)
    return needed


# -- 4. execution -----------------------------------------------------------------------------------------------------
#: backward passes run in this process (``pylucid.compile`` tells a captured training step, whose outputs'
#: graph was already run, from a forward whose outputs still need one)
RUNS = [0]


def _execute(ready, buffers, deps, retain_graph, create_graph, accumulate, captures, needed, inputs, results):
    """Run the nodes in dependency order, starting from ``ready`` (the roots nobody points at).

    The general pass: ``create_graph``, ``inputs=``, anomaly mode or forced graph-mode formulas (the
    common first-order pass is :func:`_execute_lean`). Every node goes through ``run_node``, which
    makes the general decisions (hooks, capture, pruning, missing gradients, the graph-mode formula,
    the anomaly check).
    """
    RUNS[0] += 1
    anomaly = state.anomaly
    fast_ok = not create_graph and not state.force_graph_backward
    acc_type = AccumulateGrad
    take = buffers.pop
    schedule = ready.append
    # leaves whose buffered gradient is an array no one else references: a sum made here, or a fresh array
    # (not a view, not an incoming gradient passed through, not handed to two inputs); _accumulate adopts it
    owned: set = set()
    last_dev = be = None
    if create_graph:
        from ..ops.elementwise import add as plus

        nd = Tensor  # gradients are Tensors: no scalar to wrap, sums are recorded ops
    else:
        nd = plus = None  # the node's backend array class and add, set per device below

    def push(node, in_grads, grads):
        """Send ``in_grads[i]`` along the node's edge ``i`` into the child's buffer and count the child
        down; ``in_grads`` None (the node did not run) only counts down. ``grads``: the gradients the
        node ran on, or None when its results may be referenced elsewhere (see :func:`_fresh`)."""
        _distribute(node, in_grads, grads, buffers, deps, owned, schedule, be, nd, plus, False)

    def leaf(node, g):
        """A leaf's gradient: its hooks, then into ``.grad`` (or, for ``autograd.grad``, into the results)."""
        targets = None
        if captures is not None:
            targets = captures.get(node)
            if targets is None:
                return  # only the inputs receive gradients
        var = node.variable
        mine = node in owned
        if var._hooks:
            g0 = g
            g = _leaf_hooks(var, g, create_graph)
            mine = mine and g is g0  # a hook's result may be referenced elsewhere
        if results is not None:
            for _, k in targets:
                results[k] = g
        elif accumulate:
            _accumulate(var, g, create_graph, mine)

    def run_node(node, grads):
        """The general case of one node: ``(in_grads, grads)`` for ``push``; ``in_grads`` is None when the
        node need not run (pruned, or a target that leads nowhere), ``grads`` is None unless its fast path
        made the results (a hook's or a formula's result may be a tensor someone else holds)."""
        if node._pre_hooks:
            grads = _run_pre_hooks(node, node._pre_hooks, grads, create_graph)
        if captures is not None:
            for nr, k in captures.get(node, ()):
                if results is not None:
                    results[k] = grads[nr]
                elif accumulate and grads[nr] is not None:
                    _accumulate(inputs[k], grads[nr], create_graph)
            if node not in needed:
                return None, None
        if len(grads) > 1 and any(g is None for g in grads):
            grads = _fill_missing(node, grads, create_graph)
        fast = node.backward_fast
        if fast is not None and fast_ok:
            node._check_freed()
            in_grads = fast(node.device.backend, *grads)
            if in_grads.__class__ is not tuple:
                in_grads = (in_grads,)
        else:
            in_grads = _call_backward(node, grads, create_graph)
        hooked = node._pre_hooks or node._hooks
        if node._hooks:
            in_grads = _run_post_hooks(node, in_grads, grads, create_graph)
        if anomaly:
            _check_anomaly(node, in_grads, create_graph)
        return in_grads, (grads if fast is not None and fast_ok and not hooked else None)

    while ready:
        node = ready.pop()
        grads = take(node, None)
        if node.__class__ is acc_type:
            if grads is not None:
                leaf(node, grads[0])
            continue
        if grads is None:
            push(node, None, None)  # nothing reached this node
            continue
        dev = node.device
        if dev is not last_dev:
            last_dev = dev
            be = dev.backend
            if not create_graph:
                nd = be.ndarray
                plus = be.add
        in_grads, grads = run_node(node, grads)
        if in_grads is not None and not retain_graph:
            node.release()
        push(node, in_grads, grads)


def _execute_lean(ready, buffers, deps, retain_graph, accumulate):
    """:func:`_execute` for the common pass: first order, no ``inputs=``, no anomaly mode.

    The same decisions as :func:`_execute` with those switches off, written as one loop with the
    pushes and the leaves inline: a one-output node without hooks goes straight to its fast path;
    any other node goes through :func:`_run_lean_node`.
    """
    RUNS[0] += 1
    acc_type = AccumulateGrad
    take = buffers.pop
    schedule = ready.append
    pop = ready.pop
    owned: set = set()  # leaves whose buffered gradient the engine made for them alone (see _execute)
    last_dev = be = nd = plus = None
    while ready:
        node = pop()
        grads = take(node, None)
        if node.__class__ is acc_type:
            if grads is not None:
                g = grads[0]
                var = node.variable
                mine = node in owned
                if var._hooks:
                    g0 = g
                    g = _leaf_hooks(var, g, False)
                    mine = mine and g is g0  # a hook's result may be referenced elsewhere
                if accumulate:
                    _accumulate(var, g, False, mine)
            continue
        if grads is None:  # nothing reached this node: only count its children down
            _distribute(node, None, None, buffers, deps, owned, schedule, be, nd, plus, True)
            continue
        dev = node.device
        if dev is not last_dev:
            last_dev = dev
            be = dev.backend
            nd = be.ndarray
            plus = be.add
        fast = node.backward_fast
        if fast is not None and len(grads) == 1 and node._pre_hooks is None and node._hooks is None:
            if node._freed:
                node._check_freed()
            if node.accumulates_into is None:
                in_grads = fast(be, grads[0])  # a plain call: cheaper than fast(be, *grads)
            else:
                in_grads = _accumulating(node, be, grads, buffers, nd)
            if in_grads.__class__ is not tuple:
                in_grads = (in_grads,)
        else:
            in_grads, grads = _run_lean_node(node, grads, buffers, nd)
        if not retain_graph:
            node.release()
        _distribute(node, in_grads, grads, buffers, deps, owned, schedule, be, nd, plus, True)


def _accumulating(node, be, grads, buffers, nd):
    """``node.backward_fast(be, *grads)``, with the gradient already buffered for the input
    ``node.accumulates_into`` (the residual stream's, around a normalisation) handed to the node's
    ``backward_fast_accumulate`` to add as its kernel writes that input's gradient: the buffer is then
    emptied, the sum being in the result (one kernel instead of the backward and an add). Where the
    node declines (None) or nothing is buffered yet, the plain fast path and the usual add."""
    e = node.next_edges[node.accumulates_into]
    if e is not None:
        buf = buffers.get(e[0])
        if buf is not None:
            pending = buf[e[1]]
            if pending is not None and pending.__class__ is nd:
                out = node.backward_fast_accumulate(be, pending, *grads)
                if out is not None:
                    buf[e[1]] = None
                    return out
    return node.backward_fast(be, *grads)


def _distribute(node, in_grads, grads, buffers, deps, owned, schedule, be, nd, plus, lean: bool) -> None:
    """Send ``in_grads[i]`` along ``node``'s edge ``i`` into the child's buffer (summing with what is there) and
    count the child down, scheduling it at zero; ``in_grads`` None (the node did not run) only counts down.

    ``grads`` are the gradients the node ran on, or None when its results may be referenced elsewhere (see
    :func:`_fresh`): a leaf whose buffered gradient the engine made for it alone is marked in ``owned``. ``lean``
    (first order, no captures): that ownership is only looked for while the leaf's ``.grad`` is unset, the one
    case where it matters. ``be``/``nd``/``plus``: the node's backend, its array class and its add.
    """
    edges = node.next_edges
    if in_grads is None:
        for e in edges:
            if e is not None:
                child = e[0]
                left = deps[child] - 1
                deps[child] = left
                if left == 0:
                    schedule(child)
        return
    if len(in_grads) != len(edges):
        raise LucidError(f"{node.name()}: backward returned {len(in_grads)} gradients for {len(edges)} inputs")
    acc_type = AccumulateGrad
    for e, g in zip(edges, in_grads):
        if e is None:
            continue
        child, nr = e
        if g is not None:
            if g.__class__ is not nd and isinstance(g, _SCALAR_TYPES):
                g = be.asarray(g)  # NumPy returns scalars, not 0-d arrays, from 0-d arithmetic
            buf = buffers.get(child)
            if buf is None:
                buf = buffers[child] = [None] * child.n_outputs
                buf[nr] = g
                if child.__class__ is acc_type and (not lean or (grads is not None and child.variable.grad is None)) \
                        and _fresh(g, grads, in_grads):
                    owned.add(child)
            else:
                old = buf[nr]
                if old is None:
                    buf[nr] = g
                else:
                    # the backend's add (CUDA: the vector kernel) for its own arrays; a device copy's
                    # gradient is an array of the other device, summed there with +
                    buf[nr] = plus(old, g) if g.__class__ is nd and old.__class__ is nd else old + g
                    if child.__class__ is acc_type:
                        owned.add(child)
        left = deps[child] - 1
        deps[child] = left
        if left == 0:
            schedule(child)


def _run_lean_node(node, grads, buffers, nd):
    """``run_node`` of :func:`_execute` for a lean pass (first order, no captures, no anomaly mode):
    ``(in_grads, grads)``, ``grads`` None unless the node's fast path made the results. ``buffers``
    and ``nd`` (the node's array class): for a node that adds a pending gradient (:func:`_accumulating`),
    which it does only without hooks (a post hook must see the node's own gradient)."""
    if node._pre_hooks:
        grads = _run_pre_hooks(node, node._pre_hooks, grads, False)
    if len(grads) > 1 and any(g is None for g in grads):
        grads = _fill_missing(node, grads, False)
    fast = node.backward_fast
    if fast is not None:
        node._check_freed()
        if node.accumulates_into is None or node._pre_hooks or node._hooks:
            in_grads = fast(node.device.backend, *grads)
        else:
            in_grads = _accumulating(node, node.device.backend, grads, buffers, nd)
        if in_grads.__class__ is not tuple:
            in_grads = (in_grads,)
    else:
        in_grads = _call_backward(node, grads, False)
    hooked = node._pre_hooks or node._hooks
    if node._hooks:
        in_grads = _run_post_hooks(node, in_grads, grads, False)
    return in_grads, (grads if fast is not None and not hooked else None)


def _fresh(g, grads, in_grads):
    """Whether a leaf may keep ``g`` as its ``.grad`` without a copy: an array a fast path made (not a
    view, not one of the incoming gradients ``grads`` passed through, not handed to two inputs).
    ``grads`` None: the node's results may be held elsewhere (a hook's return value, a custom
    Function's or a formula's result), so they are copied."""
    if grads is None or g.base is not None:
        return False
    for x in grads:
        if x is g:
            return False
    n = 0
    for x in in_grads:
        if x is g:
            n += 1
    return n == 1 and c_contiguous(g)


def _input_grads(results, inputs, create_graph, allow_unused):
    """``autograd.grad``'s answer: one Tensor (or None, with ``allow_unused``) per input, in its dtype."""
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
    """Zeros for the missing gradients of a multi-output node's differentiable outputs; the outputs its op
    marks non-differentiable (saved statistics, indices) never receive one and stay None."""
    meta = node.out_meta
    be = node.device.backend
    diff = getattr(node, "differentiable_outputs", None)
    out = list(grads)
    for k, g in enumerate(out):
        if g is None and (diff is None or diff[k]):
            shape, dt = meta[k] if meta is not None else (None, None)
            z = be.zeros(shape, dtype=dt)
            out[k] = _new_tensor(z, node.device) if create_graph else z
    return out


def _wrap(g, dev, create_graph):
    return g if create_graph else _new_tensor(g, dev)


def _unwrap(t, create_graph):
    return t if create_graph else t._data


def _hook_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _checked(res, like, fn, where):
    """``res``, a hook's replacement for the gradient ``like`` (a Tensor or array), checked: a Tensor of
    ``like``'s shape (PyTorch refuses other values and other sizes)."""
    from .._tensor import Tensor

    if not isinstance(res, Tensor):
        raise TypeError(f"{where} hook {_hook_name(fn)!r} returned {type(res).__name__}; a backward hook must return "
                        "None (keep the gradient) or a Tensor (the new gradient)")
    if tuple(res.shape) != tuple(like.shape):
        from ..errors import ShapeMismatch

        raise ShapeMismatch(f"{where} hook {_hook_name(fn)!r} has changed the size of the gradient: it returned shape "
                            f"{tuple(res.shape)} for a gradient of shape {tuple(like.shape)}")
    return res


def _checked_tuple(res, grads, fn, where):
    if not isinstance(res, (tuple, list)):
        raise TypeError(f"{where} hook {_hook_name(fn)!r} returned {type(res).__name__}; it must return None or a "
                        f"tuple of {len(grads)} gradients (Tensors or None)")
    # a tuple of another length is left to the engine, which names the node and both counts
    return [r if r is None or g is None else _checked(r, g, fn, where) for r, g in zip(res, grads)] + \
        list(res[len(grads):])


def _run_pre_hooks(node, hooks, grads, create_graph):
    grads = list(grads)
    for nr, fn in list(hooks.values()):
        if nr is None:
            res = fn(tuple(_wrap(g, node.device, create_graph) if g is not None else None for g in grads))
            if res is not None:
                res = _checked_tuple(res, grads, fn, f"{node.name()} pre")
                grads = [_unwrap(r, create_graph) if r is not None else None for r in res]
        elif grads[nr] is not None:
            res = fn(_wrap(grads[nr], node.device, create_graph))
            if res is not None:
                grads[nr] = _unwrap(_checked(res, grads[nr], fn, "tensor"), create_graph)
    return grads


def _run_post_hooks(node, in_grads, grads, create_graph):
    for fn in list(node._hooks.values()):
        gi = tuple(_wrap(g, node.device, create_graph) if g is not None else None for g in in_grads)
        go = tuple(_wrap(g, node.device, create_graph) if g is not None else None for g in grads)
        res = fn(gi, go)
        if res is not None:
            res = _checked_tuple(res, in_grads, fn, node.name())
            in_grads = tuple(_unwrap(r, create_graph) if r is not None else None for r in res)
    return in_grads


def _leaf_hooks(var, g, create_graph):
    if var._hooks:
        for fn in list(var._hooks.values()):
            res = fn(_wrap(g, var._device, create_graph))
            if res is not None:
                g = _unwrap(_checked(res, g, fn, "tensor"), create_graph)
    return g


def _accumulate(var, g, create_graph, owned=False):
    """Add ``g`` into ``var.grad``, in ``var``'s dtype. ``owned``: the engine made this array for this
    leaf alone, so it may become ``.grad`` without a copy."""
    if create_graph:
        if g.dtype is not var.dtype:
            g = g.to(var.dtype)
        if var.grad is None:
            var.grad = g
        else:
            from ..ops.elementwise import add

            var.grad = add(var.grad, g)
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
    """``pylucid.autograd.backward``: accumulate gradients of ``tensors`` into the leaves' ``.grad``
    (with ``inputs``, into those tensors' ``.grad`` only)."""
    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    if isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,)
    if inputs is not None:
        inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    run_backward(tuple(tensors), grad_tensors, retain_graph, create_graph, inputs=inputs)


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
