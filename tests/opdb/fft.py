"""Op-database entries for the FFT primitives (issue 3).

Each primitive (``fft_c2c``, ``fft_r2c``, ``fft_c2r``) is reached through the
``pylucid.fft`` functions named by the sample's ``fn`` keyword. As in
tests/opdb/complex.py, complex inputs are real ``(..., 2)`` arrays seen through
``view_as_complex`` (``cin=True``) and complex outputs come back through
``view_as_real``, so gradcheck and gradgradcheck run on real numbers.
"""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch, LucidError
from tests.opdb import ErrorInput, OpEntry, Sample
from tests.opdb.complex import as_complex, as_real
from tests.opdb.core import U, noncontig


def _pl(x, fn, cin=False, **k):
    if cin:
        x = pl.view_as_complex(x)
    out = getattr(pl.fft, fn)(x, **k)
    return pl.view_as_real(out) if out.dtype.is_complex else out


def _torch(x, fn, cin=False, **k):
    if cin:
        x = as_complex(x)
    out = getattr(torch.fft, fn)(x, **k)
    return as_real(out) if out.is_complex() else out


def _c2c_samples():
    return [
        Sample((U(3, 5),), {"fn": "fft"}, "fft-real"),
        Sample((U(3, 4, 2),), {"fn": "fft", "cin": True, "norm": "ortho"}, "fft-complex-ortho"),
        Sample((U(2, 5),), {"fn": "fft", "n": 7, "dim": 0}, "fft-pad"),
        Sample((U(3, 6),), {"fn": "ifft", "n": 4, "norm": "forward"}, "ifft-trim"),
        Sample((U(2, 3, 2),), {"fn": "ifft", "cin": True}, "ifft-complex"),
        Sample((U(3, 4),), {"fn": "fft2"}, "fft2"),
        Sample((U(3, 3, 2),), {"fn": "ifft2", "cin": True, "s": (4, 2)}, "ifft2-s"),
        Sample((U(2, 2, 3),), {"fn": "fftn", "dim": (0, 2), "norm": "ortho"}, "fftn-dims"),
        Sample((U(2, 3),), {"fn": "ifftn"}, "ifftn-all"),
        Sample((noncontig(4, 3),), {"fn": "fft"}, "noncontig"),
        Sample((U(1),), {"fn": "fft"}, "n1"),
    ]  # PyTorch's MKL refuses empty batches; tests/test_fft.py checks pylucid's empty results


def _r2c_samples():
    return [
        Sample((U(3, 5),), {"fn": "rfft"}, "rfft-odd"),
        Sample((U(3, 6),), {"fn": "rfft", "norm": "ortho"}, "rfft-even"),
        Sample((U(2, 5),), {"fn": "rfft", "n": 8, "norm": "forward"}, "rfft-pad"),
        Sample((U(5, 3),), {"fn": "rfft", "n": 4, "dim": 0}, "rfft-trim-dim0"),
        Sample((U(3, 4),), {"fn": "rfft2"}, "rfft2"),
        Sample((U(2, 3, 4),), {"fn": "rfftn", "s": (2, 5)}, "rfftn-s"),
        Sample((U(4, 5),), {"fn": "ihfft"}, "ihfft"),
        Sample((noncontig(4, 3),), {"fn": "rfft"}, "noncontig"),
    ]


def _c2r_samples():
    return [
        Sample((U(3, 4, 2),), {"fn": "irfft", "cin": True}, "irfft-default-n"),
        Sample((U(3, 4, 2),), {"fn": "irfft", "cin": True, "n": 7, "norm": "ortho"}, "irfft-odd-n"),
        Sample((U(2, 3, 2),), {"fn": "irfft", "cin": True, "n": 8, "norm": "forward"}, "irfft-pad"),
        Sample((U(3, 5),), {"fn": "irfft"}, "irfft-real-input"),
        Sample((U(3, 3, 2),), {"fn": "irfft2", "cin": True}, "irfft2"),
        Sample((U(2, 3, 3, 2),), {"fn": "irfftn", "cin": True, "s": (3, 5), "dim": (0, 2)}, "irfftn-s"),
        Sample((U(3, 3, 2),), {"fn": "hfft", "cin": True}, "hfft"),
    ]


def _errors():
    return [ErrorInput((U(4),), {"fn": "fft", "norm": "bogus"}, ValueError, "fft: norm must be"),
            ErrorInput((U(4),), {"fn": "fft", "n": 0}, LucidError, "fft: invalid number of data points"),
            ErrorInput((np.array(1.0),), {"fn": "fft"}, IndexError, "fft: expected a tensor with at least 1 dim"),
            ErrorInput((U(4),), {"fn": "fft", "dim": 3}, IndexError, "fft: dimension out of range"),
            ErrorInput((U(2, 3),), {"fn": "fftn", "dim": (0, 0)}, ValueError, "more than once")]


ENTRIES = [
    OpEntry("fft_c2c", _pl, _torch, _c2c_samples, error_inputs=_errors),
    OpEntry("fft_r2c", _pl, _torch, _r2c_samples,
            error_inputs=lambda: [ErrorInput((U(3, 2),), {"fn": "rfft", "cin": True}, DtypeMismatch,
                                             "rfft: expects a real input tensor")]),
    OpEntry("fft_c2r", _pl, _torch, _c2r_samples,
            error_inputs=lambda: [ErrorInput((U(1, 2),), {"fn": "irfft", "cin": True}, LucidError,
                                             r"irfft: invalid number of data points \(0\)")]),
]
