"""Op-database entries for the recurrent ops (``pylucid/ops/rnn.py``), against ``torch.lstm_cell`` /
``torch.gru_cell``: with and without biases, a non-contiguous input, an unbatched-size batch of one; and the
whole-sequence ``lstm_layer`` / ``gru_layer`` against the unrolled torch cells, both directions; and
``lstm_input_layer`` (the layer with its input projection: oneDNN's LSTM in float32 on the CPU) against a one-layer
``torch.nn.LSTM`` run with the same weights."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch
from pylucid.ops.rnn import gru_layer, lstm_input_layer, lstm_layer
from tests.opdb import ALL_FLOAT_DTYPES, ErrorInput, OpEntry, Sample, rng


def U(*shape, seed=0):
    return rng(seed).uniform(-1.5, 1.5, size=shape)


def _samples(gates, cell_state):
    def f():
        b, i, h = 3, 4, 2
        # the LSTM's (h, c) as two positional arrays (the suite casts arrays, not tuples, to each dtype)
        hx = (U(b, h, seed=1), U(b, h, seed=2)) if cell_state else (U(b, h, seed=1),)
        hx1 = (U(1, h, seed=1), U(1, h, seed=2)) if cell_state else (U(1, h, seed=1),)
        w = (U(gates * h, i, seed=3), U(gates * h, h, seed=4))
        bias = (U(gates * h, seed=5), U(gates * h, seed=6))
        return [
            Sample((U(b, i),) + hx + w + bias, name="bias"),
            Sample((U(b, i),) + hx + w, name="nobias"),
            Sample((np.swapaxes(U(i, b), 0, 1),) + hx + w + bias, name="noncontig"),
            Sample((U(1, i),) + hx1 + w + bias, name="batch1"),
        ]
    return f


def _lstm(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    return pl.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)


def _lstm_ref(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    return torch.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)


def _gru_ref(x, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return torch.gru_cell(x, hx, w_ih, w_hh, b_ih, b_hh)


def _layer_samples():
    t, b, h = 3, 2, 2
    args = (U(t, b, 4 * h), U(b, h, seed=1), U(b, h, seed=2), U(4 * h, h, seed=3))
    return [
        Sample(args, name="forward"),
        Sample(args, {"reverse": True}, name="reverse"),
        Sample((U(1, 1, 4 * h),) + tuple(U(1, h, seed=k) for k in (1, 2)) + (U(4 * h, h, seed=3),), name="one_step"),
        Sample((np.swapaxes(U(b, t, 4 * h), 0, 1),) + args[1:], name="noncontig"),
    ]


def _layer(x_proj, h0, c0, w_hh, reverse=False):
    return lstm_layer(x_proj, h0, c0, w_hh, reverse=reverse)


def _layer_ref(x_proj, h0, c0, w_hh, reverse=False):
    h, c, out = h0, c0, [None] * x_proj.shape[0]
    for t in reversed(range(x_proj.shape[0])) if reverse else range(x_proj.shape[0]):
        i, f, g, o = (x_proj[t] + h @ w_hh.T).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        out[t] = h
    return torch.stack(out), h, c


def _gru_layer_samples():
    t, b, h = 3, 2, 2
    args = (U(t, b, 3 * h), U(b, h, seed=1), U(3 * h, h, seed=3), U(3 * h, seed=4))
    return [
        Sample(args, name="forward"),
        Sample(args, {"reverse": True}, name="reverse"),
        Sample(args[:3], name="nobias"),
        Sample((np.swapaxes(U(b, t, 3 * h), 0, 1),) + args[1:], name="noncontig"),
    ]


def _gru_layer(x_proj, h0, w_hh, b_hh=None, reverse=False):
    return gru_layer(x_proj, h0, w_hh, b_hh, reverse=reverse)


def _gru_layer_ref(x_proj, h0, w_hh, b_hh=None, reverse=False):
    # torch.gru_cell with an identity input weight: its input is the projection itself
    eye = torch.eye(x_proj.shape[-1], dtype=x_proj.dtype)
    h, out = h0, [None] * x_proj.shape[0]
    for t in reversed(range(x_proj.shape[0])) if reverse else range(x_proj.shape[0]):
        out[t] = h = torch.gru_cell(x_proj[t], h, eye, w_hh, None, b_hh)
    return torch.stack(out), h


def _input_layer_samples():
    t, b, c, h = 3, 2, 3, 2
    args = (U(t, b, c), U(b, h, seed=1), U(b, h, seed=2), U(4 * h, c, seed=3), U(4 * h, h, seed=4), U(4 * h, seed=5))
    return [
        Sample(args, name="forward"),
        Sample(args, {"reverse": True}, name="reverse"),
        Sample(args[:5], name="nobias"),
        Sample((U(1, 1, c),) + tuple(U(1, h, seed=k) for k in (1, 2)) + args[3:], name="one_step"),
        Sample((np.swapaxes(U(b, t, c), 0, 1),) + args[1:], name="noncontig"),
    ]


def _input_layer(x, h0, c0, w_ih, w_hh, bias=None, reverse=False):
    return lstm_input_layer(x, h0, c0, w_ih, w_hh, bias, reverse=reverse)


def _input_layer_ref(x, h0, c0, w_ih, w_hh, bias=None, reverse=False):
    proj = x @ w_ih.T if bias is None else x @ w_ih.T + bias
    return _layer_ref(proj, h0, c0, w_hh, reverse)


ENTRIES = [
    OpEntry("lstm_input_layer", _input_layer, _input_layer_ref, _input_layer_samples, dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(3, 2, 3), U(2, 2), U(2, 2), U(8, 4), U(8, 2)), exc=ShapeMismatch,
                                             match="lstm_input_layer")]),

    OpEntry("lstm_layer", _layer, _layer_ref, _layer_samples, dtypes=ALL_FLOAT_DTYPES),
    OpEntry("gru_layer", _gru_layer, _gru_layer_ref, _gru_layer_samples, dtypes=ALL_FLOAT_DTYPES),
    OpEntry("lstm_cell", _lstm, _lstm_ref, _samples(4, True), dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(3, 4), U(3, 2), U(3, 2), U(8, 3), U(8, 2)), exc=ShapeMismatch,
                                             match="matmul")]),
    OpEntry("gru_cell", pl.gru_cell, _gru_ref, _samples(3, False), dtypes=ALL_FLOAT_DTYPES),
]
