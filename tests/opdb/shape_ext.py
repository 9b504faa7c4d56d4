"""Op-database entries for the shape/layout primitives (issue 3): flip, roll, tril, triu,
diagonal, diag_embed, pad (and its adjoint pad_backward). The composites (split,
repeat, meshgrid, ...) are tested against PyTorch in tests/test_shape_indexing.py."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch  # noqa: F401 - kept for symmetry with other entry modules
from tests.opdb import ErrorInput, OpEntry, Sample
from tests.opdb.core import U, noncontig

_ALL = ("float32", "float64", "float16", "bfloat16")


def _flip_samples():
    return [Sample((U(3, 4), (0,)), name="dim0"), Sample((U(2, 3, 4), (0, 2)), name="two-dims"),
            Sample((U(2, 3), (-1,)), name="neg"), Sample((U(0, 3), (1,)), name="empty"),
            Sample((noncontig(3, 4), (1,)), name="noncontig"), Sample((np.arange(6).reshape(2, 3), (1,)), name="int")]


def _roll_samples():
    return [Sample((U(3, 4), 1, 1), name="dim1"), Sample((U(3, 4), (1, -2), (0, 1)), name="two-dims"),
            Sample((U(3, 4), 5, None), name="flat"), Sample((U(4), -7, 0), name="big-negative"),
            Sample((U(0, 2), 1, 1), name="empty"), Sample((noncontig(3, 4), 2, 0), name="noncontig")]


def _tri_samples():
    return [Sample((U(4, 4), 0), name="square"), Sample((U(3, 5), 1), name="wide-k1"),
            Sample((U(5, 3), -1), name="tall-k-1"), Sample((U(2, 3, 3), 0), name="batched"),
            Sample((U(3, 3), 10), name="k-big"), Sample((U(0, 3), 0), name="empty"),
            Sample((noncontig(4, 3), 0), name="noncontig"), Sample((np.arange(9).reshape(3, 3), 0), name="int")]


def _diagonal_samples():
    return [Sample((U(3, 4),), name="main"), Sample((U(3, 4),), {"offset": 1}, "offset1"),
            Sample((U(3, 4),), {"offset": -2}, "offset-2"), Sample((U(2, 3, 4),), {"dim1": 1, "dim2": 2}, "batched"),
            Sample((U(2, 3, 4),), {"offset": 1, "dim1": 2, "dim2": 0}, "reversed-dims"),
            Sample((U(3, 3),), {"offset": 5}, "empty-offset"), Sample((noncontig(4, 3),), name="noncontig")]


def _diag_embed_samples():
    return [Sample((U(3),), name="vector"), Sample((U(2, 3),), name="batched"),
            Sample((U(2, 3),), {"offset": 1}, "offset1"), Sample((U(2, 3),), {"offset": -1, "dim1": 0, "dim2": 2},
                                                                   "dims"),
            Sample((U(0),), name="empty")]


def _pad_samples():
    s = [Sample((U(3, 4), (1, 2)), name="constant-last"),
         Sample((U(2, 3, 4), (1, 0, 0, 2), "constant", 1.5), name="constant-value"),
         Sample((U(3, 4), (-1, 1, 2, -1)), name="constant-crop"), Sample((U(0, 2), (1, 1)), name="constant-empty"),
         Sample((noncontig(3, 4), (1, 1, 1, 1)), name="noncontig")]
    for mode in ("reflect", "replicate", "circular"):
        s += [Sample((U(1, 2, 5), (2, 3), mode), name=f"{mode}-1d"),
              Sample((U(1, 2, 3, 4), (1, 2, 2, 1), mode), name=f"{mode}-2d"),
              Sample((U(1, 1, 2, 2, 3), (1, 1, 1, 0, 0, 1), mode), name=f"{mode}-3d")]
    return s


def _torch_pad(x, pad, mode="constant", value=None):
    return torch.nn.functional.pad(x, pad, mode=mode, value=value)


ENTRIES = [
    OpEntry("flip", lambda x, d: pl.flip(x, d), lambda x, d: torch.flip(x, d), _flip_samples, dtypes=_ALL,
            error_inputs=lambda: [ErrorInput((U(2, 3), (0, 0)), exc=ValueError, match="flip: dims"),
                                  ErrorInput((U(2, 3), (2,)), exc=IndexError, match="flip")]),
    OpEntry("roll", lambda x, s, d: pl.roll(x, s, d), lambda x, s, d: torch.roll(x, s, d), _roll_samples, dtypes=_ALL,
            error_inputs=lambda: [ErrorInput((U(2, 3), (1, 2), (0,)), exc=ValueError, match="roll: shifts")]),
    OpEntry("tril", lambda x, k: pl.tril(x, k), lambda x, k: torch.tril(x, k), _tri_samples, dtypes=_ALL,
            error_inputs=lambda: [ErrorInput((U(3), 0), exc=ValueError, match="tril: input tensor must have")]),
    OpEntry("triu", lambda x, k: pl.triu(x, k), lambda x, k: torch.triu(x, k), _tri_samples, dtypes=_ALL,
            error_inputs=lambda: [ErrorInput((U(3), 0), exc=ValueError, match="triu: input tensor must have")]),
    OpEntry("diagonal", lambda x, **k: pl.diagonal(x, **k), lambda x, **k: torch.diagonal(x, **k), _diagonal_samples,
            dtypes=_ALL,
            error_inputs=lambda: [ErrorInput((U(3, 3),), {"dim1": 1, "dim2": 1}, ValueError, "diagonal: dim1"),
                                  ErrorInput((U(3),), {}, ValueError, "diagonal: expected")]),
    OpEntry("diag_embed", lambda x, **k: pl.diag_embed(x, **k), lambda x, **k: torch.diag_embed(x, **k),
            _diag_embed_samples, dtypes=_ALL,
            error_inputs=lambda: [ErrorInput((U(3),), {"dim1": 0, "dim2": 0}, ValueError, "diag_embed: dim1")]),
    OpEntry("pad", lambda x, *a: pl.pad(x, *a), _torch_pad, _pad_samples, covers=("pad_backward",),
            error_inputs=lambda: [
                ErrorInput((U(2, 3), (1,)), exc=ValueError, match="pad: padding length must be even"),
                ErrorInput((U(1, 3), (3, 0), "reflect"), exc=ValueError, match="pad: reflect padding"),
                ErrorInput((U(1, 3), (1, 0), "wrap"), exc=ValueError, match="pad: mode"),
                ErrorInput((U(3), (1, 1, 1, 1)), exc=ValueError, match="pad: padding")]),
]
