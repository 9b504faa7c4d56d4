"""Op-database entries for the convolution, pooling and resampling ops (``pylucid/ops/conv.py``).

Samples are small (gradcheck perturbs every element in float64); each op has
strided / padded / dilated / grouped variants, a non-contiguous input, an
unbatched input and an empty batch where PyTorch accepts one.
"""

from __future__ import annotations

import numpy as np
import torch.nn.functional as F

import pylucid as pl
from pylucid.errors import DtypeMismatch, ShapeMismatch
from tests.opdb import ErrorInput, OpEntry, Sample, rng


def U(*shape, seed=0):
    return rng(seed).uniform(-2.0, 2.0, size=shape)


def NC(*shape, seed=0):
    """A non-contiguous array: the batch and channel dims swapped in memory."""
    return np.swapaxes(U(shape[1], shape[0], *shape[2:], seed=seed), 0, 1)


def distinct(*shape, seed=0):
    """Values without ties (max pooling is not differentiable at ties)."""
    n = int(np.prod(shape))
    return (rng(seed).permutation(n).reshape(shape) - n / 2) / 7.0


def _conv_samples(nd):
    sp = {1: (7,), 2: (5, 4), 3: (4, 3, 3)}[nd]
    k = {1: (3,), 2: (3, 2), 3: (2, 2, 2)}[nd]

    def f():
        return [
            Sample((U(2, 2, *sp), U(3, 2, *k, seed=1), U(3, seed=2)), name="bias"),
            Sample((U(1, 2, *sp), U(2, 2, *k, seed=1)), {"stride": 2, "padding": 1}, "stride-pad-nobias"),
            Sample((U(1, 4, *sp), U(4, 2, *k, seed=1), U(4, seed=2)), {"groups": 2, "dilation": 2, "padding": 2},
                   "groups-dilation"),
            Sample((U(1, 2, *sp), U(2, 2, *k, seed=1)), {"padding": "same"}, "same"),
            Sample((U(1, 2, *sp), U(2, 2, *k, seed=1)), {"padding": "valid"}, "valid"),
            Sample((NC(2, 2, *sp), U(2, 2, *k, seed=1)), name="noncontig"),
            Sample((U(2, *sp), U(2, 2, *k, seed=1)), name="unbatched"),
            Sample((U(0, 2, *sp), U(2, 2, *k, seed=1), U(2, seed=2)), name="empty-batch"),
            # integer convolution: exact, in the input's dtype (PyTorch's CPU kernel)
            Sample((_ints(1, 4, *sp), _ints(2, 2, *k, seed=1), _ints(2, seed=2)), {"groups": 2, "stride": 2},
                   "int64"),
            Sample((_ints(1, 2, *sp).astype(np.int32), _ints(2, 2, *k, seed=1).astype(np.int32)), name="int32"),
        ]
    return f


def _ints(*shape, seed=0):
    return rng(seed).integers(-3, 4, size=shape).astype(np.int64)


def _int_conv_errors(name, transposed):
    sp = (1, 2, 3, 3)[:2 + int(name[-2])]
    k = (2, 2, 2, 2)[:2 + int(name[-2])]
    out = [ErrorInput((_ints(*sp).astype(bool), _ints(*k).astype(bool)), exc=NotImplementedError, match="bool"),
           ErrorInput((_ints(*sp), U(*k)), exc=DtypeMismatch, match=f"{name}: input .* and weight")]
    if transposed:
        out.append(ErrorInput((_ints(*sp).astype(np.int32), _ints(*k).astype(np.int32)), exc=NotImplementedError,
                              match="int64 only"))
    return out


def _conv_errors(nd):
    sp = {1: (7,), 2: (5, 4), 3: (4, 3, 3)}[nd]
    k = {1: (3,), 2: (3, 2), 3: (2, 2, 2)}[nd]
    name = f"conv{nd}d"

    def f():
        return [
            ErrorInput((U(1, 3, *sp), U(2, 2, *k)), exc=ShapeMismatch, match=f"{name}: expected input with 2 channels"),
            ErrorInput((U(1, 2, *sp), U(2, 2, *k)), {"padding": "same", "stride": 2}, ValueError, "same"),
            ErrorInput((U(1, 2, *sp), U(2, 2, *k)), {"padding": "full"}, ValueError, "invalid padding string"),
            ErrorInput((U(*k), U(2, 2, *k)), {}, ShapeMismatch, f"{name}: expected a {nd + 1}-d"),
            *_int_conv_errors(name, False),
        ]
    return f


def _conv_t_samples(nd):
    sp = {1: (4,), 2: (3, 2), 3: (2, 2, 2)}[nd]
    k = {1: (3,), 2: (2, 3), 3: (2, 2, 1)}[nd]

    def f():
        return [
            Sample((U(2, 2, *sp), U(2, 3, *k, seed=1), U(3, seed=2)), name="bias"),
            Sample((U(1, 2, *sp), U(2, 2, *k, seed=1)), {"stride": 2, "padding": 1, "output_padding": 1},
                   "stride-outpad"),
            Sample((U(1, 4, *sp), U(4, 1, *k, seed=1), U(2, seed=2)), {"groups": 2, "dilation": 2}, "groups-dilation"),
            # output_padding >= stride, allowed below the dilation: windows past the input in the backward
            Sample((U(1, 4, *sp), U(4, 2, *k, seed=1)), {"groups": 2, "dilation": 3, "output_padding": 2},
                   "outpad-past-stride"),
            Sample((NC(2, 2, *sp), U(2, 2, *k, seed=1)), name="noncontig"),
            Sample((U(2, *sp), U(2, 2, *k, seed=1)), name="unbatched"),
            Sample((_ints(1, 2, *sp), _ints(2, 2, *k, seed=1), _ints(2, seed=2)), {"stride": 2}, "int64"),
        ]
    return f


def _pool_samples(nd, maxpool):
    sp = {1: (9,), 2: (5, 6), 3: (4, 4, 3)}[nd]
    X = distinct if maxpool else U

    def f():
        out = [
            Sample((X(2, 2, *sp),), {"kernel_size": 2}, "k2"),
            Sample((X(1, 2, *sp, seed=1),), {"kernel_size": 3, "stride": 2, "padding": 1}, "stride-pad"),
            Sample((X(1, 2, *sp, seed=2),), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
                   "ceil"),
            Sample((X(2, *sp, seed=3),), {"kernel_size": 2, "stride": 1}, "unbatched-overlap"),
            Sample((np.swapaxes(X(2, 1, *sp, seed=4), 0, 1),), {"kernel_size": 2}, "noncontig"),
        ]
        if maxpool:
            out += [
                Sample((X(1, 2, *sp, seed=5),), {"kernel_size": 2, "dilation": 2, "return_indices": True},
                       "dilation-indices"),
                Sample((np.ones((1, 1) + sp),), {"kernel_size": 2, "stride": 1}, "ties", gradcheck=False),
                Sample((np.where(np.arange(np.prod(sp)).reshape((1, 1) + sp) % 4 == 1, np.nan, 1.0),),
                       {"kernel_size": 2, "return_indices": True}, "nan", gradcheck=False),
            ]
        else:
            out += [
                Sample((X(1, 2, *sp, seed=5),), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                                                 "count_include_pad": False}, "exclude-pad"),
                # int64 (PyTorch's CPU kernel): the quotient truncated toward zero
                Sample((_ints(1, 2, *sp, seed=7) * 3,), {"kernel_size": 3, "stride": 2, "padding": 1}, "int64"),
            ]
            if nd > 1:
                out.append(Sample((X(1, 2, *sp, seed=6),), {"kernel_size": 2, "padding": 1, "divisor_override": 3},
                                  "divisor-override"))
        return out
    return f


def _pool_errors(nd, name):
    sp = {1: (9,), 2: (5, 6), 3: (4, 4, 3)}[nd]

    def f():
        return [
            ErrorInput((U(1, 2, *sp),), {"kernel_size": 2, "padding": 2}, ValueError, f"{name}: padding should be"),
            ErrorInput((U(*sp),) if nd > 1 else (U(9),), {"kernel_size": 2}, ShapeMismatch, name),
            ErrorInput((U(1, 1, *sp),), {"kernel_size": 20}, ShapeMismatch, f"{name}: input spatial size"),
        ]
    return f


def _interp_entry(name, nd, mode, dtypes=("float32", "float64")):
    sp = {1: (5,), 2: (4, 3), 3: (3, 2, 3)}[nd]
    is_linear = mode in ("linear", "cubic")

    def samples():
        out = [
            Sample((U(2, 2, *sp),), {"size": tuple(s + 2 for s in sp)}, "up-size"),
            Sample((U(1, 2, *sp, seed=1),), {"scale_factor": 1.7}, "scale-factor"),
            Sample((U(1, 2, *sp, seed=2),), {"size": tuple(max(1, s - 1) for s in sp)}, "down-size"),
            Sample((np.swapaxes(U(2, 1, *sp, seed=3), 0, 1),), {"scale_factor": 2}, "noncontig"),
        ]
        if is_linear:
            out.append(Sample((U(1, 2, *sp, seed=4),), {"size": tuple(s + 3 for s in sp), "align_corners": True},
                              "align-corners"))
            out.append(Sample((U(1, 1, *sp, seed=5),), {"size": (1,) * nd, "align_corners": True}, "align-size1"))
            out.append(Sample((U(1, 2, *sp, seed=6),), {"scale_factor": 1.7, "recompute_scale_factor": True},
                              "recompute-scale"))
            out.append(Sample((U(1, 2, *sp, seed=7),), {"scale_factor": 0.6}, "down-scale"))
            # an inf reaches only the outputs that read it (NaN where a zero-weight tap meets it, as PyTorch)
            xi = U(1, 2, *sp, seed=8)
            xi.flat[0], xi.flat[3] = -np.inf, np.inf
            out.append(Sample((xi,), {"scale_factor": 1.7}, "non-finite", gradcheck=False))
        else:
            out.append(Sample((U(1, 2, *sp, seed=4),), {"scale_factor": 1.5, "exact": True}, "nearest-exact"))
        return out

    full_mode = ("bicubic" if mode == "cubic" else {1: "linear", 2: "bilinear", 3: "trilinear"}[nd]) if is_linear \
        else "nearest"

    def op(x, exact=False, mode=None, **kw):
        return pl.nn.functional.interpolate(x, mode=mode or ("nearest-exact" if exact else full_mode), **kw)

    def ref(x, exact=False, mode=None, **kw):
        return F.interpolate(x, mode=mode or ("nearest-exact" if exact else full_mode), **kw)

    def errors():
        return [ErrorInput((U(1, 1, *sp),), {}, ValueError, "interpolate: exactly one of size or scale_factor"),
                ErrorInput((U(1, 1, *sp),), {"size": 3, "mode": "bicubic", "antialias": True}, NotImplementedError,
                           "antialias"),
                ErrorInput((U(1, 1, *sp),), {"size": 3, "mode": "area", "align_corners": True}, ValueError,
                           "align_corners"),
                ErrorInput((U(1, 1, *sp),), {"size": 3, "recompute_scale_factor": True}, ValueError,
                           "recompute_scale_factor is not meaningful")]

    return OpEntry(name, op, ref, samples, dtypes=dtypes, error_inputs=errors if nd == 2 else lambda: [],
                   covers=("interpolate",))


def _adaptive_samples(nd, maxpool):
    sp = {1: (7,), 2: (5, 7), 3: (4, 3, 5)}[nd]
    X = distinct if maxpool else U

    def f():
        out = [
            Sample((X(2, 2, *sp),), {"output_size": 3}, "overlapping"),
            Sample((X(1, 2, *sp, seed=1),), {"output_size": 1}, "global"),
            Sample((X(2, *sp, seed=2),), {"output_size": tuple(s + 1 for s in sp)}, "unbatched-up"),
            Sample((np.swapaxes(X(2, 1, *sp, seed=3), 0, 1),), {"output_size": 2}, "noncontig"),
        ]
        if nd > 1:
            out.append(Sample((X(1, 1, *sp, seed=4),), {"output_size": (None,) + (2,) * (nd - 1)}, "none-keeps"))
        if maxpool:
            out.append(Sample((X(1, 1, *sp, seed=5),), {"output_size": 2, "return_indices": True}, "indices"))
        return out
    return f


def _adaptive_errors(nd, name):
    return lambda: [ErrorInput((U(1, 1, 0, *(3,) * (nd - 1)),), {"output_size": 2}, ShapeMismatch,
                               f"{name}: expected a non-empty input")]


ENTRIES = [
    OpEntry("unfold", pl.unfold, F.unfold,
            lambda: [Sample((U(2, 2, 4, 3),), {"kernel_size": 2}, "k2"),
                     Sample((U(1, 2, 5, 4),), {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": 2},
                            "all-args"),
                     Sample((U(2, 4, 3),), {"kernel_size": 2, "stride": 1}, "unbatched"),
                     Sample((NC(2, 2, 3, 4),), {"kernel_size": 2, "padding": (1, 0)}, "noncontig"),
                     Sample((U(0, 2, 3, 3),), {"kernel_size": 2}, "empty-batch")],
            error_inputs=lambda: [ErrorInput((U(1, 1, 2, 2),), {"kernel_size": 3}, ShapeMismatch, "unfold: input"),
                                  ErrorInput((U(4),), {"kernel_size": 1}, ShapeMismatch, "unfold: expected a 3-d")]),
    OpEntry("fold", pl.fold, F.fold,
            lambda: [Sample((U(2, 8, 6),), {"output_size": (3, 4), "kernel_size": 2}, "k2"),
                     Sample((U(1, 12, 12),), {"output_size": (5, 6), "kernel_size": 2, "padding": 1, "stride": 2},
                            "pad-stride"),
                     Sample((U(8, 4),), {"output_size": (4, 3), "kernel_size": (2, 2), "dilation": (2, 1)},
                            "unbatched-dilation"),
                     Sample((np.swapaxes(U(6, 8, 2), 0, 2).copy().swapaxes(1, 2)[:2].swapaxes(1, 2),),
                            {"output_size": (3, 4), "kernel_size": 2}, "noncontig")],
            error_inputs=lambda: [ErrorInput((U(1, 7, 6),), {"output_size": (3, 4), "kernel_size": 2}, ShapeMismatch,
                                             "divisible"),
                                  ErrorInput((U(1, 8, 5),), {"output_size": (3, 4), "kernel_size": 2}, ShapeMismatch,
                                             "fold: given output_size")]),
    *[OpEntry(f"conv{nd}d", getattr(pl, f"conv{nd}d"), getattr(F, f"conv{nd}d"), _conv_samples(nd),
              error_inputs=_conv_errors(nd), atol=1e-5, rtol=1e-5) for nd in (1, 2, 3)],
    *[OpEntry(f"conv_transpose{nd}d", getattr(pl, f"conv_transpose{nd}d"), getattr(F, f"conv_transpose{nd}d"),
              _conv_t_samples(nd), atol=1e-5, rtol=1e-5,
              error_inputs=lambda nd=nd: [ErrorInput((U(1, 2, *(3,) * nd), U(2, 2, *(2,) * nd)),
                                                     {"stride": 2, "output_padding": 2}, ValueError, "output_padding"),
                                          *_int_conv_errors(f"conv_transpose{nd}d", True)])
      for nd in (1, 2, 3)],
    *[OpEntry(f"max_pool{nd}d", getattr(pl, f"max_pool{nd}d"), getattr(F, f"max_pool{nd}d"), _pool_samples(nd, True),
              error_inputs=_pool_errors(nd, f"max_pool{nd}d")) for nd in (1, 2, 3)],
    *[OpEntry(f"avg_pool{nd}d", getattr(pl, f"avg_pool{nd}d"), getattr(F, f"avg_pool{nd}d"), _pool_samples(nd, False),
              error_inputs=_pool_errors(nd, f"avg_pool{nd}d")) for nd in (1, 2, 3)],
    *[OpEntry(f"adaptive_avg_pool{nd}d", getattr(pl, f"adaptive_avg_pool{nd}d"), getattr(F, f"adaptive_avg_pool{nd}d"),
              _adaptive_samples(nd, False), error_inputs=_adaptive_errors(nd, f"adaptive_avg_pool{nd}d"))
      for nd in (1, 2, 3)],
    *[OpEntry(f"adaptive_max_pool{nd}d", getattr(pl, f"adaptive_max_pool{nd}d"), getattr(F, f"adaptive_max_pool{nd}d"),
              _adaptive_samples(nd, True), error_inputs=_adaptive_errors(nd, f"adaptive_max_pool{nd}d"))
      for nd in (1, 2, 3)],
    _interp_entry("interpolate_nearest_1d", 1, "nearest"),
    _interp_entry("interpolate_nearest_2d", 2, "nearest"),
    _interp_entry("interpolate_nearest_3d", 3, "nearest"),
    _interp_entry("interpolate_linear", 1, "linear"),
    _interp_entry("interpolate_bilinear", 2, "linear"),
    _interp_entry("interpolate_trilinear", 3, "linear"),
    _interp_entry("interpolate_bicubic", 2, "cubic"),
    # mode='area' is adaptive average pooling to the output size
    *[OpEntry(f"adaptive_avg_pool{nd}d", lambda x, **kw: pl.nn.functional.interpolate(x, mode="area", **kw),
              lambda x, **kw: F.interpolate(x, mode="area", **kw),
              lambda nd=nd: [Sample((U(2, 2, *(5, 4, 3)[:nd]),), {"size": (3, 2, 2)[:nd]}, "down"),
                             Sample((U(1, 2, *(5, 4, 3)[:nd], seed=1),), {"scale_factor": 0.5}, "scale"),
                             Sample((U(1, 2, *(2, 3, 2)[:nd], seed=2),), {"size": (3, 5, 3)[:nd]}, "up")],
              variant="area") for nd in (1, 2, 3)],
    OpEntry("pixel_shuffle", pl.pixel_shuffle, F.pixel_shuffle,
            lambda: [Sample((U(1, 8, 2, 3), 2)), Sample((U(4, 2, 2), 2), name="unbatched")]),
    OpEntry("pixel_unshuffle", pl.pixel_unshuffle, F.pixel_unshuffle,
            lambda: [Sample((U(1, 2, 4, 6), 2)), Sample((U(1, 4, 4), 2), name="unbatched")]),
    OpEntry("channel_shuffle", pl.channel_shuffle, F.channel_shuffle,
            lambda: [Sample((U(2, 6, 2, 3), 3)), Sample((U(1, 4, 3), 2), name="1d"),
                     Sample((U(1, 4, 2, 1, 2), 4), name="3d"), Sample((U(0, 4, 2), 2), name="empty-batch")],
            error_inputs=lambda: [ErrorInput((U(1, 5, 2), 2), exc=ShapeMismatch, match="channel_shuffle: number of")]),
]
