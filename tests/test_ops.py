"""The generic op suite: every entry of the op database through every check (DESIGN.md §6).

Checks: forward vs PyTorch (values and dtypes) for each supported dtype and
device; first-order gradients vs PyTorch; gradcheck and gradgradcheck in
float64 (finite differences, independent of the code under test); the
first-order fast path vs the graph-mode formula; the output dtype under
autocast against the schema's AMP policy; error inputs; what the node keeps
alive; and coverage of every registered op.
"""

from __future__ import annotations

import csv
import gc
import os
import weakref

import numpy as np
import pytest
import torch

import pylucid
from pylucid._state import state
from pylucid.ops import AmpPolicy
from tests.opdb import all_entries
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
BY_ID = [pytest.param(e, id=e.name) for e in ENTRIES]


def _with_dtype(e, dtypes=None):
    return [pytest.param(e, d, id=f"{e.name}-{d}") for e in ENTRIES for d in (dtypes or e.dtypes)]


def _grad_positions(sample):
    if sample.grad_args is not None:
        return sample.grad_args
    return tuple(i for i, a in enumerate(sample.args) if is_float_array(a))


def _run_pl(entry, args, kwargs):
    return entry.op(*args, **kwargs)


def _post(entry, out):
    return entry.postprocess(out) if entry.postprocess else out


@pytest.mark.parametrize("entry,dtype", _with_dtype(None))
def test_forward(entry, dtype, device):
    if device == "cuda" and entry.cuda_skip:
        pytest.skip(entry.cuda_skip)
    atol, rtol = TOL.get(dtype, (entry.atol, entry.rtol))
    if dtype == "float32":  # an entry may loosen the float32 tolerances (accumulation order)
        atol, rtol = max(atol, entry.atol), max(rtol, entry.rtol)
    for s in entry.samples():
        args = [cast_sample(a, dtype) for a in s.args]
        out = _run_pl(entry, [to_pl(a, device) for a in args], s.kwargs)
        ref = entry.ref(*[to_torch(a) for a in args], **s.kwargs)
        outs, refs = flat_outputs(out), flat_outputs(ref)
        assert len(outs) == len(refs), f"{entry.name}[{s.name}]: {len(outs)} outputs, reference has {len(refs)}"
        for k, (o, r) in enumerate(zip(outs, refs)):
            what = f"{entry.name}[{s.name}] output {k} ({dtype}, {device})"
            if isinstance(r, torch.Tensor):
                assert isinstance(o, pylucid.Tensor), f"{what}: expected a Tensor, got {type(o).__name__}"
                assert dtype_name(o) == dtype_name(r), f"{what}: dtype {dtype_name(o)} != reference {dtype_name(r)}"
                assert str(o.device).startswith(device), f"{what}: result on {o.device}"
            assert_close(_post(entry, pl_to_np(o)), _post(entry, torch_to_np(r)), atol, rtol, what)


def _cotangents(outs, seed=1):
    g = np.random.default_rng(seed)
    return [g.standard_normal(np.shape(o)) if isinstance(o, (pylucid.Tensor, torch.Tensor)) else None for o in outs]


def _pl_grads(entry, s, device, dtype="float64"):
    args = [cast_sample(a, dtype) for a in s.args]
    pos = _grad_positions(s)
    pl_args = [to_pl(a, device, requires_grad=(i in pos)) for i, a in enumerate(args)]
    out = flat_outputs(entry.op(*pl_args, **s.kwargs))
    cot = _cotangents(out)
    live = [(o, c) for o, c in zip(out, cot) if isinstance(o, pylucid.Tensor) and o.requires_grad]
    if not live:
        return None, pos
    grads = pylucid.autograd.grad([o for o, _ in live], [pl_args[i] for i in pos],
                                  [pylucid.tensor(c, dtype=o.dtype, device=device) for o, c in live],
                                  allow_unused=True)
    return [None if g is None else pl_to_np(g) for g in grads], pos


@pytest.mark.parametrize("entry", [p for p in BY_ID if p.values[0].grad])
def test_grad_vs_torch(entry, device):
    if device == "cuda" and entry.cuda_skip:
        pytest.skip(entry.cuda_skip)
    checked = 0
    for s in entry.samples():
        grads, pos = _pl_grads(entry, s, device)
        args = [cast_sample(a, "float64") for a in s.args]
        t_args = [to_torch(a, requires_grad=(i in pos)) for i, a in enumerate(args)]
        out = flat_outputs(entry.ref(*t_args, **s.kwargs))
        cot = _cotangents(out)
        live = [(o, c) for o, c in zip(out, cot) if isinstance(o, torch.Tensor) and o.requires_grad]
        if not live:
            assert grads is None, f"{entry.name}[{s.name}]: pylucid output requires grad, PyTorch's does not"
            continue
        t_grads = torch.autograd.grad([o for o, _ in live], [t_args[i] for i in pos],
                                      [torch.from_numpy(c).to(o.dtype) for o, c in live], allow_unused=True)
        assert grads is not None, f"{entry.name}[{s.name}]: output does not require grad"
        for i, g, tg in zip(pos, grads, t_grads):
            what = f"{entry.name}[{s.name}] d/d arg{i}"
            if tg is None:
                assert g is None or np.allclose(g, 0), f"{what}: PyTorch has no gradient, pylucid has {g}"
                continue
            assert g is not None, f"{what}: pylucid returned no gradient"
            assert_close(g, tg.numpy(), 1e-7, 1e-6, what)
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


@pytest.mark.parametrize("entry", [p for p in BY_ID if p.values[0].grad])
def test_gradcheck(entry):
    for s in entry.samples():
        pos = _grad_positions(s)
        if not pos or not s.gradcheck or not _small(entry, s):
            continue
        fn, inputs = _gc_fn(entry, s, pos)
        assert pylucid.autograd.gradcheck(fn, inputs, atol=1e-5, rtol=1e-3), f"{entry.name}[{s.name}]"


@pytest.mark.parametrize("entry", [p for p in BY_ID if p.values[0].grad and p.values[0].gradgrad])
def test_gradgradcheck(entry):
    for s in entry.samples():
        pos = _grad_positions(s)
        if not pos or not s.gradcheck or not _small(entry, s):
            continue
        fn, inputs = _gc_fn(entry, s, pos)
        assert pylucid.autograd.gradgradcheck(fn, inputs, atol=1e-4, rtol=1e-3), f"{entry.name}[{s.name}]"


@pytest.mark.parametrize("entry", [p for p in BY_ID if p.values[0].grad])
def test_fast_path_matches_graph_formula(entry, device):
    if device == "cuda" and entry.cuda_skip:
        pytest.skip(entry.cuda_skip)
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
            assert (a is None) == (b is None), f"{entry.name}[{s.name}] arg{i}: one path gives no gradient"
            if a is not None:
                assert_close(a, b, 1e-12, 1e-10, f"{entry.name}[{s.name}] arg{i} fast vs graph")


def _expected_amp_dtype(policy, autocast_dtype, input_dtype, ref_dtype):
    if ref_dtype not in ("float16", "bfloat16", "float32", "float64"):
        return ref_dtype  # bool/int outputs are never touched by autocast
    if policy is AmpPolicy.PROMOTE:
        return autocast_dtype
    if policy is AmpPolicy.FORCE_FP32:
        return "float32"
    return input_dtype


@pytest.mark.parametrize("amp_dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("entry", [p for p in BY_ID if p.values[0].amp and "float32" in p.values[0].dtypes])
def test_amp_output_dtype(entry, amp_dtype):
    policy = pylucid.ops.schema(entry.name).amp_policy
    for s in entry.samples():
        args = [cast_sample(a, "float32") for a in s.args]
        if not any(is_float_array(a) and a.dtype.kind == "f" for a in args):
            continue
        ref = flat_outputs(entry.ref(*[to_torch(a) for a in args], **s.kwargs))
        with pylucid.amp.autocast("cpu", dtype=getattr(pylucid, amp_dtype)):
            out = flat_outputs(entry.op(*[to_pl(a) for a in args], **s.kwargs))
        for o, r in zip(out, ref):
            if isinstance(r, torch.Tensor):
                want = _expected_amp_dtype(policy, amp_dtype, "float32", dtype_name(r))
                assert dtype_name(o) == want, f"{entry.name}[{s.name}] under {amp_dtype} autocast: {dtype_name(o)}"


@pytest.mark.parametrize("entry", BY_ID)
def test_error_inputs(entry):
    for e in entry.error_inputs():
        args = [to_pl(a) for a in e.args]
        with pytest.raises(e.exc, match=e.match):
            entry.op(*args, **e.kwargs)


@pytest.mark.parametrize("entry", [p for p in BY_ID if p.values[0].grad])
def test_saved_tensor_declaration(entry):
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
        if node is None or type(node) is not op_cls:
            continue
        if not sch.saves_input:
            assert node.saved is None, f"{entry.name}: saves_input=False but the node saved inputs"
            if op_cls.is_view or any(isinstance(o, pylucid.Tensor) and o._base is not None for o in out):
                return  # a view keeps its base's storage alive by design
            del inputs
            gc.collect()
            assert all(r() is None for r in refs), f"{entry.name}: an input was kept alive by the node"
        if not sch.saves_output:
            assert node._out is None, f"{entry.name}: saves_output=False but the node saved its output"
        return


def test_coverage():
    """Every registered op has an entry in the op database."""
    covered = set()
    for e in ENTRIES:
        covered.add(e.name)
        covered.update(e.covers)
    missing = sorted(set(pylucid.ops.list_ops()) - covered)
    assert not missing, f"registered ops without an op-database entry: {missing}"
    unknown = sorted(covered - set(pylucid.ops.list_ops()))
    assert not unknown, f"op-database entries for ops that are not registered: {unknown}"


_CSV = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "reference", "op_policies.csv")
# ops whose AMP policy deliberately differs from the reference table, with the reason
AMP_DEVIATIONS = {
    "abs": "listed twice in the reference (Promote and KeepInput); KeepInput matches PyTorch's dtype behaviour",
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
