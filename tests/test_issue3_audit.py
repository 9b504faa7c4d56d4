"""Issue 3 audit: every name the op catalogue lists exists where a PyTorch user looks for it, and one call of
each matches PyTorch.

For every name of every family (unary, binary, comparisons/logical/bitwise, reductions and scans, shape and
layout, indexing and scatter, sorting and selection, linalg and ``pylucid.linalg``, ``pylucid.fft``, complex,
``pylucid.special``, random) the table below checks that it exists as ``pylucid.<name>`` (or in its
namespace), that it is a ``Tensor`` method where ``torch.Tensor`` has one, and calls it once on a small
float64 input against PyTorch: values and dtypes of every output, then the gradient of a fixed real loss of
the floating outputs with respect to every floating input. The method form is called with the same
arguments and compared too.

Also here: complex autograd of the core ops against PyTorch (first and second order), the single ``norm``
primitive behind every vector-norm front end, ``gradcheck`` with empty inputs and outputs that need no
gradient, and the registry count.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pylucid as pl
from pylucid.autograd.gradcheck import gradcheck, gradgradcheck

INF = float("inf")
NAN = float("nan")


def R(*shape, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape)


def C(*shape, seed=0):
    g = np.random.default_rng(seed)
    return g.standard_normal(shape) + 1j * g.standard_normal(shape)


X = R(3, 4)
Y = R(3, 4, seed=1)
POS = R(3, 4, lo=0.3, hi=2.0)
UNIT = R(3, 4, lo=-0.9, hi=0.9)
PROB = R(3, 4, lo=0.05, hi=0.95)
INTS = np.array([[3, -1, 4], [1, -5, 9]])
SPECIALS = np.array([1.0, NAN, INF, -INF, 0.0, -2.5])
SQ = R(3, 3) + 3 * np.eye(3)  # well conditioned
SPD = SQ @ SQ.T + np.eye(3)


@dataclass
class Case:
    """One name of the issue: where it lives and one call of it.

    ``call(m, *tensors)`` runs it with library ``m`` (``pylucid`` or ``torch``); the default is
    ``getattr(namespace, name)(*tensors, **kw)``. ``tcall`` overrides the PyTorch side (names that live in
    ``torch.nn.functional``, documented deviations). NumPy arrays in ``args`` become tensors.
    """

    name: str
    args: tuple = ()
    kw: dict = field(default_factory=dict)
    ns: str = ""
    call: Callable | None = None
    tcall: Callable | None = None
    grad: bool = True
    method: bool = True
    atol: float = 1e-8
    tag: str = ""
    post: Callable[[Any], Any] | None = None


def _ns(m, ns):
    return getattr(m, ns) if ns else m


def _default_call(case):
    def run(m, *a):
        return getattr(_ns(m, case.ns), case.name)(*a, **case.kw)
    return run


def _to(m, a, requires_grad=False):
    if not isinstance(a, np.ndarray):
        return a
    if m is pl:
        t = pl.tensor(a)
        return t.requires_grad_() if requires_grad else t
    return torch.tensor(a, requires_grad=requires_grad)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in _flat(o)]
    return [out]


def _np(o):
    if isinstance(o, pl.Tensor):
        return o.detach().numpy()
    if isinstance(o, torch.Tensor):
        return o.detach().resolve_conj().numpy()
    return o


def _dtype_name(o):
    return str(o.dtype).split(".")[-1]


def _compare(case, out, ref, what):
    outs, refs = _flat(out), _flat(ref)
    assert len(outs) == len(refs), f"{what}: {len(outs)} outputs, PyTorch gives {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        if isinstance(r, torch.Tensor):
            assert isinstance(o, pl.Tensor), f"{what} output {k}: {type(o).__name__}, PyTorch gives a Tensor"
            assert _dtype_name(o) == _dtype_name(r), f"{what} output {k}: dtype {o.dtype} vs PyTorch {r.dtype}"
            assert tuple(o.shape) == tuple(r.shape), f"{what} output {k}: shape {tuple(o.shape)} vs {tuple(r.shape)}"
        a, b = _np(o), _np(r)
        if case.post is not None:
            a, b = case.post(a), case.post(b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=case.atol, rtol=1e-6, equal_nan=True,
                                   err_msg=f"{what} output {k}")


def _loss(m, out):
    """A fixed real loss of the floating outputs: sum of out * w (real part for complex outputs)."""
    total = None
    for k, o in enumerate(_flat(out)):
        is_t = isinstance(o, (pl.Tensor, torch.Tensor))
        if not is_t or not o.requires_grad:
            continue
        w = np.linspace(0.5, 1.5, max(o.numel(), 1))[: o.numel()].reshape(tuple(o.shape)) + 0.1 * k
        term = o * _to(m, w)
        if o.is_complex():
            term = term.real + 0.5 * (o * _to(m, w)).imag
        term = term.sum()
        total = term if total is None else total + term
    return total


def _run_case(case: Case, method: bool = False):
    def with_kw(fn):
        return (lambda m, *a: fn(m, *a, **case.kw)) if fn is not None else None

    call = with_kw(case.call) or _default_call(case)
    tcall = with_kw(case.tcall) or call
    if method:
        def call(m, x, *rest):  # noqa: F811 - the method form with the same arguments
            return getattr(x, case.name)(*rest, **case.kw)
        tcall = call
    pos = [i for i, a in enumerate(case.args) if isinstance(a, np.ndarray) and a.dtype.kind in "fc"]
    want_grad = case.grad and bool(pos)
    pa = [_to(pl, a, want_grad and i in pos) for i, a in enumerate(case.args)]
    ta = [_to(torch, a, want_grad and i in pos) for i, a in enumerate(case.args)]
    what = f"{case.ns + '.' if case.ns else ''}{case.name}{'[' + case.tag + ']' if case.tag else ''}"
    what += " (Tensor method)" if method else ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = call(pl, *pa)
        ref = tcall(torch, *ta)
    _compare(case, out, ref, what)
    if not want_grad:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loss of nan_to_num's huge outputs overflows, in both frameworks
        lt = _loss(torch, ref)
        lp = _loss(pl, out)
    if lt is None:
        assert lp is None, f"{what}: pylucid's output requires grad, PyTorch's does not"
        return
    assert lp is not None, f"{what}: the output does not require grad (PyTorch's does)"
    tg = torch.autograd.grad(lt, [ta[i] for i in pos], allow_unused=True)
    pg = pl.autograd.grad(lp, [pa[i] for i in pos], allow_unused=True)
    for i, g, h in zip(pos, pg, tg):
        if h is None:
            assert g is None or np.allclose(_np(g), 0), f"{what}: gradient for arg {i} where PyTorch has none"
            continue
        assert g is not None, f"{what}: no gradient for arg {i}"
        np.testing.assert_allclose(_np(g), _np(h), atol=1e-7, rtol=1e-6, equal_nan=True,
                                   err_msg=f"{what}: gradient of arg {i}")


# ============================================================================ the table
def _F(name, **fixed):
    """PyTorch reference from torch.nn.functional."""
    return lambda m, *a, **k: getattr(F, name)(*a, **{**fixed, **k})


UNARY_DOMAINS = {
    "log": POS, "log2": POS, "log10": POS, "log1p": POS, "sqrt": POS, "rsqrt": POS, "reciprocal": POS,
    "arcsin": UNIT, "arccos": UNIT, "arctanh": UNIT, "asin": UNIT, "acos": UNIT, "atanh": UNIT, "erfinv": UNIT,
    "arccosh": POS + 1.0, "acosh": POS + 1.0, "logit": PROB,
}
UNARY = ("exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh "
         "arctanh asin acos atan asinh acosh atanh sigmoid logit relu erf erfinv reciprocal rsqrt abs sign floor "
         "ceil round trunc frac").split()
ACTIVATIONS = ("relu6 gelu silu softplus mish elu selu leaky_relu hardtanh hardsigmoid hardswish").split()

CASES: list[Case] = []
CASES += [Case(n, (UNARY_DOMAINS.get(n, X),)) for n in UNARY]
CASES += [Case(n, (X,), tcall=_F(n)) for n in ACTIVATIONS]
CASES += [
    Case("gelu", (X,), {"approximate": "tanh"}, tcall=_F("gelu"), tag="tanh"),
    Case("leaky_relu", (X, 0.2), tcall=_F("leaky_relu"), tag="slope"),
    Case("elu", (X,), {"alpha": 0.5}, tcall=_F("elu"), tag="alpha"),
    Case("softplus", (X,), {"beta": 2.0, "threshold": 3.0}, tcall=_F("softplus"), tag="beta"),
    Case("hardtanh", (X,), {"min_val": -0.5, "max_val": 0.7}, tcall=_F("hardtanh"), tag="bounds"),
    Case("cube", (X,), tcall=lambda m, x: x ** 3),
    Case("cbrt", (X,), tcall=lambda m, x: torch.sign(x) * x.abs() ** (1 / 3)),
    Case("round", (X * 10,), {"decimals": 1}, tag="decimals"),
    Case("clamp", (X,), {"min": -0.5, "max": 0.5}),
    Case("clip", (X,), {"min": -0.5, "max": 0.5}),
    Case("clamp", (X, Y * 0.5 - 0.3, Y * 0.5 + 0.3), tag="tensor-bounds"),
    Case("isnan", (SPECIALS,)), Case("isinf", (SPECIALS,)), Case("isfinite", (SPECIALS,)),
    Case("nan_to_num", (SPECIALS,)), Case("nan_to_num", (SPECIALS,), {"nan": 1.0, "posinf": 9.0, "neginf": -9.0},
                                          tag="values"),
    Case("logit", (PROB,), {"eps": 0.1}, tag="eps"),
    # binary, broadcasting and weak scalars
    *[Case(n, (X, R(4, seed=1))) for n in ("add", "sub", "mul", "maximum", "minimum", "fmax", "fmin", "atan2",
                                           "hypot", "logaddexp")],
    Case("add", (X, Y), {"alpha": 2.0}, tag="alpha"), Case("sub", (X, 1.5), tag="scalar"),
    Case("mul", (2.5, X), method=False, tag="scalar-lhs"),
    Case("div", (X, POS)), Case("div", (X, POS), {"rounding_mode": "floor"}, grad=False, tag="floor"),
    Case("div", (X, POS), {"rounding_mode": "trunc"}, grad=False, tag="trunc"),
    Case("div", (INTS, 2), {"rounding_mode": "floor"}, tag="int-floor"),
    Case("remainder", (X * 3, POS)), Case("fmod", (X * 3, POS)), Case("remainder", (INTS, 3), tag="int"),
    Case("pow", (POS, Y)), Case("pow", (X, 2), tag="scalar-exp"),
    Case("pow", (2.0, X), method=False, tag="scalar-base"),
    Case("copysign", (X, Y)), Case("lerp", (X, Y, 0.3)), Case("lerp", (X, Y, PROB), tag="tensor-weight"),
    Case("maximum", (np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])), tag="ties"),
    Case("minimum", (np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])), tag="ties"),
    # comparisons, logical, bitwise
    *[Case(n, (X, Y)) for n in ("eq", "ne", "lt", "le", "gt", "ge")],
    *[Case(n, (X, 0.0), tag="scalar") for n in ("eq", "lt", "ge")],
    Case("isclose", (X, X + 1e-9)), Case("allclose", (X, X + 1e-9)), Case("equal", (X, X.copy())),
    *[Case(n, (X > 0, Y > 0)) for n in ("logical_and", "logical_or", "logical_xor")],
    Case("logical_not", (X > 0,)), Case("logical_and", (X, Y), tag="float"),
    *[Case(n, (INTS, INTS[::-1] + 2)) for n in ("bitwise_and", "bitwise_or", "bitwise_xor")],
    *[Case(n, (X > 0, Y > 0), tag="bool") for n in ("bitwise_and", "bitwise_or", "bitwise_xor")],
    Case("bitwise_not", (INTS,)), Case("bitwise_not", (X > 0,), tag="bool"),
    # reductions and scans
    Case("sum", (X,)), Case("sum", (X,), {"dim": 1, "keepdim": True}, tag="dim"),
    Case("sum", (INTS.astype(np.int32),), tag="int32->int64"), Case("sum", (X > 0,), tag="bool->int64"),
    Case("prod", (X,)), Case("prod", (X,), {"dim": 0}, tag="dim"), Case("mean", (X,), {"dim": (0, 1)}),
    Case("min", (X,)), Case("max", (X,)), Case("amin", (X,), {"dim": 1}), Case("amax", (X,), {"dim": 0}),
    # one int dim: torch.max(x, dim)'s (values, indices); a Tensor: the element-wise form (X has no ties, so the
    # tie-sharing gradient of the values is PyTorch's too)
    Case("max", (X,), {"dim": 1}, tag="dim"), Case("min", (X,), {"dim": 0}, tag="dim"),
    Case("max", (X, Y), tag="binary"), Case("min", (X, Y), tag="binary"),
    Case("max_with_indices", (X, 1), tcall=lambda m, x, d: torch.max(x, d)),
    Case("min_with_indices", (X, 0), tcall=lambda m, x, d: torch.min(x, d)),
    Case("argmin", (X,), {"dim": 1}), Case("argmax", (X,)),
    Case("var", (X,), {"dim": 1}), Case("var", (X,), {"dim": 1, "correction": 0}, tag="correction"),
    Case("var", (X,), {"dim": 0, "unbiased": False}, tag="unbiased"), Case("std", (X,), {"correction": 2}),
    Case("std", (X,), {"dim": 1, "unbiased": True}, tag="unbiased"),
    Case("var_mean", (X,), {"dim": 1}), Case("std_mean", (X,), {"dim": 0, "correction": 0}),
    Case("logsumexp", (X * 300,), {"dim": 1}),
    *[Case("norm", (X,), {"p": p}, tag=str(p)) for p in (1, 2, INF, "fro")],
    Case("norm", (X,), {"p": 2, "dim": 1}, tag="dim"),
    Case("all", (X > -1.5,)), Case("any", (X > 1.9,), {"dim": 1}), Case("count_nonzero", (X > 0,), {"dim": 0}),
    Case("median", (X,)), Case("median", (X,), {"dim": 1}, tag="dim"),
    Case("mode", (np.array([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 0.0, 0.0]]),), {"dim": 1}),
    Case("nansum", (SPECIALS[[0, 1, 4, 5]],)), Case("nanmean", (SPECIALS[[0, 1, 4, 5]],)),
    Case("cumsum", (X,), {"dim": 1}), Case("cumsum", (INTS.astype(np.int32),), {"dim": 0}, tag="int32"),
    Case("cumprod", (X,), {"dim": 0}), Case("cummax", (X,), {"dim": 1}), Case("cummin", (X,), {"dim": 0}),
    Case("diff", (X,)), Case("diff", (X,), {"n": 2, "dim": 0}, tag="n2"),
    # shape and layout
    Case("reshape", (X, (2, 6))), Case("view", (X, (4, 3)), call=lambda m, x, s: x.view(s), method=False),
    Case("flatten", (R(2, 3, 4),), {"start_dim": 1}), Case("unflatten", (X, 1, (2, 2))),
    Case("squeeze", (R(3, 1, 4),)), Case("squeeze", (R(3, 1, 4),), {"dim": 1}, tag="dim"),
    Case("unsqueeze", (X, 1)),
    Case("expand", (R(3, 1), (3, 4)), call=lambda m, x, s: x.expand(*s), method=False),
    Case("expand_as", (R(3, 1), X), call=lambda m, x, y: x.expand_as(y), method=False),
    Case("broadcast_to", (R(3, 1), (2, 3, 4))), Case("broadcast_tensors", (R(3, 1), R(4, seed=1))),
    Case("permute", (R(2, 3, 4), (2, 0, 1))), Case("transpose", (X, 0, 1)), Case("swapaxes", (X, 0, 1)),
    Case("movedim", (R(2, 3, 4), 0, -1)), Case("t", (X,)),
    Case("cat", (X, Y), call=lambda m, a, b: m.cat([a, b], 1)),
    Case("concatenate", (X, Y), call=lambda m, a, b: m.concatenate([a, b], 0)),
    *[Case(n, (X, Y), call=lambda m, a, b, n=n: getattr(m, n)([a, b])) for n in ("stack", "hstack", "vstack",
                                                                                   "dstack")],
    Case("split", (X, 2), {"dim": 1}), Case("split", (X, [1, 3]), {"dim": 1}, tag="sizes"),
    Case("chunk", (X, 2, 1)), Case("unbind", (X,), {"dim": 1}), Case("tensor_split", (X, 3), {"dim": 1}),
    Case("flip", (X, (0, 1))), Case("fliplr", (X,)), Case("flipud", (X,)),
    Case("roll", (X, 1, 1)), Case("roll", (X, (1, -1), (0, 1)), tag="dims"), Case("rot90", (X, 1, (0, 1))),
    Case("repeat", (R(2, 3), (2, 1, 2)), call=lambda m, x, s: x.repeat(*s), method=False),
    Case("tile", (R(2, 3), (2, 2))), Case("repeat_interleave", (R(2, 3), 2), {"dim": 1}),
    Case("tril", (X,)), Case("triu", (X, 1)), Case("diagonal", (R(3, 3),), {"offset": 1}),
    Case("diag", (R(3, 3),)), Case("diag", (R(3),), tag="vector"), Case("diag_embed", (X,)),
    Case("trace", (R(3, 3),)), Case("narrow", (X, 1, 1, 2)),
    Case("contiguous", (X.T,), call=lambda m, x: x.contiguous(), method=False),
    *[Case("pad", (R(1, 2, 5),), {"pad": (2, 1), "mode": mode}, tcall=_F("pad"), tag=mode)
      for mode in ("constant", "reflect", "replicate", "circular")],
    Case("pad", (X,), {"pad": (1, 1, 2, 0), "value": 0.5}, tcall=_F("pad"), tag="value"),
    Case("meshgrid", (R(3), R(2, seed=1)), call=lambda m, a, b: m.meshgrid(a, b, indexing="ij")),
    Case("meshgrid", (R(3), R(2, seed=1)), call=lambda m, a, b: m.meshgrid(a, b, indexing="xy"), tag="xy"),
    # indexing and scatter
    Case("getitem", (X,), call=lambda m, x: x[1:, ::2], tag="slices"),
    Case("getitem", (R(2, 3, 4),), call=lambda m, x: x[..., None, 1], tag="ellipsis-none"),
    Case("getitem", (X,), call=lambda m, x: x[x > 0], tag="bool-mask"),
    Case("getitem", (X,), call=lambda m, x: x[_to(m, np.array([2, 0, 2])), 1:], tag="int-tensor"),
    Case("getitem", (R(2, 3, 4),), call=lambda m, x: x[_to(m, np.array([1, 0])), :, _to(m, np.array([3, 2]))],
         tag="advanced-split"),
    Case("setitem", (X, R(4, seed=2)), call=lambda m, x, v: _setitem(x, (1,), v)),
    Case("setitem", (X, R(2, seed=2)), call=lambda m, x, v: _setitem(x, (slice(None, 2), 0), v), tag="slice"),
    Case("index_select", (X, 1, np.array([3, 0, 3]))), Case("take", (X, np.array([[0, 11], [5, 5]]))),
    Case("take_along_dim", (X, np.argsort(X, axis=1)), {"dim": 1}),
    Case("gather", (X, 1, np.array([[0, 0], [1, 3], [2, 2]]))),
    Case("scatter", (X, 1, np.array([[0], [2], [1]]), R(3, 1, seed=3))),
    Case("scatter_add", (X, 0, np.array([[0, 1, 2, 0]]), R(1, 4, seed=3))),
    *[Case("scatter_reduce", (X, 1, np.array([[0, 0], [1, 3], [2, 2]]), R(3, 2, seed=3), red), grad=(red != "prod"),
           tag=red) for red in ("sum", "prod", "mean", "amax", "amin")],
    Case("index_add", (X, 0, np.array([0, 2]), R(2, 4, seed=3))),
    Case("index_copy", (X, 0, np.array([2, 0]), R(2, 4, seed=3))),
    Case("index_fill", (X, 1, np.array([1, 3]), -1.0)),
    Case("masked_fill", (X, X > 0, 0.5)), Case("masked_select", (X, X > 0)),
    Case("masked_scatter", (X, X > 0, R(12, seed=4))),
    Case("where", (X > 0, X, Y)), Case("where", (X > 0, X, 0.0), tag="scalar"),
    Case("nonzero", (X > 0,)), Case("argwhere", (X > 0,)),
    Case("one_hot", (np.array([0, 2, 1]),), {"num_classes": 4}, tcall=_F("one_hot")),
    # sorting and selection
    Case("sort", (X,), {"dim": 1}), Case("sort", (X,), {"descending": True, "dim": 0}, tag="descending"),
    Case("argsort", (X,), {"dim": 1}), Case("topk", (X, 2)), Case("topk", (X, 2), {"largest": False}, tag="smallest"),
    Case("kthvalue", (X, 2, 1)), Case("msort", (X,)),
    Case("unique", (np.array([3, 1, 3, 2, 1]),), {"sorted": True, "return_inverse": True, "return_counts": True}),
    Case("unique", (np.array([[1, 2], [1, 2], [0, 5]]),), {"dim": 0}, tag="dim"),
    Case("searchsorted", (np.array([1.0, 3.0, 5.0, 7.0]), np.array([0.0, 3.0, 6.0, 9.0]))),
    Case("searchsorted", (np.array([1.0, 3.0, 5.0]), np.array([3.0, 4.0])), {"right": True}, tag="right"),
    Case("bucketize", (np.array([0.0, 3.0, 6.0, 9.0]), np.array([1.0, 3.0, 5.0, 7.0]))),
    # linear algebra (top level)
    Case("matmul", (R(2, 3, 4), R(4, 2, seed=1))), Case("mm", (X, R(4, 2, seed=1))),
    Case("bmm", (R(2, 3, 4), R(2, 4, 2, seed=1))), Case("mv", (X, R(4, seed=1))),
    Case("dot", (R(4), R(4, seed=1))), Case("vdot", (C(3), C(3, seed=1))), Case("inner", (X, Y)),
    Case("outer", (R(3), R(4, seed=1))), Case("tensordot", (R(2, 3, 4), R(3, 4, 2, seed=1)), {"dims": 2}),
    Case("einsum", (X, Y), call=lambda m, a, b: m.einsum("ij,kj->ik", a, b)),
    Case("kron", (R(2, 2), R(2, 3, seed=1))),
    Case("baddbmm", (R(2, 3, 2), R(2, 3, 4, seed=1), R(2, 4, 2, seed=2)), {"beta": 0.5, "alpha": 2.0}),
    Case("addmm", (R(3, 2), X, R(4, 2, seed=2)), {"beta": 0.5, "alpha": 2.0}),
    Case("cross", (R(4, 3), R(4, 3, seed=1)), {"dim": 1}),
    # complex
    Case("real", (C(3, 2),), method=False), Case("imag", (C(3, 2),), method=False),
    Case("conj", (C(3, 2),)), Case("angle", (C(3, 2),)), Case("abs", (C(3, 2),), tag="complex"),
    Case("view_as_real", (C(3, 2),)), Case("view_as_complex", (R(3, 2),)),
    Case("complex", (X, Y)), Case("polar", (POS, Y)), Case("sgn", (C(3, 2),)),
    Case("real", (C(3, 2),), call=lambda m, z: z.real, tag="property"),
    Case("imag", (C(3, 2),), call=lambda m, z: z.imag, tag="property"),
]


def _setitem(x, idx, v):
    y = x * 1.0
    y[idx] = v
    return y


def _svd_parts(m, a):
    u, s, vh = m.linalg.svd(a, full_matrices=False)
    return (u * s[..., None, :]) @ vh, s, (u @ vh).abs()


def _eigh_parts(m, a):
    w, v = m.linalg.eigh(a)
    return w, (v * w[..., None, :]) @ v.mT


def _qr_parts(m, a):
    q, r = m.linalg.qr(a)
    return q @ r, r.abs(), q.abs()


LINALG = [
    Case("norm", (X,), ns="linalg"), Case("norm", (X,), {"ord": "nuc"}, ns="linalg", tag="nuc"),
    Case("norm", (R(4),), {"ord": 3}, ns="linalg", tag="vector-3"),
    *[Case("vector_norm", (X,), {"ord": o, "dim": 1}, ns="linalg", tag=str(o)) for o in (1, 2, 0.5, INF, -INF)],
    *[Case("matrix_norm", (R(2, 3, 4),), {"ord": o}, ns="linalg", tag=str(o)) for o in ("fro", "nuc", 2, 1, INF)],
    Case("det", (SQ,), ns="linalg"), Case("slogdet", (SQ,), ns="linalg"), Case("inv", (SQ,), ns="linalg"),
    Case("solve", (SQ, R(3, 2, seed=1)), ns="linalg"), Case("cholesky", (SPD,), ns="linalg", atol=1e-7),
    Case("qr", (R(4, 3),), ns="linalg", call=_qr_parts, atol=1e-7),
    Case("svd", (R(4, 3),), ns="linalg", call=_svd_parts, atol=1e-7),
    Case("svdvals", (R(4, 3),), ns="linalg"),
    Case("eigh", (SPD,), ns="linalg", call=_eigh_parts, atol=1e-7), Case("eigvalsh", (SPD,), ns="linalg"),
    Case("lstsq", (R(5, 3), R(5, 2, seed=1)), ns="linalg", call=lambda m, a, b: m.linalg.lstsq(a, b).solution,
         atol=1e-7),
    Case("pinv", (R(4, 3),), ns="linalg", atol=1e-7), Case("matrix_power", (SQ / 4, 3), ns="linalg"),
    Case("matrix_power", (SQ, -2), ns="linalg", tag="negative"), Case("matrix_exp", (X[:3, :3],), ns="linalg"),
    Case("solve_triangular", (np.triu(SQ), R(3, 2, seed=1)), {"upper": True}, ns="linalg"),
    Case("lu_factor", (SQ,), ns="linalg", grad=False),
]

FFT = [
    *[Case(n, (C(8),), {"norm": nm}, ns="fft", tag=str(nm)) for n in ("fft", "ifft") for nm in (None, "ortho",
                                                                                              "forward")],
    Case("rfft", (R(8),), {"norm": "ortho"}, ns="fft"), Case("irfft", (C(5),), {"n": 8}, ns="fft"),
    Case("fft2", (C(4, 6),), ns="fft"), Case("ifft2", (C(4, 6),), {"norm": "forward"}, ns="fft"),
    Case("rfft2", (R(4, 6),), ns="fft"), Case("irfft2", (C(4, 4),), {"s": (4, 6)}, ns="fft"),
    Case("fftn", (C(2, 3, 4),), {"dim": (0, 2)}, ns="fft"), Case("ifftn", (C(2, 3, 4),), ns="fft"),
    Case("rfftn", (R(2, 3, 4),), ns="fft"), Case("irfftn", (C(2, 3, 3),), {"s": (3, 4), "dim": (1, 2)}, ns="fft"),
    Case("fftfreq", (5,), {"d": 0.5}, ns="fft"), Case("rfftfreq", (6,), ns="fft"),
    Case("fftshift", (R(3, 4),), ns="fft"), Case("ifftshift", (R(3, 5),), {"dim": 1}, ns="fft"),
]

SPECIAL = [
    *[Case(n, (X,), ns="special") for n in ("erf", "erfc", "expit", "gammaln", "digamma", "i0", "sinc")],
    Case("erfinv", (UNIT,), ns="special"), Case("logit", (PROB,), ns="special"),
    Case("gammaln", (POS,), ns="special", tag="positive"), Case("digamma", (POS,), ns="special", tag="positive"),
    Case("polygamma", (1, POS), ns="special"), Case("xlogy", (X, POS), ns="special"),
    Case("xlogy", (np.array([0.0, 0.0, 1.0]), np.array([0.0, 2.0, 3.0])), ns="special", tag="zero-x"),
    Case("log_softmax", (X * 500,), {"dim": 1}, ns="special"), Case("softmax", (X,), {"dim": 0}, ns="special"),
    Case("ndtri", (PROB,), ns="special"), Case("logsumexp", (X,), {"dim": 1}, ns="special"),
    Case("entr", (np.array([0.0, 0.5, 1.0, 2.0, -1.0]),), ns="special"),
]


# torch.Tensor methods whose argument conventions differ from the function's on purpose, or that PyTorch
# spells differently; each is checked by an explicit case above or below instead
_NO_METHOD_CALL = {"split", "t", "unique", "where", "one_hot", "gather", "scatter", "scatter_add", "scatter_reduce",
                   "index_select", "index_add", "index_copy", "index_fill", "take_along_dim", "searchsorted"}

ALL = CASES + LINALG + FFT + SPECIAL


def _case_id(c):
    return f"{c.ns + '.' if c.ns else ''}{c.name}{'-' + c.tag if c.tag else ''}"


def _resolve(c):
    if c.name in ("getitem", "setitem"):
        return getattr(pl.Tensor, f"__{c.name}__")
    return getattr(_ns(pl, c.ns), c.name)


@pytest.mark.parametrize("case", ALL, ids=[_case_id(c) for c in ALL])
def test_name_exists_and_matches_torch(case):
    fn = _resolve(case)  # AttributeError names what is missing
    assert callable(fn)
    _run_case(case)


METHOD_CASES = [c for c in CASES if c.method and not c.ns and c.name not in _NO_METHOD_CALL
                and hasattr(torch.Tensor, c.name) and c.call is None and c.tcall is None
                and isinstance(c.args[0], np.ndarray)]


@pytest.mark.parametrize("case", METHOD_CASES, ids=[_case_id(c) for c in METHOD_CASES])
def test_tensor_method_matches_torch(case):
    assert hasattr(pl.Tensor, case.name), f"Tensor.{case.name} is missing (torch.Tensor has it)"
    _run_case(case, method=True)


#: every name the issue lists, by family; torch.Tensor methods of the same name must exist on pylucid.Tensor
ISSUE_NAMES = {
    "": ("exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh "
         "arctanh asin acos atan asinh acosh atanh sigmoid logit relu relu6 gelu silu softplus mish elu selu "
         "leaky_relu hardtanh hardsigmoid hardswish erf erfinv reciprocal rsqrt cube cbrt abs sign floor ceil round "
         "trunc frac clamp clip isnan isinf isfinite nan_to_num "
         "add sub mul div remainder fmod pow maximum minimum fmax fmin atan2 hypot copysign logaddexp lerp "
         "eq ne lt le gt ge isclose allclose equal logical_and logical_or logical_xor logical_not bitwise_and "
         "bitwise_or bitwise_xor bitwise_not "
         "sum prod mean min max amin amax argmin argmax var std var_mean std_mean logsumexp norm all any "
         "count_nonzero median mode nansum nanmean cumsum cumprod cummax cummin diff max_with_indices "
         "min_with_indices "
         "reshape view flatten unflatten squeeze unsqueeze expand expand_as broadcast_to broadcast_tensors permute "
         "transpose swapaxes movedim t cat concatenate stack hstack vstack dstack split chunk unbind tensor_split "
         "flip fliplr flipud roll rot90 repeat tile repeat_interleave tril triu diagonal diag diag_embed trace "
         "narrow contiguous pad meshgrid "
         "index_select take take_along_dim gather scatter scatter_add scatter_reduce index_add index_copy "
         "index_fill masked_fill masked_select masked_scatter where nonzero argwhere one_hot "
         "sort argsort topk kthvalue unique searchsorted bucketize msort "
         "matmul mm bmm mv dot vdot inner outer tensordot einsum kron baddbmm addmm cross "
         "real imag conj angle view_as_real view_as_complex "
         "rand randn randint randperm normal bernoulli multinomial manual_seed Generator").split(),
    "linalg": ("norm vector_norm matrix_norm det slogdet inv solve cholesky qr svd svdvals eigh eigvalsh lstsq "
               "pinv matrix_power matrix_exp solve_triangular lu_factor").split(),
    "fft": ("fft ifft rfft irfft fft2 ifft2 rfft2 irfft2 fftn ifftn rfftn irfftn fftfreq rfftfreq fftshift "
            "ifftshift").split(),
    "special": ("erf erfc erfinv expit logit gammaln digamma polygamma i0 xlogy log_softmax softmax logsumexp "
                "entr sinc").split(),
}


def test_every_issue_name_exists_with_its_tensor_method():
    missing = [f"pylucid{'.' + ns if ns else ''}.{n}" for ns, names in ISSUE_NAMES.items() for n in names
               if not hasattr(_ns(pl, ns), n)]
    assert not missing, f"missing: {missing}"
    no_method = [n for n in ISSUE_NAMES[""] if hasattr(torch.Tensor, n) and not hasattr(pl.Tensor, n)]
    no_method += [n for n in ("uniform_", "normal_", "exponential_", "bernoulli_", "random_")
                  if not hasattr(pl.Tensor, n)]
    assert not no_method, f"Tensor methods missing (torch.Tensor has them): {no_method}"
    aliases = "asin acos atan asinh acosh atanh arctan2 clip absolute negative multiply divide subtract true_divide"
    missing = [n for n in aliases.split() if hasattr(torch, n) and not hasattr(pl, n)]
    assert not missing, f"PyTorch aliases missing: {missing}"
    covered = {c.name for c in ALL if not c.ns} | {"rand", "randn", "randint", "randperm", "normal", "bernoulli",
                                                   "multinomial", "manual_seed", "Generator"}
    assert not set(ISSUE_NAMES[""]) - covered, f"names without a call in the table: {set(ISSUE_NAMES['']) - covered}"
    for ns in ("linalg", "fft", "special"):
        called = {c.name for c in ALL if c.ns == ns}
        assert not set(ISSUE_NAMES[ns]) - called, f"{ns}: names without a call: {set(ISSUE_NAMES[ns]) - called}"


def test_max_over_one_dim_and_max_with_indices():
    x = pl.tensor(X)
    vals, idx = x.max(dim=1)  # PyTorch's (values, indices) named tuple
    ref = torch.tensor(X).max(dim=1)
    np.testing.assert_array_equal(vals.numpy(), ref.values.numpy())
    np.testing.assert_array_equal(idx.numpy(), ref.indices.numpy())
    v, i = pl.max_with_indices(x, 1)
    np.testing.assert_array_equal(i.numpy(), ref.indices.numpy())


# ============================================================================ random
@pytest.mark.parametrize("name,call", [
    ("rand", lambda g: pl.rand(2, 3, generator=g)),
    ("randn", lambda g: pl.randn(2, 3, generator=g)),
    ("randint", lambda g: pl.randint(0, 10, (2, 3), generator=g)),
    ("randint-high-only", lambda g: pl.randint(10, (2, 3), generator=g)),
    ("randperm", lambda g: pl.randperm(6, generator=g)),
    ("normal", lambda g: pl.normal(0.0, 2.0, (2, 3), generator=g)),
    ("normal-tensors", lambda g: pl.normal(pl.zeros(2, 3), pl.ones(2, 3), generator=g)),
    ("bernoulli", lambda g: pl.bernoulli(pl.full((2, 3), 0.5), generator=g)),
    ("multinomial", lambda g: pl.multinomial(pl.tensor([0.2, 0.3, 0.5]), 2, generator=g)),
    ("uniform_", lambda g: pl.empty(2, 3).uniform_(-1, 1, generator=g)),
    ("normal_", lambda g: pl.empty(2, 3).normal_(0, 1, generator=g)),
    ("exponential_", lambda g: pl.empty(2, 3).exponential_(2.0, generator=g)),
])
def test_random_reproducible_and_shaped_like_torch(name, call):
    a = call(pl.Generator().manual_seed(7))
    b = call(pl.Generator().manual_seed(7))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    pl.manual_seed(3)
    c = call(None)
    pl.manual_seed(3)
    d = call(None)
    np.testing.assert_array_equal(c.numpy(), d.numpy())
    torch_calls = {
        "rand": lambda: torch.rand(2, 3), "randn": lambda: torch.randn(2, 3),
        "randint": lambda: torch.randint(0, 10, (2, 3)), "randint-high-only": lambda: torch.randint(10, (2, 3)),
        "randperm": lambda: torch.randperm(6), "normal": lambda: torch.normal(0.0, 2.0, (2, 3)),
        "normal-tensors": lambda: torch.normal(torch.zeros(2, 3), torch.ones(2, 3)),
        "bernoulli": lambda: torch.bernoulli(torch.full((2, 3), 0.5)),
        "multinomial": lambda: torch.multinomial(torch.tensor([0.2, 0.3, 0.5]), 2),
        "uniform_": lambda: torch.empty(2, 3).uniform_(-1, 1), "normal_": lambda: torch.empty(2, 3).normal_(0, 1),
        "exponential_": lambda: torch.empty(2, 3).exponential_(2.0),
    }
    ref = torch_calls[name]()
    assert tuple(a.shape) == tuple(ref.shape) and _dtype_name(a) == _dtype_name(ref), name
    if name == "randperm":
        assert sorted(a.tolist()) == list(range(6))
    if name in ("randint", "randint-high-only"):
        assert 0 <= a.min().item() and a.max().item() < 10


# ============================================================================ complex autograd (issue 3, item 3)
Z = C(3)
W = C(3, seed=1)
A = C(2, 3, seed=2)
B = C(3, 2, seed=3)

COMPLEX_LOSSES = [
    ("mul-abs", lambda m, z, w: (z * w).abs().sum(), (Z, W)),
    ("mul-scalar", lambda m, z: (z * (2 - 1j)).imag.sum(), (Z,)),
    ("div-abs", lambda m, z, w: (z / w).abs().sum(), (Z, W)),
    ("div-scalar-lhs", lambda m, z: ((1 + 2j) / z).real.sum(), (Z,)),
    ("pow-abs", lambda m, z, w: (z ** w).abs().sum(), (Z, W)),
    ("pow-scalar", lambda m, z: (z ** 2.5).imag.sum(), (Z,)),
    ("pow-real-base", lambda m, x, w: (x ** w).imag.sum(), (R(3, lo=0.5, hi=2), W)),
    ("matmul-real", lambda m, a, b: (a @ b).real.sum(), (A, B)),
    ("matmul-abs", lambda m, a, b: (a @ b).abs().sum(), (A, B)),
    ("matmul-vec", lambda m, a, z: (a @ z).imag.sum(), (A, Z)),
    ("mv", lambda m, a, z: m.mv(a, z).abs().sum(), (A, Z)),
    ("abs", lambda m, z: z.abs().sum(), (Z,)),
    ("real-times-complex", lambda m, x, w: (x * w).abs().sum(), (R(3), W)),
    ("cast-real-to-complex", lambda m, x: (x.to(m.complex128) * (1 + 2j)).imag.sum(), (R(3),)),
    ("prod", lambda m, z: m.prod(z).abs(), (Z,)),
    ("mean-sum", lambda m, z: (z * z).mean().abs() + (z * z).sum().real, (Z,)),
    *[(f, lambda m, z, f=f: getattr(m, f)(z).imag.sum() + getattr(m, f)(z).abs().sum(), (Z,))
      for f in ("exp", "log", "sin", "cos", "sqrt", "square", "reciprocal", "rsqrt", "tanh", "sigmoid", "tan",
                "sinh", "cosh", "expm1", "log1p", "log2", "log10", "exp2", "asin", "acos", "atan", "asinh",
                "acosh", "atanh", "sgn")],
]


def _complex_pair(fn, arrays):
    pa = [pl.tensor(a, requires_grad=True) for a in arrays]
    ta = [torch.tensor(a, requires_grad=True) for a in arrays]
    return fn(pl, *pa), fn(torch, *ta), pa, ta


@pytest.mark.parametrize("name,fn,arrays", COMPLEX_LOSSES, ids=[c[0] for c in COMPLEX_LOSSES])
def test_complex_autograd_first_and_second_order(name, fn, arrays):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning, no overflow: the conjugates are exact
        lp, lt, pa, ta = _complex_pair(fn, arrays)
        np.testing.assert_allclose(lp.item(), lt.item(), rtol=1e-10)
        pg = pl.autograd.grad(lp, pa, create_graph=True)
        tg = torch.autograd.grad(lt, ta, create_graph=True)
        for g, h in zip(pg, tg):
            assert g.dtype == (pl.complex128 if h.is_complex() else pl.float64), f"{name}: gradient dtype {g.dtype}"
            np.testing.assert_allclose(g.detach().numpy(), h.detach().resolve_conj().numpy(), rtol=1e-9, atol=1e-12)

        # second order: a real loss of the (complex) gradients
        def second(m, gs):
            total = 0
            for g in gs:
                total = total + (g * g.conj()).real.sum() + 0.3 * g.real.sum()
                if g.is_complex():
                    total = total + 0.7 * g.imag.sum()
            return total

        sp, st = second(pl, pg), second(torch, tg)
        if not st.requires_grad:  # a linear function: constant gradients
            assert not sp.requires_grad
            return
        pgg = pl.autograd.grad(sp, pa, allow_unused=True)
        tgg = torch.autograd.grad(st, ta, allow_unused=True)
        for g, h in zip(pgg, tgg):
            assert (g is None) == (h is None)
            if g is not None:
                np.testing.assert_allclose(g.numpy(), h.resolve_conj().numpy(), rtol=1e-8, atol=1e-10)


def test_complex_fast_paths_match_graph_formulas():
    from pylucid._state import state

    for name, fn, arrays in COMPLEX_LOSSES:
        grads = []
        for force in (False, True):
            state.force_graph_backward = force
            try:
                lp, _, pa, _ = _complex_pair(fn, arrays)
                grads.append([g.numpy() for g in pl.autograd.grad(lp, pa)])
            finally:
                state.force_graph_backward = False
        for a, b in zip(*grads):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=name)


def test_complex_to_real_cast_keeps_real_part_and_warns_like_torch():
    z = pl.tensor(Z, requires_grad=True)
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        y = z.to(pl.float64)
    np.testing.assert_array_equal(y.detach().numpy(), Z.real)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (g,) = pl.autograd.grad((y * y).sum(), z)
    np.testing.assert_allclose(g.numpy(), 2 * Z.real + 0j)


def test_real_dtype_behaviour_unchanged_by_the_complex_convention():
    # the conjugates are identities on real dtypes: each gradient is bit-identical to the real formula
    def grads(fn):
        x, y = pl.tensor(X, requires_grad=True), pl.tensor(Y + 3, requires_grad=True)
        return [g.numpy() for g in pl.autograd.grad(fn(x, y).sum(), [x, y])]

    ones = np.ones((3, 4))
    for fn, want in [
        (lambda x, y: x * y, [Y + 3, X]),
        (lambda x, y: x / y, [ones / (Y + 3), -(ones * X) / ((Y + 3) * (Y + 3))]),
        (lambda x, y: pl.exp(x) + pl.log(y), [ones * np.exp(X), ones / (Y + 3)]),
        (lambda x, y: pl.sin(x) * 1.0 + pl.sqrt(y), [ones * np.cos(X), ones / (2 * np.sqrt(Y + 3))]),
        (lambda x, y: x @ y.T, [np.ones((3, 3)) @ (Y + 3), np.ones((3, 3)).T @ X]),
    ]:
        for g, w in zip(grads(fn), want):
            np.testing.assert_array_equal(g, w)


# ============================================================================ one norm primitive (item 2)
@pytest.mark.parametrize("front", ["pylucid.norm", "Tensor.norm", "linalg.vector_norm", "linalg.norm",
                                   "ops.reduction.norm", "matrix_norm-fro"])
def test_every_vector_norm_front_end_runs_the_registered_norm_op(front):
    x = pl.tensor(X, requires_grad=True)
    out = {"pylucid.norm": lambda: pl.norm(x), "Tensor.norm": lambda: x.norm(),
           "linalg.norm": lambda: pl.linalg.norm(x), "linalg.vector_norm": lambda: pl.linalg.vector_norm(x),
           "ops.reduction.norm": lambda: pl.ops.reduction.norm(x),
           "matrix_norm-fro": lambda: pl.linalg.matrix_norm(x)}[front]()
    assert type(out.grad_fn) is pl.ops.op_class("norm")
    assert "vector_norm" not in pl.ops.list_ops()
    np.testing.assert_allclose(out.item(), np.linalg.norm(X))


NORM_CALLS = {
    "norm": lambda m, x: m.norm(x), "l2": lambda m, x: m.linalg.vector_norm(x),
    "l1": lambda m, x: m.linalg.vector_norm(x, ord=1), "l3": lambda m, x: m.linalg.vector_norm(x, 3),
    "inf": lambda m, x: m.linalg.vector_norm(x, INF), "l0.5": lambda m, x: m.linalg.vector_norm(x, 0.5),
}


@pytest.mark.parametrize("which", list(NORM_CALLS))
def test_norm_zero_vector_and_complex_like_torch(which):
    fn = NORM_CALLS[which]
    for arr in (np.zeros(4), np.array([0.0, 3.0, -4.0, 0.0]), C(4), np.array([0j, 3 - 4j, 1j])):
        x, xt = pl.tensor(arr, requires_grad=True), torch.tensor(arr, requires_grad=True)
        y, yt = fn(pl, x), fn(torch, xt)
        assert _dtype_name(y) == _dtype_name(yt)
        np.testing.assert_allclose(y.item(), yt.item())
        (g,) = pl.autograd.grad(y, x, create_graph=True)
        (gt,) = torch.autograd.grad(yt, xt, create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), atol=1e-12, equal_nan=True)
        (g_fast,) = pl.autograd.grad(fn(pl, x), x)  # first order: the fast path
        np.testing.assert_allclose(g_fast.numpy(), gt.detach().numpy(), atol=1e-12, equal_nan=True)
        # second derivatives of real inputs; p < 1 at x == 0 is singular: PyTorch gives NaN there, pylucid 0
        # (docs/semantics/reductions.md), so that case compares the nonzero entries only
        if arr.any() and not np.iscomplexobj(arr) and which != "inf":
            (gg,) = pl.autograd.grad(g.sum(), x)
            (ggt,) = torch.autograd.grad(gt.sum(), xt)
            keep = arr != 0 if which == "l0.5" else slice(None)
            np.testing.assert_allclose(gg.numpy()[keep], ggt.numpy(force=True)[keep], atol=1e-10, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_norm_half_precision_accumulates_in_float32(dtype):
    x = pl.full((4096,), 300.0, dtype=getattr(pl, dtype))  # sum of squares overflows float16
    y = pl.linalg.vector_norm(x)
    assert y.dtype == getattr(pl, dtype)
    assert np.isfinite(float(y.item())) and abs(float(y.item()) - 300.0 * 64) / (300.0 * 64) < 1e-2


# ============================================================================ gradcheck (item 4)
def test_gradcheck_with_empty_input_and_outputs_that_need_no_gradient():
    x = pl.tensor(np.zeros((0, 3)), dtype=pl.float64, requires_grad=True)
    w = pl.tensor(np.ones(3), dtype=pl.float64, requires_grad=True)
    fns = [
        lambda x, w: (x.sum(0) * w, x.detach().sum(0)),  # an output that does not require grad
        lambda x, w: (w * 2, x.detach()),  # an empty output that does not require grad
        lambda x, w: (x.sum(0) * w, pl.argmax(w)),  # an integer output
        lambda x, w: (x * w,),  # an empty output
        lambda x, w: (w * w, x.detach().sum(0), 3),  # a Python number
    ]
    for fn in fns:
        assert gradcheck(fn, (x, w))
        assert gradgradcheck(fn, (x, w))


def test_gradcheck_still_catches_a_wrong_gradient_next_to_a_constant_output():
    class Wrong(pl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = pl.tensor([1.0, 2.0], dtype=pl.float64, requires_grad=True)
    assert not gradcheck(lambda x: (Wrong.apply(x), x.detach() + 1), (x,), raise_exception=False)


# ============================================================================ registry
def test_list_ops_is_the_registry():
    ops = pl.ops.list_ops()
    assert len(ops) == len(set(ops)) and len(ops) >= 200
    for name in ops:
        assert pl.ops.schema(name).name == name
    primitives = ("exp expm1 log1p sigmoid tanh relu gelu erf erfinv abs pow maximum minimum atan2 hypot logaddexp "
                  "lerp clamp where prod var logsumexp norm cumsum cumprod sort topk matmul dot einsum det inv svd "
                  "eigh qr cholesky fft_c2c fft_r2c fft_c2r real imag conj angle view_as_real view_as_complex").split()
    missing = [p for p in primitives if p not in ops]
    assert not missing, f"expected registered ops: {missing}"


def test_cumprod_complex_gradient_matches_torch():
    """cumprod's backward conjugates the local derivative for complex inputs (with and without zeros)."""
    import torch

    from pylucid._state import state

    rng = np.random.default_rng(0)
    for zeros in (False, True):
        z = rng.standard_normal(5) + 1j * rng.standard_normal(5)
        if zeros:
            z[2] = 0
        zt = torch.tensor(z, requires_grad=True)
        torch.cumprod(zt, 0).abs().sum().backward()
        for force_graph in (False, True):
            state.force_graph_backward = force_graph
            try:
                zp = pl.tensor(z, dtype=pl.complex128, requires_grad=True)
                pl.cumprod(zp, 0).abs().sum().backward()
            finally:
                state.force_graph_backward = False
            np.testing.assert_allclose(zp.grad.numpy(), zt.grad.numpy(), rtol=1e-10, atol=1e-12)
