"""``linspace`` and ``logspace`` against PyTorch 2.13's CPU values, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pylucid as pl


def _bounds(rng, kind):
    """(start, end) pairs of several kinds: moderate floats, ints, very different magnitudes, wide exponents."""
    r = rng.integers(4)
    if kind == "log":
        return float(rng.uniform(-30, 30)), float(rng.uniform(-30, 30))
    if r == 0:
        return float(rng.uniform(-100, 100)), float(rng.uniform(-100, 100))
    if r == 1:
        return int(rng.integers(-60, 60)), int(rng.integers(-60, 60))
    if r == 2:
        return float(rng.uniform(-1e4, 1e4)), float(rng.uniform(-1, 1))
    return tuple(float(rng.uniform(-1, 1) * 10.0 ** rng.integers(-30, 4)) for _ in range(2))


STEPS = [2, 3, 4, 5, 7, 10, 33, 100, 257, 1000]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int16", "uint8",
                                   "complex64", "complex128"])
def test_linspace_equals_torch_bit_for_bit(dtype):
    rng = np.random.default_rng(sum(map(ord, dtype)))
    bad = []
    for _ in range(150):
        start, end = _bounds(rng, "lin")
        if dtype == "uint8":
            start, end = abs(start) % 256, abs(end) % 256
        elif dtype == "int16":
            start, end = start % 30000, -end % 30000
        elif dtype.startswith("complex") and rng.random() < 0.7:
            start, end = complex(start, rng.uniform(-9, 9)), complex(end, rng.uniform(-9, 9))
        steps = int(rng.choice(STEPS))
        want = torch.linspace(start, end, steps, dtype=getattr(torch, dtype))
        got = pl.linspace(start, end, steps, dtype=getattr(pl, dtype))
        w, g = (want.float().numpy(), got.float().numpy()) if dtype == "bfloat16" else (want.numpy(), got.numpy())
        if got.dtype is not getattr(pl, dtype) or not np.array_equal(w, g):
            bad.append((start, end, steps))
    assert bad == []


@pytest.mark.parametrize("args", [(0, 1, 0), (0, 1, 1), (-1, 5, 3), (-1, 5, 1), (0, 10, 5), (1 + 2j, 3, 4),
                                  (2.7, -3.9, 4), (0.0, float("inf"), 3), (float("nan"), 1.0, 3), (3.5, 2, 1)])
@pytest.mark.parametrize("dtype", [None, "uint8", "int64", "float16", "float32"])
def test_linspace_edge_cases_as_torch(args, dtype):
    kw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    try:
        want = torch.linspace(*args, **kw)
    except RuntimeError:
        with pytest.raises(RuntimeError, match=r"^linspace: "):
            pl.linspace(*args, **({} if dtype is None else {"dtype": getattr(pl, dtype)}))
        return
    got = pl.linspace(*args, **({} if dtype is None else {"dtype": getattr(pl, dtype)}))
    assert str(got.dtype).rsplit(".", 1)[-1] == str(want.dtype).rsplit(".", 1)[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_linspace_of_many_steps_and_of_bool():
    for dtype, n in (("float16", 70000), ("float32", 100003), ("float64", 100003)):
        want = torch.linspace(-3.1, 2.5, n, dtype=getattr(torch, dtype)).numpy()
        np.testing.assert_array_equal(pl.linspace(-3.1, 2.5, n, dtype=getattr(pl, dtype)).numpy(), want)
    with pytest.raises(TypeError, match=r"^linspace: dtype bool is not supported"):
        pl.linspace(0, 1, 3, dtype=pl.bool)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32"])
def test_logspace_equals_torch_bit_for_bit(dtype):
    rng = np.random.default_rng(sum(map(ord, dtype)) + 1)
    bad = []
    for _ in range(100):
        start, end = _bounds(rng, "log")
        if dtype in ("float16", "bfloat16", "int32"):
            start, end = start / 4, end / 4  # inside the dtype's range
        steps = int(rng.choice(STEPS))
        base = float(rng.choice([10.0, 2.0, 2.5, math.e]))
        want = torch.logspace(start, end, steps, base=base, dtype=getattr(torch, dtype))
        got = pl.logspace(start, end, steps, base=base, dtype=getattr(pl, dtype))
        w, g = (want.float().numpy(), got.float().numpy()) if dtype == "bfloat16" else (want.numpy(), got.numpy())
        if not np.array_equal(w, g):
            bad.append((start, end, steps, base))
    assert bad == []


def test_complex_logspace_is_close_to_torch():
    """A documented deviation: complex logspace is computed in complex128 (PyTorch: the dtype's complex pow)."""
    for dtype in ("complex64", "complex128"):
        want = torch.logspace(1 + 2j, -2 + 0.5j, 9, base=2.5, dtype=getattr(torch, dtype))
        got = pl.logspace(1 + 2j, -2 + 0.5j, 9, base=2.5, dtype=getattr(pl, dtype))
        assert got.dtype is getattr(pl, dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5 if dtype == "complex64" else 1e-12)
