"""Fill values converted as PyTorch converts them, and error messages that name the op the user called.

PyTorch (CPU) is the oracle: the same call is made in both libraries, and either both give the same values and
dtype, or both raise (pylucid's error an instance of PyTorch's exception type, and naming the op).
"""

from __future__ import annotations

import math

import pytest
import torch

import pylucid

_DTYPES = ["int64", "int32", "int16", "int8", "uint8", "bool", "float16", "bfloat16", "float32", "float64",
           "complex64", "complex128"]
_VALUES = [2 ** 24 + 1, 16777217.0, 2 ** 53 + 1, float(2 ** 53 + 1), -1, -1.0, 300, 2.5, 70000.0, 1e40, -1e40,
           math.nan, math.inf, -math.inf, 1 + 2j, 3 + 0j, 0j, True]


def _fill(lib, op, dtype, value):
    x = lib.zeros(3, dtype=getattr(lib, dtype))
    if op == "masked_fill":
        return x.masked_fill(lib.tensor([True, False, True]), value)
    if op == "index_fill":
        return x.index_fill(0, lib.tensor([1]), value)
    return x.scatter(0, lib.tensor([2]), value)


def _same_as_torch(call, op, *context):
    """``call(torch)`` and ``call(pylucid)`` agree: the same dtype and values (compared as complex128 lists), or
    pylucid raises an instance of PyTorch's exception type whose message starts with ``op``."""
    try:
        want = call(torch)
    except Exception as exc:  # noqa: BLE001 - any PyTorch error: pylucid must raise one of the same type
        with pytest.raises(type(exc), match=rf"^{op}: "):
            call(pylucid)
        return
    got = call(pylucid)
    assert got.dtype.name == str(want.dtype).split(".")[-1], (*context, got.dtype)
    w = [complex(v) for v in want.to(torch.complex128).tolist()]
    g = [complex(v) for v in got.to(pylucid.complex128).tolist()]
    assert str(g) == str(w), (*context, g, w)


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("op", ["masked_fill", "index_fill", "scatter"])
def test_fill_value_converted_as_torch(op, dtype):
    for value in _VALUES:
        _same_as_torch(lambda lib: _fill(lib, op, dtype, value), op, dtype, value)


def _assign(lib, dtype, value, advanced):
    x = lib.zeros(3, dtype=getattr(lib, dtype))
    x[lib.tensor([0, 2]) if advanced else 0] = value
    return x


@pytest.mark.parametrize("dtype", _DTYPES)
def test_setitem_number_converted_as_torch(dtype):
    # PyTorch's setitem takes an int of at most 64 signed bits, and half types without an overflow check
    for value in _VALUES + [2 ** 63, -2 ** 63 - 1, 2 ** 64]:
        for advanced in (False, True):
            _same_as_torch(lambda lib: _assign(lib, dtype, value, advanced), "setitem", dtype, value, advanced)


def test_masked_fill_int64_keeps_every_digit():
    x = pylucid.zeros(2, dtype=pylucid.int64).masked_fill(pylucid.tensor([True, False]), 16777217.0)
    assert x.tolist() == [16777217, 0]
    x = pylucid.zeros(2, dtype=pylucid.int64).masked_fill(pylucid.tensor([True, False]), 2 ** 53 + 1)
    assert x.tolist() == [2 ** 53 + 1, 0]


def test_masked_fill_float_overflow_is_typed():
    with pytest.raises(pylucid.errors.ScalarOverflow, match=r"^masked_fill: value 1e\+40 .*float32"):
        pylucid.zeros(2).masked_fill(pylucid.tensor([True, False]), 1e40)


# ---------------------------------------------------------------- error messages name the op called
def _t(lib, *shape, dtype="float32"):
    return lib.ones(*shape, dtype=getattr(lib, dtype))


#: (id, call on a library, the start of pylucid's message: the op called and what was given)
_ERRORS = [
    ("rand_like-int", lambda L: L.rand_like(_t(L, 3, dtype="int64")), r"^rand_like: .*int64.*accepted: float"),
    ("randn_like-int", lambda L: L.randn_like(_t(L, 3, dtype="int64")), r"^randn_like: .*int64.*accepted: float"),
    ("rand_like-list", lambda L: L.rand_like([1.0, 2.0]), r"^rand_like: input must be a Tensor, got list"),
    ("hardshrink-complex", lambda L: L.nn.functional.hardshrink(_t(L, 3, dtype="complex64")),
     r"^hardshrink: input has dtype complex64; hardshrink accepts float"),
    ("hardshrink-int", lambda L: L.nn.functional.hardshrink(_t(L, 3, dtype="int64")), r"^hardshrink: .*int64"),
    ("logsigmoid-bool", lambda L: L.nn.functional.logsigmoid(_t(L, 3, dtype="bool")),
     r"^logsigmoid: input has dtype bool; logsigmoid accepts float"),
    ("logsigmoid-complex", lambda L: L.nn.functional.logsigmoid(_t(L, 3, dtype="complex64")),
     r"^logsigmoid: input has dtype complex64; logsigmoid accepts float"),
    ("logsigmoid-uint8", lambda L: L.nn.functional.logsigmoid(_t(L, 3, dtype="uint8")), r"^logsigmoid: .*uint8"),
    ("diagonal_scatter-offset-None", lambda L: L.diagonal_scatter(_t(L, 3, 3), _t(L, 3), None),
     r"^diagonal_scatter: offset must be an int, got NoneType"),
    ("diagonal_scatter-offset-float", lambda L: L.diagonal_scatter(_t(L, 3, 3), _t(L, 2), 1.0),
     r"^diagonal_scatter: offset must be an int, got float"),
    ("diagonal_scatter-1d", lambda L: L.diagonal_scatter(_t(L, 3), _t(L, 1)), r"^diagonal_scatter: dim"),
    ("diagonal_scatter-same-dims", lambda L: L.diagonal_scatter(_t(L, 3, 3), _t(L, 3), 0, 1, 1),
     r"^diagonal_scatter: dim1 and dim2"),
    ("diagonal_scatter-shape", lambda L: L.diagonal_scatter(_t(L, 3, 3), _t(L, 2)),
     r"^diagonal_scatter: src of shape \(2,\) .*\(3,\)"),
    ("batch_norm-int", lambda L: L.nn.functional.batch_norm(_t(L, 2, 3, dtype="int64"), _t(L, 3), _t(L, 3)),
     r"^batch_norm: input has dtype int64; batch_norm accepts float"),
    ("batch_norm-bool", lambda L: L.nn.functional.batch_norm(_t(L, 2, 3, dtype="bool"), None, None, training=True),
     r"^batch_norm: input has dtype bool; batch_norm accepts float"),
    ("chebyshev_v-broadcast", lambda L: L.special.chebyshev_polynomial_v(_t(L, 3), _t(L, 2)),
     r"^special\.chebyshev_polynomial_v: input of shape \(3,\) and n of shape \(2,\) cannot be broadcast"),
    ("chain_matmul-shapes", lambda L: L.chain_matmul(_t(L, 2, 3), _t(L, 2, 3)),
     r"^chain_matmul: matrices 0 and 1 of shapes \(2, 3\) and \(2, 3\) cannot be multiplied"),
    ("chain_matmul-1d", lambda L: L.chain_matmul(_t(L, 3), _t(L, 3, 3)), r"^chain_matmul: matrix 0 must be 2-d"),
    ("chain_matmul-one-1d", lambda L: L.chain_matmul(_t(L, 3)), r"^chain_matmul: matrix 0 must be 2-d"),
    ("chain_matmul-none", lambda L: L.chain_matmul(), r"^chain_matmul: expected one or more matrices"),
    ("chain_matmul-dtypes", lambda L: L.chain_matmul(_t(L, 2, 2), _t(L, 2, 2, dtype="float64")),
     r"^chain_matmul: .*float32 .*float64"),
    ("smooth_l1_loss-broadcast", lambda L: L.nn.functional.smooth_l1_loss(_t(L, 3), _t(L, 2)),
     r"^smooth_l1_loss: target of shape \[2\] cannot be broadcast to the input of shape \[3\]"),
    ("smooth_l1_loss-int", lambda L: L.nn.functional.smooth_l1_loss(_t(L, 3, dtype="int64"), _t(L, 3, dtype="int64")),
     r"^smooth_l1_loss: argument 'input' has dtype int64"),
    ("median-complex", lambda L: L.median(_t(L, 3, dtype="complex64")), r"^median: input has dtype complex64"),
    ("median-dim-complex", lambda L: L.median(_t(L, 3, dtype="complex64"), 0), r"^median: input has dtype complex64"),
    ("nanmedian-complex", lambda L: L.nanmedian(_t(L, 3, dtype="complex64")), r"^nanmedian: input has dtype comp"),
    ("nanmedian-dim-complex", lambda L: _t(L, 3, dtype="complex64").nanmedian(0), r"^nanmedian: input has dtype"),
]

#: NumPy's and Python's own wording, which must not reach the user
_LEAKS = ("ufunc", "could not be coerced", "int() argument", "objects cannot be broadcast", "casting rule",
          "median_dim", "multi_dot", "huber_loss", "batch_norm_stats", "neg:", "le:")


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch.chain_matmul is deprecated
@pytest.mark.parametrize("call, match", [c[1:] for c in _ERRORS], ids=[c[0] for c in _ERRORS])
def test_error_names_the_op_called(call, match):
    with pytest.raises(Exception) as want:  # noqa: PT011 - whatever PyTorch raises, pylucid raises its kind
        call(torch)
    kind = RuntimeError if isinstance(want.value, NotImplementedError) else type(want.value)
    with pytest.raises(kind, match=match) as got:
        call(pylucid)
    assert not any(s in str(got.value) for s in _LEAKS), str(got.value)


def test_cbrt_complex_is_refused_by_name():
    # PyTorch has no cbrt; pylucid's is the real cube root and refuses complex input up front
    with pytest.raises(pylucid.errors.DtypeMismatch, match=r"^cbrt: .*complex64 \(complex\); cbrt accepts float"):
        pylucid.cbrt(pylucid.ones(3, dtype=pylucid.complex64))


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch.chain_matmul is deprecated
def test_chain_matmul_values_match_torch():
    a = [[1.0, 2.0], [3.0, 4.0]]
    b = [[0.5, -1.0, 2.0], [1.5, 0.0, -2.0]]
    c = [[1.0], [2.0], [3.0]]
    want = torch.chain_matmul(torch.tensor(a), torch.tensor(b), torch.tensor(c))
    got = pylucid.chain_matmul(pylucid.tensor(a), pylucid.tensor(b), pylucid.tensor(c))
    assert got.tolist() == want.tolist()
    x = pylucid.tensor(a)
    one = pylucid.chain_matmul(x)
    assert one is not x and one.tolist() == a
