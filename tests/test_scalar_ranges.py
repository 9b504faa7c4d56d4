"""Python numbers converted to a tensor's dtype by the fill functions, against PyTorch 2.13 as the oracle.

One table of values (in range, at the edges, beyond them, NaN/inf, complex, beyond what a PyTorch Scalar holds)
runs through each fill entry point for each dtype: where PyTorch refuses (``RuntimeError`` "cannot be converted
... without overflow") pylucid raises ``ScalarOverflow`` (a ``RuntimeError`` and a ``ValueError``) naming the op;
where PyTorch's argument parser refuses an int (``OverflowError``) so does pylucid; otherwise the values and the
dtype are PyTorch's. Tensors have two elements: PyTorch skips the float16 range check on one-element tensors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid.errors import ScalarOverflow

INT_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]

VALUES = [
    True, False, 0, 1, -1, 2, 127, 128, -128, -129, 255, 256, -255, -256, 32767, 32768, -32769, 65535, 65536,
    2**31 - 1, 2**31, -2**31 - 1, 2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64 - 1, 2**64,
    0.0, -0.0, 0.5, -0.5, 1.5, -1.0, 2.7, -2.7, 127.9, 128.0, -128.9, 255.5, 256.0, 2147483647.5, 1e10, 9.3e18,
    -9.3e18, 2.0**64, 65504.0, 65519.0, 65520.0, 70000.0, 3.3895e38, 3.4e38, 3.5e38, 1e300, float("nan"),
    float("inf"), -float("inf"), 1 + 0j, 1j, 2.5 - 0j, 3.5e38 + 0j, complex(1.0, float("nan")),
]


def _full(lib, dt, v):
    return lib.full((2,), v, dtype=dt)


def _full_like(lib, dt, v):
    return lib.full_like(lib.zeros(2, dtype=dt), v)


def _new_full(lib, dt, v):
    return lib.zeros(1, dtype=dt).new_full((2,), v)


def _fill_(lib, dt, v):
    return lib.zeros(2, dtype=dt).fill_(v)


def _fill(lib, dt, v):
    return lib.fill(lib.zeros(2, dtype=dt), v)


def _masked_fill(lib, dt, v):
    return lib.zeros(2, dtype=dt).masked_fill(lib.tensor([True, False]), v)


def _index_fill(lib, dt, v):
    return lib.zeros(2, dtype=dt).index_fill(0, lib.tensor([0]), v)


FILLS = {"full": _full, "full_like": _full_like, "new_full": _new_full, "fill_": _fill_, "fill": _fill}


def _outcome(lib, call, dtype, value):
    """``("ok", dtype name, first element)`` or ``("err", exception)``."""
    try:
        r = call(lib, getattr(lib, dtype), value)
    except (RuntimeError, ValueError, OverflowError, TypeError) as exc:
        return ("err", exc)
    x = r[0].item()
    if isinstance(x, float) and math.isnan(x):
        x = "nan"
    elif isinstance(x, complex):
        x = tuple("nan" if math.isnan(p) else p for p in (x.real, x.imag))
    return ("ok", str(r.dtype).rsplit(".", 1)[-1], x)


def _mismatches(call, op, dtype, values, err=ScalarOverflow):
    bad = []
    for v in values:
        want, got = _outcome(torch, call, dtype, v), _outcome(pl, call, dtype, v)
        if want[0] == "ok":
            if got != want:
                bad.append((v, want, got))
        elif isinstance(want[1], OverflowError):  # PyTorch's parser: the int does not fit a Scalar
            if not (got[0] == "err" and isinstance(got[1], OverflowError) and str(got[1]).startswith(op)):
                bad.append((v, "OverflowError", got))
        elif "without overflow" in str(want[1]):
            if not (got[0] == "err" and isinstance(got[1], err)
                    and str(got[1]).startswith(f"{op}: value ") and "cannot be converted" in str(got[1])):
                bad.append((v, "ScalarOverflow", got))
        else:
            raise AssertionError(f"unexpected PyTorch error for {op}({dtype}, {v!r}): {want[1]!r}")
    return bad


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(FILLS))
def test_fill_values_convert_as_torch(name, dtype):
    op = "full" if name == "new_full" else name
    assert _mismatches(FILLS[name], op, dtype, VALUES) == []


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", ["masked_fill", "index_fill"])
def test_masked_and_index_fill_values_convert_as_torch(name, dtype):
    """The same table for integer and bool dtypes (real values inside what a PyTorch Scalar holds); these two
    refuse with a plain ``ValueError``."""
    call = _masked_fill if name == "masked_fill" else _index_fill
    values = [v for v in VALUES if not isinstance(v, complex) and not (isinstance(v, int) and abs(v) >= 2**63)
              and v != 2147483647.5]
    assert _mismatches(call, name, dtype, values, ValueError) == []


def test_overflow_is_a_runtime_error_and_a_value_error():
    with pytest.raises(RuntimeError, match=r"^full: value -1\.0 cannot be converted to uint8 without overflow"):
        pl.full((2,), -1.0, dtype=pl.uint8)
    with pytest.raises(ValueError, match=r"^fill_: value 256 cannot be converted to uint8"):
        pl.zeros(2, dtype=pl.uint8).fill_(256)
    assert pl.zeros(2, dtype=pl.uint8).fill_(-1).tolist() == [255, 255]


def test_fill_in_a_graph_converts_too():
    x = pl.zeros(2, requires_grad=True) * 1
    assert x.to(pl.int8).fill_(-1.0).tolist() == [-1, -1]
    with pytest.raises(ScalarOverflow, match=r"^fill_: value 70000\.0 cannot be converted to float16"):
        pl.zeros(2, dtype=pl.float16, requires_grad=True).clone().fill_(70000.0)


@pytest.mark.parametrize("name", sorted(FILLS))
def test_numpy_scalars_convert_as_the_python_numbers(name):
    values = [np.int64(-1), np.uint8(200), np.float32(2.5), np.float64(-1.0), np.bool_(True), np.int64(300)]
    op = "full" if name == "new_full" else name
    for dtype in ("uint8", "int8", "float16", "bool"):
        assert _mismatches(FILLS[name], op, dtype, values) == []
