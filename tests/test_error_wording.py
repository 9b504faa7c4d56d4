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


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("op", ["masked_fill", "index_fill", "scatter"])
def test_fill_value_converted_as_torch(op, dtype):
    for value in _VALUES:
        try:
            want = _fill(torch, op, dtype, value)
        except Exception as exc:  # noqa: BLE001 - any PyTorch error: pylucid must raise one of the same type
            with pytest.raises(type(exc), match=rf"^{op}: "):
                _fill(pylucid, op, dtype, value)
            continue
        got = _fill(pylucid, op, dtype, value)
        assert got.dtype.name == str(want.dtype).split(".")[-1], (value, got.dtype)
        w = [complex(v) for v in want.to(torch.complex128).tolist()]
        g = [complex(v) for v in got.to(pylucid.complex128).tolist()]
        assert str(g) == str(w), (op, dtype, value, g, w)


def test_masked_fill_int64_keeps_every_digit():
    x = pylucid.zeros(2, dtype=pylucid.int64).masked_fill(pylucid.tensor([True, False]), 16777217.0)
    assert x.tolist() == [16777217, 0]
    x = pylucid.zeros(2, dtype=pylucid.int64).masked_fill(pylucid.tensor([True, False]), 2 ** 53 + 1)
    assert x.tolist() == [2 ** 53 + 1, 0]


def test_masked_fill_float_overflow_is_typed():
    with pytest.raises(pylucid.errors.ScalarOverflow, match=r"^masked_fill: value 1e\+40 .*float32"):
        pylucid.zeros(2).masked_fill(pylucid.tensor([True, False]), 1e40)
