"""Conversions between sample data, pylucid tensors and PyTorch tensors for the op suite."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

import pylucid

TORCH_DTYPE = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
    "complex64": torch.complex64, "complex128": torch.complex128, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
TOL = {"float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1.6e-2), "float32": (1e-5, 1.3e-6), "float64": (1e-7, 1e-7),
       "complex64": (1e-5, 1.3e-6), "complex128": (1e-7, 1e-7)}


def is_float_array(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind in "fc"


def cast_sample(a, dtype: str):
    """Cast a floating sample array to the test dtype (complex samples keep their kind)."""
    if not is_float_array(a):
        return a
    if a.dtype.kind == "c":
        return a.astype(np.complex64 if dtype in ("float32", "float16", "bfloat16", "complex64") else np.complex128)
    return a.astype(np.float32).astype(ml_dtypes.bfloat16) if dtype == "bfloat16" else a.astype(dtype)


def to_pl(a, device="cpu", requires_grad=False):
    if isinstance(a, np.ndarray):
        t = pylucid.tensor(a, device=device)
        if requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(a, (list, tuple)) and any(isinstance(x, np.ndarray) for x in a):
        # a list of tensors (``cat``), or an index mixing tensors with slices and ints
        return type(a)(to_pl(x, device, requires_grad and is_float_array(x)) for x in a)
    return a


def to_torch(a, requires_grad=False):
    if isinstance(a, np.ndarray):
        if a.dtype == ml_dtypes.bfloat16:
            t = torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
        else:
            t = torch.from_numpy(a.copy())
        if requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(a, (list, tuple)) and any(isinstance(x, np.ndarray) for x in a):
        return type(a)(to_torch(x, requires_grad and is_float_array(x)) for x in a)
    return a


def pl_to_np(x):
    if isinstance(x, pylucid.Tensor):
        arr = np.asarray(x.detach().cpu()._data)
        if arr.dtype == ml_dtypes.bfloat16 or arr.dtype == np.float16:
            arr = arr.astype(np.float32)
        return arr
    if isinstance(x, (tuple, list)):
        return type(x)(pl_to_np(v) for v in x)
    return x


def torch_to_np(x):
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.float()
        return x.resolve_conj().numpy(force=True)
    if isinstance(x, (tuple, list)):
        return type(x)(torch_to_np(v) for v in x)
    return x


def flat_outputs(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(flat_outputs(o))
        return res
    return [out]


def dtype_name(x) -> str:
    if isinstance(x, pylucid.Tensor):
        return x.dtype.name
    if isinstance(x, torch.Tensor):
        return str(x.dtype).removeprefix("torch.")
    return type(x).__name__


def assert_close(actual, expected, atol, rtol, what=""):
    if actual is None or expected is None:  # functions that work in place and return None
        assert actual is None and expected is None, f"{what}: {actual!r} vs reference {expected!r}"
        return
    a = np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != reference {e.shape}"
    if e.dtype == bool or a.dtype == bool:
        np.testing.assert_array_equal(a, e, err_msg=what)
        return
    np.testing.assert_allclose(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                               e.astype(np.complex128 if e.dtype.kind == "c" else np.float64),
                               atol=atol, rtol=rtol, equal_nan=True, err_msg=what)
