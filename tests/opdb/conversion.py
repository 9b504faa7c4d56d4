"""Op-database entries for the conversions (``pylucid/ops/conversion.py``): casts, copies, device moves and the
in-place writes ``fill_``/``zero_``/``copy_``."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from tests.opdb import C, ErrorInput, OpEntry, Sample, U, noncontig, unary_samples
from tests.optest_utils import TORCH_DTYPE


def _torch_cast(x, dtype):
    return x.to(TORCH_DTYPE[dtype.name])


def _cast_samples():
    return [Sample((U(3, 4), pl.float64), name="to-float64"),
            Sample((U(3, 4), pl.float32), name="to-float32", gradcheck=False),  # float32 rounding beats the step
            Sample((U(2, 3), pl.float16), name="to-float16", gradcheck=False),
            Sample((U(3, 4) * 3, pl.int64), name="to-int64"),
            Sample((np.array([1, 2]), pl.float32), name="int", gradcheck=False),
            Sample((np.array([0, 2]), pl.bool), name="int-to-bool"),
            Sample((U(3) * 4, pl.complex128), name="real-to-complex"),
            # the real part is kept, with PyTorch's warning; its gradient is complex again
            Sample((C(3), pl.float64), name="complex-to-real")]


def _quiet_cast(x, dtype):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # complex -> real: checked once in error_inputs
        return pl.cast(x, dtype)


ENTRIES = [
    OpEntry("astype", _quiet_cast, _torch_cast, _cast_samples, amp=False, rtol=1e-6,
            error_inputs=lambda: [ErrorInput(([1.0], pl.float64), exc=TypeError, match="astype: expected a Tensor")]),
    # the declared function itself (its method is Tensor.astype), without the warning filter
    OpEntry("astype", pl.cast, _torch_cast, lambda: _cast_samples()[:6], amp=False, variant="method", grad=False,
            error_inputs=lambda: [ErrorInput((C(3), pl.float64), exc=UserWarning, match="discards the imaginary")]),
    OpEntry("clone", pl.clone, torch.clone, unary_samples()),
    OpEntry("contiguous", pl.contiguous, lambda x: x.contiguous(),
            lambda: [Sample((noncontig(3, 4),), name="noncontig"), Sample((U(2, 3),), name="already")]),
    # a round trip through the other device kind (a no-op copy on a CPU-only machine)
    OpEntry("to_device", lambda x: x.to("cpu").to(x.device) if x.device.type != "cpu" else x.to("cpu"),
            lambda x: x, unary_samples(), amp=False),
    OpEntry("fill", pl.fill, torch.fill,
            lambda: [Sample((U(3, 4), 2.5)), Sample((np.array([1, 2]), 7), name="int"),
                     Sample((U(0, 2), 1.0), name="empty"), Sample((np.array(3.0), -1.0), name="0d"),
                     Sample((U(2, 3), np.array(1.5)), name="0d-tensor-value")],
            error_inputs=lambda: [ErrorInput((U(3), U(2)), exc=ValueError, match="fill: value must be"),
                                  ErrorInput((U(3), "a"), exc=TypeError, match="fill: value must be")]),
    # the in-place writes: the declared methods on fresh tensors, and inside a graph for their gradients
    OpEntry("fill_", pl.Tensor.fill_, torch.Tensor.fill_,
            lambda: [Sample((U(3, 4), 2.5)), Sample((np.array([1, 2]), 7), name="int"),
                     Sample((U(2), np.array(1.5)), name="0d-tensor-value")], grad=False, amp=False),
    OpEntry("zero_", pl.Tensor.zero_, torch.Tensor.zero_,
            lambda: [Sample((U(3, 4),)), Sample((np.array([1, 2]),), name="int")], grad=False, amp=False),
    OpEntry("copy_", pl.Tensor.copy_, torch.Tensor.copy_,
            lambda: [Sample((U(3, 4), U(3, 4, seed=1))), Sample((U(3, 4), U(4, seed=1)), name="broadcast"),
                     Sample((U(2, 3), np.array([[1, 2, 3], [4, 5, 6]])), name="cast"),
                     Sample((noncontig(3, 4), U(3, 4, seed=1)), name="noncontig")], grad=False, amp=False),
]
