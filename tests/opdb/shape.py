"""Op-database entries for shape and layout (``pylucid/ops/shape.py``): the primitives (reshape, view,
permute, broadcast_to, concatenate, unbind, flip, roll, tril/triu, diagonal, diag_embed, pad) and the
composites built on them (split, stack, repeat, meshgrid, ...)."""

from __future__ import annotations

import inspect

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch
from tests.opdb import ALL_FLOAT_DTYPES, C, ErrorInput, I, OpEntry, Sample, U, noncontig
from tests.optest_utils import TORCH_DTYPE


def _as_strided_scatter_ref(x, src, size, stride, offset):
    flat = torch.zeros(x.numel(), dtype=x.dtype)
    idx = torch.arange(x.numel()).as_strided(size, stride, offset).reshape(-1)
    mask = flat.index_fill(0, idx, 1.0).reshape(x.shape)
    placed = torch.zeros(x.numel(), dtype=src.dtype).index_put((idx,), src.reshape(-1)).reshape(x.shape)
    return x * (1 - mask) + placed


def _flip_samples():
    return [Sample((U(3, 4), (0,)), name="dim0"), Sample((U(2, 3, 4), (0, 2)), name="two-dims"),
            Sample((U(3, 4), (0, 1)), name="both"),
            Sample((U(2, 3), (-1,)), name="neg"), Sample((U(0, 3), (1,)), name="empty"),
            Sample((noncontig(3, 4), (1,)), name="noncontig"), Sample((np.arange(6).reshape(2, 3), (1,)), name="int")]


def _roll_samples():
    return [Sample((U(3, 4), 1, 1), name="dim1"), Sample((U(3, 4), (1, -2), (0, 1)), name="two-dims"),
            Sample((U(3, 4), 5, None), name="flat"), Sample((U(4), -7, 0), name="big-negative"),
            Sample((U(0, 2), 1, 1), name="empty"), Sample((noncontig(3, 4), 2, 0), name="noncontig")]


def _tri_samples():
    return [Sample((U(4, 4), 0), name="square"), Sample((U(3, 4),), name="default"), Sample((U(3, 5), 1),
                                                                                            name="wide-k1"),
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
         Sample((U(3, 4),), {"pad": (1, 1, 2, 0), "value": 0.5}, "keywords"),
         Sample((U(3, 4), (-1, 1, 2, -1)), name="constant-crop"), Sample((U(0, 2), (1, 1)), name="constant-empty"),
         Sample((noncontig(3, 4), (1, 1, 1, 1)), name="noncontig")]
    for mode in ("reflect", "replicate", "circular"):
        s += [Sample((U(1, 2, 4, 4), (-1, 1, -2, 1), mode), name=f"{mode}-negative")]
        s += [Sample((U(1, 2, 5), (2, 3), mode), name=f"{mode}-1d"),
              Sample((U(1, 2, 5),), {"pad": (2, 1), "mode": mode}, f"{mode}-1d-keywords"),
              Sample((U(1, 2, 3, 4), (1, 2, 2, 1), mode), name=f"{mode}-2d"),
              Sample((U(1, 1, 2, 2, 3), (1, 1, 1, 0, 0, 1), mode), name=f"{mode}-3d")]
    return s


def _torch_pad(x, pad, mode="constant", value=None):
    return torch.nn.functional.pad(x, pad, mode=mode, value=value)


def _torch_dtype_kw(fn):
    """``fn`` with a pylucid ``dtype=`` keyword given as torch's."""
    def call(*a, dtype=None, **k):
        return fn(*a, **k) if dtype is None else fn(*a, dtype=TORCH_DTYPE[dtype.name], **k)
    return call


def _listed(fn):
    """``fn(list_of_tensors, **kw)`` called with the tensors as positional sample args (gradients for each)."""
    return lambda *xs, **k: fn(list(xs), **k)


def _two(*shape):
    return (U(*shape), U(*shape, seed=1))


def _split_samples():
    return [Sample((U(3, 4), 2), {"dim": 1}, "size"), Sample((U(3, 4), [1, 3]), {"dim": 1}, "sizes"),
            Sample((U(5, 2), 2), name="uneven"), Sample((U(0, 2), 1), {"dim": 1}, "empty")]


ENTRIES = [
    # -- primitives ------------------------------------------------------------------------
    OpEntry("reshape", pl.reshape, torch.reshape,
            lambda: [Sample((U(3, 4), (4, 3))), Sample((U(3, 4), (2, 6)), name="2x6"),
                     Sample((U(3, 4), (-1,)), name="flat"),
                     Sample((noncontig(3, 4), (2, 6)), name="noncontig-copy"),
                     Sample((np.array(1.0), (1, 1)), name="0d")],
            error_inputs=lambda: [ErrorInput((U(3, 4), (5, 2)), exc=ShapeMismatch, match="reshape: shape")]),
    OpEntry("view", pl.view, lambda x, *s: x.view(*s),
            lambda: [Sample((U(3, 4), (2, 6))), Sample((U(3, 4), 4, 3), name="sizes"),
                     Sample((U(3, 4), (12,)), name="flat")],
            error_inputs=lambda: [ErrorInput((noncontig(3, 4), (12,)), exc=pl.LucidError, match="view: size")]),
    OpEntry("broadcast_to", pl.broadcast_to, torch.broadcast_to,
            lambda: [Sample((U(3, 1), (2, 3, 4))), Sample((np.array(2.0), (3,)), name="0d"),
                     Sample((U(1, 4), (-1, 4)), name="keep")],
            error_inputs=lambda: [ErrorInput((U(3, 2), (3, 4)), exc=ShapeMismatch, match="broadcast_to")]),
    OpEntry("permute", pl.permute, lambda x, *d: x.permute(*d),
            lambda: [Sample((U(2, 3, 4), (2, 0, 1))), Sample((U(2, 3), (1, 0)), name="transpose"),
                     Sample((U(2, 3, 4), 1, 2, 0), name="dims")],
            error_inputs=lambda: [ErrorInput((U(2, 3), (0, 0)), exc=ValueError, match="permute")]),
    OpEntry("unbind", pl.unbind, torch.unbind,
            lambda: [Sample((U(3, 4),)), Sample((U(2, 3, 4),), {"dim": 1}, "dim1"),
                     Sample((noncontig(3, 4),), {"dim": -1}, "noncontig-neg")],
            error_inputs=lambda: [ErrorInput((U(2, 3), 2), exc=IndexError, match="unbind")]),
    OpEntry("concatenate", _listed(pl.concatenate), _listed(torch.cat),
            lambda: [Sample((U(2, 3), U(1, 3, seed=1))), Sample((U(2, 3), U(2, 1, seed=1)), {"dim": 1}, "dim1"),
                     Sample((U(2, 0), U(2, 2, seed=1)), {"dim": -1}, "empty")],
            error_inputs=lambda: [ErrorInput((U(2, 3), U(2, 4)), exc=ShapeMismatch, match="cat: sizes")]),
    OpEntry("flip", pl.flip, torch.flip, _flip_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(2, 3), (0, 0)), exc=ValueError, match="flip: dims"),
                                  ErrorInput((U(2, 3), (2,)), exc=IndexError, match="flip")]),
    OpEntry("roll", pl.roll, torch.roll, _roll_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(2, 3), (1, 2), (0,)), exc=ValueError, match="roll: shifts")]),
    OpEntry("tril", pl.tril, torch.tril, _tri_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(3), 0), exc=ValueError, match="tril: input tensor must have")]),
    OpEntry("triu", pl.triu, torch.triu, _tri_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(3), 0), exc=ValueError, match="triu: input tensor must have")]),
    OpEntry("diagonal", pl.diagonal, torch.diagonal, _diagonal_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(3, 3),), {"dim1": 1, "dim2": 1}, ValueError, "diagonal: dim1"),
                                  ErrorInput((U(3),), {}, ValueError, "diagonal: expected")]),
    OpEntry("diag_embed", pl.diag_embed, torch.diag_embed, _diag_embed_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(3),), {"dim1": 0, "dim2": 0}, ValueError, "diag_embed: dim1")]),
    OpEntry("pad", pl.pad, _torch_pad, _pad_samples, covers=("pad_backward",),
            error_inputs=lambda: [
                ErrorInput((U(2, 3), (1,)), exc=ValueError, match="pad: padding length must be even"),
                ErrorInput((U(1, 3), (3, 0), "reflect"), exc=ValueError, match="pad: reflect padding"),
                ErrorInput((U(1, 3), (1, 0), "wrap"), exc=ValueError, match="pad: mode"),
                ErrorInput((U(3), (1, 1, 1, 1)), exc=ValueError, match="pad: padding")]),
    # -- composites: views and reshapes -------------------------------------------------------
    OpEntry("flatten", pl.flatten, torch.flatten,
            lambda: [Sample((U(2, 3, 4),), {"start_dim": 1}), Sample((U(2, 3, 4),), name="all"),
                     Sample((U(2, 3, 4), 0, 1), name="first-two"), Sample((np.array(1.5),), name="0d")]),
    OpEntry("unflatten", pl.unflatten, torch.unflatten,
            lambda: [Sample((U(3, 4), 1, (2, 2))), Sample((U(6, 2), 0, (-1, 3)), name="infer")]),
    OpEntry("ravel", pl.ravel, torch.ravel, lambda: [Sample((U(3, 4),)), Sample((noncontig(3, 4),), name="noncontig")]),
    OpEntry("squeeze", pl.squeeze, torch.squeeze,
            lambda: [Sample((U(3, 1, 4),)), Sample((U(3, 1, 4),), {"dim": 1}, "dim"),
                     Sample((U(3, 1, 4), 0), name="dim-not-1"), Sample((U(1, 3, 1),), {"dim": (0, 2)}, "dims")]),
    OpEntry("unsqueeze", pl.unsqueeze, torch.unsqueeze,
            lambda: [Sample((U(3, 4), 1)), Sample((U(3, 4), -1), name="neg"), Sample((np.array(1.5), 0), name="0d")]),
    OpEntry("expand", pl.expand, lambda x, *s: x.expand(*s),
            lambda: [Sample((U(3, 1), 3, 4)), Sample((U(3, 1), (2, 3, 4)), name="tuple"),
                     Sample((U(3, 1), -1, 5), name="keep")]),
    OpEntry("expand_as", pl.expand_as, lambda x, y: x.expand_as(y),
            lambda: [Sample((U(3, 1), U(3, 4)), grad_args=(0,))]),
    OpEntry("view_as", pl.Tensor.view_as, torch.Tensor.view_as, lambda: [Sample((U(3, 4), U(2, 6)), grad_args=(0,))]),
    OpEntry("reshape_as", pl.Tensor.reshape_as, torch.Tensor.reshape_as,
            lambda: [Sample((noncontig(3, 4), U(2, 6)), grad_args=(0,))]),
    OpEntry("transpose", pl.transpose, torch.transpose,
            lambda: [Sample((U(3, 4), 0, 1)), Sample((U(2, 3, 4), -1, 0), name="3d")]),
    # the T and mT properties, through their getter functions
    *[OpEntry(n, inspect.getattr_static(pl.Tensor, n).fget, lambda x, n=n: getattr(x, n),
              lambda: [Sample((U(3, 4),)), Sample((U(2, 3, 4),), name="3d")]) for n in ("mT",)],
    OpEntry("T", inspect.getattr_static(pl.Tensor, "T").fget, lambda x: x.T if x.ndim < 3 else x.permute(2, 1, 0),
            lambda: [Sample((U(3, 4),)), Sample((U(3),), name="1d")]),
    OpEntry("t", pl.t, torch.t, lambda: [Sample((U(3, 4),)), Sample((U(3),), name="1d")],
            error_inputs=lambda: [ErrorInput((U(2, 3, 4),), exc=ValueError,
                                             match="t: expects a tensor with <= 2 dims")]),
    OpEntry("movedim", pl.movedim, torch.movedim,
            lambda: [Sample((U(2, 3, 4), 0, -1)), Sample((U(2, 3, 4), (0, 1), (2, 0)), name="several")]),
    OpEntry("broadcast_tensors", pl.broadcast_tensors, torch.broadcast_tensors,
            lambda: [Sample((U(3, 1), U(4, seed=1))), Sample((U(2, 3), U(3, seed=1), np.array(1.5)), name="three")]),
    OpEntry("broadcast_shapes", pl.broadcast_shapes, torch.broadcast_shapes,
            lambda: [Sample(((2, 1), (3,))), Sample(((1,), (4, 1, 2), ()), name="three")], grad=False,
            error_inputs=lambda: [ErrorInput(((2,), (3,)), exc=ShapeMismatch, match="broadcast_shapes: shapes")]),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda: [Sample((U(3),)), Sample((np.array(1.5), U(2, 3, seed=1)), name="two")])
      for n in ("atleast_1d", "atleast_2d", "atleast_3d")],
    # -- composites: joins and splits ---------------------------------------------------------
    OpEntry("cat", _listed(pl.cat), _listed(torch.cat),
            lambda: [Sample(_two(3, 4), {"dim": 1}), Sample(_two(3, 4), name="dim0")]),
    *[OpEntry(n, _listed(getattr(pl, n)), _listed(getattr(torch, n)),
              lambda: [Sample(_two(3, 4)), Sample(_two(3,), name="1d"), Sample((U(2, 3), U(2, 3, seed=1), U(2, 3,
                                                                                                            seed=2)),
                                                                              name="three")])
      for n in ("stack", "hstack", "vstack", "dstack", "column_stack")],
    OpEntry("stack", _listed(pl.stack), _listed(torch.stack), lambda: [Sample(_two(3, 4), {"dim": -1})],
            variant="dim"),
    # the functions themselves on a list (their aliases and methods), first order through the entries above
    *[OpEntry(n, getattr(pl, n), getattr(torch, t), lambda: [Sample(([U(2, 3), U(2, 3, seed=1)],))], variant="list",
              grad=False) for n, t in (("concatenate", "cat"), ("cat", "cat"), ("stack", "stack"), ("hstack", "hstack"),
                                       ("vstack", "vstack"), ("dstack", "dstack"), ("column_stack", "column_stack"))],
    OpEntry("split", pl.split, torch.split, _split_samples),
    OpEntry("chunk", pl.chunk, torch.chunk,
            lambda: [Sample((U(3, 4), 2, 1)), Sample((U(5, 2), 3), name="uneven")]),
    OpEntry("tensor_split", pl.tensor_split, torch.tensor_split,
            lambda: [Sample((U(3, 4), 3), {"dim": 1}), Sample((U(7, 2), [1, 4]), name="indices")]),
    *[OpEntry(n, getattr(pl, n), getattr(torch, n),
              lambda shape=shape: [Sample((U(*shape), 2)), Sample((U(*shape), [1]), name="indices")])
      for n, shape in (("hsplit", (3, 4)), ("vsplit", (4, 3)), ("dsplit", (2, 3, 4)))],
    OpEntry("narrow", pl.narrow, torch.narrow,
            lambda: [Sample((U(3, 4), 1, 1, 2)), Sample((U(3, 4), 0, -2, 2), name="negative-start")]),
    # reference: narrow + clone (torch.narrow_copy has no derivative before torch 2.13)
    OpEntry("narrow_copy", pl.narrow_copy, lambda x, d, s, n: torch.narrow(x, d, s, n).clone(),
            lambda: [Sample((U(3, 4), 1, 1, 2))]),
    # -- composites: flips, rotations, repeats, diagonals ---------------------------------------
    OpEntry("fliplr", pl.fliplr, torch.fliplr, lambda: [Sample((U(3, 4),))]),
    OpEntry("flipud", pl.flipud, torch.flipud, lambda: [Sample((U(3, 4),)), Sample((U(3),), name="1d")]),
    OpEntry("rot90", pl.rot90, torch.rot90,
            lambda: [Sample((U(3, 4), 1, (0, 1))), Sample((U(3, 4), -3, (1, 0)), name="k-3"),
                     Sample((U(2, 3, 4), 2, (1, 2)), name="3d-k2"), Sample((U(3, 4),), name="default")]),
    OpEntry("repeat", pl.repeat, lambda x, *s: x.repeat(*s),
            lambda: [Sample((U(2, 3), 2, 1, 2)), Sample((U(2, 3), (2, 2)), name="tuple")]),
    OpEntry("tile", pl.tile, torch.tile,
            lambda: [Sample((U(2, 3), (2, 2))), Sample((U(2, 3), (2,)), name="short")]),
    OpEntry("repeat_interleave", pl.repeat_interleave, torch.repeat_interleave,
            lambda: [Sample((U(2, 3), 2), {"dim": 1}), Sample((U(2, 3), 2), name="flat"),
                     Sample((U(3, 2), np.array([1, 0, 2])), {"dim": 0}, "tensor-repeats")]),
    OpEntry("diag", pl.diag, torch.diag,
            lambda: [Sample((U(3, 3),)), Sample((U(3),), name="vector"), Sample((U(3, 4), 1), name="offset"),
                     Sample((U(2), -1), name="vector-offset")]),
    OpEntry("trace", pl.trace, torch.trace, lambda: [Sample((U(3, 3),)), Sample((U(3, 4),), name="wide")]),
    OpEntry("meshgrid", pl.meshgrid, torch.meshgrid,
            lambda: [Sample((U(3), U(2, seed=1)), {"indexing": "ij"}), Sample((U(3), U(2, seed=1)), {"indexing": "xy"},
                                                                              "xy"),
                     Sample((U(2), U(3, seed=1), U(2, seed=2)), {"indexing": "ij"}, "three")]),
    # -- composites: block matrices, products, index sets ----------------------------------------
    OpEntry("block_diag", pl.block_diag, torch.block_diag,
            lambda: [Sample((U(2, 3), U(1, 2, seed=1))), Sample((np.array(1.5), U(3, seed=1), U(2, 2, seed=2)),
                                                                name="0d-1d-2d"),
                     Sample((U(2, 3), np.array([[1, 2]])), name="mixed-dtypes"),
                     Sample((U(0, 2), U(2, 0, seed=1)), name="empty"), Sample((noncontig(3, 2),), name="one")],
            error_inputs=lambda: [ErrorInput((U(2, 2, 2),), exc=ValueError, match="block_diag: expects")]),
    OpEntry("cartesian_prod", pl.cartesian_prod, torch.cartesian_prod,
            lambda: [Sample((U(2), U(3, seed=1))), Sample((U(2), U(1, seed=1), U(2, seed=2)), name="three"),
                     Sample((U(3),), name="one"), Sample((U(2), U(0, seed=1)), name="empty")],
            error_inputs=lambda: [ErrorInput((U(2, 2),), exc=ValueError, match="cartesian_prod: expects 1-D")]),
    OpEntry("combinations", pl.combinations, torch.combinations,
            lambda: [Sample((U(4),)), Sample((U(4), 3), name="r3"),
                     Sample((U(3),), {"with_replacement": True}, "with-replacement"),
                     Sample((np.array([1, 2, 3]), 1), name="int-r1")],
            error_inputs=lambda: [ErrorInput((U(2, 2),), exc=ValueError, match="combinations: expects a 1-D")]),
    # fewer elements than r: an empty (0, r) result, in the graph as PyTorch's
    OpEntry("combinations", pl.combinations, torch.combinations, lambda: [Sample((U(2), 3), name="none")],
            variant="none", grad=False),
    *[OpEntry(n, getattr(pl, n),
              lambda *a, n=n, dtype=None: getattr(torch, n)(*a, **({} if dtype is None else
                                                                    {"dtype": getattr(torch, dtype.name)})),
              lambda: [Sample((3, 4)), Sample((4, 3, 1), name="offset"), Sample((3, 3, -1), name="negative-offset"),
                       Sample((0, 0), name="empty"), Sample((3, 3), {"dtype": pl.int32}, "int32")],
              grad=False, amp=False,
              error_inputs=lambda n=n: [ErrorInput((-1, 2), exc=ValueError, match=f"{n}: row and col")])
      for n in ("tril_indices", "triu_indices")],
    OpEntry("diagflat", pl.diagflat, torch.diagflat,
            lambda: [Sample((U(3),)), Sample((U(2, 2), 1), name="2d-offset"), Sample((U(2), -2), name="negative"),
                     Sample((np.array(1.5),), name="0d")]),
    OpEntry("unravel_index", pl.unravel_index, torch.unravel_index,
            lambda: [Sample((I(5, 7, 0), (2, 4))), Sample((I(-1, 3), (2, 2, 3)), name="negative"),
                     Sample((np.array(4, dtype=np.int64), (3, 2)), name="0d")], grad=False, amp=False,
            error_inputs=lambda: [ErrorInput((I(8), (2, 4)), exc=IndexError, match="unravel_index: indices"),
                                  ErrorInput((U(2), (2,)), exc=TypeError, match="unravel_index: indices")]),
    # -- composites: writes of a slice, an element or a diagonal (out of place) --------------------
    OpEntry("slice_scatter", pl.slice_scatter, torch.slice_scatter,
            lambda: [Sample((U(4, 3), U(2, 3, seed=1)), {"start": 1, "end": 3}),
                     Sample((U(3, 4), U(3, 2, seed=1), 1, 0, None, 2), name="step"),
                     Sample((U(3, 4), U(3, 4, seed=1)), {"dim": 1}, "whole")],
            error_inputs=lambda: [ErrorInput((U(4), U(3)), {"start": 1, "end": 3}, exc=ShapeMismatch,
                                             match="slice_scatter: src")]),
    OpEntry("select_scatter", pl.select_scatter, torch.select_scatter,
            lambda: [Sample((U(3, 4), U(4, seed=1), 0, 1)), Sample((U(3, 4), U(3, seed=1), 1, -1), name="last"),
                     Sample((U(3), np.array(2.0), 0, 0), name="1d")],
            error_inputs=lambda: [ErrorInput((U(3, 4), U(3), 0, 1), exc=ShapeMismatch, match="select_scatter: src")]),
    OpEntry("diagonal_scatter", pl.diagonal_scatter, torch.diagonal_scatter,
            lambda: [Sample((U(3, 3), U(3, seed=1))), Sample((U(3, 4), U(3, seed=1), 1), name="offset"),
                     Sample((U(2, 3, 4), U(2, 3, seed=1), -1, 2, 1), name="dims")],
            error_inputs=lambda: [ErrorInput((U(3, 3), U(2)), exc=ShapeMismatch, match="diagonal_scatter: src")]),
    # -- composites: strided windows ----------------------------------------------------------------
    OpEntry("as_strided", pl.as_strided, torch.as_strided,
            lambda: [Sample((U(3, 3), (2, 2), (1, 2))), Sample((U(9), (3, 3), (1, 1), 2), name="overlap"),
                     Sample((U(4), (), (), 3), name="0d"), Sample((U(6), (0, 2), (1, 1)), name="empty")],
            error_inputs=lambda: [ErrorInput((U(4), (3,), (2,)), exc=ValueError, match="as_strided: size")]),
    OpEntry("as_strided_scatter", pl.as_strided_scatter, torch.as_strided_scatter,
            lambda: [Sample((U(3, 3), U(2, 2, seed=1), (2, 2), (1, 2), 1))], grad=False,
            error_inputs=lambda: [ErrorInput((U(4), U(3), (2,), (2,)), exc=ShapeMismatch,
                                             match="as_strided_scatter: src")]),
    # its gradient: the overwritten positions of ``input`` get zero (PyTorch 2.13 passes ``g`` through there,
    # docs/semantics/opinfo.md), so the reference is the composite ``input * (1 - mask) + scattered src``
    OpEntry("as_strided_scatter", pl.as_strided_scatter, _as_strided_scatter_ref,
            lambda: [Sample((U(3, 3), U(2, 2, seed=1), (2, 2), (1, 2), 1))], variant="gradient", amp=False),
    OpEntry("unfold", pl.Tensor.unfold, torch.Tensor.unfold,
            lambda: [Sample((U(7), 0, 2, 2)), Sample((U(3, 5), 1, 3, 1), name="overlap"),
                     Sample((U(2, 5, 3), -2, 5, 2), name="whole"), Sample((np.array(1.5), 0, 1, 1), name="0d"),
                     Sample((U(4, 2), 0, 0, 1), name="size0")],
            error_inputs=lambda: [ErrorInput((U(3), 0, 4, 1), exc=ValueError, match="unfold: size"),
                                  ErrorInput((U(3), 0, 2, 0), exc=ValueError, match="unfold: step")],
            # Tensor.unfold (sliding windows), a composite of getitem; ``unfold`` the op is nn.functional's im2col
            variant="Tensor", runs=("getitem",)),
    OpEntry("select", pl.select, torch.select,
            lambda: [Sample((U(3, 4), 0, 1)), Sample((U(3, 4), 1, -1), name="negative"),
                     Sample((U(3), 0, 2), name="1d")],
            error_inputs=lambda: [ErrorInput((U(3), 0, 3), exc=IndexError, match="select: index")]),
    *[OpEntry(n, inspect.getattr_static(pl.Tensor, n).fget, lambda x, n=n: getattr(x, n),
              lambda: [Sample((U(3, 4),)), Sample((C(2, 3),), name="complex")]) for n in ("H", "mH")],
    OpEntry("mH", inspect.getattr_static(pl.Tensor, "mH").fget, lambda x: x.mH,
            lambda: [Sample((U(2, 3, 4),)), Sample((C(2, 2, 3),), name="complex")], variant="batched"),
    OpEntry("adjoint", pl.adjoint, torch.adjoint,
            lambda: [Sample((U(3, 4),)), Sample((C(2, 2, 3),), name="complex")],
            error_inputs=lambda: [ErrorInput((U(3),), exc=ValueError, match="adjoint: expects")]),
    # -- composites: the copying forms of the views, and split spellings -----------------------------
    *[OpEntry(n, getattr(pl, n), getattr(torch, n), lambda samples=samples: samples)
      for n, samples in (
          ("alias_copy", [Sample((U(3, 4),))]),
          ("as_strided_copy", [Sample((U(3, 3), (2, 2), (1, 2)))]),
          ("diagonal_copy", [Sample((U(3, 4),)), Sample((U(2, 3, 4), 1, 1, 2), name="dims")]),
          ("expand_copy", [Sample((U(3, 1), (2, 3, 4)))]),
          ("permute_copy", [Sample((U(2, 3, 4), (2, 0, 1)))]),
          ("squeeze_copy", [Sample((U(3, 1, 4),)), Sample((U(3, 1, 4), 1), name="dim")]),
          ("t_copy", [Sample((U(3, 4),))]),
          ("transpose_copy", [Sample((U(2, 3, 4), 0, 2))]),
          ("unbind_copy", [Sample((U(3, 4),)), Sample((U(3, 4), 1), name="dim1")]),
          ("unfold_copy", [Sample((U(3, 6), 1, 2, 2))]),
          ("unsqueeze_copy", [Sample((U(3, 4), 1))]),
          ("view_copy", [Sample((U(3, 4), (4, 3)))]),
          ("split_with_sizes", [Sample((U(5, 2), [2, 3])), Sample((U(2, 5), [1, 0, 4], 1), name="dim1-empty")]),
          ("split_with_sizes_copy", [Sample((U(5, 2), [2, 3]))]),
          ("unsafe_split", [Sample((U(5, 2), 2))]),
          ("unsafe_chunk", [Sample((U(5, 2), 2))]),
          ("constant_pad_nd", [Sample((U(3, 4), (1, 2))),
                               Sample((U(2, 3, 4), (1, 0, -1, 2), 0.5), name="value-crop")]))],
    # -- creation with PyTorch's layout arguments (pylucid's arrays are row-major: strides and layouts are checked
    #    only; the reference gets torch's dtype); an uninitialised result is compared in shape and dtype
    OpEntry("scalar_tensor", pl.scalar_tensor, _torch_dtype_kw(torch.scalar_tensor),
            lambda: [Sample((3,)), Sample((2.5,), name="float"), Sample((True,), name="bool"),
                     Sample((7,), {"dtype": pl.int64}, "int64")],
            dtypes=("float32",), grad=False, gradgrad=False, amp=False,
            error_inputs=lambda: [ErrorInput((1 + 2j,), exc=TypeError, match="scalar_tensor: s must be a real")]),
    *[OpEntry(n, getattr(pl, n), _torch_dtype_kw(getattr(torch, n)), samples, dtypes=("float32",), grad=False,
              gradgrad=False,
              amp=False, postprocess=np.zeros_like, error_inputs=errors)
      for n, samples, errors in (
          ("empty_strided", lambda: [Sample(((2, 3), (1, 2))), Sample(((), ()), name="0d"),
                                     Sample(((0, 4), (4, 1)), {"dtype": pl.float64}, "empty-float64")],
           lambda: [ErrorInput(((2, 3), (1,)), exc=ValueError, match="empty_strided: 2 sizes and 1 strides")]),
          ("empty_permuted", lambda: [Sample(((2, 3, 4), (0, 2, 1))), Sample(((), ()), name="0d")],
           lambda: [ErrorInput(((2, 3), (0, 0)), exc=ValueError, match="empty_permuted: physical_layout")]))],
    OpEntry("new_empty_strided", pl.Tensor.new_empty_strided, _torch_dtype_kw(torch.Tensor.new_empty_strided),
            lambda: [Sample((U(2), (2, 3), (3, 1))), Sample((U(2), (4,), (1,)), {"dtype": pl.int64}, "int64")],
            grad=False, gradgrad=False, amp=False, postprocess=np.zeros_like),
    # -- in-place resizing: a grown tensor's new elements are uninitialised, so results are compared in shape and
    #    dtype (the fuzzer grows them; the doctest shows growth); the kept values are compared by the OpInfo suite. The
    #    reference resizes a clone: a tensor made from a NumPy array cannot grow its storage
    OpEntry("resize_", pl.Tensor.resize_, lambda x, *s: x.clone().resize_(*s),
            lambda: [Sample((U(2, 3), (3, 2))), Sample((U(2, 3), 6), name="varargs"),
                     Sample((np.array(1.5), (1, 1)), name="0d")],
            grad=False, gradgrad=False, amp=False, postprocess=np.zeros_like,
            error_inputs=lambda: [ErrorInput((U(2, 3), (-1, 2)), exc=ValueError, match="resize_: negative")]),
    OpEntry("resize_as_", pl.resize_as_, lambda x, t: torch.resize_as_(x.clone(), t),
            lambda: [Sample((U(2, 3), U(3, 2, seed=1))), Sample((U(4), U(2, 2, seed=1)), name="2d")],
            grad=False, gradgrad=False, amp=False, postprocess=np.zeros_like),
]
