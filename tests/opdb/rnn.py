"""Op-database entries for the recurrent cell ops (``pylucid/ops/rnn.py``), against ``torch.lstm_cell`` /
``torch.gru_cell``: with and without biases, a non-contiguous input, an unbatched-size batch of one."""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch
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


ENTRIES = [
    OpEntry("lstm_cell", _lstm, _lstm_ref, _samples(4, True), dtypes=ALL_FLOAT_DTYPES,
            error_inputs=lambda: [ErrorInput((U(3, 4), U(3, 2), U(3, 2), U(8, 3), U(8, 2)), exc=ShapeMismatch,
                                             match="matmul")]),
    OpEntry("gru_cell", pl.gru_cell, _gru_ref, _samples(3, False), dtypes=ALL_FLOAT_DTYPES),
]
