"""The generic op suite: every entry of the op database through every check (DESIGN.md §6).

Per entry: forward vs PyTorch (values and dtypes) for each supported dtype and
device; first-order gradients vs PyTorch (complex samples with complex
cotangents); gradcheck and gradgradcheck in float64 (finite differences,
independent of the code under test); second-order gradients vs PyTorch where
finite differences cannot go (complex samples, kinks); the first-order fast
path vs the graph-mode formula; the output dtype under autocast against the
schema's AMP policy; error inputs; what the node keeps alive; that the entry
really runs its op; the declaration's variants (``Tensor`` methods, in-place
methods, aliases, operator dunders) against the function; repeatable draws
for samplers.

Then the table itself: every registered op and every public function has an
entry (or is non-op API, listed below), names PyTorch users look for exist,
and the checkers the suite relies on catch what they must.

The ``check_*`` functions are the checks; the ``test_*`` functions run them
over the table (tests/test_add_an_op.py runs them on the entry docs/add_an_op.md
builds).
"""

from __future__ import annotations

import csv
import gc
import importlib
import inspect
import os
import warnings
import weakref
from collections import defaultdict

import numpy as np
import pytest
import torch

import pylucid
from pylucid._state import state
from pylucid.ops import AmpPolicy, registry
from tests.opdb import NAMESPACES, all_entries, public_names
from tests.optest_utils import (
    TOL,
    assert_close,
    cast_sample,
    dtype_name,
    flat_outputs,
    is_float_array,
    pl_to_np,
    to_pl,
    to_torch,
    torch_to_np,
)

ENTRIES = all_entries()
REGISTERED = frozenset(pylucid.ops.list_ops())


def _is_op(entry) -> bool:
    return entry.name in REGISTERED


def _params(pred=lambda e: True):
    return [pytest.param(e, id=e.id) for e in ENTRIES if pred(e)]


def _with_dtype(pred=lambda e: True):
    return [pytest.param(e, d, id=f"{e.id}-{d}") for e in ENTRIES if pred(e) for d in e.dtypes]


def _has_complex(sample) -> bool:
    return any(isinstance(a, np.ndarray) and a.dtype.kind == "c" for a in sample.args)


def _grad_positions(sample):
    if sample.grad_args is not None:
        return sample.grad_args
    return tuple(i for i, a in enumerate(sample.args) if is_float_array(a))


def _post(entry, out):
    return entry.postprocess(out) if entry.postprocess else out


@pytest.fixture(autouse=True)
def _full_float32_convolutions():
    """The op suite compares float32 results with PyTorch's CPU kernels: cuDNN's TF32 engines (on by default,
    as in PyTorch) round the inputs to 10 mantissa bits, so they are switched off here."""
    import pylucid.backends.cudnn as cudnn_flags

    before, cudnn_flags.allow_tf32 = cudnn_flags.allow_tf32, False
    yield
    cudnn_flags.allow_tf32 = before


def _skip_cuda(entry, device):
    if device == "cuda" and entry.cuda_skip:
        pytest.skip(entry.cuda_skip)


def _is_complex_out(o) -> bool:
    return o.dtype.is_complex if isinstance(o, pylucid.Tensor) else o.is_complex()


def _cotangents(outs, seed=1):
    g = np.random.default_rng(seed)
    cots = []
    for o in outs:
        if not isinstance(o, (pylucid.Tensor, torch.Tensor)):
            cots.append(None)
            continue
        c = np.asarray(g.standard_normal(tuple(o.shape)))
        cots.append(np.asarray(c + 1j * g.standard_normal(tuple(o.shape))) if _is_complex_out(o) else c)
    return cots


def _quiet_complex(sample):
    """pylucid must not drop imaginary parts silently (NumPy's ComplexWarning), and the complex conjugates in
    backward formulas are exact (no NumPy floating-point warning on a complex sample): either fails the check."""
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("error", np.exceptions.ComplexWarning)
    if _has_complex(sample):
        warnings.simplefilter("error", RuntimeWarning)
    return ctx


# ================================================================ per-entry checks
def check_forward(entry, dtype, device):
    _skip_cuda(entry, device)
    atol, rtol = TOL.get(dtype, (entry.atol, entry.rtol))
    if dtype == "float32":  # an entry may loosen the float32 tolerances (accumulation order)
        atol, rtol = max(atol, entry.atol), max(rtol, entry.rtol)
    for s in entry.samples():
        args = [cast_sample(a, dtype) for a in s.args]
        out = entry.op(*[to_pl(a, device) for a in args], **s.kwargs)
        ref = entry.ref(*[to_torch(a) for a in args], **s.kwargs)
        outs, refs = flat_outputs(out), flat_outputs(ref)
        assert len(outs) == len(refs), f"{entry.id}[{s.name}]: {len(outs)} outputs, reference has {len(refs)}"
        for k, (o, r) in enumerate(zip(outs, refs)):
            what = f"{entry.id}[{s.name}] output {k} ({dtype}, {device})"
            if isinstance(r, torch.Tensor):
                assert isinstance(o, pylucid.Tensor), f"{what}: expected a Tensor, got {type(o).__name__}"
                assert dtype_name(o) == dtype_name(r), f"{what}: dtype {dtype_name(o)} != reference {dtype_name(r)}"
                # factory functions (no tensor argument: fftfreq, randn, ...) make their result on the CPU
                if any(isinstance(a, np.ndarray) for a in args):
                    assert str(o.device).startswith(device), f"{what}: result on {o.device}"
                if entry.random:  # the draws differ; their shape does not, nor a property postprocess extracts
                    assert tuple(o.shape) == tuple(r.shape), f"{what}: shape {tuple(o.shape)} != {tuple(r.shape)}"
                    if entry.postprocess:
                        assert_close(_post(entry, pl_to_np(o)), _post(entry, torch_to_np(r)), 0, 0, what)
                    continue
            o_atol, o_rtol = atol, rtol
            if isinstance(r, torch.Tensor) and dtype_name(r) in TOL and dtype_name(r) != dtype:
                # an output of lower precision than the run (integers in, float32 out): its dtype's tolerance
                o_atol, o_rtol = max(atol, TOL[dtype_name(r)][0]), max(rtol, TOL[dtype_name(r)][1])
            assert_close(_post(entry, pl_to_np(o)), _post(entry, torch_to_np(r)), o_atol, o_rtol, what)


def _pl_grads(entry, s, device, dtype="float64"):
    args = [cast_sample(a, dtype) for a in s.args]
    pos = _grad_positions(s)
    pl_args = [to_pl(a, device, requires_grad=(i in pos)) for i, a in enumerate(args)]
    ctx = _quiet_complex(s)
    try:
        out = flat_outputs(entry.op(*pl_args, **s.kwargs))
        cot = _cotangents(out)
        live = [(o, c) for o, c in zip(out, cot) if isinstance(o, pylucid.Tensor) and o.requires_grad]
        if not live:
            return None, pos
        grads = pylucid.autograd.grad([o for o, _ in live], [pl_args[i] for i in pos],
                                      [pylucid.tensor(c, dtype=o.dtype, device=device) for o, c in live],
                                      allow_unused=True)
    finally:
        ctx.__exit__(None, None, None)
    return [None if g is None else pl_to_np(g) for g in grads], pos


def check_grad_vs_torch(entry, device):
    _skip_cuda(entry, device)
    checked = 0
    for s in entry.samples():
        grads, pos = _pl_grads(entry, s, device)
        args = [cast_sample(a, "float64") for a in s.args]
        t_args = [to_torch(a, requires_grad=(i in pos)) for i, a in enumerate(args)]
        out = flat_outputs(entry.ref(*t_args, **s.kwargs))
        cot = _cotangents(out)
        live = [(o, c) for o, c in zip(out, cot) if isinstance(o, torch.Tensor) and o.requires_grad]
        if not live:
            assert grads is None, f"{entry.id}[{s.name}]: pylucid output requires grad, PyTorch's does not"
            continue
        try:
            t_grads = torch.autograd.grad([o for o, _ in live], [t_args[i] for i in pos],
                                          [torch.from_numpy(c).to(o.dtype) for o, c in live], allow_unused=True)
        except (NotImplementedError, RuntimeError) as exc:
            if "derivative for" in str(exc) and "not implemented" in str(exc) and torch.__version__ < "2.13":
                pytest.skip(f"the installed torch {torch.__version__} has no derivative of this op (2.13 has)")
            raise
        assert grads is not None, f"{entry.id}[{s.name}]: output does not require grad"
        for i, g, tg in zip(pos, grads, t_grads):
            what = f"{entry.id}[{s.name}] d/d arg{i}"
            if tg is None:
                assert g is None or np.allclose(g, 0), f"{what}: PyTorch has no gradient, pylucid has {g}"
                continue
            assert g is not None, f"{what}: pylucid returned no gradient"
            want = tg.resolve_conj().numpy(force=True)
            assert g.dtype == want.dtype, f"{what}: gradient dtype {g.dtype}, PyTorch's is {want.dtype}"
            assert_close(g, want, 1e-7, 1e-6, what)
            checked += 1
    assert checked or not any(_grad_positions(s) for s in entry.samples())


def _small(entry, s):
    return all(np.size(a) <= entry.gradcheck_max_numel for a in s.args if is_float_array(a))


def _gc_fn(entry, s, pos):
    args = [cast_sample(a, "float64") for a in s.args]

    def fn(*xs):
        full = list(to_pl(a) for a in args)
        for i, x in zip(pos, xs):
            full[i] = x
        out = flat_outputs(entry.op(*full, **s.kwargs))
        outs = tuple(o for o in out if isinstance(o, pylucid.Tensor) and o.dtype.is_floating_point)
        return outs if len(outs) != 1 else outs[0]

    inputs = tuple(to_pl(args[i], requires_grad=True) for i in pos)
    return fn, inputs


def _fd_samples(entry):
    """Samples finite differences can check: real, smooth, small."""
    for s in entry.samples():
        pos = _grad_positions(s)
        if pos and s.gradcheck and not _has_complex(s) and _small(entry, s):
            yield s, pos


def check_gradcheck(entry):
    for s, pos in _fd_samples(entry):
        fn, inputs = _gc_fn(entry, s, pos)
        assert pylucid.autograd.gradcheck(fn, inputs, atol=1e-5, rtol=1e-3), f"{entry.id}[{s.name}]"


def check_gradgradcheck(entry):
    for s, pos in _fd_samples(entry):
        fn, inputs = _gc_fn(entry, s, pos)
        outs = flat_outputs(fn(*inputs))
        if not any(isinstance(o, pylucid.Tensor) and o.requires_grad for o in outs):
            continue  # no real output depends on the inputs (integer results, complex results of real inputs)
        assert pylucid.autograd.gradgradcheck(fn, inputs, atol=1e-4, rtol=1e-3), f"{entry.id}[{s.name}]"


def _second_order(lib, entry, s, device):
    """Gradients of a fixed real function of the first-order gradients (a Hessian-vector product), or None when
    nothing requires grad, or "constant" when the first-order gradients do not depend on the inputs."""
    args = [cast_sample(a, "float64") for a in s.args]
    pos = _grad_positions(s)
    if lib is torch:
        leaves = [to_torch(a, requires_grad=(i in pos)) for i, a in enumerate(args)]
        out = flat_outputs(entry.ref(*leaves, **s.kwargs))
        wrap = torch.from_numpy
    else:
        leaves = [to_pl(a, device, requires_grad=(i in pos)) for i, a in enumerate(args)]
        out = flat_outputs(entry.op(*leaves, **s.kwargs))
        def wrap(a):
            return pylucid.tensor(a, device=device)
    cot = _cotangents(out)
    live = [(o, c) for o, c in zip(out, cot) if isinstance(o, (torch.Tensor, pylucid.Tensor)) and o.requires_grad]
    if not live:
        return None
    grads = lib.autograd.grad([o for o, _ in live], [leaves[i] for i in pos],
                              [wrap(c).to(o.dtype) for o, c in live], create_graph=True, allow_unused=True)
    g2 = np.random.default_rng(2)
    loss = None
    for g in grads:
        if g is None:
            continue
        w = wrap(g2.standard_normal(tuple(g.shape)))
        term = (g.real * w).sum() + (g.imag * (w * 0.5 + 0.25)).sum() if _is_complex_out(g) else (g * w).sum()
        loss = term if loss is None else loss + term
    if loss is None or not loss.requires_grad:
        return "constant"
    gg = lib.autograd.grad(loss, [leaves[i] for i in pos], allow_unused=True)
    return [None if x is None else (x.detach().resolve_conj().numpy(force=True) if lib is torch else pl_to_np(x))
            for x in gg]


def check_gradgrad_vs_torch(entry, device):
    """Second order vs PyTorch for the samples finite differences cannot take: complex ones, and real samples at
    kinks marked ``gradgrad_ref``."""
    _skip_cuda(entry, device)
    for s in entry.samples():
        mode = s.gradgrad_ref or ("all" if _has_complex(s) else "")
        if not mode or not _grad_positions(s):
            continue
        ctx = _quiet_complex(s)
        try:
            mine = _second_order(pylucid, entry, s, device)
        finally:
            ctx.__exit__(None, None, None)
        ref = _second_order(torch, entry, s, device)
        what = f"{entry.id}[{s.name}] second order"
        if not isinstance(ref, list):  # nothing requires grad, or PyTorch's first order is constant
            same = mine == ref if not isinstance(mine, list) else all(m is None or np.allclose(m, 0) for m in mine)
            assert same, f"{what}: PyTorch gives {ref!r}, pylucid does not"
            continue
        assert isinstance(mine, list), f"{what}: pylucid's first-order gradients do not depend on the inputs ({mine})"
        for i, (a, b) in enumerate(zip(mine, ref)):
            if b is None:
                assert a is None or np.allclose(a, 0), f"{what} arg {i}: PyTorch has none, pylucid has {a}"
                continue
            assert a is not None, f"{what} arg {i}: pylucid gives none"
            keep = np.isfinite(b) if mode == "finite" else slice(None)
            assert_close(np.asarray(a)[keep], np.asarray(b)[keep], 1e-9, 1e-7, f"{what} arg {i}")


def check_fast_path_matches_graph_formula(entry, device):
    _skip_cuda(entry, device)
    for s in entry.samples():
        fast, pos = _pl_grads(entry, s, device)
        state.force_graph_backward = True
        try:
            graph, _ = _pl_grads(entry, s, device)
        finally:
            state.force_graph_backward = False
        if fast is None:
            continue
        for i, a, b in zip(pos, fast, graph):
            assert (a is None) == (b is None), f"{entry.id}[{s.name}] arg{i}: one path gives no gradient"
            if a is not None:
                assert_close(a, b, 1e-12, 1e-10, f"{entry.id}[{s.name}] arg{i} fast vs graph")


def _expected_amp_dtype(policy, autocast_dtype, input_dtype, ref_dtype):
    if ref_dtype not in ("float16", "bfloat16", "float32"):
        # bool/int outputs are never touched by autocast, and neither is float64 (an explicit dtype=float64:
        # PyTorch's autocast leaves double alone)
        return ref_dtype
    if policy is AmpPolicy.PROMOTE:
        return autocast_dtype
    if policy is AmpPolicy.FORCE_FP32:
        return "float32"
    return input_dtype


def check_amp_output_dtype(entry, amp_dtype):
    policy = pylucid.ops.schema(entry.name).amp_policy
    for s in entry.samples():
        args = [cast_sample(a, "float32") for a in s.args]
        if _has_complex(s) or not any(is_float_array(a) and a.dtype.kind == "f" for a in args):
            continue
        ref = flat_outputs(entry.ref(*[to_torch(a) for a in args], **s.kwargs))
        with pylucid.amp.autocast("cpu", dtype=getattr(pylucid, amp_dtype)):
            out = flat_outputs(entry.op(*[to_pl(a) for a in args], **s.kwargs))
        for o, r in zip(out, ref):
            if isinstance(r, torch.Tensor):
                want = _expected_amp_dtype(policy, amp_dtype, "float32", dtype_name(r))
                assert dtype_name(o) == want, f"{entry.id}[{s.name}] under {amp_dtype} autocast: {dtype_name(o)}"


def check_error_inputs(entry):
    for e in entry.error_inputs():
        args = [to_pl(a) for a in e.args]
        if issubclass(e.exc, Warning):
            with pytest.warns(e.exc, match=e.match):
                entry.op(*args, **e.kwargs)
        else:
            with pytest.raises(e.exc, match=e.match):
                entry.op(*args, **e.kwargs)


def check_saved_tensor_declaration(entry):
    """A node keeps exactly what its schema declares: no input when saves_input=False."""
    op_cls = pylucid.ops.op_class(entry.name)
    sch = op_cls.schema
    for s in entry.samples():
        pos = _grad_positions(s)
        if not pos:
            continue
        args = [cast_sample(a, "float64") for a in s.args]
        leaves = [to_pl(a, requires_grad=(i in pos)) for i, a in enumerate(args)]
        # non-leaf inputs: nothing but the op's node could keep them alive
        inputs = [x * 1.0 if i in pos else x for i, x in enumerate(leaves)]
        refs = [weakref.ref(inputs[i]) for i in pos]
        out = flat_outputs(entry.op(*inputs, **s.kwargs))
        node = next((o.grad_fn for o in out if isinstance(o, pylucid.Tensor) and o.grad_fn is not None), None)
        if node is None or not isinstance(node, op_cls):  # (ops of several arities are subclasses)
            continue
        if not sch.saves_input:
            assert node.saved is None, f"{entry.id}: saves_input=False but the node saved inputs"
            if op_cls.is_view or any(isinstance(o, pylucid.Tensor) and o._base is not None for o in out):
                return  # a view keeps its base's storage alive by design
            del inputs
            if any(r() is not None for r in refs):  # only a reference cycle needs the (slow) collector
                gc.collect()
            assert all(r() is None for r in refs), f"{entry.id}: an input was kept alive by the node"
        if not sch.saves_output:
            assert node._out is None, f"{entry.id}: saves_output=False but the node saved its output"
        return


def _graph_ops(outs) -> set:
    """Types of every node in the graphs of ``outs``."""
    seen, stack, types = set(), [o.grad_fn for o in outs if isinstance(o, pylucid.Tensor) and o.grad_fn], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        types.add(type(node))
        stack.extend(e[0] for e in node.next_edges if e is not None)
    return types


#: ops a CPU-only machine cannot run, with the reason
_NEEDS_TWO_DEVICE_KINDS = {"to_device": "a copy between devices; without a GPU the move is the identity"}


def check_runs_its_op(entry):
    """Some sample's graph contains the entry's op (or every op in ``runs``): the entry tests what it names."""
    if entry.name in _NEEDS_TWO_DEVICE_KINDS and not pylucid.cuda.is_available():
        pytest.skip(_NEEDS_TWO_DEVICE_KINDS[entry.name])
    want = {pylucid.ops.op_class(n) for n in entry.runs} or ({entry.op_class} if _is_op(entry) else set())
    found = set()
    for s in entry.samples():
        pos = _grad_positions(s)
        if not pos:
            continue
        args = [cast_sample(a, "float64") for a in s.args]
        out = flat_outputs(entry.op(*[to_pl(a, requires_grad=(i in pos)) for i, a in enumerate(args)], **s.kwargs))
        found |= {w for w in want for t in _graph_ops(out) if issubclass(t, w)}
        if found == want:
            return
    missing = sorted(c.schema.name for c in want - found)
    assert not missing, f"{entry.id}: no sample's graph runs {missing}"


_BINARY_DUNDERS = frozenset(("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
                             "lshift", "rshift"))


def _same(got, want, what, post=None):
    """``got`` equals ``want`` exactly (``post``: the entry's postprocess, applied to both: uninitialised memory
    of two allocations differs, on the GPU most of all)."""
    got = flat_outputs(got)
    assert len(got) == len(want), f"{what}: {len(got)} outputs, the function gives {len(want)}"
    for k, (a, b) in enumerate(zip(got, want)):
        assert type(a) is type(b), f"{what} output {k}: {type(a).__name__}, the function gives {type(b).__name__}"
        if isinstance(b, pylucid.Tensor):
            assert a.dtype == b.dtype, f"{what} output {k}: dtype {a.dtype}, the function gives {b.dtype}"
        a, b = pl_to_np(a), pl_to_np(b)
        if post is not None:
            a, b = post(a), post(b)
        assert_close(a, b, 0, 0, f"{what} output {k}")


def _check_inplace(name, x_arr, rest, kwargs, want, device, what) -> bool:
    """``x.name(*rest)`` on a clone under no_grad writes the function's result into ``x`` and bumps its version.
    False when the sample cannot drive it (PyTorch refuses in-place results of another shape or a higher dtype
    category)."""
    if len(want) != 1 or not isinstance(want[0], pylucid.Tensor):
        return False
    base = to_pl(x_arr, device)
    w = want[0]
    if tuple(w.shape) != tuple(base.shape) or w.dtype.category > base.dtype.category:
        return False
    x = base.clone()
    before = x.version
    with pylucid.no_grad():
        r = getattr(x, name)(*rest, **kwargs)
    assert r is x, f"{what}: returns a new tensor, not self"
    assert x.version > before, f"{what}: the version counter did not move ({before} -> {x.version})"
    assert x.dtype == base.dtype, f"{what}: the tensor's dtype changed to {x.dtype}"
    assert_close(pl_to_np(x), pl_to_np(w).astype(pl_to_np(x).dtype), 0, 0, what)
    assert_close(pl_to_np(base), pl_to_np(to_pl(x_arr)), 0, 0, f"{what}: the clone's source changed")
    return True


def check_variants(entry, device):
    """Every Tensor method, in-place method, alias and dunder of the entry's declaration agrees with the function."""
    _skip_cuda(entry, device)
    methods, inplace = entry.method_variants(), entry.inplace_variants()
    aliases, dunders = entry.alias_variants(), entry.dunder_variants()
    exercised = set()

    def call(fn, *args, **kwargs):
        if entry.random:  # the same draws for the function and its variant
            if _takes_generator(fn):
                tensors = [*args, getattr(fn, "__self__", None)]  # a bound method's tensor counts too
                on = device if any(isinstance(a, pylucid.Tensor) for a in tensors) else "cpu"
                kwargs["generator"] = pylucid.Generator(device=on).manual_seed(5)
            else:
                pylucid.manual_seed(5)
        return fn(*args, **kwargs)

    for s in entry.samples():
        args = [cast_sample(a, "float64") for a in s.args]

        def fresh():
            return [to_pl(a, device) for a in args]

        want = flat_outputs(call(entry.op, *fresh(), **s.kwargs))
        first_is_tensor = isinstance(args[0], np.ndarray) if args else False
        for name, _ in methods:
            if not first_is_tensor:
                continue
            a = fresh()
            what = f"{entry.id}[{s.name}] Tensor.{name}"
            if isinstance(inspect.getattr_static(pylucid.Tensor, name), property):  # x.T: read, not called
                if len(a) == 1 and not s.kwargs:
                    _same(getattr(a[0], name), want, what, entry.postprocess)
                    exercised.add(name)
                continue
            _same(call(getattr(a[0], name), *a[1:], **s.kwargs), want, what, entry.postprocess)
            exercised.add(name)
        for qual, fn in aliases:
            _same(call(fn, *fresh(), **s.kwargs), want, f"{entry.id}[{s.name}] {qual}", entry.postprocess)
            exercised.add(qual)
        if entry.random:
            continue
        for name, _ in inplace:
            if first_is_tensor and _check_inplace(name, args[0], fresh()[1:], s.kwargs, want, device,
                                                  f"{entry.id}[{s.name}] Tensor.{name}"):
                exercised.add(name)
        for name, _ in dunders:
            if s.kwargs:
                continue  # operators take no keywords
            what = f"{entry.id}[{s.name}] Tensor.{name}"
            op = name[2:-2]
            if op[0] in "ri" and op[1:] in _BINARY_DUNDERS:
                if op[0] == "r" and len(args) == 2 and isinstance(args[1], np.ndarray):
                    a = fresh()
                    _same(getattr(a[1], name)(a[0]), want, what)
                    exercised.add(name)
                elif op[0] == "i" and first_is_tensor and _check_inplace(name, args[0], fresh()[1:], {}, want,
                                                                        device, what):
                    exercised.add(name)
            elif first_is_tensor:
                a = fresh()
                _same(getattr(a[0], name)(*a[1:]), want, what)
                exercised.add(name)
    listed = {n for n, _ in methods + inplace + dunders} | {q for q, _ in aliases}
    if entry.random:
        listed -= {n for n, _ in inplace + dunders}
    missing = sorted(listed - exercised)
    assert not missing, f"{entry.id}: no sample can drive {missing}"


def _takes_generator(fn) -> bool:
    try:
        return "generator" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def check_random_repeats(entry):
    """A sampler repeats its draws from one generator seed (when it takes ``generator=``), and from one global
    seed."""
    for s in entry.samples():
        args = [cast_sample(a, "float32") for a in s.args]

        def draw(generator):
            kw = dict(s.kwargs, generator=generator) if generator is not None else dict(s.kwargs)
            return [pl_to_np(o) for o in flat_outputs(entry.op(*[to_pl(a) for a in args], **kw))]

        what = f"{entry.id}[{s.name}]"
        if _takes_generator(entry.op):
            for a, b in zip(draw(pylucid.Generator().manual_seed(7)), draw(pylucid.Generator().manual_seed(7))):
                np.testing.assert_array_equal(a, b, err_msg=f"{what}: one generator seed, two draws")
        pylucid.manual_seed(3)
        first = draw(None)
        pylucid.manual_seed(3)
        for a, b in zip(first, draw(None)):
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: one global seed, two draws")


# ================================================================ the checks over the table
@pytest.mark.parametrize("entry,dtype", _with_dtype())
def test_forward(entry, dtype, device):
    check_forward(entry, dtype, device)


@pytest.mark.parametrize("entry", _params(lambda e: e.grad))
def test_grad_vs_torch(entry, device):
    check_grad_vs_torch(entry, device)


@pytest.mark.parametrize("entry", _params(lambda e: e.grad))
def test_gradcheck(entry):
    check_gradcheck(entry)


# composites are built from ops whose entries take their second derivatives (a composite has no backward of its
# own, so it is twice differentiable where its ops are); their first order is checked above
@pytest.mark.parametrize("entry", _params(lambda e: e.grad and e.gradgrad and _is_op(e)))
def test_gradgradcheck(entry):
    check_gradgradcheck(entry)


@pytest.mark.parametrize("entry", _params(lambda e: e.grad and any(_has_complex(s) or s.gradgrad_ref
                                                                    for s in e.samples())))
def test_gradgrad_vs_torch(entry, device):
    check_gradgrad_vs_torch(entry, device)


# composites have no fast path, schema or node of their own: their ops' entries check those
@pytest.mark.parametrize("entry", _params(lambda e: e.grad and _is_op(e)))
def test_fast_path_matches_graph_formula(entry, device):
    check_fast_path_matches_graph_formula(entry, device)


@pytest.mark.parametrize("amp_dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("entry", _params(lambda e: e.amp and _is_op(e) and "float32" in e.dtypes))
def test_amp_output_dtype(entry, amp_dtype):
    check_amp_output_dtype(entry, amp_dtype)


@pytest.mark.parametrize("entry", _params(lambda e: bool(e.error_inputs())))
def test_error_inputs(entry):
    check_error_inputs(entry)


@pytest.mark.parametrize("entry", _params(lambda e: e.grad and _is_op(e)))
def test_saved_tensor_declaration(entry):
    check_saved_tensor_declaration(entry)


@pytest.mark.parametrize("entry", _params(lambda e: (e.grad and _is_op(e)) or e.runs))
def test_runs_its_op(entry):
    check_runs_its_op(entry)


@pytest.mark.parametrize("entry", _params(lambda e: e.declaration() is not None))
def test_variants(entry, device):
    check_variants(entry, device)


@pytest.mark.parametrize("entry", _params(lambda e: e.random))
def test_random_repeats(entry):
    check_random_repeats(entry)


# ================================================================ the table covers the registry and the public API
def test_entry_ids_are_unique():
    ids = [e.id for e in ENTRIES]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"entries sharing a name need distinct variants: {dup}"


def _covered_names() -> set:
    covered = set()
    for e in ENTRIES:
        covered.add(e.name)
        covered.update(e.covers)
    return covered


def test_coverage():
    """Every registered op has an entry in the op database, and every entry names an op or a public function."""
    covered = _covered_names()
    missing = sorted(REGISTERED - covered)
    assert not missing, f"registered ops without an op-database entry: {missing}"
    known = set(REGISTERED) | {n for _, n, _ in _public_functions()}
    for d in registry.declarations():
        known |= public_names(d)
    unknown = sorted(covered - known)
    assert not unknown, f"op-database entries for names that are neither registered ops nor public functions: {unknown}"


# Public callables that are not ops: they make tensors from data or shapes, manage state, or read a tensor's
# metadata. Everything else public must be declared (pylucid.ops.registry.declare) and have an entry.
NON_OP_API = {
    # creation from data, shapes and ranges (tests/test_tensor.py)
    *(f"pylucid.{n}" for n in "arange as_tensor asarray empty empty_like eye from_dlpack from_numpy full full_like "
                               "linspace logspace ones ones_like tensor zeros zeros_like".split()),
    # fresh random tensors and the seeding of the generators (tests/test_random.py and the random entries)
    *(f"pylucid.{n}" for n in "rand rand_like randint randint_like randn randn_like randperm "
                               "manual_seed seed initial_seed get_rng_state set_rng_state".split()),
    # grad mode, determinism and dtype settings (the context managers themselves are classes)
    *(f"pylucid.{n}" for n in "is_grad_enabled use_deterministic_algorithms are_deterministic_algorithms_enabled "
                               "get_default_dtype set_default_dtype promote_types result_type".split()),
    # CPU thread settings (tests/test_threads.py)
    *(f"pylucid.{n}" for n in "set_num_threads get_num_threads set_num_interop_threads "
                               "get_num_interop_threads".split()),
    # questions about a tensor, not computations on its values
    "pylucid.is_tensor", "pylucid.is_floating_point", "pylucid.numel",
    # serialization, and compile (a function transform; today it returns its argument)
    "pylucid.save", "pylucid.load", "pylucid.save_safetensors", "pylucid.load_safetensors", "pylucid.compile",
    # Tensor housekeeping: autograd plumbing, metadata, devices, dtype casts, conversion to Python/NumPy
    *(f"pylucid.Tensor.{n}" for n in "backward register_hook retain_grad requires_grad_ detach detach_ "
                                      "dim ndimension size stride numel nelement element_size data_ptr item tolist "
                                      "numpy is_contiguous is_complex is_floating_point cpu cuda to type "
                                      "float double half bfloat16 int long short char byte bool cfloat "
                                      "cdouble get_device is_neg is_nonzero is_pinned is_same_size is_set_to "
                                      "is_shared is_signed".split()),
    # new tensors shaped like nothing in particular, on this tensor's device and dtype (creation)
    *(f"pylucid.Tensor.{n}" for n in "new_empty new_full new_ones new_tensor new_zeros".split()),
}


def _public_functions():
    """``(qualified name, entry-style name, object)`` of every public callable of the op namespaces and Tensor."""
    out = []
    for ns, prefix in NAMESPACES.items():
        mod = importlib.import_module(ns)
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for n in names:
            v = getattr(mod, n)
            if inspect.ismodule(v) or isinstance(v, type) or not callable(v):
                continue
            out.append((f"{ns}.{n}", prefix + n, v))
    for n in dir(pylucid.Tensor):
        if n.startswith("_"):
            continue
        v = inspect.getattr_static(pylucid.Tensor, n)
        if isinstance(v, property) or inspect.isdatadescriptor(v) or not callable(v):
            continue
        out.append((f"pylucid.Tensor.{n}", n, v))
    return out


def _declaration_of_public(v):
    """The declaration behind a public callable: its function, or a method/in-place variant it installed."""
    d = registry.declaration_of(v)
    if d is not None:
        return d
    owner = getattr(v, "_pylucid_declared", None)
    if owner is None:
        return None
    return next((d for d in registry.declarations() if f"{d.fn.__module__}.{d.name}" == owner), None)


def _covers(d, covered, entry_fns) -> bool:
    """An entry reaches declaration ``d``: it calls the function, names its op, or names the composite."""
    if id(d.fn) in entry_fns:
        return True
    if d.op is not None:
        return d.op.schema.name in covered
    return bool(public_names(d) & covered)


def test_declared_functions_have_entries():
    """Every public function with a declaration (op or composite), and every method or in-place variant it
    installs, is reached by an op-database entry."""
    covered, entry_fns = _covered_names(), {id(e.op) for e in ENTRIES}
    missing = defaultdict(list)
    for qual, _, v in _public_functions():
        d = _declaration_of_public(v)
        if d is not None and not _covers(d, covered, entry_fns):
            missing[qual.rsplit(".", 1)[0]].append(qual.rsplit(".", 1)[1])
    assert not missing, "declared public functions without an op-database entry:\n" + "\n".join(
        f"  {mod}: {' '.join(sorted(names))}" for mod, names in sorted(missing.items()))


def _undeclared():
    """Public callables with no declaration that are not on the non-op list, by the module defining them."""
    found = defaultdict(list)
    for qual, _, v in _public_functions():
        if _declaration_of_public(v) is None and qual not in NON_OP_API:
            found[getattr(v, "__module__", None) or "?"].append(qual.removeprefix("pylucid."))
    return found


def test_public_functions_are_declared_or_non_op_api():
    """Every public function is an op with a declaration, or is listed in NON_OP_API."""
    found = _undeclared()
    assert not found, "public functions with no declaration, not in NON_OP_API (by defining module):\n" + "\n".join(
        f"  {mod} ({len(names)}): {' '.join(sorted(names))}" for mod, names in sorted(found.items()))


def test_non_op_api_list_is_current():
    """Every NON_OP_API name exists (a renamed function must not keep a stale exemption)."""
    public = {q for q, _, _ in _public_functions()}
    stale = sorted(NON_OP_API - public)
    assert not stale, f"NON_OP_API names that are not public callables: {stale}"


def test_every_declared_variant_is_exercised():
    """Each declared Tensor method, in-place method, alias and dunder is driven by some entry's samples: the
    entry must call the declared function itself (not a wrapper) for test_variants to reach them."""
    entry_fns = {id(e.op) for e in ENTRIES}
    unreached = sorted(d.name for d in registry.declarations()
                       if (d.methods or d.inplace or d.aliases or d.dunders) and id(d.fn) not in entry_fns)
    assert not unreached, f"declarations whose variants no entry calls: {unreached}"


# ================================================================ names PyTorch users look for
#: names that must exist where a PyTorch user looks for them; each has an entry through its declaration
TORCH_NAMES = {
    "pylucid": (
        "exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh "
        "arctanh asin acos atan asinh acosh atanh arctan2 sigmoid logit relu relu6 gelu silu softplus mish elu selu "
        "leaky_relu hardtanh hardsigmoid hardswish erf erfinv reciprocal rsqrt cube cbrt abs absolute sign floor ceil "
        "round trunc frac clamp clip isnan isinf isfinite nan_to_num add sub subtract mul multiply div divide "
        "true_divide negative remainder fmod pow maximum minimum fmax fmin atan2 hypot copysign logaddexp lerp "
        "eq ne lt le gt ge isclose allclose equal logical_and logical_or logical_xor logical_not bitwise_and "
        "bitwise_or bitwise_xor bitwise_not sum prod mean min max amin amax argmin argmax var std var_mean "
        "std_mean logsumexp norm all any count_nonzero median mode nansum nanmean cumsum cumprod cummax cummin diff "
        "max_with_indices min_with_indices reshape view flatten unflatten squeeze unsqueeze expand expand_as "
        "broadcast_to broadcast_tensors permute transpose swapaxes movedim t cat concatenate stack hstack vstack "
        "dstack split chunk unbind tensor_split flip fliplr flipud roll rot90 repeat tile repeat_interleave tril "
        "triu diagonal diag diag_embed trace narrow contiguous pad meshgrid index_select take take_along_dim gather "
        "scatter scatter_add scatter_reduce index_add index_copy index_fill masked_fill masked_select masked_scatter "
        "where nonzero argwhere one_hot sort argsort topk kthvalue unique searchsorted bucketize msort matmul mm bmm "
        "mv dot vdot inner outer tensordot einsum kron baddbmm addmm cross real imag conj angle view_as_real "
        "view_as_complex complex polar sgn rand randn randint randperm normal bernoulli multinomial manual_seed "
        "Generator").split(),
    "pylucid.linalg": ("norm vector_norm matrix_norm det slogdet inv solve cholesky qr svd svdvals eigh eigvalsh "
                       "lstsq pinv matrix_power matrix_exp solve_triangular lu_factor").split(),
    "pylucid.fft": ("fft ifft rfft irfft fft2 ifft2 rfft2 irfft2 fftn ifftn rfftn irfftn fftfreq rfftfreq fftshift "
                    "ifftshift").split(),
    "pylucid.special": ("erf erfc erfinv expit logit gammaln digamma polygamma i0 xlogy log_softmax softmax "
                        "logsumexp entr sinc ndtri").split(),
}
#: in-place samplers torch.Tensor has
TORCH_RANDOM_METHODS = ("uniform_", "normal_", "exponential_", "bernoulli_", "random_")


def test_torch_names_exist_with_their_tensor_methods():
    missing = [f"{ns}.{n}" for ns, names in TORCH_NAMES.items() for n in names
               if not hasattr(importlib.import_module(ns), n)]
    assert not missing, f"missing: {missing}"
    no_method = [n for n in TORCH_NAMES["pylucid"] if hasattr(torch.Tensor, n) and not hasattr(pylucid.Tensor, n)]
    no_method += [n for n in TORCH_RANDOM_METHODS if not hasattr(pylucid.Tensor, n)]
    assert not no_method, f"Tensor methods missing (torch.Tensor has them): {no_method}"


#: public ops that torch has as a function and a Tensor method and pylucid not yet as a method
MISSING_TENSOR_METHODS: dict = {}


def test_public_ops_are_tensor_methods_where_torch_has_them():
    """Beyond the list: a public op of ``pylucid`` that is ``torch.<name>`` and ``torch.Tensor.<name>`` is a
    pylucid.Tensor method too."""
    missing = sorted(n for q, n, v in _public_functions() if q == f"pylucid.{n}" and q not in NON_OP_API
                     and hasattr(torch, n) and hasattr(torch.Tensor, n) and not hasattr(pylucid.Tensor, n))
    assert set(missing) <= set(MISSING_TENSOR_METHODS), f"Tensor methods missing (torch.Tensor has them): {missing}"
    fixed = sorted(set(MISSING_TENSOR_METHODS) - set(missing))
    assert not fixed, f"now Tensor methods, remove from MISSING_TENSOR_METHODS: {fixed}"


# ================================================================ the registry
def _reference_table():
    """shared/reference/op_policies.csv beside this checkout (or beside a directory above it: a worktree)."""
    d = os.path.dirname(os.path.abspath(__file__))
    while True:
        path = os.path.join(d, "shared", "reference", "op_policies.csv")
        if os.path.exists(path) or os.path.dirname(d) == d:
            return path
        d = os.path.dirname(d)


_CSV = _reference_table()
# ops whose AMP policy deliberately differs from the reference table, with the reason
AMP_DEVIATIONS = {
    "abs": "listed twice in the reference (Promote and KeepInput); KeepInput matches PyTorch's dtype behaviour",
    "batch_norm": "KeepInput, as PyTorch (batch_norm is on no autocast list): half activations stay half, the "
                  "statistics and arithmetic are float32 inside the backend call",
    "scaled_dot_product_attention": "Promote, as PyTorch's autocast: the softmax and its statistics stay float32 "
                                    "inside the op for half inputs (flash kernels, upcast scores), so the GEMMs "
                                    "run in the half dtype",
}


def test_schemas_match_reference_table():
    if not os.path.exists(_CSV):
        pytest.skip("shared/reference/op_policies.csv is not beside this checkout")
    with open(_CSV) as f:
        rows = list(csv.DictReader(f))
    registered = set(pylucid.ops.list_ops())
    checked = 0
    for row in rows:
        name = row["op"]
        if name not in registered or name in AMP_DEVIATIONS:
            continue
        sch = pylucid.ops.schema(name)
        assert sch.amp_policy.value == row["amp_policy"], f"{name}: {sch.amp_policy.value} != {row['amp_policy']}"
        if row["deterministic"]:
            assert sch.deterministic == (row["deterministic"] == "true"), name
        if row["saves_output"] == "true":
            assert sch.saves_output, f"{name}: the reference table says it saves its output"
        if row["real_valued"] == "true":
            assert sch.real_valued, f"{name}: the reference table says integer inputs become float"
        checked += 1
    assert checked >= 10


def test_list_ops_is_the_registry():
    ops = pylucid.ops.list_ops()
    assert len(ops) == len(set(ops)) and len(ops) >= 200
    for name in ops:
        assert pylucid.ops.schema(name).name == name
    primitives = ("exp expm1 log1p sigmoid tanh relu gelu erf erfinv abs pow maximum minimum atan2 hypot logaddexp "
                  "lerp clamp where prod var logsumexp norm cumsum cumprod sort topk matmul dot einsum det inv svd "
                  "eigh qr cholesky fft_c2c fft_r2c fft_c2r real imag conj angle view_as_real view_as_complex").split()
    missing = [p for p in primitives if p not in ops]
    assert not missing, f"expected registered ops: {missing}"
    # one vector-norm primitive: pylucid.norm, Tensor.norm and linalg.vector_norm/norm/matrix_norm('fro') run it
    # (the norm entries' runs= check that)
    assert "vector_norm" not in ops


# ================================================================ conventions and checkers the table relies on
def test_real_dtype_behaviour_unchanged_by_the_complex_convention():
    """The complex conjugates in backward formulas are identities on real dtypes: each real gradient is
    bit-identical to the plain real formula."""
    rng = np.random.default_rng(0)
    X, Y = rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4)) + 3

    def grads(fn):
        x, y = pylucid.tensor(X, requires_grad=True), pylucid.tensor(Y, requires_grad=True)
        return [g.numpy() for g in pylucid.autograd.grad(fn(x, y).sum(), [x, y])]

    ones = np.ones((3, 4))
    for fn, want in [
        (lambda x, y: x * y, [Y, X]),
        (lambda x, y: x / y, [ones / Y, -(ones * X) / (Y * Y)]),
        (lambda x, y: pylucid.exp(x) + pylucid.log(y), [ones * np.exp(X), ones / Y]),
        (lambda x, y: pylucid.sin(x) * 1.0 + pylucid.sqrt(y), [ones * np.cos(X), ones / (2 * np.sqrt(Y))]),
        (lambda x, y: x @ y.T, [np.ones((3, 3)) @ Y, np.ones((3, 3)).T @ X]),
    ]:
        for g, w in zip(grads(fn), want):
            np.testing.assert_array_equal(g, w)


def test_gradcheck_with_empty_input_and_outputs_that_need_no_gradient():
    x = pylucid.tensor(np.zeros((0, 3)), dtype=pylucid.float64, requires_grad=True)
    w = pylucid.tensor(np.ones(3), dtype=pylucid.float64, requires_grad=True)
    fns = [
        lambda x, w: (x.sum(0) * w, x.detach().sum(0)),  # an output that does not require grad
        lambda x, w: (w * 2, x.detach()),  # an empty output that does not require grad
        lambda x, w: (x.sum(0) * w, pylucid.argmax(w)),  # an integer output
        lambda x, w: (x * w,),  # an empty output
        lambda x, w: (w * w, x.detach().sum(0), 3),  # a Python number
    ]
    for fn in fns:
        assert pylucid.autograd.gradcheck(fn, (x, w))
        assert pylucid.autograd.gradgradcheck(fn, (x, w))


def test_gradcheck_still_catches_a_wrong_gradient_next_to_a_constant_output():
    class Wrong(pylucid.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = pylucid.tensor([1.0, 2.0], dtype=pylucid.float64, requires_grad=True)
    assert not pylucid.autograd.gradcheck(lambda x: (Wrong.apply(x), x.detach() + 1), (x,), raise_exception=False)
