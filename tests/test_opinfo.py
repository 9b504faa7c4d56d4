"""Conformance against PyTorch's own OpInfo database.

Every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db``
whose op pylucid has (``resolve``) is run on its own ``sample_inputs`` for
float32, float64, int64 and bool (those the OpInfo supports on the CPU): the
values, dtypes and shapes of the outputs are compared with PyTorch's, and, in
float64 for ops PyTorch differentiates, the first-order gradient (a vjp with a
random cotangent) and the second-order one (the gradient of ``<vjp, v>``).

At most ``SAMPLES`` samples per op and dtype are run (spread over the
OpInfo's list; every sample of the ``masked.*`` OpInfos); ``PYLUCID_OPINFO_FULL=1``
runs them all. Known differences are listed, each with its reason, in
``tests/opinfo_skips.py``.

``python -m tests.test_opinfo --report`` (or ``tools/opinfo_report.py``)
prints the coverage and agreement figures.
"""

from __future__ import annotations

import math
import os
import sys
import traceback
import types
from collections.abc import Mapping

import numpy as np
import pytest

pytest.importorskip("expecttest")  # PyTorch's OpInfo database needs it (a test dependency)
import torch

import pylucid
import pylucid.fft
import pylucid.linalg
import pylucid.masked
import pylucid.nn.functional
import pylucid.special
from tests.opinfo_skips import SKIPS, lookup

FULL = os.environ.get("PYLUCID_OPINFO_FULL", "") not in ("", "0")
SAMPLES = 2
DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool)
KINDS = ("forward", "grad", "gradgrad")
TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-7, 1e-7), torch.complex64: (1e-4, 1e-5),
       torch.complex128: (1e-7, 1e-7)}
GRAD_TOL = (1e-6, 1e-6)

# OpInfos whose every sample runs: pylucid.masked has no op-database entries (tests/opdb), this suite is its test
# (a few seconds)
ALL_SAMPLES = ("masked.",)

# OpInfo names that are not ops of the public API: sparse layouts, prototype ops, internal aten entries
# (names with a leading underscore or the ``torch.ops`` namespace), jiterator CUDA kernels.
EXCLUDED_PREFIXES = ("_", "torch.", "sparse.", "jiterator_", "to_sparse")


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


def key(opinfo) -> str:
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


def excluded(opinfo) -> bool:
    return opinfo.name.startswith(EXCLUDED_PREFIXES)


# ---------------------------------------------------------------- finding pylucid's op
def _lookup(path: str):
    obj = pylucid
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _duck_typed(fn) -> bool:
    """A lambda of the database that only calls tensor methods (``lambda x: x.mT``) runs on pylucid tensors:
    every name its code uses is a pylucid Tensor attribute (a global such as ``torch`` is not)."""
    code = getattr(fn, "__code__", None)
    if getattr(fn, "__name__", "") != "<lambda>" or code is None or not code.co_names:
        return False
    return all(hasattr(pylucid.Tensor, a) for a in code.co_names)


# torch's own spelling for an op pylucid has under its Python-3 name
RENAMED = {"__rdiv__": "Tensor.__rtruediv__"}


def _seeded(fn, *args, **kwargs):
    pylucid.manual_seed(0)
    return fn(*args, **kwargs)


def _on_pylucid(fn):
    """The database's lambda with ``torch`` bound to ``pylucid`` (``lambda self, c, o: torch.where(c, self, o)``
    calls ``pylucid.where``): it keeps the argument order the samples are written for."""
    env = dict(fn.__globals__, torch=pylucid, wrapper_set_seed=_seeded)
    out = types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    return out


def resolve(opinfo):
    """pylucid's callable for an OpInfo, or None.

    The OpInfo is matched when pylucid has its op: the function under its (dotted) name or one of its aliases, or
    the Tensor method of that name, or, for a database lambda that only calls tensor methods, those methods. When
    the database's op is a lambda that calls ``torch`` (to reorder arguments, clone first, or seed a sampler), the
    same lambda runs with ``torch`` bound to ``pylucid``."""
    if opinfo.name in RENAMED:
        fn = _lookup(RENAMED[opinfo.name])
        return fn
    if _duck_typed(opinfo.op):
        return opinfo.op
    found = _resolve_name(opinfo)
    if getattr(opinfo.op, "__name__", "") == "<lambda>" and (found is not None or _names_exist(opinfo.op)):
        return _on_pylucid(opinfo.op)
    return found


_MODULE_NAMES = frozenset(("torch", "wrapper_set_seed", "Tensor", "nn", "functional", "linalg", "special", "fft",
                           "masked"))


def _names_exist(fn) -> bool:
    """Every function or method a database lambda names exists in pylucid (``lambda x: torch.Tensor.cauchy_(x)``
    tests ``Tensor.cauchy_``)."""
    spaces = (pylucid, pylucid.Tensor, pylucid.nn.functional, pylucid.linalg, pylucid.special, pylucid.fft,
              pylucid.masked)
    names = [n for n in fn.__code__.co_names if n not in _MODULE_NAMES]
    return bool(names) and all(any(hasattr(sp, n) for sp in spaces) for n in names)


def _resolve_name(opinfo):
    names = [opinfo.name] + [a.name for a in opinfo.aliases]
    for n in names:
        fn = _lookup(n)
        if fn is not None and callable(fn) and not isinstance(fn, type):
            return fn
    if opinfo.method_variant is not None or "." not in opinfo.name:
        attr = pylucid.Tensor.__dict__.get(opinfo.name) or getattr(pylucid.Tensor, opinfo.name, None)
        if attr is not None:
            if isinstance(attr, property):
                return lambda x, *a, **k: getattr(x, opinfo.name)
            return getattr(pylucid.Tensor, opinfo.name)
    return None


# ---------------------------------------------------------------- conversion
_PL_DTYPE = {}


def pl_dtype(d):
    if not _PL_DTYPE:
        for name in ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8", "int16",
                     "int32", "int64", "uint8", "bool"):
            if hasattr(pylucid, name):
                _PL_DTYPE[getattr(torch, name)] = getattr(pylucid, name)
    return _PL_DTYPE[d]


def to_pl(obj, grads: list | None = None):
    """torch objects inside a sample -> pylucid's (tensors keep requires_grad; ``grads`` collects the leaves)."""
    if isinstance(obj, torch.Tensor):
        src = obj.detach().resolve_conj().resolve_neg()
        if src.dtype in (torch.bfloat16, torch.float16):
            t = pylucid.tensor(src.float().numpy(force=True).copy()).to(pl_dtype(src.dtype))
        else:
            t = pylucid.tensor(src.numpy(force=True).copy())
        if obj.requires_grad:
            t.requires_grad_(True)
            if grads is not None:
                grads.append(t)
        return t
    if isinstance(obj, torch.dtype):
        return pl_dtype(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    if isinstance(obj, torch.Size):
        return tuple(obj)
    if isinstance(obj, torch.memory_format):
        return None
    if isinstance(obj, torch.Generator):
        return None
    if isinstance(obj, torch.nn.PairwiseDistance):  # a sample's distance_function: pylucid's module of that name
        return pylucid.nn.PairwiseDistance(p=obj.norm, eps=obj.eps, keepdim=obj.keepdim)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_pl(v, grads) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_pl(v, grads) for v in obj)
    if isinstance(obj, Mapping):
        return {k: to_pl(v, grads) for k, v in obj.items()}
    return obj


def torch_leaves(sample) -> list:
    out = []

    def walk(o):
        if isinstance(o, torch.Tensor):
            if o.requires_grad:
                out.append(o)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif isinstance(o, Mapping):
            for v in o.values():
                walk(v)

    walk(sample.input)
    walk(sample.args)
    walk(sample.kwargs)
    return out


def flat(obj) -> list:
    if isinstance(obj, (torch.Tensor, pylucid.Tensor)):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in flat(v)]
    return [obj]


def _np(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().resolve_conj().resolve_neg()
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.float()
        return x.numpy(force=True)
    arr = x.detach().cpu().numpy()
    return np.asarray(arr, dtype=np.float32) if arr.dtype.kind == "f" and arr.itemsize < 4 else arr


class Mismatch(AssertionError):
    pass


def compare(expected, actual, tol, what="output", check_dtype=True, values=True):
    """Raise Mismatch naming the first difference between torch's ``expected`` and pylucid's ``actual``."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, pylucid.Tensor):
            if isinstance(actual, (bool, int, float, complex)) and expected.ndim == 0:
                actual = pylucid.tensor(actual)
            else:
                raise Mismatch(f"{what}: expected a Tensor, got {type(actual).__name__}")
        if tuple(expected.shape) != tuple(actual.shape):
            raise Mismatch(f"{what}: shape {tuple(actual.shape)} != torch's {tuple(expected.shape)}")
        if check_dtype and pl_dtype(expected.dtype) != actual.dtype:
            raise Mismatch(f"{what}: dtype {actual.dtype} != torch's {expected.dtype}")
        if values and expected.numel():
            e, a = _np(expected), _np(actual)
            if e.dtype.kind in "fc" or a.dtype.kind in "fc":
                rtol, atol = tol if tol is not None else TOL.get(expected.dtype, (1e-7, 1e-7))
                if tol is None and expected.dtype in (torch.float32, torch.complex64):
                    # float32 rounding of a sum scales with its terms: an element that cancels to near zero
                    # carries the error of the large ones (summation orders differ between libraries)
                    atol *= max(1.0, float(np.abs(e).max()))
                ok = np.isclose(a.astype(np.complex128), e.astype(np.complex128), rtol=rtol, atol=atol,
                                equal_nan=True)
                if not ok.all():
                    with np.errstate(invalid="ignore"):
                        d = np.abs(a.astype(np.complex128) - e.astype(np.complex128))
                    d = np.where(ok, 0, np.nan_to_num(d, nan=np.inf))
                    raise Mismatch(f"{what}: max |diff| {float(d.max()):.3g} at {np.unravel_index(d.argmax(), d.shape)}"
                                   f" ({int((~ok).sum())} of {ok.size} differ)")
            elif not np.array_equal(e, a):
                raise Mismatch(f"{what}: values differ ({int((e != a).sum())} of {e.size})")
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)):
            raise Mismatch(f"{what}: expected a {type(expected).__name__} of {len(expected)}, got "
                           f"{type(actual).__name__}")
        if len(expected) != len(actual):
            raise Mismatch(f"{what}: length {len(actual)} != torch's {len(expected)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, tol, f"{what}[{i}]", check_dtype, values)
        return
    if isinstance(actual, pylucid.Tensor) and actual.ndim == 0:
        actual = actual.item()
    if isinstance(expected, (bool, int, float, complex)) and isinstance(actual, (bool, int, float, complex)):
        rtol, atol = tol or (1e-5, 1e-7)
        nan = isinstance(expected, float) and math.isnan(expected) and math.isnan(actual)
        close = not isinstance(expected, bool) and np.isclose(actual, expected, rtol, atol)
        if values and not (expected == actual or nan or close):
            raise Mismatch(f"{what}: {actual!r} != torch's {expected!r}")
        return
    if expected != actual:
        raise Mismatch(f"{what}: {actual!r} != torch's {expected!r}")


# ---------------------------------------------------------------- running samples
_LAST: dict = {}


def samples(opinfo, dtype, requires_grad: bool) -> list:
    """The samples one OpInfo runs for ``dtype``; the last OpInfo's are kept, so its three kinds draw them once."""
    k = (key(opinfo), dtype, requires_grad)
    if _LAST.get("op") != key(opinfo):
        _LAST.clear()
        _LAST["op"] = key(opinfo)
    if k not in _LAST:
        _LAST[k] = _draw(opinfo, dtype, requires_grad)
    return _LAST[k]


def _draw(opinfo, dtype, requires_grad: bool) -> list:
    torch.manual_seed(0)
    got = list(opinfo.sample_inputs("cpu", dtype, requires_grad=requires_grad))
    if FULL or len(got) <= SAMPLES or opinfo.name.startswith(ALL_SAMPLES):
        return got
    idx = np.linspace(0, len(got) - 1, SAMPLES).round().astype(int)
    return [got[i] for i in sorted(set(idx))]


def values_compared(opinfo) -> bool:
    """Random and uninitialised outputs are compared in shape and dtype only."""
    seeded = "wrapper_set_seed" in getattr(getattr(opinfo.op, "__code__", None), "co_names", ())
    return not (opinfo.has_nondeterministic_output or opinfo.name in RANDOM or seeded)


RANDOM = frozenset((
    "bernoulli", "normal", "uniform", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
    "empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "empty_permuted",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout", "nn.functional.rrelu", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "native_dropout_backward", "svd_lowrank", "pca_lowrank",
))


def _call(fn, sample, convert, wrapper=None):
    inp = convert(sample.input)
    args = convert(sample.args)
    kwargs = convert(sample.kwargs)
    if wrapper is not None:
        return wrapper(fn, inp, *args, **kwargs)
    return fn(inp, *args, **kwargs)


def _wrapper(opinfo):
    w = opinfo.gradcheck_wrapper
    return None if getattr(w, "__name__", "") == "<lambda>" else w


def _masked_output_mask(w, opinfo, sample):
    """The output mask PyTorch's masked-op gradcheck wrappers apply (None: no mask given), computed in torch."""
    import torch.testing._internal.opinfo.core as core

    kw = sample.kwargs
    if w is core.gradcheck_wrapper_masked_operation:
        if kw.get("mask") is None:
            return None
        return torch.masked._output_mask(opinfo.op, sample.input, *sample.args, **kw)
    if w is core.gradcheck_wrapper_masked_pointwise_operation:
        if kw.get("input_mask") is None or kw.get("other_mask") is None:
            return None
        both = torch.logical_and(kw["input_mask"], kw["other_mask"])
        return torch.masked._input_mask(sample.input, *sample.args, **dict(kw, mask=both))
    return False


def _pl_wrapper(opinfo, sample):
    """PyTorch's gradcheck wrapper for the pylucid call, with ``torch`` bound to ``pylucid`` (the cholesky-like
    wrapper calls ``torch.diag_embed``). The masked-op wrappers, which call torch.masked's internals on the
    sample, become ``where(output mask, output, 0)`` with the mask computed by torch."""
    w = _wrapper(opinfo)
    if w is None:
        return None
    out_mask = _masked_output_mask(w, opinfo, sample)
    if out_mask is False:
        return _on_pylucid(w) if hasattr(w, "__code__") else w
    if out_mask is None:
        return lambda fn, inp, *a, **k: fn(inp, *a, **k)
    m = to_pl(out_mask)
    return lambda fn, inp, *a, **k: pylucid.where(m, fn(inp, *a, **k), 0.0)


def _grad_outputs(out, proc):
    try:
        out = proc(out)
    except Exception:  # noqa: BLE001 - a post-processor written for torch results; use the raw output
        pass
    return [o for o in flat(out) if isinstance(o, (torch.Tensor, pylucid.Tensor))]


def run_forward(opinfo, fn, sample, dtype):
    expected = opinfo(sample.input, *sample.args, **sample.kwargs)
    actual = _call(fn, sample, to_pl)
    compare(expected, actual, None, values=values_compared(opinfo))


def run_grad(opinfo, fn, sample, order: int):
    wrapper = _wrapper(opinfo)
    t_in = torch_leaves(sample)
    if not t_in:
        return "no input requires grad"
    # the wrapper gets the OpInfo's function (the masked-op wrappers read its __name__)
    t_out = opinfo(sample.input, *sample.args, **sample.kwargs) if wrapper is None else \
        wrapper(opinfo.op, sample.input, *sample.args, **sample.kwargs)
    t_outs = _grad_outputs(t_out, sample.output_process_fn_grad)
    keep = [i for i, o in enumerate(t_outs) if o.requires_grad and o.dtype.is_floating_point or o.is_complex()]
    keep = [i for i in keep if t_outs[i].requires_grad]
    if not keep:
        return "no output requires grad"
    gen = torch.Generator().manual_seed(1)
    cot = [torch.randn(t_outs[i].shape, dtype=t_outs[i].dtype, generator=gen) for i in keep]
    t_g = torch.autograd.grad([t_outs[i] for i in keep], t_in, cot, allow_unused=True, create_graph=order > 1)

    p_in: list = []
    convert = lambda o: to_pl(o, p_in)  # noqa: E731
    p_out = _call(fn, sample, convert, _pl_wrapper(opinfo, sample))
    p_outs = _grad_outputs(p_out, sample.output_process_fn_grad)
    if len(p_outs) != len(t_outs):
        raise Mismatch(f"{len(p_outs)} differentiable outputs, torch has {len(t_outs)}")
    for i in keep:
        if not p_outs[i].requires_grad:
            raise Mismatch(f"output[{i}] does not require grad")
    p_g = pylucid.autograd.grad([p_outs[i] for i in keep], p_in, [to_pl(c) for c in cot], allow_unused=True,
                                create_graph=order > 1)
    values = values_compared(opinfo)  # a sampler's gradient depends on its draws: shapes only
    if order == 1:
        _compare_grads(t_g, p_g, t_in, "grad", values)
        return None
    t_pairs = [(g, torch.randn(g.shape, dtype=g.dtype, generator=gen)) for g in t_g
               if g is not None and g.requires_grad]
    if not t_pairs:
        return "first-order gradient is constant"
    t_s = sum((g * v).sum() for g, v in t_pairs)
    t_gg = torch.autograd.grad(t_s, t_in, allow_unused=True)
    vs = iter(v for _, v in t_pairs)
    terms = []
    for tg, pg in zip(t_g, p_g):
        if tg is not None and tg.requires_grad:
            v = next(vs)
            if pg is None:
                continue
            terms.append((pg * to_pl(v)).sum())
    if not terms or not any(t.requires_grad for t in terms):
        if any(g is not None and g.numel() and g.abs().max() > 0 for g in t_gg):
            raise Mismatch("gradgrad: pylucid's first-order gradient is not differentiable")
        return None
    p_s = terms[0]
    for t in terms[1:]:
        p_s = p_s + t
    p_gg = pylucid.autograd.grad(p_s, p_in, allow_unused=True)
    _compare_grads(t_gg, p_gg, t_in, "gradgrad", values)
    return None


def _compare_grads(t_g, p_g, t_in, what, values=True):
    for i, (tg, pg, x) in enumerate(zip(t_g, p_g, t_in)):
        tg = torch.zeros_like(x) if tg is None else tg
        if pg is None:
            pg = pylucid.zeros(tuple(x.shape), dtype=pl_dtype(x.dtype))
        # a float32 input (cov's aweights in a float64 sample) has a float32 gradient: float32's tolerance
        tol = TOL[x.dtype] if x.dtype in (torch.float32, torch.complex64) else GRAD_TOL
        compare(tg, pg, tol, f"{what} of input {i}", check_dtype=False, values=values)


def dtypes_of(opinfo):
    sup = opinfo.supported_dtypes("cpu")
    return [d for d in DTYPES if d in sup]


def differentiable(opinfo) -> bool:
    return opinfo.supports_autograd and torch.float64 in opinfo.supported_backward_dtypes("cpu")


def run(opinfo, kind: str, record=None, check_skips=False):
    """Run one OpInfo's samples of one kind; returns (passed, failed, skipped, messages). With ``check_skips``
    the skipped samples run too and are recorded as ``skip-pass`` (the skip is stale) or ``skip-fail``."""
    fn = resolve(opinfo)
    k = key(opinfo)
    passed = failed = skipped = 0
    msgs = []
    if kind == "forward":
        plan = [(d, samples(opinfo, d, False)) for d in dtypes_of(opinfo)]
    else:
        if not differentiable(opinfo) or (kind == "gradgrad" and not opinfo.supports_gradgrad):
            return 0, 0, 0, []
        plan = [(torch.float64, samples(opinfo, torch.float64, True))]
    for dtype, ss in plan:
        dname = str(dtype).split(".")[1]
        for i, s in enumerate(ss):
            skip = lookup(k, dname, kind, s, sample_repr)
            if skip is not None:
                skipped += 1
                why = f"[skipped, {skip.category}] {skip.reason}"
                if check_skips and record is not None:
                    try:
                        _run_one(opinfo, fn, s, dtype, kind)
                        record(k, dname, kind, i, "skip-pass", why, s)
                    except Exception as e:  # noqa: BLE001 - still failing: the skip stands
                        record(k, dname, kind, i, "skip", f"{why}; now: {_describe(e)}", s)
                elif record is not None:
                    record(k, dname, kind, i, "skip", why, s)
                continue
            try:
                note = _run_one(opinfo, fn, s, dtype, kind)
            except Exception as e:  # noqa: BLE001 - every failure is reported with its sample
                failed += 1
                msg = _describe(e)
                msgs.append(f"{k} {dname} {kind} sample {i}: {msg}\n    {sample_repr(s)}")
                if record is not None:
                    record(k, dname, kind, i, "fail", msg, s)
                continue
            if note is None:
                passed += 1
                if record is not None:
                    record(k, dname, kind, i, "pass", "", s)
    return passed, failed, skipped, msgs


def _run_one(opinfo, fn, s, dtype, kind):
    if kind == "forward":
        return run_forward(opinfo, fn, s, dtype)
    return run_grad(opinfo, fn, s, 1 if kind == "grad" else 2)


def _describe(e: Exception) -> str:
    if isinstance(e, Mismatch):
        return str(e)
    tb = traceback.extract_tb(e.__traceback__)
    where = next((f"{os.path.relpath(f.filename)}:{f.lineno}" for f in reversed(tb) if "/pylucid/" in f.filename), "")
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text[:300]}" + (f" [{where}]" if where else "")


def _short(o) -> str:
    if isinstance(o, torch.Tensor):
        rg = ", requires_grad" if o.requires_grad else ""
        return f"T{list(o.shape)}:{str(o.dtype)[6:]}{rg}"
    if isinstance(o, (list, tuple)):
        inner = ", ".join(_short(v) for v in o)
        return f"[{inner}]" if isinstance(o, list) else f"({inner}{',' if len(o) == 1 else ''})"
    if isinstance(o, Mapping):
        return "{" + ", ".join(f"{k}={_short(v)}" for k, v in o.items()) + "}"
    return repr(o)


def sample_repr(s) -> str:
    args = ", ".join([_short(s.input)] + [_short(a) for a in s.args] + [f"{k}={_short(v)}" for k, v in
                                                                          s.kwargs.items()])
    return f"({args})"


# ---------------------------------------------------------------- the tests
def _matched():
    return [o for o in op_db() if not excluded(o) and resolve(o) is not None]


_MATCHED = _matched()


@pytest.mark.parametrize("opinfo", _MATCHED, ids=key)
def test_opinfo(opinfo):
    """Forward, first-order and second-order samples of one OpInfo agree with PyTorch (or are skipped, with
    their reason, in tests/opinfo_skips.py)."""
    msgs, ran = [], 0
    for kind in KINDS:
        passed, failed, skipped, m = run(opinfo, kind)
        msgs += m
        ran += passed + failed + skipped
    if msgs:
        pytest.fail(f"{len(msgs)} sample(s) disagree with PyTorch:\n" + "\n".join(msgs), pytrace=False)
    if not ran:
        pytest.skip("no samples")


def test_skips_name_database_entries():
    """Every skip names an OpInfo of the database, a dtype and a kind the suite runs."""
    keys = {key(o) for o in op_db()}
    for s in SKIPS:
        assert s.op in keys, f"skip for unknown OpInfo {s.op!r}"
        assert s.kind in KINDS + ("*",), s
        assert s.dtype in ("float32", "float64", "int64", "bool", "*"), s
        assert s.reason and s.category in ("deviation", "not implemented", "known bug"), s


if __name__ == "__main__" and "--report" in sys.argv:
    from tools.opinfo_report import main

    main(sys.argv[1:])
