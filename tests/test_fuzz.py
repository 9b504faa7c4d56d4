"""The bad-input fuzzer: every public op and the creation functions, run on valid and invalid arguments, against
PyTorch.

Cases are built from the op database (``tests/opdb``: each entry's samples and its PyTorch reference, which
together cover every declaration of ``pylucid.ops.registry``) and from a table of creation calls. Each sample is
mutated one way at a time: the dtype of its tensors (every dtype, complex and bool included; all tensors or only
the first), 0-d and empty tensors, a broadcast mismatch, NaN/inf values, junk (``None``, a string, a dict, a
list) in place of each argument, and, for each integer argument, a float, a dim far out of range (alone and on a
0-d tensor), ``None`` and a string.

A case passes when

- both frameworks raise (any exception), or PyTorch's CPU build lacks the dtype's kernel ("not implemented for
  'Half'"); pylucid then only has to return or raise a typed error;
- both return, with the same dtypes, shapes and values (NaN equal to NaN; samplers by shape and dtype only);
- PyTorch returns and pylucid raises a typed error (a documented restriction).

It fails when pylucid returns where PyTorch raises (a silent wrong answer), returns another value/dtype/shape,
raises an untyped exception (an AttributeError/KeyError, or any exception that is not a ``pylucid.errors`` class
and whose traceback ends outside pylucid or whose message does not name the op), fails inside the op where PyTorch
computes (an error the declaration's failure path typed on the way out: "crash"), or emits a NumPy
``RuntimeWarning``. Where PyTorch refuses integer/bool inputs its CPU build has no kernel for, or mixed dtypes it
does not promote, and pylucid computes, the case is an "extension": listed, not a failure.

Some of PyTorch's answers are not the oracle: its answer at a NaN operand of some special functions, tied indices,
results on unsorted sequences, documented deviations (``docs/semantics/math_inputs.md``: the "deviation" outcome,
listed, not a failure), a half-precision result that agrees with PyTorch's float32 computation, and ``None``
passed for a declared parameter whose default is ``None`` (judged by PyTorch's call without it), and artifacts of
PyTorch's kernels (float32 ``gelu(+inf)``, an empty ``pixel_unshuffle``, non-finite ``grid_sample`` coordinates,
norms with an infinite weight: "deviation") or of its generator (``fractional_max_pool``'s own draws).

Hypothesis (derandomized) picks ``PYLUCID_FUZZ_EXAMPLES`` cases per entry (default 6; ``5000`` exhausts every
entry: the nightly run). Cases that fail today are listed in ``tests/fuzz_known_failures.txt`` and are reported
but do not fail the run; a new failure does. ``python -m tests.test_fuzz --report FILE`` runs every case and
writes the findings per op family; ``--update-known`` rewrites the list of known failures.
"""

from __future__ import annotations

import math
import os
import re
import sys
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pylucid
import pylucid.errors as plerr
from pylucid import _fp_warnings
from pylucid.ops import registry
from tests.opdb import _FAMILIES
from tests.optest_utils import TORCH_DTYPE, flat_outputs, pl_to_np, to_pl, to_torch, torch_to_np

EXAMPLES = int(os.environ.get("PYLUCID_FUZZ_EXAMPLES", "6"))
KNOWN_FILE = Path(__file__).with_name("fuzz_known_failures.txt")
PYLUCID_DIR = str(Path(pylucid.__file__).parent)

_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool", "complex64")
_JUNK = (("None", lambda: None), ("str", lambda: "abc"), ("dict", dict), ("list", lambda: [1.0, 2.0]))
# PyTorch's CPU build lacks some kernels for these dtypes: not a statement about the op's semantics
_TORCH_GAPS = re.compile(r"not implemented for '(Half|BFloat16|ComplexHalf)'|Unsupported dtype (Half|BFloat16)|"
                         r"MKL FFT error|MKL FFT doesn't support tensors of type: (Half|BFloat16)|"
                         r"Unsupported input type|Low precision dtypes not supported|"
                         r"input tensor must be either float or double dtype|on CPU does not support complex|"
                         r"does not support bool dtypes on CPU|"
                         r"index_reduce_func_exclude_input_init\" not implemented for 'Complex|"
                         # half-precision linear algebra: pylucid computes it in float32 (docs/semantics/linalg_fft.md)
                         r"doesn't handle types other than float and double|linalg\.pinv\((Half|BFloat16)|"
                         r"linalg\.vander supports .* but got (Half|BFloat16)")
# PyTorch refuses integer/bool inputs or mixed dtypes where pylucid computes (promoting like the arithmetic ops):
# an extension, listed in the report but not a failure
_TORCH_EXTENSION = re.compile(r"not implemented for '(Long|Int|Short|Char|Byte|Bool)'")
# PyTorch does not promote mixed dtypes in these ops; pylucid promotes as its arithmetic does: also an extension
_TORCH_NO_PROMOTION = re.compile(r"expected scalar type|same dtype|mixed dtype|Input type \(\S+\) and (weight|bias) "
                                 r"type|Input dtypes must be the same|did not match|Type promoting not supported|"
                                 r"expected dtype .* for|dtypes match|should have same dtype|same datatype|"
                                 r"must be the same dtype|All tensors must have the same dtype|"
                                 r"Found dtype \w+ but expected|dtype \w+ does not match")
_OP_PREFIX = re.compile(r"^\s*[\w.]+(\(\))?: ")
_NUMPY_FP = re.compile(r"encountered in|Mean of empty slice|Degrees of freedom <= 0 for slice|All-NaN (slice|axis)")


# ---------------------------------------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One call: an entry (or a creation call) with one sample mutated one way."""

    family: str
    key: str  # "<entry id>|<sample name>|<mutation>": stable, the known-failures list uses it
    op: object
    ref: object
    args: tuple
    kwargs: dict
    random: bool = False
    postprocess: object = None
    names: frozenset = frozenset()
    tol: tuple = (0.0, 0.0)  # the entry's own (atol, rtol) where looser than the fuzzer's (a bfloat16 GEMM's)


def _cast(a, dtype):
    if not (isinstance(a, np.ndarray) and a.dtype.kind in "fc"):
        return a
    return np.asarray(_cast_array(a, dtype))


def _cast_array(a, dtype):
    if dtype == "bfloat16":
        return a.real.astype(np.float32).astype(ml_dtypes.bfloat16)
    if dtype == "complex64":
        return (a + 0.5j * a[::-1] if a.ndim else a + 0.5j).astype(np.complex64)
    if dtype in ("int64", "int32"):
        return np.round(a.real * 2).astype(dtype)
    if dtype == "uint8":
        return np.round(np.abs(a.real) * 2).astype(np.uint8)
    if dtype == "bool":
        return a.real > 0
    if a.dtype.kind == "c":
        return a.astype(np.complex64 if dtype in ("float32", "float16") else np.complex128)
    return a.astype(dtype)


def _float_positions(args):
    return [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind in "fc"]


def _int_like(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _names(entry) -> frozenset:
    """Words an error message may use to name the op of an entry."""
    out = {entry.name.split(".")[-1], entry.name}
    fn = entry.op
    out.add(getattr(fn, "__name__", ""))
    d = registry.declaration_of(fn)
    if d is not None:
        out.update((d.name, *d.aliases, *d.methods, *d.inplace))
        if d.op is not None:
            out.add(d.op.schema.name)
    for extra in (*entry.covers, *entry.runs):
        out.add(extra)
    return frozenset(n.rstrip("_") for n in out if n and n != "<lambda>")


def _mutations(args, kwargs):
    """``(label, args, kwargs)`` of every mutation of one sample (float32 samples; the label names the change)."""
    base = [_cast(a, "float32") for a in args]
    fpos = _float_positions(args)
    yield "valid", tuple(base), kwargs
    if fpos:
        for dt in _DTYPES[1:]:
            yield f"dtype={dt}", tuple(_cast(a, dt) for a in base), kwargs
        if len(fpos) > 1:
            for dt in ("int64", "bool", "complex64", "float64"):
                one = list(base)
                one[fpos[0]] = _cast(base[fpos[0]], dt)
                yield f"dtype0={dt}", tuple(one), kwargs
        if all(base[i].size for i in fpos) and any(base[i].ndim for i in fpos):
            zd = list(base)
            for i in fpos:
                zd[i] = base[i].reshape(-1)[:1].reshape(())
            yield "0d", tuple(zd), kwargs
            for k, v in kwargs.items():
                if _int_like(v) and "dim" in k:
                    for bad in (1, -2, 5):
                        yield f"0d,{k}={bad}", tuple(zd), {**kwargs, k: bad}
        if all(base[i].ndim for i in fpos):
            yield "empty", tuple(a[:0] if i in fpos else a for i, a in enumerate(base)), kwargs
        if len(fpos) > 1 and base[fpos[-1]].ndim:
            last = base[fpos[-1]]
            wider = np.concatenate([last, last[..., :1]], axis=-1)
            yield "broadcast", tuple(wider if i == fpos[-1] else a for i, a in enumerate(base)), kwargs
        nanv = list(base)
        for i in fpos:
            a = base[i].copy()
            flat = a.reshape(-1)
            for j, v in enumerate((np.nan, np.inf, -np.inf)):
                if j < flat.size:
                    flat[j] = v
            nanv[i] = a
        yield "nan", tuple(nanv), kwargs
    for i in range(len(base)):
        for jn, jv in _JUNK:
            yield f"arg{i}={jn}", tuple(jv() if k == i else a for k, a in enumerate(base)), kwargs
    # integer arguments (positional non-tensors and keywords): floats, far dims, None, strings
    for i, a in enumerate(base):
        if _int_like(a):
            for lab, bad in (("1.5", a + 0.5), ("99", 99), ("-99", -99)):
                yield f"arg{i}={lab}", tuple(bad if k == i else x for k, x in enumerate(base)), kwargs
    for k, v in kwargs.items():
        if _int_like(v):
            bads = (("1.5", v + 0.5), ("99", 99), ("-99", -99), ("None", None), ("str", "abc"))
        elif isinstance(v, tuple) and v and all(_int_like(x) for x in v):
            bads = (("1.5", (v[0] + 0.5, *v[1:])), ("99", (99, *v[1:])), ("str", "abc"))
        elif isinstance(v, float):
            bads = (("str", "abc"), ("nan", math.nan))
        else:
            continue
        for lab, bad in bads:
            yield f"{k}={lab}", tuple(base), {**kwargs, k: bad}


# cases that crash the PyTorch reference process itself (LAPACK's geev on NaN/inf: a segmentation fault)
_REF_CRASHES = re.compile(r"^(linalg\.)?eig(vals)?[|-].*\|nan$")


def _entries():
    import importlib

    for fam in _FAMILIES:
        for e in importlib.import_module(f"tests.opdb.{fam}").ENTRIES:
            yield fam, e


def _minmax_bool_ref(e, ref):
    """The op database's max/min reference builds ``(values, indices)`` from ``amax`` and ``argmax``, and
    ``argmax`` refuses bool; ``torch.max(x, dim)`` itself takes bool: the reference for a bool input."""
    if e.id not in ("max", "min") or getattr(ref, "__qualname__", "") != "_minmax_ref.<locals>.ref":
        return ref
    direct = torch.max if e.id == "max" else torch.min

    def fixed(x, dim=None, keepdim=False):
        if isinstance(x, torch.Tensor) and x.dtype == torch.bool and isinstance(dim, int):
            return tuple(direct(x, dim, keepdim))
        return ref(x, dim, keepdim)

    return fixed


def _minmax_elementwise_ref(e, ref):
    """The op database's element-wise max/min reference has no reduction: for a second argument that is not a
    Tensor (a mutation's junk, ``None``) PyTorch's ``torch.max``/``torch.min`` itself is the reference."""
    if e.id not in ("max-elementwise", "min-elementwise"):
        return ref
    direct = torch.max if e.id == "max-elementwise" else torch.min
    return lambda x, *a, **k: ref(x, *a, **k) if a and isinstance(a[0], torch.Tensor) else direct(x, *a, **k)


def _weak_scalar_ref(ref):
    """The op database's ``_scalar_ref`` makes a Python scalar a 0-d tensor of the other operand's dtype, which
    truncates ``1.5`` to ``1`` for an integer tensor; PyTorch's (and pylucid's) weak-scalar rule takes the
    scalar's category into account: the 0-d tensor gets ``torch.result_type(tensor, scalar)``."""
    if getattr(ref, "__qualname__", "") != "_scalar_ref.<locals>.ref" or not ref.__closure__:
        return ref
    fn = ref.__closure__[0].cell_contents

    def weak(a, b):
        if not isinstance(b, torch.Tensor):
            b = torch.tensor(b, dtype=torch.result_type(a, b))
        if not isinstance(a, torch.Tensor):
            a = torch.tensor(a, dtype=torch.result_type(b, a))
        return fn(a, b)

    return weak


# entries whose reference is a composite written for the gradient at the valid sample (its ``1 - mask`` refuses
# bool, ``inf * 0`` is NaN, ``int * float`` promotes): the op's value entry runs the same mutations against PyTorch
_VALID_ONLY = {"as_strided_scatter-gradient"}


def _setitem_on_a_copy(x, index, value):
    """``x[index] = value`` on a copy of ``x``'s dtype, for either library: the op database's ``setitem`` copies
    by ``x * 1.0``, which makes an integer ``x`` float and a dtype mutation a mixed-dtype write."""
    y = x.clone()
    y[index] = value
    return y


def entry_cases(fam, e) -> list:
    out = []
    names = _names(e)
    ref = _minmax_elementwise_ref(e, _minmax_bool_ref(e, _weak_scalar_ref(e.ref)))
    op = _setitem_on_a_copy if e.id == "setitem" else e.op
    ref = _setitem_on_a_copy if e.id == "setitem" else ref
    seen = set()
    for si, s in enumerate(e.samples()):
        sname = s.name or str(si)
        for label, args, kwargs in _mutations(s.args, s.kwargs):
            key = f"{e.id}|{sname}|{label}"
            if key in seen or _REF_CRASHES.search(key) or (e.id in _VALID_ONLY and label != "valid"):
                continue
            seen.add(key)
            out.append(Case(fam, key, op, ref, args, kwargs, e.random, e.postprocess, names, (e.atol, e.rtol)))
    return out


# creation functions: (name, args, kwargs); PyTorch's function of the same name is the reference
_I64, _F32, _F64 = "int64", "float32", "float64"
_CREATION_CALLS = [
    ("zeros", (2, 3), {}), ("zeros", ((2, 3),), {}), ("zeros", (-1,), {}), ("zeros", (2**62,), {}),
    ("zeros", (2.5,), {}), ("zeros", ("a",), {}), ("zeros", (None,), {}), ("zeros", (2,), {"dtype": _I64}),
    ("ones", (0, 3), {}), ("ones", (-2, 3), {}), ("ones", (2.0,), {}), ("empty", (-1,), {}),
    ("full", ((2,), 1.5), {}), ("full", (2.5, 1.0), {}), ("full", ((2,), "a"), {}), ("full", ((-1,), 1.0), {}),
    ("full", ((2,), 1), {}), ("full", ((2,), True), {}), ("full", ((2,), 1.5), {"dtype": _I64}),
    ("arange", (5,), {}), ("arange", (0, 5, 0.5), {}), ("arange", (0, float("nan")), {}),
    ("arange", (0, float("inf")), {}), ("arange", (0, 5, 0), {}), ("arange", (5, 0, 1), {}),
    ("arange", (0.0, -8.000001, -4.0), {"dtype": _I64}), ("arange", (0, 1, 0.1), {}),
    ("arange", ("a",), {}), ("arange", (1.5,), {"dtype": _I64}), ("arange", (0, 10, 3), {"dtype": _F32}),
    ("linspace", (0, 1, 5), {}), ("linspace", (0, 1, -1), {}), ("linspace", (0, 1, 2.5), {}),
    ("linspace", (0, 1, 0), {}), ("linspace", (0, 1, 1), {}), ("linspace", (0, 10, 5), {"dtype": _I64}),
    ("logspace", (0, 2, 3), {}), ("logspace", (0, 2, -3), {}), ("logspace", (0, 2, 3), {"base": 2.0}),
    ("eye", (3,), {}), ("eye", (2, 3), {}), ("eye", (-1,), {}), ("eye", (2.5,), {}), ("eye", (0,), {}),
    ("rand", (-1,), {}), ("rand", (2.5,), {}), ("rand", ("a",), {}), ("randn", (-1, 2), {}),
    ("randn", (2,), {"dtype": _I64}), ("rand", (2,), {"dtype": _I64}),
    ("randint", (0, 10, (-1,)), {}), ("randint", (10, 0, (2,)), {}), ("randint", (0, 10, (2.5,)), {}),
    ("randperm", (-1,), {}), ("randperm", (2.5,), {}), ("randperm", (0,), {}),
    ("tensor", ([1, 2.5],), {}), ("tensor", ([[1, 2], [3]],), {}), ("tensor", ("abc",), {}),
    ("tensor", ([1, 2],), {"dtype": _F32}), ("tensor", (1.5,), {"dtype": _I64}), ("tensor", ([],), {}),
    ("tensor", (None,), {}), ("tensor", ([True, False],), {}), ("tensor", (1 + 2j,), {}),
    ("zeros_like", ("T",), {}), ("zeros_like", (None,), {}), ("ones_like", ([1.0, 2.0],), {}),
    ("full_like", ("T", 2.5), {}), ("full_like", ("T", "a"), {}), ("empty_like", ("T",), {"dtype": _I64}),
    ("rand_like", ("T",), {}), ("rand_like", ("I",), {}), ("randn_like", ("I",), {}),
    ("tril_indices", (3, 3), {}), ("tril_indices", (-1, 3), {}), ("triu_indices", (3, 3, 1), {}),
]


def _creation_arg(a, lib):
    if a == "T":
        return lib.ones(2, 3)
    if a == "I":
        return lib.ones(2, 3, dtype=lib.int64)
    return a


def _make_creation(name, lib_is_torch):
    def call(*args, **kwargs):
        lib = torch if lib_is_torch else pylucid
        args = tuple(_creation_arg(a, lib) if isinstance(a, str) and a in ("T", "I") else a for a in args)
        if "dtype" in kwargs:
            kwargs = {**kwargs, "dtype": TORCH_DTYPE[kwargs["dtype"]] if lib_is_torch
                      else getattr(pylucid, kwargs["dtype"])}
        return getattr(lib, name)(*args, **kwargs)

    return call


def creation_cases() -> list:
    out = []
    for i, (name, args, kwargs) in enumerate(_CREATION_CALLS):
        if not hasattr(pylucid, name):
            continue
        key = f"creation.{name}|{i}|{args!r}{kwargs or ''}"
        out.append(Case("creation", key, _make_creation(name, False), _make_creation(name, True), args, kwargs,
                        random=name.startswith("rand") or name.startswith("empty"), names=frozenset({name})))
    return out


# ---------------------------------------------------------------------------------------------------- judging
def _torch_gap(exc) -> bool:
    return _TORCH_GAPS.search(str(exc)) is not None


def classify_exception(exc, names) -> str:
    """``"typed"`` or a reason the exception is not a typed pylucid error: a ``pylucid.errors`` class is typed; any
    other exception is typed when pylucid raised it (its traceback ends in pylucid) with a message naming the op,
    except Python's AttributeError/KeyError (a bad argument reached an attribute or a table)."""
    if isinstance(exc, plerr.LucidError):
        return "typed"
    if isinstance(exc, (AttributeError, KeyError)):
        return f"bare {type(exc).__name__}"
    tb = traceback.extract_tb(exc.__traceback__)
    last = tb[-1].filename if tb else ""
    if not last.startswith(PYLUCID_DIR):
        where = Path(last).parts
        return f"bare {type(exc).__name__} from {'/'.join(where[-2:])}"
    msg = str(exc)
    if not any(n in msg for n in names) and not _OP_PREFIX.match(msg):
        return f"unnamed {type(exc).__name__}"
    return "typed"


def _dtype_name(x):
    if isinstance(x, pylucid.Tensor):
        return x.dtype.name
    if isinstance(x, torch.Tensor):
        return str(x.dtype).removeprefix("torch.")
    return type(x).__name__


def _compare(case, out, ref) -> str:
    """``""`` when ``out`` matches ``ref``, else what differs."""
    outs, refs = flat_outputs(out), flat_outputs(ref)
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, torch {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        if isinstance(r, torch.Tensor):
            if not isinstance(o, pylucid.Tensor):
                return f"output {k} is {type(o).__name__}, torch gives a Tensor"
            if _dtype_name(o) != _dtype_name(r):
                return f"output {k} dtype {_dtype_name(o)}, torch {_dtype_name(r)}"
            if tuple(o.shape) != tuple(r.shape):
                return f"output {k} shape {tuple(o.shape)}, torch {tuple(r.shape)}"
            if case.random:
                continue
            a, e = pl_to_np(o), torch_to_np(r)
        elif isinstance(o, pylucid.Tensor):
            return f"output {k} is a Tensor, torch gives {type(r).__name__}"
        else:
            a, e = o, r
        if case.postprocess is not None:
            try:
                a, e = case.postprocess(np.asarray(a)), case.postprocess(np.asarray(e))
            except Exception:  # noqa: BLE001 - a postprocess written for valid samples only
                pass
        try:
            a, e = np.asarray(a), np.asarray(e)
        except Exception:  # noqa: BLE001 - not array-like: compare as objects
            if a != e:
                return f"output {k} {a!r}, torch {e!r}"
            continue
        if a.shape != e.shape:
            return f"output {k} shape {a.shape}, torch {e.shape}"
        if a.dtype.kind in "biu" and e.dtype.kind in "biu":
            if not np.array_equal(a, e):
                return f"output {k} values differ: {a.ravel()[:4]} vs torch {e.ravel()[:4]}"
            continue
        if a.dtype.kind not in "biufc" or e.dtype.kind not in "biufc":
            continue
        low = _dtype_name(o) in ("float16", "bfloat16") if isinstance(o, pylucid.Tensor) else False
        tol = 2e-2 if low else 1e-4
        atol, rtol = max(tol, case.tol[0]), max(tol, case.tol[1])
        ac = a.astype(np.complex128)
        ec = e.astype(np.complex128)
        if not np.allclose(ac, ec, atol=atol, rtol=rtol, equal_nan=True):
            bad = ~np.isclose(ac, ec, atol=atol, rtol=rtol, equal_nan=True)
            return f"output {k} values differ: {ac[bad].ravel()[:3]} vs torch {ec[bad].ravel()[:3]}"
    return ""


_NONE_LABEL = re.compile(r"\|(arg(\d+)|(\w+))=None$")


def _declared_param(case, which):
    """The ``inspect.Parameter`` of the declared pylucid function the case calls, by position or name, or None when
    the case calls a wrapper (a lambda of the op database) or the function has no such parameter."""
    import inspect

    fn = case.op if registry.declaration_of(case.op) is not None else None
    if fn is None:
        return None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if isinstance(which, int):
        p = params[which] if which < len(params) else None
        return None if p is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) else p
    return next((p for p in params if p.name == which), None)


def _none_is_the_default(case, out) -> bool:
    """True when the mutation put ``None`` in the last positional argument or in a keyword, PyTorch refuses
    ``None`` there, and PyTorch's call without that argument gives pylucid's answer: pylucid's parameter defaults
    to ``None`` and passing it equals leaving it out (a Python call cannot tell the two apart)."""
    m = _NONE_LABEL.search(case.key)
    if m is None or case.random:
        return False
    param = _declared_param(case, int(m.group(2)) if m.group(2) is not None else m.group(3))
    if param is None or param.default is not None:
        return False
    args, kwargs = case.args, dict(case.kwargs)
    if m.group(2) is not None:
        i = int(m.group(2))
        if i != len(args) - 1:
            return False
        args = args[:-1]
    else:
        kwargs.pop(m.group(3), None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = case.ref(*(to_torch(a) for a in args), **kwargs)
        return _compare(case, out, ref) == ""
    except Exception:  # noqa: BLE001 - PyTorch refuses the shorter call too
        return False


# ops returning (values, indices) whose samples have no ties; a dtype mutation (int, bool) makes ties, and which of
# the tied positions is returned is not specified (PyTorch's CPU kernels differ between versions)
_TIE_OPS = {"topk": 2, "kthvalue": 2}


def _tie_indices_ok(case, out, ref) -> bool:
    """True when only the indices differ, and pylucid's select the returned values from the input (ties)."""
    name = case.key.split("|")[0]
    if name not in _TIE_OPS or not isinstance(out, tuple) or len(out) != 2:
        return False
    if _compare(case, out[0], ref[0]):
        return False
    x = case.args[0]
    dim = case.kwargs.get("dim", case.args[_TIE_OPS[name]] if len(case.args) > _TIE_OPS[name] else -1)
    vals, idx = pl_to_np(out[0]), pl_to_np(out[1])
    if x.ndim == 0:
        return bool(np.all(idx == 0))
    if idx.ndim < x.ndim:
        idx, vals = np.expand_dims(idx, dim), np.expand_dims(vals, dim)
    return bool(np.array_equal(np.take_along_axis(x, idx, dim), vals))


# Special functions where PyTorch's answer at a non-finite operand is an artifact of its kernel, not a value
# (docs/semantics/math_inputs.md): igamma/igammac test the other operand first and return 0 or 1 for a NaN one;
# the orthogonal polynomials return uninitialised memory for NaN x; zeta(s, inf) and polygamma(n >= 2, inf) are NaN
# from Cephes' series (0/0) where the limit is 0. pylucid answers NaN for a NaN operand and the limit at infinity.
_NONFINITE_OPS = re.compile(r"^(igamma|igammac|special\.gammainc|special\.gammaincc|zeta|special\.zeta|polygamma"
                            r"(-method)?|\w*polynomial_\w+)$")


def _nonfinite_ok(case, out, ref) -> bool:
    """True when pylucid and PyTorch differ only where an operand is non-finite, pylucid answering NaN where one
    is NaN and NaN or 0 (the limit) where one is infinite (``_NONFINITE_OPS``)."""
    if not _NONFINITE_OPS.match(case.key.split("|")[0]) or not isinstance(out, pylucid.Tensor):
        return False
    arrays = [np.asarray(a, dtype=np.float64) for a in case.args
              if isinstance(a, np.ndarray) and a.dtype.kind in "fiub" or isinstance(a, (int, float))]
    a, e = pl_to_np(out).astype(np.float64), torch_to_np(ref).astype(np.float64)
    try:
        nan_in = np.zeros(a.shape, bool)
        inf_in = np.zeros(a.shape, bool)
        for x in arrays:
            nan_in |= np.broadcast_to(np.isnan(x), a.shape)
            inf_in |= np.broadcast_to(np.isinf(x), a.shape)
    except ValueError:
        return False
    low = out.dtype.name in ("float16", "bfloat16")
    tol = 2e-2 if low else 1e-4
    same = np.isclose(a, e, atol=tol, rtol=tol, equal_nan=True)
    ok_nan = nan_in & np.isnan(a)
    ok_inf = inf_in & ~nan_in & (np.isnan(a) | (a == 0))
    return bool(np.all(same | ok_nan | ok_inf))


def _empty_int_softmax_ok(case, out, ref) -> bool:
    """PyTorch's softmax/log_softmax refuse integer and bool input ("not implemented for 'Long'") but return an
    empty integer tensor for an empty one (no kernel runs); pylucid computes them in the default float dtype (an
    extension) for every size. PyTorch's multi_margin_loss is the same (its 'mean' of an empty integer input is
    uninitialised memory)."""
    if case.key.split("|")[0] not in ("softmax", "log_softmax", "nn.functional.multi_margin_loss") or \
            "|empty" not in case.key:
        return False
    return (isinstance(out, pylucid.Tensor) and out.numel() == 0 and out.dtype.is_floating_point
            and not ref.dtype.is_floating_point and tuple(out.shape) == tuple(ref.shape))


def _complex_wrapper_not_applicable(case, t_exc) -> bool:
    """The complex family's reference wrapper (``tests/opdb/complex.py``'s ``_tc``) indexes the ``(..., 2)`` last
    dim of its input, which a 0-d or empty mutation removed (pylucid's wrapper then passes the real input on);
    ``torch.view_as_complex`` refuses the zero strides of NumPy-made empty tensors."""
    if isinstance(t_exc, IndexError) and getattr(case.ref, "__qualname__", "").startswith("_tc."):
        return True
    return ("stride 1" in str(t_exc) and case.key.startswith("view_as_complex")
            and any(isinstance(a, np.ndarray) and a.size == 0 for a in case.args))


def _float64_ok(case, out) -> bool:
    """polygamma of float32: PyTorch's float32 kernel multiplies an overflowed ``n!`` by an underflowed
    ``zeta(n + 1, x)`` (NaN where the value overflows to inf, or is a representable small number); pylucid's
    agrees with PyTorch's float64 computation rounded once."""
    if not re.match(r"^polygamma(-method)?\|", case.key) or not isinstance(out, pylucid.Tensor) or \
            out.dtype.name != "float32":
        return False
    args = tuple(a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32 else a
                 for a in case.args)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref64 = case.ref(*(to_torch(a) for a in args), **case.kwargs)
    except Exception:  # noqa: BLE001 - no float64 reference: nothing to compare with
        return False
    return _compare(case, out, ref64.to(torch.float32)) == ""


def _half_ok(case, out) -> bool:
    """A float16/bfloat16 result that differs from PyTorch's half-precision one but agrees with PyTorch's float32
    computation on the same (half) inputs, rounded once: pylucid is the more accurate (``cdist``'s matrix-product
    formula cancels completely in bfloat16 in PyTorch; pylucid runs it in float32)."""
    if not isinstance(out, pylucid.Tensor) or out.dtype.name not in ("float16", "bfloat16") or case.random:
        return False
    args = tuple(a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype in (np.float16, ml_dtypes.bfloat16)
                 else a for a in case.args)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref32 = case.ref(*(to_torch(a) for a in args), **case.kwargs)
    except Exception:  # noqa: BLE001 - no float32 reference: nothing to compare with
        return False
    if not isinstance(ref32, torch.Tensor) or not ref32.dtype.is_floating_point:
        return False
    half = torch.float16 if out.dtype.name == "float16" else torch.bfloat16
    return _compare(case, out, ref32.to(half)) == ""


# pylucid computes where PyTorch raises, as documented (docs/semantics/math_inputs.md, the ops' docstrings)
_DEVIATIONS = (
    (r"^(logsumexp|prod|median_dim|nanmedian_dim)\|[^|]*\|dim=None$",
     "dim=None reduces over every dim (keepdim keeps them as size 1); PyTorch requires a dim for this form"),
    (r"^positive\|.*\|dtype=bool$", "+x returns a bool tensor unchanged (positive's docstring)"),
    (r"^(linalg\.ldl_factor|ldl_solve)\|.*\|nan$", "PyTorch's ldl_factor fails an internal assert on the info code "
                                                  "of a NaN input (a bug it asks to report); pylucid factors it"),
    (r"^(svd|pca)_lowrank\|.*\|dtype=(bfloat16|float16)$", "half precision computed in float32 (PyTorch mixes its "
                                                            "float32 random matrix with the input and raises)"),
    (r"^fft\.i?fftshift\|.*\|0d$", "a 0-d tensor has nothing to shift: a copy (PyTorch's roll refuses no dims)"),
    (r"^combinations(-none)?\|[^|]*\|arg1=99$", "combinations of r > len(input) elements are no rows (with "
     "replacement: C(n + r - 1, r) rows); PyTorch builds the n**r grid first and overflows"),
)
# results PyTorch does not specify for these inputs: (key pattern, why), by entry
_UNSPECIFIED = {
    "mode": (r"\|nan$", "the mode of a slice holding NaN follows the unordered NaN comparisons of PyTorch's sort "
                        "(torch.mode([nan, inf, -inf, 1.]) is nan, torch.mode([2., nan, 1.]) is 1.)"),
    "searchsorted": (r"\|nan$", "NaN and -inf after inf leave the sorted sequence unsorted"),
    "bucketize": (r"\|(broadcast|nan)$", "the widened boundaries, or NaN and -inf after inf, are not sorted"),
    "einsum": (r"\|empty\|dtype0=", "PyTorch refuses mixed dtypes (pylucid promotes, an extension) but gives an "
                                    "empty result the last operand's dtype"),
    # sym() of a bool matrix is singular: the last pivot is the square root of a rounding error (NumPy's LAPACK
    # computes float32 in float64)
    **dict.fromkeys(("cholesky", "linalg.cholesky_ex"), (r"\|dtype=bool$", "the last pivot of a singular matrix")),
    # a Cholesky factor has a real diagonal; the complex cast makes it complex, of which LAPACK's potri (lauum)
    # reads the real part only
    **dict.fromkeys(("cholesky_inverse", "cholesky_inverse-direct"), (r"\|dtype=complex64$",
                                                                      "a factor with a complex diagonal")),
    # MKL's Householder reflector of a column with a NaN leading entry takes max/min of NaN and the column's norm:
    # a finite R[0, 0] from a NaN column (pylucid's is NaN)
    **dict.fromkeys(("qr", "qr-method", "qr-torch", "geqrf"), (r"\|nan$", "R[0, 0] of a NaN column")),
    "ldl_factor": (r"\|nan$", "Bunch-Kaufman pivots chosen by comparisons with NaN (reference LAPACK stops at a "
                              "NaN pivot, MKL goes on)"),
    "linalg.cond-edges": (r"\|singular\|arg1=None$", "the singular-value ratio of a singular matrix: 1 / a rounding "
                                                     "error (NumPy computes float32 in float64)"),
    # a deviation (docs/semantics/math_inputs.md): the NaN PyTorch's max drops, pylucid propagates
    "cdist": (r"\|pinf\|nan$", "PyTorch's CPU p=inf kernel takes max(|x1 - x2|) with a comparison that drops NaN "
                                 "(0 for [nan] vs [nan]); pylucid's is NaN, as vector_norm(x1 - x2, inf) and every p"),
}


def _mean_ok(case, out, ref) -> bool:
    """var_mean/std_mean: PyTorch's one-pass (Welford) kernel gives a NaN mean for a slice holding an infinity;
    pylucid's mean is torch.mean's (inf); the variances must agree."""
    if case.key.split("|")[0] not in ("var_mean", "std_mean") or not isinstance(out, tuple):
        return False
    if _compare(case, out[0], ref[0]):
        return False
    x = to_torch(case.args[0])
    dim = case.kwargs.get("dim", case.args[1] if len(case.args) > 1 else None)
    mean = torch.mean(x, dim=dim, keepdim=case.kwargs.get("keepdim", False)) if dim is not None else torch.mean(x)
    return _compare(case, out[1], mean) == ""


def _ieee_complex_sum_ok(case, out) -> bool:
    """add/sub of complex tensors: PyTorch's CPU kernel computes ``a + alpha * b`` with a complex ``alpha = 1``,
    so an infinite operand gets a NaN imaginary part (``inf * 0``); pylucid's sum is the IEEE one, NumPy's."""
    name = case.key.split("|")[0]
    if name not in ("add", "sub") or not case.key.endswith("|nan") or case.kwargs.get("alpha", 1) != 1:
        return False
    a, b = case.args[0], case.args[1]
    if not any(isinstance(x, np.ndarray) and x.dtype.kind == "c" for x in (a, b)):
        return False
    with np.errstate(all="ignore"):
        expect = np.add(a, b) if name == "add" else np.subtract(a, b)
    return bool(np.allclose(pl_to_np(out), expect, equal_nan=True))


def _float64_kernel_ok(case, out) -> bool:
    """gelu: PyTorch's vectorised float32 CPU kernel answers NaN at +inf (its erf polynomial), where its float64
    kernel and its strided float32 loop answer inf (``x Phi(x) -> x``); pylucid's result agrees with PyTorch's
    float64 computation on the same inputs, rounded once."""
    if case.key.split("|")[0] not in ("gelu", "nn.functional.gelu") or not isinstance(out, pylucid.Tensor):
        return False
    if out.dtype.name != "float32" or case.random:
        return False
    args = tuple(a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32 else a for a in case.args)
    try:
        ref64 = case.ref(*(to_torch(a) for a in args), **case.kwargs)
    except Exception:  # noqa: BLE001 - no float64 reference: nothing to compare with
        return False
    return isinstance(ref64, torch.Tensor) and _compare(case, out, ref64.to(torch.float32)) == ""


def _empty_unshuffle_ok(case, out, ref) -> bool:
    """pixel_unshuffle: PyTorch returns a clone of an empty input, its shape not unshuffled (a ``numel() == 0``
    shortcut; ``pixel_shuffle`` reshapes its empty input); pylucid's empty result has the unshuffled shape."""
    if case.key.split("|")[0] != "pixel_unshuffle" or not case.key.endswith("|empty") or \
            not isinstance(out, pylucid.Tensor):
        return False
    x, r = case.args[0], case.args[1]
    if not isinstance(x, np.ndarray) or x.ndim < 3 or not _int_like(r) or r < 1:
        return False
    want = (*x.shape[:-3], x.shape[-3] * r * r, x.shape[-2] // r, x.shape[-1] // r)
    return tuple(ref.shape) == x.shape and tuple(out.shape) == want and out.dtype.name == _dtype_name(ref)


def _grid_nonfinite_ok(case, out, ref) -> bool:
    """grid_sample at a non-finite grid coordinate: PyTorch's 2-d kernel clamps NaN to 0 under border/reflection
    padding, its 3-d kernel to size - 1, its 2-d bilinear one answers NaN under zeros padding where the 3-d one
    answers 0; pylucid answers NaN (border, reflection: no value to clamp to) or 0 (zeros: off the input). The
    other points must agree."""
    if case.key.split("|")[0] not in ("nn.functional.grid_sample", "grid_sampler_2d", "grid_sampler_3d") or \
            not isinstance(out, pylucid.Tensor) or not isinstance(ref, torch.Tensor) or len(case.args) < 2:
        return False
    a, e = pl_to_np(out).astype(np.float64), torch_to_np(ref).astype(np.float64)
    grid = np.asarray(case.args[1])
    if a.shape != e.shape or grid.ndim != a.ndim or grid.dtype.kind != "f":
        return False
    lost = np.broadcast_to(np.expand_dims(~np.isfinite(grid).all(-1), 1), a.shape)
    same = np.isclose(a, e, atol=1e-4, rtol=1e-4, equal_nan=True)
    return bool(np.all(same | (lost & (np.isnan(a) | ((a == 0) & np.isnan(e))))))


_NORMS = ("batch_norm", "native_batch_norm", "native_batch_norm-output", "native_group_norm",
          "nn.functional.group_norm", "nn.functional.instance_norm", "nn.functional.batch_norm")


def _norm_affine_ok(case, out, ref) -> bool:
    """The norms with an infinite weight or bias: PyTorch folds the mean into the shift,
    ``x * (w rstd) + (b - mean w rstd)``, which is NaN wherever ``x w`` and ``mean w`` are infinite alike; pylucid
    computes ``(x - mean) rstd w + b``, +-inf there. Only the channels of a non-finite weight or bias may differ,
    pylucid non-finite where PyTorch is NaN; the other outputs (the statistics) must agree."""
    if case.key.split("|")[0] not in _NORMS or not case.key.endswith("|nan"):
        return False
    outs, refs = flat_outputs(out), flat_outputs(ref)
    x = case.args[0]
    if len(outs) != len(refs) or not isinstance(outs[0], pylucid.Tensor) or x.ndim < 2:
        return False
    if any(_compare(case, o, r) for o, r in zip(outs[1:], refs[1:])):
        return False
    a, e = pl_to_np(outs[0]).astype(np.float64), torch_to_np(refs[0]).astype(np.float64)
    if a.shape != x.shape or e.shape != x.shape:
        return False
    bad = np.zeros(x.shape[1], bool)
    for v in case.args[1:]:
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.shape == (x.shape[1],):
            bad |= ~np.isfinite(v)
    lost = np.broadcast_to(bad.reshape((1, -1) + (1,) * (x.ndim - 2)), x.shape)
    same = np.isclose(a, e, atol=1e-4, rtol=1e-4, equal_nan=True)
    return bool(np.all(same | (lost & ~np.isfinite(a) & np.isnan(e))))


_OWN_DRAW = re.compile(r"^nn\.functional\.fractional_max_pool\dd(_with_indices)?\|[^|]*\|arg5=None$")


def _own_draw_ok(case, out, ref) -> bool:
    """fractional_max_pool with ``_random_samples=None`` draws its window offsets from each framework's own
    generator: a sampler, compared by shape and dtype only."""
    if not _OWN_DRAW.match(case.key):
        return False
    from dataclasses import replace

    return _compare(replace(case, random=True), out, ref) == ""


def run_case(case):
    """``(outcome, detail)``; outcome is "ok", "extension" or one of the failure kinds "accepts", "wrong", "bare",
    "crash" (an error from inside the op, typed on the way out, where PyTorch computes), "warns"."""
    t_args = tuple(to_torch(a) for a in case.args)
    torch.manual_seed(0)  # samplers: the same draws every run, so a case's outcome never changes
    pylucid.manual_seed(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = case.ref(*t_args, **case.kwargs)
        t_exc = None
    except Exception as exc:  # noqa: BLE001 - any PyTorch refusal
        ref, t_exc = None, exc
    p_args = tuple(to_pl(a) for a in case.args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fp_warnings.install()  # what a user sees: pylucid's filter of NumPy's floating-point warnings applies
        try:
            out = case.op(*p_args, **case.kwargs)
            p_exc = None
        except Exception as exc:  # noqa: BLE001 - judged below
            out, p_exc = None, exc
    # NumPy's floating-point warnings ("invalid value encountered in ...") are attributed to the line that called
    # the ufunc, inside pylucid; pylucid's own RuntimeWarnings (cov's degrees of freedom, ...) are deliberate
    numpy_warnings = [w for w in caught if issubclass(w.category, RuntimeWarning)
                      and (not str(w.filename).startswith(PYLUCID_DIR) or _NUMPY_FP.search(str(w.message)))]
    if p_exc is not None:
        tb = traceback.extract_tb(p_exc.__traceback__)
        if isinstance(p_exc, (AttributeError, TypeError)) and tb and "/tests/" in tb[-1].filename:
            return "ok", "entry wrapper not applicable"  # the op database's lambda cannot take this input
        kind = classify_exception(p_exc, case.names)
        if kind != "typed":
            return "bare", f"{kind}: {str(p_exc)[:150]}"
        if getattr(p_exc, "_pylucid_internal", False) and t_exc is None:
            # the declaration's failure path typed an error from inside the op, and PyTorch computes a result
            cause = p_exc.__cause__
            return "crash", f"{type(cause).__name__ if cause else ''} inside: {str(p_exc)[:150]}"
        return "ok", f"typed {type(p_exc).__name__}"
    if t_exc is not None:
        if _torch_gap(t_exc):
            return "ok", "torch lacks the kernel"
        tb = traceback.extract_tb(t_exc.__traceback__)
        if isinstance(t_exc, (AttributeError, KeyError)) and tb and "/tests/" in tb[-1].filename:
            # the reference wrapper (a lambda of the op database) cannot take this input: nothing to judge
            return "ok", "reference not applicable"
        if _complex_wrapper_not_applicable(case, t_exc):
            return "ok", "reference not applicable"
        for pat, why in _DEVIATIONS:
            if re.search(pat, case.key):
                return "deviation", why
        if _none_is_the_default(case, out):
            return "ok", "None for an argument whose default is None: the same call as leaving it out"
        if (_TORCH_EXTENSION.search(str(t_exc)) and "complex" not in case.key.rsplit("|", 1)[-1]) or (
                _TORCH_NO_PROMOTION.search(str(t_exc)) and "|dtype0=" in case.key):
            return "extension", f"torch raises {type(t_exc).__name__}: {str(t_exc).splitlines()[0][:120]}"
        return "accepts", f"torch raises {type(t_exc).__name__}: {str(t_exc).splitlines()[0][:120]}"
    try:
        diff = _compare(case, out, ref)
        if diff and (_tie_indices_ok(case, out, ref) or _nonfinite_ok(case, out, ref) or
                     _empty_int_softmax_ok(case, out, ref) or _half_ok(case, out) or _mean_ok(case, out, ref)
                     or _float64_ok(case, out)
                     or _ieee_complex_sum_ok(case, out)):
            diff = ""
        if diff and (_float64_kernel_ok(case, out) or _empty_unshuffle_ok(case, out, ref)
                     or _grid_nonfinite_ok(case, out, ref) or _norm_affine_ok(case, out, ref)):
            return "deviation", "PyTorch's kernel artifact (docs/semantics/math_inputs.md)"
        if diff and _own_draw_ok(case, out, ref):
            return "ok", "a sampler (each framework's generator): shapes and dtypes agree"
        unspecified = _UNSPECIFIED.get(case.key.split("|")[0])
        if diff and unspecified and re.search(unspecified[0], case.key):
            return "ok", f"unspecified: {unspecified[1]}"
    except Exception as exc:  # noqa: BLE001 - a broken result (a dtype pylucid has no name for, ...)
        diff = f"unreadable result: {type(exc).__name__}: {exc}"
    if diff:
        return "wrong", diff
    if numpy_warnings:
        w = numpy_warnings[0]
        return "warns", f"{w.category.__name__}: {w.message}"
    return "ok", ""


_PASSING = ("ok", "extension", "deviation")


def _known() -> set:
    if not KNOWN_FILE.exists():
        return set()
    return {ln.rstrip("\n") for ln in KNOWN_FILE.read_text().splitlines() if ln and not ln.startswith("#")}


# ---------------------------------------------------------------------------------------------------- the tests
ENTRY_LIST = list(_entries())
KNOWN = _known()
STATS: Counter = Counter()
TYPED_SEEN: set = set()


def _check(case):
    outcome, detail = run_case(case)
    STATS["cases"] += 1
    STATS[outcome] += 1
    if detail.startswith("typed"):
        TYPED_SEEN.add((case.key.split("|")[0], detail))
    if outcome not in _PASSING and case.key not in KNOWN:
        raise AssertionError(f"{case.key}: {outcome}: {detail}")


_SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                     suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("fam_entry", ENTRY_LIST, ids=[f"{f}-{e.id}" for f, e in ENTRY_LIST])
@_SETTINGS
@given(data=st.data())
def test_fuzz_entry(fam_entry, data):
    cases = _cases_of(fam_entry)
    _check(data.draw(st.sampled_from(cases), label="case"))


_CASE_CACHE: dict = {}


def _cases_of(fam_entry):
    k = id(fam_entry[1])
    if k not in _CASE_CACHE:
        _CASE_CACHE[k] = entry_cases(*fam_entry)
    return _CASE_CACHE[k]


@_SETTINGS
@given(case=st.sampled_from(creation_cases()))
def test_fuzz_creation(case):
    _check(case)


def test_fuzz_summary(capsys):
    """The counts of this run (the other tests ran first): cases, outcomes, distinct typed errors."""
    with capsys.disabled():
        print(f"\nfuzz: {STATS['cases']} cases, outcomes {dict(STATS)}, {len(TYPED_SEEN)} distinct typed errors")
    assert STATS["cases"] == 0 or STATS["ok"] > 0


def test_judge_catches_bare_and_silent_answers():
    """The judge itself: a NumPy error is bare, an op-named pylucid error is typed, accepting what torch refuses
    fails."""
    with pytest.raises(Exception) as e:  # noqa: PT011 - whatever NumPy raises
        np.broadcast_shapes((2, 3), (4,))
    assert classify_exception(e.value, frozenset({"xlogy"})).startswith("bare")
    assert classify_exception(plerr.ShapeMismatch("xlogy: shapes"), frozenset({"xlogy"})) == "typed"
    c = Case("t", "t", lambda x: x, torch.relu, (np.ones(2, np.complex64),), {})
    assert run_case(c)[0] == "accepts"
    c = Case("t", "t", lambda x: x * 2, lambda x: x, (np.ones(2),), {})
    assert run_case(c)[0] == "wrong"


# ---------------------------------------------------------------------------------------------------- the rules
# (docs/semantics/validation.md) checked directly: each with PyTorch's answer where it has one
F = pylucid.nn.functional


@pytest.mark.parametrize("call", [
    lambda lib: lib.softmax(lib.tensor(2.0), 5), lambda lib: lib.log_softmax(lib.tensor(2.0), 1),
    lambda lib: lib.sum(lib.tensor(2.0), 1), lambda lib: lib.tensor(2.0).softmax(-2),
])
def test_zero_d_tensors_have_dims_minus_one_and_zero_only(call):
    with pytest.raises(IndexError):
        call(torch)
    with pytest.raises(IndexError, match=r"dimension out of range \(expected to be in range of \[-1, 0\]"):
        call(pylucid)


@pytest.mark.parametrize("dim", [0, -1])
def test_zero_d_dims_that_exist(dim):
    assert pylucid.softmax(pylucid.tensor(2.0), dim).item() == torch.softmax(torch.tensor(2.0), dim).item() == 1.0


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.tril(x, 1.5), lambda lib, x: lib.triu(x, 1.5), lambda lib, x: lib.diagonal(x, 1.5),
    lambda lib, x: lib.diag_embed(x, 1.5), lambda lib, x: lib.roll(x, shifts=1.5),
    lambda lib, x: lib.tril(x, 1.0), lambda lib, x: lib.sum(x, dim=0.5),
])
def test_floats_for_ints_are_type_errors(call):
    with pytest.raises(TypeError):
        call(torch, torch.ones(3, 3))
    with pytest.raises(TypeError, match=r"must be an int"):
        call(pylucid, pylucid.ones(3, 3))


@pytest.mark.parametrize("junk", [None, "abc", {}, [1.0, 2.0]])
@pytest.mark.parametrize("call", [
    lambda lib, j: lib.nn.functional.dropout(j, training=False),
    lambda lib, j: lib.nn.functional.mse_loss(lib.ones(2), j),
    lambda lib, j: lib.nn.functional.l1_loss(j, lib.ones(2)),
    lambda lib, j: lib.xlogy(j, lib.ones(2)),
])
def test_junk_for_a_tensor_is_a_type_error_naming_the_op(call, junk):
    with pytest.raises((TypeError, AttributeError)):  # PyTorch's losses reach .size() of the junk
        call(torch, junk)
    with pytest.raises(TypeError) as e:
        call(pylucid, junk)
    assert classify_exception(e.value, frozenset({"dropout", "mse_loss", "l1_loss", "xlogy"})) == "typed"


def test_numpy_broadcast_errors_become_shape_mismatch():
    with pytest.raises(RuntimeError):
        torch.xlogy(torch.ones(3, 4), torch.ones(3, 5))
    with pytest.raises(plerr.ShapeMismatch, match=r"xlogy: .*\(3, ?4\).*\(3, ?5\)"):
        pylucid.xlogy(pylucid.ones(3, 4), pylucid.ones(3, 5))


@pytest.mark.parametrize("call", [
    lambda lib, z: lib.relu(z), lambda lib, z: lib.sort(z), lambda lib, z: lib.clamp(z, 0, 1),
    lambda lib, z: lib.gt(z, z), lambda lib, z: lib.amax(z), lambda lib, z: lib.maximum(z, z),
    lambda lib, z: lib.nn.functional.mse_loss(z, z), lambda lib, z: lib.argmax(z),
    lambda lib, z: lib.nn.functional.max_pool1d(z.reshape(1, 1, 4), 2),
])
def test_ordering_and_real_only_ops_refuse_complex(call):
    z = np.array([1 + 1j, -2j, 3.0, 0.5j], dtype=np.complex64)
    with pytest.raises((RuntimeError, NotImplementedError)):
        call(torch, torch.from_numpy(z))
    with pytest.raises(plerr.DtypeMismatch, match=r"complex64 \(complex\); \w+ accepts float, int"):
        call(pylucid, pylucid.tensor(z))


def test_complex_ops_that_accept_complex_still_do():
    z = pylucid.tensor(np.array([1 + 1j, -2j], dtype=np.complex64))
    assert pylucid.abs(z).dtype == pylucid.float32 and pylucid.exp(z).dtype == pylucid.complex64


def test_schema_accepts_names_known_kinds_only():
    from pylucid.ops.schema import OpSchema

    assert OpSchema("_t", accepts=("float", "int")).accepts == ("float", "int")
    with pytest.raises(ValueError, match="unknown dtype kind 'real'"):
        OpSchema("_t", accepts=("real",))


def test_per_input_accepts():
    from pylucid.ops import Op, OpSchema, apply

    class _Pick(Op):
        schema = OpSchema("_test_pick", accepts=(("float",), ("int", "bool")), differentiable=False)
        promote_args = ()

        @staticmethod
        def forward(be, x, index):
            return x[index]

    try:
        x, i = pylucid.tensor([1.0, 2.0]), pylucid.tensor([1])
        assert apply(_Pick, (x, i)).tolist() == [2.0]
        with pytest.raises(plerr.DtypeMismatch, match=r"_test_pick: argument 'index' has dtype float32 \(float\); "
                                                       r"_test_pick accepts int, bool tensors"):
            apply(_Pick, (x, x))
        with pytest.raises(plerr.DtypeMismatch, match=r"argument .x. has dtype int64 \(int\); _test_pick accepts fl"):
            apply(_Pick, (i, i))
    finally:
        registry._REGISTRY.pop("_test_pick", None)


def test_declared_functions_keep_signature_docs_and_module():
    import inspect

    for fn in (pylucid.softmax, pylucid.tril, F.dropout, pylucid.add, pylucid.Tensor.sum):
        assert fn.__wrapped__ is not None
        assert inspect.signature(fn) == inspect.signature(fn.__wrapped__)
        assert fn.__doc__ == fn.__wrapped__.__doc__ and fn.__globals__ is fn.__wrapped__.__globals__
        assert registry.declaration_of(fn) is not None


def test_typed_errors_pass_through_unchanged():
    with pytest.raises(ZeroDivisionError, match=r"^floor_divide: integer division by zero"):
        pylucid.floor_divide(pylucid.tensor([1]), pylucid.tensor([0]))
    with pytest.raises(IndexError, match=r"^sum: dimension out of range"):
        pylucid.ones(2).sum(dim=3)


# ---------------------------------------------------------------------------------------------------- report
def _all_cases():
    for fam, e in ENTRY_LIST:
        try:
            yield from entry_cases(fam, e)
        except Exception as exc:  # noqa: BLE001 - a sample builder that needs a missing function
            print(f"skip {e.id}: {exc}", file=sys.stderr)
    yield from creation_cases()


def _show(a) -> str:
    if isinstance(a, np.ndarray):
        dt = "bfloat16" if a.dtype == ml_dtypes.bfloat16 else str(a.dtype)
        return f"T{list(a.shape)}:{dt}" if a.size > 4 or a.dtype.kind not in "biuf" else \
            f"tensor({a.tolist()!r}, {dt})"
    if isinstance(a, (list, tuple)) and any(isinstance(x, np.ndarray) for x in a):
        inner = ", ".join(_show(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner},)"
    return repr(a)


def reproducer(case) -> str:
    """A one-line call: ``T[3, 4]:float32`` stands for a tensor of that shape and dtype."""
    name = case.key.split("|")[0]
    call = ", ".join([_show(a) for a in case.args] + [f"{k}={_show(v)}" for k, v in case.kwargs.items()])
    return f"{name}({call})"


_NUM = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")


def _report(results, typed, fails, extensions) -> str:
    by = Counter(o for _, o, _ in results)
    lines = [f"{len(results)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
             + f"; {len(typed)} distinct typed errors seen\n\n"
             "Outcomes: **accepts** = pylucid returns where PyTorch raises; **wrong** = another value/dtype/shape; "
             "**bare** = an untyped exception (not pylucid.errors, or raised outside pylucid, or not naming the op); "
             "**crash** = the op failed inside on inputs PyTorch computes (typed on the way out by the declaration); "
             "**warns** = a NumPy RuntimeWarning escapes. One line per (entry, outcome, message pattern), with the "
             "number of cases and one reproducer (`T[3, 4]:float32` = a tensor of that shape and dtype).\n"]
    groups: dict = {}
    central = Counter()
    for c, o, d in fails:
        if o == "bare" and re.search(r"\|arg\d=(None|str|dict|list)$", c.key):
            central[c.family] += 1  # junk in place of a tensor: the declaration's argument check words these
            continue
        k = (c.family, c.key.split("|")[0], o, _NUM.sub("N", d)[:90])
        groups.setdefault(k, []).append((c, d))
    fam_count = Counter(k[0] for k in groups)
    last_fam = None
    for k in sorted(groups, key=lambda k: (_FAMILIES.index(k[0]) if k[0] in _FAMILIES else 99, k[1], k[2])):
        fam, ent, o, _ = k
        if fam != last_fam:
            lines.append(f"\n## {fam} ({fam_count[fam]} groups; {central[fam]} more cases are junk arguments "
                         "that raise bare errors)\n\n")
            last_fam = fam
        rows = groups[k]
        c, d = rows[0]
        lines.append(f"- {o} x{len(rows)}: `{reproducer(c)}` -> {d}\n")
    lines.append(f"\n## extensions: PyTorch refuses, pylucid computes ({len(extensions)} cases, not failures)\n\n")
    ext = Counter(c.key.split("|")[0] for c, _, _ in extensions)
    lines.append(", ".join(f"{n} x{v}" for n, v in sorted(ext.items())) + "\n")
    return "".join(lines)


def main(argv) -> None:
    results = []
    typed = set()
    for case in _all_cases():
        outcome, detail = run_case(case)
        results.append((case, outcome, detail))
        if detail.startswith("typed"):
            typed.add((case.key.split("|")[0], detail))
    fails = [r for r in results if r[1] not in _PASSING]
    extensions = [r for r in results if r[1] == "extension"]
    if "--update-known" in argv:
        KNOWN_FILE.write_text("# cases of tests/test_fuzz.py that fail today (regenerate: python -m tests.test_fuzz "
                              "--update-known)\n" + "".join(f"{c.key}\n" for c, _, _ in fails))
    if "--report" in argv:
        Path(argv[argv.index("--report") + 1]).write_text(_report(results, typed, fails, extensions))
    print(f"{len(results)} cases, {len(fails)} failing, {len(typed)} distinct typed errors")


if __name__ == "__main__":
    main(sys.argv)
