"""Op-database entries for the FFT primitives (``pylucid/ops/fft.py``) and the ``pylucid.fft`` functions.

Each primitive (``fft_c2c``, ``fft_r2c``, ``fft_c2r``) is reached through the
``pylucid.fft`` functions named by the sample's ``fn`` keyword. As in
tests/opdb/complex.py, complex inputs are real ``(..., 2)`` arrays seen through
``view_as_complex`` (``cin=True``) and complex outputs come back through
``view_as_real``, so gradcheck and gradgradcheck run on real numbers. Each public
function then has an entry of its own, called directly on real and complex samples.
"""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch, LucidError
from tests.opdb import C, ErrorInput, OpEntry, Sample, U, noncontig
from tests.opdb.complex import as_complex, as_real


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
    # -- the pylucid.fft functions, called directly ------------------------------------------------
    *[OpEntry(f"fft.{n}", getattr(pl.fft, n), getattr(torch.fft, n),
              lambda: [Sample((C(8),), name="complex"), Sample((C(8),), {"norm": "ortho"}, "complex-ortho"),
                       Sample((C(8),), {"norm": "forward"}, "complex-forward"), Sample((U(3, 5),), name="real"),
                       Sample((C(2, 6),), {"n": 4, "dim": 0}, "n-dim")])
      for n in ("fft", "ifft")],
    OpEntry("fft.rfft", pl.fft.rfft, torch.fft.rfft,
            lambda: [Sample((U(8),), {"norm": "ortho"}), Sample((U(3, 5),), {"n": 6}, "n")]),
    OpEntry("fft.irfft", pl.fft.irfft, torch.fft.irfft,
            lambda: [Sample((C(5),), {"n": 8}), Sample((C(3, 4),), name="default-n"), Sample((U(5),), name="real")]),
    OpEntry("fft.hfft", pl.fft.hfft, torch.fft.hfft, lambda: [Sample((C(5),)), Sample((C(4),), {"n": 7}, "n")]),
    OpEntry("fft.ihfft", pl.fft.ihfft, torch.fft.ihfft, lambda: [Sample((U(6),)), Sample((U(2, 5),), {"n": 4}, "n")]),
    *[OpEntry(f"fft.{n}", getattr(pl.fft, n), getattr(torch.fft, n),
              lambda: [Sample((C(4, 6),)), Sample((C(4, 6),), {"norm": "forward"}, "forward"),
                       Sample((U(3, 4),), name="real")]) for n in ("fft2", "ifft2")],
    OpEntry("fft.rfft2", pl.fft.rfft2, torch.fft.rfft2, lambda: [Sample((U(4, 6),))]),
    OpEntry("fft.irfft2", pl.fft.irfft2, torch.fft.irfft2, lambda: [Sample((C(4, 4),), {"s": (4, 6)}),
                                                                   Sample((C(3, 4),), name="default-s")]),
    *[OpEntry(f"fft.{n}", getattr(pl.fft, n), getattr(torch.fft, n),
              lambda: [Sample((C(2, 3, 4),), {"dim": (0, 2)}), Sample((C(2, 3, 4),), name="all"),
                       Sample((U(2, 3),), {"s": (3, 4)}, "real-s")]) for n in ("fftn", "ifftn")],
    OpEntry("fft.rfftn", pl.fft.rfftn, torch.fft.rfftn, lambda: [Sample((U(2, 3, 4),))]),
    OpEntry("fft.irfftn", pl.fft.irfftn, torch.fft.irfftn,
            lambda: [Sample((C(2, 3, 3),), {"s": (3, 4), "dim": (1, 2)}), Sample((C(2, 3),), name="all")]),
    *[OpEntry(f"fft.{n}", getattr(pl.fft, n), getattr(torch.fft, n),
              lambda: [Sample((5,), {"d": 0.5}), Sample((6,), name="even")], grad=False, amp=False)
      for n in ("fftfreq", "rfftfreq")],
    OpEntry("fft.fftshift", pl.fft.fftshift, torch.fft.fftshift,
            lambda: [Sample((U(3, 4),)), Sample((U(3, 5),), {"dim": 1}, "dim"), Sample((C(5),), name="complex")]),
    OpEntry("fft.ifftshift", pl.fft.ifftshift, torch.fft.ifftshift,
            lambda: [Sample((U(3, 5),), {"dim": 1}), Sample((U(3, 4),), name="all")]),
    # -- Hermitian n-d transforms ----------------------------------------------------------------
    *[OpEntry(f"fft.{n}", getattr(pl.fft, n), getattr(torch.fft, n),
              lambda: [Sample((C(3, 4),)), Sample((C(3, 4),), {"norm": "ortho", "s": (4, 5)}, "ortho-s"),
                       Sample((C(2, 3, 4),), {"norm": "forward"}, "forward"), Sample((U(3, 3),), name="real")])
      for n in ("hfft2", "hfftn")],
    OpEntry("fft.hfftn", pl.fft.hfftn, torch.fft.hfftn,
            lambda: [Sample((C(2, 3, 4),), {"dim": (0, 2)}, "dims"), Sample((C(4, 3),), {"dim": (0,)}, "one-dim")],
            variant="dims"),
    *[OpEntry(f"fft.{n}", getattr(pl.fft, n), getattr(torch.fft, n),
              lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"norm": "ortho", "s": (4, 6)}, "ortho-s"),
                       Sample((U(2, 3, 4),), {"norm": "forward"}, "forward")],
              error_inputs=lambda n=n: [ErrorInput((C(3, 4),), {}, DtypeMismatch, f"{n}: expects a real input")])
      for n in ("ihfft2", "ihfftn")],
    OpEntry("fft.ihfftn", pl.fft.ihfftn, torch.fft.ihfftn,
            lambda: [Sample((U(2, 3, 4),), {"dim": (0, 2)}, "dims"), Sample((U(4, 3),), {"dim": (0,)}, "one-dim")],
            variant="dims"),
    # -- short-time Fourier transform (window passed positionally: it is differentiated too) ---------
    OpEntry("stft", pl.stft, torch.stft,
            lambda: [Sample((U(20), 8, 2, 8, U(8, lo=0.5, hi=1.0, seed=1)), {"return_complex": True}),
                     Sample((U(2, 16), 8, 4, 6, U(6, lo=0.5, hi=1.0, seed=1)), {"return_complex": True,
                                                                               "normalized": True}, "batch-win6"),
                     Sample((U(12), 4, 2, None, U(4, lo=0.5, hi=1.0, seed=1)), {"center": False,
                                                                               "return_complex": True}, "no-center"),
                     Sample((U(12), 4, 2, None, U(4, lo=0.5, hi=1.0, seed=1)), {"pad_mode": "constant",
                                                                               "return_complex": True}, "constant"),
                     Sample((U(12), 4, 2, None, U(4, lo=0.5, hi=1.0, seed=1)), {"onesided": False,
                                                                               "return_complex": True}, "two-sided"),
                     Sample((C(12), 4, 2, None, U(4, lo=0.5, hi=1.0, seed=1)), {"return_complex": True}, "complex"),
                     Sample((U(12), 4), {"return_complex": False}, "real-view")],
            error_inputs=lambda: [ErrorInput((U(12), 4), {}, ValueError, "stft: return_complex must be given")]),
    OpEntry("istft", pl.istft, torch.istft,
            lambda: [Sample((C(5, 7), 8, 2, 8, U(8, lo=0.5, hi=1.0, seed=1))),
                     Sample((C(2, 5, 5), 8, 4, 6, U(6, lo=0.5, hi=1.0, seed=1)), {"normalized": True}, "batch-win6"),
                     Sample((C(3, 5), 4, 2, None, U(4, lo=0.5, hi=1.0, seed=1)), {"center": False}, "no-center"),
                     Sample((C(3, 5), 4, 2, None, U(4, lo=0.5, hi=1.0, seed=1)), {"length": 12}, "length-pad"),
                     Sample((C(3, 5), 4, 2, None, U(4, lo=0.5, hi=1.0, seed=1)), {"length": 5}, "length-trim"),
                     Sample((C(4, 5), 4, 2, None, U(4, lo=0.5, hi=1.0, seed=1)), {"onesided": False,
                                                                                 "return_complex": True},
                            "two-sided-complex")],
            error_inputs=lambda: [ErrorInput((U(3, 5), 4), {}, DtypeMismatch, "istft: expected a complex input")]),
]
