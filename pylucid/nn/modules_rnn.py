"""Recurrent layers: ``RNNCell``, ``LSTMCell``, ``GRUCell``, ``RNN``, ``LSTM``, ``GRU``, as ``torch.nn``.

Parameter names, shapes and gate orders are PyTorch's (``weight_ih_l0``,
``weight_hh_l0_reverse``, ...; LSTM gates ``i, f, g, o``; GRU gates ``r, z, n``),
so a ``state_dict`` copied from a torch module gives the same results. Every
parameter starts as ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``.

Built from pylucid ops: the input projection of a whole sequence is one GEMM
per layer and direction. An LSTM (without ``proj_size``) or GRU layer then runs its whole recurrence as one
op (``pylucid.ops.rnn.lstm_layer`` / ``gru_layer``: a loop over the steps on raw arrays, each way; on the CPU
an LSTM layer's projection joins it, ``lstm_input_layer``, oneDNN's LSTM primitive where installed); the
others (and every layer under a function transform or the ONNX tracer) loop over the time steps in Python,
each step a matmul, an add and one fused cell op (``pylucid.ops.rnn``).

>>> import pylucid
>>> from pylucid import nn
>>> lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True)
>>> lstm
LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True)
>>> out, (h, c) = lstm(pylucid.zeros(2, 5, 3))
>>> out.shape, h.shape, c.shape
((2, 5, 8), (4, 2, 4), (4, 2, 4))
"""

from __future__ import annotations

import math

import pylucid as _pl

from .. import dtypes as _dt
from ..errors import ShapeMismatch
from ..ops import _op
from ..ops import rnn as _rnn_ops
from . import init
from .module import Module, Parameter

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "RNNBase", "RNN", "LSTM", "GRU"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _factory(device, dtype):
    return {"device": device, "dtype": _dt.as_dtype(dtype) if dtype is not None else None}


def _linear(x, w, b=None):
    y = _pl.matmul(x, _pl.transpose(w, -1, -2))
    return y if b is None else y + b


def _cell_step(mode, x_proj, h, c, w_hh, b_hh, hidden, w_hr=None, w_hh_t=None):
    """One time step given the input projection ``x_proj = x W_ih^T + b_ih``; returns (h', c').

    ``w_hh_t``: ``W_hh^T`` made once for a whole sequence (else transposed here). The LSTM and GRU gate
    arithmetic is one fused op each (``pylucid.ops.rnn``)."""
    hp = _pl.matmul(h, w_hh_t if w_hh_t is not None else _pl.transpose(w_hh, -1, -2))
    if b_hh is not None:
        hp = hp + b_hh
    if mode == "GRU":
        return _rnn_ops.gru_gates(x_proj, hp, h), None
    gates = x_proj + hp
    if mode == "LSTM":
        h, c = _rnn_ops.lstm_gates(gates, c)
        if w_hr is not None:
            h = _linear(h, w_hr)
        return h, c
    return (_pl.tanh(gates) if mode == "RNN_TANH" else _pl.relu(gates)), None


def _check_input(module, input, batched_ndim: int) -> bool:
    """Whether ``input`` of a cell (``batched_ndim`` 2) or network (3) is batched; ShapeMismatch unless it has
    ``batched_ndim`` or ``batched_ndim - 1`` dims and ``module.input_size`` features."""
    name = type(module).__name__
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        raise ShapeMismatch(f"{name}: expected a {batched_ndim - 1}-d (unbatched) or {batched_ndim}-d input, got "
                            f"shape {tuple(input.shape)}")
    if input.shape[-1] != module.input_size:
        raise ShapeMismatch(f"{name}: input has {input.shape[-1]} features, expected input_size={module.input_size}")
    return input.ndim == batched_ndim


# ----------------------------------------------------------------------------------------------------------
# cells
# ----------------------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Shared parameters of the cells: ``weight_ih`` (G*H, in), ``weight_hh`` (G*H, H), ``bias_ih``, ``bias_hh``."""

    _mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        fk = _factory(device, dtype)
        self.weight_ih = Parameter(_pl.empty(num_chunks * hidden_size, input_size, **fk))
        self.weight_hh = Parameter(_pl.empty(num_chunks * hidden_size, hidden_size, **fk))
        if bias:
            self.bias_ih = Parameter(_pl.empty(num_chunks * hidden_size, **fk))
            self.bias_hh = Parameter(_pl.empty(num_chunks * hidden_size, **fk))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input, hx):
        batched = _check_input(self, input, 2)
        x = input if batched else _pl.unsqueeze(input, 0)
        if hx is None:
            return x, None, batched
        hx = tuple(hx) if isinstance(hx, (tuple, list)) else (hx,)
        out = []
        for h in hx:
            if h.ndim != x.ndim - (0 if batched else 1) or h.shape[-1] != self.hidden_size:
                raise ShapeMismatch(f"{type(self).__name__}: hidden state of shape {tuple(h.shape)} does not match "
                                    f"input of shape {tuple(input.shape)} and hidden_size={self.hidden_size}")
            out.append(h if batched else _pl.unsqueeze(h, 0))
        return x, out, batched

    def _zeros(self, x):
        return _pl.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)


class RNNCell(RNNCellBase):
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ``relu``).

    >>> import pylucid
    >>> cell = pylucid.nn.RNNCell(3, 2)
    >>> cell(pylucid.zeros(4, 3)).shape
    (4, 2)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; accepted: 'tanh', 'relu'")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        x, hx, batched = self._prepare(input, hx)
        h = hx[0] if hx is not None else self._zeros(x)
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        h, _ = _cell_step(mode, _linear(x, self.weight_ih, self.bias_ih), h, None, self.weight_hh, self.bias_hh,
                          self.hidden_size)
        return h if batched else _pl.squeeze(h, 0)


class LSTMCell(RNNCellBase):
    """LSTM cell: gates ``i, f, g, o`` (in that order in the weights); returns ``(h', c')``.

    ``c' = f*c + i*g``, ``h' = o*tanh(c')`` with ``i, f, o`` sigmoids and ``g`` a tanh.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, hx, batched = self._prepare(input, hx)
        if hx is None:
            hx = [self._zeros(x), self._zeros(x)]
        elif len(hx) != 2:
            raise ValueError("LSTMCell: hx must be a tuple (h, c)")
        h, c = _cell_step("LSTM", _linear(x, self.weight_ih, self.bias_ih), hx[0], hx[1], self.weight_hh,
                          self.bias_hh, self.hidden_size)
        if not batched:
            h, c = _pl.squeeze(h, 0), _pl.squeeze(c, 0)
        return h, c


class GRUCell(RNNCellBase):
    """GRU cell: gates ``r, z, n``; ``n = tanh(x W_in^T + b_in + r*(h W_hn^T + b_hn))``, ``h' = (1-z)*n + z*h``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, hx, batched = self._prepare(input, hx)
        h = hx[0] if hx is not None else self._zeros(x)
        h, _ = _cell_step("GRU", _linear(x, self.weight_ih, self.bias_ih), h, None, self.weight_hh, self.bias_hh,
                          self.hidden_size)
        return h if batched else _pl.squeeze(h, 0)


# ----------------------------------------------------------------------------------------------------------
# multi-layer recurrent networks
# ----------------------------------------------------------------------------------------------------------
class RNNBase(Module):
    """Shared multi-layer, optionally bidirectional recurrence (PyTorch's ``RNNBase``)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout should be a number in range [0, 1], got {dropout!r}")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if proj_size < 0:
            raise ValueError(f"{name}: proj_size must be >= 0, got {proj_size}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size is supported only by LSTM")
        if proj_size >= hidden_size:
            if proj_size:
                raise ValueError(f"{name}: proj_size ({proj_size}) must be smaller than hidden_size ({hidden_size})")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gates = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        dirs = 2 if bidirectional else 1
        fk = _factory(device, dtype)
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else real_hidden * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
                setattr(self, "weight_ih" + sfx, Parameter(_pl.empty(gates, layer_in, **fk)))
                setattr(self, "weight_hh" + sfx, Parameter(_pl.empty(gates, real_hidden, **fk)))
                if bias:
                    setattr(self, "bias_ih" + sfx, Parameter(_pl.empty(gates, **fk)))
                    setattr(self, "bias_hh" + sfx, Parameter(_pl.empty(gates, **fk)))
                if proj_size > 0:
                    setattr(self, "weight_hr" + sfx, Parameter(_pl.empty(proj_size, hidden_size, **fk)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Does nothing, as documented for PyTorch off cuDNN.

        PyTorch uses this to pack the weights into one contiguous buffer for cuDNN's fused RNN
        kernels; it is a no-op unless the module is on a GPU with cuDNN enabled. pylucid runs the
        recurrence with its own ops (one GEMM per layer and direction for the inputs, then the time
        loop), never with cuDNN's RNN, so there is nothing to pack and the weights stay as they are.
        """

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _weights(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
        g = self._parameters.get
        return (g("weight_ih" + sfx), g("weight_hh" + sfx), g("bias_ih" + sfx), g("bias_hh" + sfx),
                g("weight_hr" + sfx))

    def _check_hidden(self, h, expected, what):
        if tuple(h.shape) != expected:
            raise ShapeMismatch(f"{type(self).__name__}: expected {what} of shape {expected}, got {tuple(h.shape)}")

    def forward(self, input, hx=None):
        name = type(self).__name__
        batched = _check_input(self, input, 3)
        x = input
        if not batched:
            x = _pl.unsqueeze(x, 1)
        elif self.batch_first:
            x = _pl.transpose(x, 0, 1)
        seq_len, n = x.shape[0], x.shape[1]
        dirs = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        is_lstm = self.mode == "LSTM"
        h_shape = (self.num_layers * dirs, n, real_hidden)
        c_shape = (self.num_layers * dirs, n, self.hidden_size)
        if hx is None:
            h0 = _pl.zeros(*h_shape, dtype=x.dtype, device=x.device)
            c0 = _pl.zeros(*c_shape, dtype=x.dtype, device=x.device) if is_lstm else None
        else:
            if is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise ValueError(f"{name}: hx must be a tuple (h_0, c_0)")
                h0, c0 = hx
            else:
                h0, c0 = hx, None
            if not batched:
                h0 = _pl.unsqueeze(h0, 1)
                c0 = _pl.unsqueeze(c0, 1) if c0 is not None else None
            self._check_hidden(h0, h_shape, "hidden state h_0")
            if c0 is not None:
                self._check_hidden(c0, c_shape, "cell state c_0")
        h_n, c_n = [], []
        layer_in = x
        # the whole recurrence of a layer as one op, unless a function transform or the ONNX tracer is active:
        # those see the cell ops (the tracer exports those, not the fused layers)
        fused = not _op.transform_active()
        # on the CPU a whole LSTM layer, its input projection included, is one op (oneDNN's LSTM where installed);
        # elsewhere the projection is a linear op before the recurrence's
        on_cpu = x.device.type == "cpu"
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
                idx = layer * dirs + d
                h = h0[idx]
                c = c0[idx] if c0 is not None else None
                # the input projection of the whole sequence: one GEMM over the folded (time, batch) rows (with
                # b_hh in its bias too, except for the GRU, whose b_hh sits inside the reset gate's product)
                bias = b_ih
                if b_hh is not None and self.mode != "GRU":
                    bias, b_hh = b_ih + b_hh, None
                if fused and is_lstm and w_hr is None and on_cpu:
                    # the projection inside the layer op too: oneDNN's LSTM primitive takes the whole layer
                    out, h, c = _rnn_ops.lstm_input_layer(layer_in, h, c, w_ih, w_hh, bias, reverse=d == 1)
                    outs.append(out)
                    h_n.append(h)
                    c_n.append(c)
                    continue
                x_proj = _pl.nn.functional.linear(layer_in, w_ih, bias)
                if fused and is_lstm and w_hr is None:
                    # the whole recurrence as one op: a raw-array loop, one GEMM per step each way
                    out, h, c = _rnn_ops.lstm_layer(x_proj, h, c, w_hh, reverse=d == 1)
                    outs.append(out)
                    h_n.append(h)
                    c_n.append(c)
                    continue
                if fused and self.mode == "GRU":
                    out, h = _rnn_ops.gru_layer(x_proj, h, w_hh, b_hh, reverse=d == 1)
                    outs.append(out)
                    h_n.append(h)
                    continue
                x_steps = _pl.unbind(x_proj, 0) if seq_len else ()
                w_hh_t = _pl.transpose(w_hh, 0, 1)
                steps = range(seq_len - 1, -1, -1) if d == 1 else range(seq_len)
                seq = [None] * seq_len
                for t in steps:
                    h, c = _cell_step(self.mode, x_steps[t], h, c, w_hh, b_hh, self.hidden_size, w_hr, w_hh_t)
                    seq[t] = h
                outs.append(_pl.stack(seq, 0) if seq_len else _pl.zeros(0, n, real_hidden, dtype=x.dtype,
                                                                        device=x.device))
                h_n.append(h)
                if c is not None:
                    c_n.append(c)
            layer_in = outs[0] if dirs == 1 else _pl.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = _pl.nn.functional.dropout(layer_in, self.dropout, True)
        output = layer_in
        h_n = _pl.stack(h_n, 0)
        c_n = _pl.stack(c_n, 0) if is_lstm else None
        if not batched:
            output = _pl.squeeze(output, 1)
            h_n = _pl.squeeze(h_n, 1)
            c_n = _pl.squeeze(c_n, 1) if c_n is not None else None
        elif self.batch_first:
            output = _pl.transpose(output, 0, 1)
        return (output, (h_n, c_n)) if is_lstm else (output, h_n)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or ``relu``), stacked and
    optionally bidirectional; returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; accepted: 'tanh', 'relu'")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)


class LSTM(RNNBase):
    """Multi-layer LSTM (gates ``i, f, g, o``), optional ``proj_size``; returns ``(output, (h_n, c_n))``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """Multi-layer GRU (gates ``r, z, n``); returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)
