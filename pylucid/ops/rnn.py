"""Recurrent cell ops: the gate arithmetic of one LSTM / GRU time step as ONE op each.

A recurrent layer spends its time in the per-step Python work, not in arithmetic (the gates of a
200-unit LSTM at batch 20 are 16k numbers): unfused, one LSTM step is ~17 ops and ~17 autograd nodes.
Here the input projections of a whole sequence are one GEMM (done by the caller), and each step is
``gates = x_proj[t] + h @ W_hh^T`` (two ops) plus one fused cell op:

- ``LstmCell``: ``(gates, c) -> (h', c')`` with ``i, f, g, o = sigma, sigma, tanh, sigma`` of the
  four gate blocks, ``c' = f c + i g``, ``h' = o tanh(c')`` (PyTorch's gate order ``i, f, g, o``);
- ``GruCell``: ``(x_gates, h_gates, h) -> h'`` with ``r, z = sigma(x_r + h_r), sigma(x_z + h_z)``,
  ``n = tanh(x_n + r h_n)``, ``h' = (1 - z) n + z h`` (gate order ``r, z, n``; ``h_gates`` includes
  ``b_hh``, which PyTorch keeps inside the ``r`` product).

A whole LSTM layer direction is one op as well, ``LstmLayer`` (``lstm_layer``, what ``nn.LSTM`` runs): its
forward and first-order backward loop over the steps on raw arrays, so a sequence of T steps costs one
autograd node instead of 3 T (its docstring has the details).

Each cell op has a forward on raw arrays that keeps the activations for the backward, a first-order
``backward_fast`` on raw arrays, and a graph-mode ``backward`` in pylucid ops (recomputing the
activations from the saved inputs), so higher derivatives work. Half precision is computed in float32
and rounded once per output. The public functions are PyTorch's ``torch.lstm_cell`` and
``torch.gru_cell``.
"""

from __future__ import annotations

from .._tensor import Tensor
from ..errors import ShapeMismatch
from ._op import Op, apply
from ._utils import check_tensor
from .registry import declare
from .schema import PROMOTE, OpSchema

_HALF_NAMES = ("float16", "bfloat16")


def _sig(be, x):
    # 1 / (1 + exp(-x)) overflows exp for x << 0 in float32 only to inf, giving the exact 0: no NaN
    with be.errstate():
        return 1.0 / (1.0 + be.exp(-x))


def _up(be, a):
    """float32 for half inputs (the gates are computed in float32 and rounded once)."""
    # itemsize first: ``dtype.name`` builds a string on every call, and this runs several times per step
    return a.astype("float32") if a.dtype.itemsize == 2 and a.dtype.name in _HALF_NAMES else a


class LstmCell(Op):
    """``(gates (B, 4H), c (B, H)) -> (h', c')``: the pointwise part of an LSTM step (see the module)."""

    schema = OpSchema("lstm_cell", amp_policy=PROMOTE, saves_input=True, family="nn", accepts=("float",))
    n_outputs = 3
    differentiable_outputs = (True, True, False)

    @staticmethod
    def forward(be, gates, c):
        dt = gates.dtype
        a = _up(be, gates)
        hid = a.shape[-1] // 4
        act = be.empty(a.shape[:-1] + (5 * hid,), dtype=a.dtype)  # i, f, g, o, tanh(c')
        s = act[..., :4 * hid]
        with be.errstate():  # sigmoid of all four blocks in place: exp(-x) may overflow to inf, giving 0
            be.negative(a, out=s)
            be.exp(s, out=s)
            s += 1
            be.reciprocal(s, out=s)
        be.tanh(a[..., 2 * hid:3 * hid], out=act[..., 2 * hid:3 * hid])
        i, f, g, o = (act[..., k * hid:(k + 1) * hid] for k in range(4))
        c2 = f * _up(be, c)
        c2 += i * g
        tc = act[..., 4 * hid:]
        be.tanh(c2, out=tc)
        return (o * tc).astype(dt, copy=False), c2.astype(c.dtype, copy=False), act

    def save_extra(self, arrays, out):
        self.extra = out[2]

    def backward_fast(self, be, gh, gc, _g_act=None):
        act = self.extra
        c = _up(be, self.input(1)._data)
        hid = act.shape[-1] // 5
        i, f, g, o, tc = (act[..., k * hid:(k + 1) * hid] for k in range(5))
        gh, gc = _up(be, gh), _up(be, gc)
        dc2 = gc + gh * o * (1 - tc * tc)
        da = be.empty(act.shape[:-1] + (4 * hid,), dtype=act.dtype)
        da[..., :hid] = dc2 * g * i * (1 - i)
        da[..., hid:2 * hid] = dc2 * c * f * (1 - f)
        da[..., 2 * hid:3 * hid] = dc2 * i * (1 - g * g)
        da[..., 3 * hid:] = gh * tc * o * (1 - o)
        dt_a, dt_c = self.input(0)._data.dtype, self.input(1)._data.dtype
        ea, ec = self.next_edges
        return (da.astype(dt_a, copy=False) if ea is not None else None,
                (dc2 * f).astype(dt_c, copy=False) if ec is not None else None)

    def backward(self, gh, gc, _g_act=None):
        return _lstm_cell_grad(self.input(0), self.input(1), gh, gc)


def _lstm_cell_grad(a, c, gh, gc):
    """``(d gates, d c)`` of one LSTM cell in pylucid ops (graph mode), the activations recomputed from the
    pre-activation ``gates`` ``a`` and the cell state ``c``."""
    from .activation import sigmoid, tanh
    from .shape import cat

    hid = a.shape[-1] // 4
    i, f, o = sigmoid(a[..., :hid]), sigmoid(a[..., hid:2 * hid]), sigmoid(a[..., 3 * hid:])
    g = tanh(a[..., 2 * hid:3 * hid])
    tc = tanh(f * c + i * g)
    dc2 = gc + gh * o * (1 - tc * tc)
    da = cat([dc2 * g * i * (1 - i), dc2 * c * f * (1 - f), dc2 * i * (1 - g * g), gh * tc * o * (1 - o)], -1)
    return da, dc2 * f


class LstmLayer(Op):
    """``(x_proj (T, B, 4H), h0 (B, H), c0 (B, H), w_hh (4H, H)) -> (out (T, B, H), h_n, c_n)``: one direction of
    one LSTM layer over a whole sequence, ``x_proj`` holding ``x_t W_ih^T + b_ih + b_hh`` of every step.

    The forward loops over the steps on raw arrays (per step one ``(B, H) x (H, 4H)`` GEMM and the gate
    arithmetic written in place), keeping the activations ``i, f, g, o``, ``tanh(c_t)``, ``c_t`` and ``h_t``.
    The first-order backward loops in reverse: per step the gate gradients and ONE GEMM for ``dh_{t-1}``;
    the weight gradient is ONE GEMM over all steps at the end (``dG^T [h_{-1}, ..., h_{T-2}]``). The graph-mode
    ``backward`` (``create_graph``) is the unrolled composition of the cell ops. Half precision is computed in
    float32 and rounded once per output.
    """

    schema = OpSchema("lstm_layer", amp_policy=PROMOTE, saves_input=True, family="nn", accepts=("float",))
    n_outputs = 5
    # the last two outputs are the saved activations (gates; tanh(c), c and h per step), never handed out
    differentiable_outputs = (True, True, True, False, False)

    @staticmethod
    def forward(be, x_proj, h0, c0, w_hh, *, reverse=False):
        dt = h0.dtype
        xp = _up(be, x_proj)
        cdt = xp.dtype
        steps, bsz, g4 = xp.shape
        hid = g4 // 4
        wt = be.ascontiguousarray(_up(be, w_hh).T)  # (H, 4H): the step's GEMM reads it row-major
        acts = be.empty((steps, bsz, g4), dtype=cdt)  # sigma(i), sigma(f), tanh(g), sigma(o)
        st = be.empty((3, steps, bsz, hid), dtype=cdt)  # tanh(c_t), c_t, h_t
        tcs, cs, hs = st[0], st[1], st[2]
        h, c = _up(be, h0), _up(be, c0)
        mm = be.xp.matmul
        tmp = be.empty((bsz, hid), dtype=cdt)
        # sigma(x) = (1 + tanh(x / 2)) / 2: the four gate blocks take ONE tanh pass between a scale and a shift
        # per column (1/2 on the sigmoid blocks, 1 on the cell block g), no exp, no reciprocal
        scale = be.full((g4,), 0.5, dtype=cdt)
        scale[2 * hid:3 * hid] = 1
        shift = be.full((g4,), 0.5, dtype=cdt)
        shift[2 * hid:3 * hid] = 0
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            a = acts[t]
            mm(h, wt, out=a)
            a += xp[t]
            a *= scale
            be.tanh(a, out=a)
            a *= scale
            a += shift
            c2 = cs[t]
            be.multiply(a[:, hid:2 * hid], c, out=c2)
            be.multiply(a[:, :hid], a[:, 2 * hid:3 * hid], out=tmp)
            c2 += tmp
            be.tanh(c2, out=tcs[t])
            be.multiply(a[:, 3 * hid:], tcs[t], out=hs[t])
            h, c = hs[t], c2
        out = hs.astype(dt)
        return out, h.astype(dt), c.astype(c0.dtype), acts, st

    def save_extra(self, arrays, out):
        self.extra = (out[3], out[4])

    def backward_fast(self, be, g_out, g_hn, g_cn, _g_acts=None, _g_st=None):
        acts, st = self.extra
        x_proj, h0, c0, w_hh = (self.input(k)._data for k in range(4))
        ex, eh, ec, ew = self.next_edges
        dg, dh, dc, dw = _lstm_loop_backward(be, acts, st, h0, c0, w_hh, g_out, g_hn, g_cn,
                                             self.params.get("reverse", False), ew is not None)
        return (dg.astype(x_proj.dtype, copy=False) if ex is not None else None,
                dh.astype(h0.dtype, copy=False) if eh is not None else None,
                dc.astype(c0.dtype, copy=False) if ec is not None else None, dw)

    def backward(self, g_out, g_hn, g_cn, _g_acts=None, _g_st=None):
        x_proj, h0, c0, w_hh = (self.input(k) for k in range(4))
        return _lstm_graph_grad(x_proj, h0, c0, w_hh, g_out, g_hn, g_cn, self.params.get("reverse", False))


def _lstm_loop_backward(be, acts, st, h0, c0, w_hh, g_out, g_hn, g_cn, reverse, need_w):
    """``(d x_proj, d h0, d c0, d W_hh)`` of :class:`LstmLayer`'s forward loop from its saved activations
    ``acts`` and states ``st`` (in the compute dtype; ``d W_hh`` in ``w_hh``'s dtype, None unless ``need_w``)."""
    cdt = acts.dtype
    steps, bsz, g4 = acts.shape
    hid = g4 // 4
    tcs, cs, hs = st[0], st[1], st[2]
    w = _up(be, w_hh)
    c0f, h0f = _up(be, c0), _up(be, h0)
    g_out = _up(be, g_out)
    dh = be.array(_up(be, g_hn), dtype=cdt, copy=True)
    dc = be.array(_up(be, g_cn), dtype=cdt, copy=True)
    # the local derivatives of every step, computed for the whole sequence at once (few passes over long
    # arrays, not many over small strided blocks): k = [g i(1-i), c_prev f(1-f), i(1-g^2), tanh(c) o(1-o)]
    # multiplies [dc, dc, dc, dh] into the gate gradients, kc = o (1 - tanh(c)^2) takes dh into dc
    k = acts * acts
    be.subtract(acts, k, out=k)
    i, f, g, o = (acts[..., j * hid:(j + 1) * hid] for j in range(4))
    k[..., :hid] *= g
    if steps:
        if reverse:
            k[:-1, :, hid:2 * hid] *= cs[1:]
            k[-1, :, hid:2 * hid] *= c0f
        else:
            k[1:, :, hid:2 * hid] *= cs[:-1]
            k[0, :, hid:2 * hid] *= c0f
    kg = k[..., 2 * hid:3 * hid]
    be.multiply(g, g, out=kg)
    be.subtract(1, kg, out=kg)
    kg *= i
    k[..., 3 * hid:] *= tcs
    kc = tcs * tcs
    be.subtract(1, kc, out=kc)
    kc *= o
    k3 = k[..., :3 * hid].reshape(steps, bsz, 3, hid)
    dg = be.empty((steps, bsz, g4), dtype=cdt)
    dg3 = dg[..., :3 * hid].reshape(steps, bsz, 3, hid)
    tmp = be.empty((bsz, hid), dtype=cdt)
    mm = be.xp.matmul
    for t in (range(steps) if reverse else range(steps - 1, -1, -1)):
        dh += g_out[t]
        be.multiply(kc[t], dh, out=tmp)
        dc += tmp
        be.multiply(k3[t], dc[:, None, :], out=dg3[t])
        be.multiply(k[t, :, 3 * hid:], dh, out=dg[t, :, 3 * hid:])
        mm(dg[t], w, out=dh)
        dc *= f[t]
    dw = None
    if need_w and steps:
        # h_{t-1} of every step in the rows of dg: one GEMM over the whole sequence
        if steps == 1:
            prev = h0f[None]
        elif reverse:
            prev = be.concatenate([hs[1:], h0f[None]], axis=0)
        else:
            prev = be.concatenate([h0f[None], hs[:-1]], axis=0)
        dw = mm(dg.reshape(steps * bsz, g4).T, prev.reshape(steps * bsz, hid)).astype(w_hh.dtype, copy=False)
    elif need_w:
        dw = be.zeros(w_hh.shape, dtype=w_hh.dtype)
    return dg, dh, dc, dw


def _lstm_graph_grad(x_proj, h0, c0, w_hh, g_out, g_hn, g_cn, reverse):
    """``(d x_proj, d h0, d c0, d W_hh)`` of one LSTM layer direction in pylucid ops (graph mode: the forward
    recomputed as the unrolled cell ops, so the formula is differentiable once more)."""
    from .linalg import matmul
    from .shape import reshape, stack, transpose

    steps, bsz, g4 = x_proj.shape
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    wt = transpose(w_hh, 0, 1)
    h, c = h0, c0
    prev, gates = [None] * steps, [None] * steps
    for t in order:
        prev[t] = (h, c)
        gates[t] = x_proj[t] + matmul(h, wt)
        h, c = lstm_gates(gates[t], c)
    dh, dc = g_hn, g_cn
    dg = [None] * steps
    for t in reversed(order):
        dh = dh + g_out[t]
        dg[t], dc = _lstm_cell_grad(gates[t], prev[t][1], dh, dc)
        dh = matmul(dg[t], w_hh)
    if not steps:
        return x_proj * 0, dh, dc, w_hh * 0
    d_proj = stack(dg, 0)
    hp = stack([p[0] for p in prev], 0)
    dw = matmul(transpose(reshape(d_proj, (steps * bsz, g4)), 0, 1), reshape(hp, (steps * bsz, hp.shape[-1])))
    return d_proj, dh, dc, dw


class LstmInputLayer(Op):
    """``(x (T, B, C), h0 (B, H), c0 (B, H), w_ih (4H, C), w_hh (4H, H), bias (4H,) or None) -> (out (T, B, H),
    h_n, c_n)``: one direction of one LSTM layer from its input sequence, the input projection included
    (``bias`` is ``b_ih + b_hh``).

    On the CPU with oneDNN (``pylucid.backends.mkldnn.enabled``) float32 runs as PyTorch's CPU LSTM does:
    oneDNN's LSTM primitive, forward and backward each one library call (the input GEMM of all steps, the
    per-step recurrent GEMMs and the gate arithmetic inside it, the weight gradients accumulated over the
    sequence there too), its workspace the one saved activation. Elsewhere (other dtypes, no oneDNN, other
    devices) the input projection is one GEMM and the recurrence :class:`LstmLayer`'s raw-array loop, each
    way. The graph-mode ``backward`` is the projection and :class:`LstmLayer`'s unrolled formula in pylucid ops.
    """

    schema = OpSchema("lstm_input_layer", amp_policy=PROMOTE, saves_input=True, family="nn", accepts=("float",))
    n_outputs = 5
    # the last two are saved for the backward, never handed out: oneDNN's workspace and states (the output
    # sequence, h_n and c_n), or the loop's activations and states
    differentiable_outputs = (True, True, True, False, False)

    @staticmethod
    def forward(be, x, h0, c0, w_ih, w_hh, bias, *, reverse=False):
        run = getattr(be, "library_lstm_forward", None)
        got = run(x, h0, c0, w_ih, w_hh, bias, reverse) if run is not None else None
        if got is not None:
            # the outputs are copies: the saved states stay as the backward needs them when the caller writes into
            # the outputs (as the loop's own copies do)
            states, workspace = got
            steps = x.shape[0]
            return (states[:steps].copy(), states[steps].copy(), states[steps + 1].copy(), workspace, states)
        x2 = x.reshape(-1, x.shape[-1])
        x_proj = be.matmul(x2, w_ih.T) if bias is None else be.matmul_bias(x2, w_ih.T, bias)
        return LstmLayer.forward(be, x_proj.reshape(x.shape[:-1] + (w_ih.shape[0],)), h0, c0, w_hh,
                                 reverse=reverse)

    def save_extra(self, arrays, out):
        # a 1-d array of bytes is oneDNN's workspace (the library ran); the loop's activations are 3-d
        self.extra = (out[3].ndim == 1, out[3], out[4])

    def backward_fast(self, be, g_out, g_hn, g_cn, _g_a=None, _g_b=None):
        x, h0, c0, w_ih, w_hh, bias = (self.input(k) for k in range(6))
        x, h0, c0, w_ih, w_hh = x._data, h0._data, c0._data, w_ih._data, w_hh._data
        reverse = self.params.get("reverse", False)
        ex, eh, ec, ew_ih, ew_hh, eb = self.next_edges
        library, saved_a, saved_b = self.extra
        if library:
            got = be.library_lstm_backward(x, h0, c0, w_ih, w_hh, None if bias is None else bias._data, saved_b,
                                           saved_a, g_out, g_hn, g_cn, reverse)
            return tuple(d if e is not None else None for d, e in zip(got, self.next_edges))
        dg, dh, dc, dw_hh = _lstm_loop_backward(be, saved_a, saved_b, h0, c0, w_hh, g_out, g_hn, g_cn, reverse,
                                                ew_hh is not None)
        dt = x.dtype
        steps, bsz, g4 = dg.shape
        dg2 = dg.reshape(steps * bsz, g4)
        if ex is not None or ew_ih is not None or eb is not None:
            dg2 = dg2.astype(dt, copy=False)  # the projection's gradients from the gate gradients rounded once
        dx = be.matmul(dg2, w_ih).reshape(x.shape) if ex is not None else None
        dw_ih = be.matmul(dg2.T, x.reshape(-1, x.shape[-1])) if ew_ih is not None else None
        db = be.sum(dg2, axis=0) if eb is not None else None
        return (dx, dh.astype(h0.dtype, copy=False) if eh is not None else None,
                dc.astype(c0.dtype, copy=False) if ec is not None else None, dw_ih, dw_hh, db)

    def backward(self, g_out, g_hn, g_cn, _g_a=None, _g_b=None):
        from .linalg import matmul
        from .reduction import sum as _sum
        from .shape import reshape, transpose

        x, h0, c0, w_ih, w_hh, bias = (self.input(k) for k in range(6))
        steps, bsz, n_in = x.shape
        x2 = reshape(x, (steps * bsz, n_in))
        x_proj = matmul(x2, transpose(w_ih, 0, 1))
        if bias is not None:
            x_proj = x_proj + bias
        x_proj = reshape(x_proj, (steps, bsz, w_ih.shape[0]))
        d_proj, dh, dc, dw_hh = _lstm_graph_grad(x_proj, h0, c0, w_hh, g_out, g_hn, g_cn,
                                                 self.params.get("reverse", False))
        d2 = reshape(d_proj, (steps * bsz, w_ih.shape[0]))
        return (reshape(matmul(d2, w_ih), x.shape), dh, dc, matmul(transpose(d2, 0, 1), x2), dw_hh,
                None if bias is None else _sum(d2, 0))


class GruCell(Op):
    """``(x_gates (B, 3H), h_gates (B, 3H), h (B, H)) -> h'``: the pointwise part of a GRU step."""

    schema = OpSchema("gru_cell", amp_policy=PROMOTE, saves_input=True, family="nn", accepts=("float",))
    n_outputs = 2
    differentiable_outputs = (True, False)

    @staticmethod
    def forward(be, xg, hg, h):
        dt = h.dtype
        xg, hg, hf = _up(be, xg), _up(be, hg), _up(be, h)
        hid = hf.shape[-1]
        rz = _sig(be, xg[..., :2 * hid] + hg[..., :2 * hid])
        r, z = rz[..., :hid], rz[..., hid:]
        n = be.tanh(xg[..., 2 * hid:] + r * hg[..., 2 * hid:])
        h2 = n + z * (hf - n)
        act = be.concatenate([rz, n], axis=-1)  # r, z, n
        return h2.astype(dt, copy=False), act

    def save_extra(self, arrays, out):
        self.extra = out[1]

    def backward_fast(self, be, g, _g_act=None):
        act = self.extra
        hid = act.shape[-1] // 3
        r, z, n = act[..., :hid], act[..., hid:2 * hid], act[..., 2 * hid:]
        hg = _up(be, self.input(1)._data)
        h = _up(be, self.input(2)._data)
        g = _up(be, g)
        dn = g * (1 - z) * (1 - n * n)
        dx = be.empty(act.shape, dtype=act.dtype)
        dx[..., :hid] = dn * hg[..., 2 * hid:] * r * (1 - r)
        dx[..., hid:2 * hid] = g * (h - n) * z * (1 - z)
        dx[..., 2 * hid:] = dn
        dh = be.empty(act.shape, dtype=act.dtype)
        dh[..., :2 * hid] = dx[..., :2 * hid]
        dh[..., 2 * hid:] = dn * r
        ex, eh, e_h = self.next_edges
        dts = [self.input(k)._data.dtype for k in range(3)]
        return (dx.astype(dts[0], copy=False) if ex is not None else None,
                dh.astype(dts[1], copy=False) if eh is not None else None,
                (g * z).astype(dts[2], copy=False) if e_h is not None else None)

    def backward(self, g, _g_act=None):
        return _gru_cell_grad(self.input(0), self.input(1), self.input(2), g)


def _gru_cell_grad(xg, hg, h, g):
    """``(d x_gates, d h_gates, d h)`` of one GRU cell in pylucid ops (graph mode), the activations recomputed."""
    from .activation import sigmoid, tanh
    from .shape import cat

    hid = h.shape[-1]
    r = sigmoid(xg[..., :hid] + hg[..., :hid])
    z = sigmoid(xg[..., hid:2 * hid] + hg[..., hid:2 * hid])
    hn = hg[..., 2 * hid:]
    n = tanh(xg[..., 2 * hid:] + r * hn)
    dn = g * (1 - z) * (1 - n * n)
    dr = dn * hn * r * (1 - r)
    dz = g * (h - n) * z * (1 - z)
    return cat([dr, dz, dn], -1), cat([dr, dz, dn * r], -1), g * z


class GruLayer(Op):
    """``(x_proj (T, B, 3H), h0 (B, H), w_hh (3H, H), b_hh (3H,) or None) -> (out (T, B, H), h_n)``: one
    direction of one GRU layer over a whole sequence, ``x_proj`` holding ``x_t W_ih^T + b_ih`` of every step
    (``b_hh`` stays separate: it sits inside the reset gate's product).

    As :class:`LstmLayer`: a raw-array loop forward (per step one GEMM for ``h W_hh^T``), a first-order backward
    that computes the local derivatives of all steps at once, then loops in reverse with one GEMM per step for
    ``dh``, and the ``W_hh`` / ``b_hh`` gradients summed over all steps at the end; the graph-mode ``backward``
    is the unrolled composition of the cell ops. Half precision is computed in float32.
    """

    schema = OpSchema("gru_layer", amp_policy=PROMOTE, saves_input=True, family="nn", accepts=("float",))
    n_outputs = 5
    # the last three are saved for the backward, never handed out: the activations (r, z, n per step), the
    # hidden-side gates h W_hh^T + b_hh and the hidden states in the compute dtype
    differentiable_outputs = (True, True, False, False, False)

    @staticmethod
    def forward(be, x_proj, h0, w_hh, b_hh, *, reverse=False):
        dt = h0.dtype
        xp = _up(be, x_proj)
        cdt = xp.dtype
        steps, bsz, g3 = xp.shape
        hid = g3 // 3
        wt = be.ascontiguousarray(_up(be, w_hh).T)  # (H, 3H)
        b = None if b_hh is None else _up(be, b_hh)
        acts = be.empty((steps, bsz, g3), dtype=cdt)  # sigma(r), sigma(z), tanh(n)
        hgs = be.empty((steps, bsz, g3), dtype=cdt)  # h W_hh^T + b_hh
        hs = be.empty((steps, bsz, hid), dtype=cdt)
        h = _up(be, h0)
        mm = be.xp.matmul
        tmp = be.empty((bsz, hid), dtype=cdt)
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            hg, a = hgs[t], acts[t]
            mm(h, wt, out=hg)
            if b is not None:
                hg += b
            rz = a[:, :2 * hid]
            be.add(xp[t, :, :2 * hid], hg[:, :2 * hid], out=rz)
            # sigma(x) = (1 + tanh(x / 2)) / 2, as the LSTM layer's gates
            rz *= 0.5
            be.tanh(rz, out=rz)
            rz *= 0.5
            rz += 0.5
            n = a[:, 2 * hid:]
            be.multiply(a[:, :hid], hg[:, 2 * hid:], out=n)
            n += xp[t, :, 2 * hid:]
            be.tanh(n, out=n)
            # h' = n + z (h - n)
            be.subtract(h, n, out=tmp)
            tmp *= a[:, hid:2 * hid]
            be.add(n, tmp, out=hs[t])
            h = hs[t]
        return hs.astype(dt), h.astype(dt), acts, hgs, hs

    def save_extra(self, arrays, out):
        self.extra = out[2:]

    def backward_fast(self, be, g_out, g_hn, _g_acts=None, _g_hgs=None, _g_hs=None):
        acts, hgs, hs = self.extra
        x_proj, h0, w_hh, b_hh = (self.input(k) for k in range(4))
        reverse = self.params.get("reverse", False)
        cdt = acts.dtype
        steps, bsz, g3 = acts.shape
        hid = g3 // 3
        ex, eh, ew, eb = self.next_edges
        if not steps:
            return (be.zeros(x_proj.shape, dtype=x_proj._data.dtype) if ex is not None else None,
                    g_hn.astype(h0._data.dtype) if eh is not None else None,
                    be.zeros(w_hh.shape, dtype=w_hh._data.dtype) if ew is not None else None,
                    be.zeros(b_hh.shape, dtype=b_hh._data.dtype) if eb is not None else None)
        w = _up(be, w_hh._data)
        h0f = _up(be, h0._data)
        g_out = _up(be, g_out)
        dh = be.array(_up(be, g_hn), dtype=cdt, copy=True)
        r, z, n = acts[..., :hid], acts[..., hid:2 * hid], acts[..., 2 * hid:]
        # h_{t-1} of every step, in step order
        if reverse:
            prev = be.concatenate([hs[1:], h0f[None]], axis=0)
        else:
            prev = be.concatenate([h0f[None], hs[:-1]], axis=0)
        # local derivatives: d x_proj = dh [kn kr, kz, kn], d hg = dh [kn kr, kz, kn r], with
        # kn = (1 - z)(1 - n^2), kz = (h_prev - n) z (1 - z), kr = hg_n r (1 - r)
        kx = be.empty((steps, bsz, 3, hid), dtype=cdt)
        kn = kx[:, :, 2]
        be.multiply(n, n, out=kn)
        be.subtract(1, kn, out=kn)
        kn *= 1 - z
        kz = kx[:, :, 1]
        be.subtract(prev, n, out=kz)
        kz *= z
        kz *= 1 - z
        kr = kx[:, :, 0]
        be.multiply(r, r, out=kr)
        be.subtract(r, kr, out=kr)
        kr *= hgs[..., 2 * hid:]
        kr *= kn
        kh = kx.copy()
        kh[:, :, 2] *= r
        dx = be.empty((steps, bsz, 3, hid), dtype=cdt)
        dhg = be.empty((steps, bsz, 3, hid), dtype=cdt)
        tmp = be.empty((bsz, hid), dtype=cdt)
        mm = be.xp.matmul
        for t in (range(steps) if reverse else range(steps - 1, -1, -1)):
            dh += g_out[t]
            be.multiply(kx[t], dh[:, None, :], out=dx[t])
            be.multiply(kh[t], dh[:, None, :], out=dhg[t])
            be.multiply(dh, z[t], out=tmp)
            mm(dhg[t].reshape(bsz, g3), w, out=dh)
            dh += tmp
        dhg2 = dhg.reshape(steps * bsz, g3)
        dw = db = None
        if ew is not None:
            dw = mm(dhg2.T, prev.reshape(steps * bsz, hid)).astype(w_hh._data.dtype, copy=False)
        if eb is not None:
            db = mm(be.ones((steps * bsz,), dtype=cdt), dhg2).astype(b_hh._data.dtype, copy=False)
        return (dx.reshape(steps, bsz, g3).astype(x_proj._data.dtype, copy=False) if ex is not None else None,
                dh.astype(h0._data.dtype, copy=False) if eh is not None else None, dw, db)

    def backward(self, g_out, g_hn, _g_acts=None, _g_hgs=None, _g_hs=None):
        from .linalg import matmul
        from .reduction import sum as _sum
        from .shape import reshape, stack, transpose

        x_proj, h0, w_hh, b_hh = (self.input(k) for k in range(4))
        steps, bsz, g3 = x_proj.shape
        order = range(steps - 1, -1, -1) if self.params.get("reverse", False) else range(steps)
        # the forward again, as pylucid ops (so this formula is differentiable once more)
        wt = transpose(w_hh, 0, 1)
        h = h0
        prev, hgs = [None] * steps, [None] * steps
        for t in order:
            prev[t] = h
            hgs[t] = matmul(h, wt) if b_hh is None else matmul(h, wt) + b_hh
            h = gru_gates(x_proj[t], hgs[t], h)
        dh = g_hn
        dx, dhg = [None] * steps, [None] * steps
        for t in reversed(order):
            dh = dh + g_out[t]
            dx[t], dhg[t], dh_direct = _gru_cell_grad(x_proj[t], hgs[t], prev[t], dh)
            dh = dh_direct + matmul(dhg[t], w_hh)
        if not steps:
            return x_proj * 0, dh, w_hh * 0, None if b_hh is None else b_hh * 0
        d2 = reshape(stack(dhg, 0), (steps * bsz, g3))
        hp = reshape(stack(prev, 0), (steps * bsz, h0.shape[-1]))
        return stack(dx, 0), dh, matmul(transpose(d2, 0, 1), hp), None if b_hh is None else _sum(d2, 0)


def lstm_gates(gates: Tensor, c: Tensor):
    """``(h', c')`` of one LSTM step from its pre-activation ``gates`` (B, 4H) and cell state ``c``."""
    h2, c2, _ = apply(LstmCell, (gates, c))
    return h2, c2


def lstm_layer(x_proj: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, reverse: bool = False):
    """``(out (T, B, H), h_n, c_n)`` of one LSTM layer direction from the input projections of all steps
    ``x_proj`` (T, B, 4H) (``x W_ih^T + b_ih + b_hh``), the initial state and ``W_hh``; ``reverse`` runs the
    steps from the last to the first (the backward direction of a bidirectional layer)."""
    _layer_args("lstm_layer", 4, x_proj, (h0, c0), w_hh, None)
    out, h_n, c_n, _, _ = apply(LstmLayer, (x_proj, h0, c0, w_hh), {"reverse": bool(reverse)})
    return out, h_n, c_n


def lstm_input_layer(x: Tensor, h0: Tensor, c0: Tensor, w_ih: Tensor, w_hh: Tensor, bias: Tensor | None = None,
                     reverse: bool = False):
    """``(out (T, B, H), h_n, c_n)`` of one LSTM layer direction from its input sequence ``x`` (T, B, C), the
    initial state ``h0``, ``c0`` (B, H), ``W_ih`` (4H, C), ``W_hh`` (4H, H) and ``bias = b_ih + b_hh`` (4H,) or
    None; gates ``i, f, g, o`` as PyTorch's. ``reverse`` runs the steps from the last to the first.

    ``gates_t = x_t W_ih^T + bias + h_{t-1} W_hh^T``, ``c_t = sigma(f) c_{t-1} + sigma(i) tanh(g)``,
    ``h_t = sigma(o) tanh(c_t)``, ``out[t] = h_t``. An empty sequence returns ``h0`` and ``c0``.

    >>> import pylucid
    >>> from pylucid.ops.rnn import lstm_input_layer
    >>> out, h, c = lstm_input_layer(pylucid.zeros(3, 1, 2), pylucid.zeros(1, 1), pylucid.ones(1, 1),
    ...                              pylucid.zeros(4, 2), pylucid.zeros(4, 1))
    >>> out.shape, round(c.item(), 4), round(h.item(), 4)
    ((3, 1, 1), 0.125, 0.0622)
    """
    op = "lstm_input_layer"
    for t, what in ((x, "x"), (h0, "h0"), (c0, "c0"), (w_ih, "w_ih"), (w_hh, "w_hh")):
        check_tensor(t, op, what)
    if bias is not None:
        check_tensor(bias, op, "bias")
    hid = w_hh.shape[-1] if w_hh.ndim == 2 else -1
    if x.ndim != 3 or w_ih.ndim != 2 or w_hh.ndim != 2 or h0.ndim != 2 or c0.ndim != 2 or \
            w_ih.shape != (4 * hid, x.shape[-1]) or w_hh.shape != (4 * hid, hid) or \
            h0.shape != (x.shape[1], hid) or c0.shape != h0.shape or (bias is not None and bias.shape != (4 * hid,)):
        raise ShapeMismatch(f"{op}: shapes do not fit together: x {tuple(x.shape)}, h0 {tuple(h0.shape)}, c0 "
                            f"{tuple(c0.shape)}, w_ih {tuple(w_ih.shape)}, w_hh {tuple(w_hh.shape)}"
                            + (f", bias {tuple(bias.shape)}" if bias is not None else "")
                            + " (expected (T, B, C), (B, H), (B, H), (4H, C), (4H, H), (4H,))")
    out, h_n, c_n, _, _ = apply(LstmInputLayer, (x, h0, c0, w_ih, w_hh, bias), {"reverse": bool(reverse)})
    return out, h_n, c_n


def _layer_args(op, gates, x_proj, states, w_hh, b_hh) -> None:
    """ShapeMismatch (naming ``op``) unless ``x_proj`` is (T, B, G*H), each state (B, H), ``w_hh`` (G*H, H) and
    ``b_hh`` (G*H,) or None."""
    for t, what in ((x_proj, "x_proj"), (w_hh, "w_hh"), *((h, "state") for h in states)):
        check_tensor(t, op, what)
    if b_hh is not None:
        check_tensor(b_hh, op, "b_hh")
    if x_proj.ndim != 3 or w_hh.ndim != 2 or any(h.ndim != 2 for h in states):
        raise ShapeMismatch(f"{op}: expected x_proj (T, B, {gates}H), states (B, H) and w_hh ({gates}H, H), got "
                            f"{tuple(x_proj.shape)}, {[tuple(h.shape) for h in states]} and {tuple(w_hh.shape)}")
    _, bsz, g = x_proj.shape
    hid = w_hh.shape[1]
    if g != gates * hid or w_hh.shape[0] != g or any(tuple(h.shape) != (bsz, hid) for h in states) or (
            b_hh is not None and tuple(b_hh.shape) != (g,)):
        raise ShapeMismatch(f"{op}: shapes do not fit together: x_proj {tuple(x_proj.shape)}, states "
                            f"{[tuple(h.shape) for h in states]}, w_hh {tuple(w_hh.shape)}"
                            + (f", b_hh {tuple(b_hh.shape)}" if b_hh is not None else "")
                            + f" (expected (T, B, {gates}H), (B, H), ({gates}H, H), ({gates}H,))")


def gru_layer(x_proj: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor | None = None, reverse: bool = False):
    """``(out (T, B, H), h_n)`` of one GRU layer direction from the input projections of all steps ``x_proj``
    (T, B, 3H) (``x W_ih^T + b_ih``), the initial state, ``W_hh`` and ``b_hh``; ``reverse`` runs the steps from
    the last to the first."""
    _layer_args("gru_layer", 3, x_proj, (h0,), w_hh, b_hh)
    out, h_n, _, _, _ = apply(GruLayer, (x_proj, h0, w_hh, b_hh), {"reverse": bool(reverse)})
    return out, h_n


def gru_gates(x_gates: Tensor, h_gates: Tensor, h: Tensor) -> Tensor:
    """``h'`` of one GRU step from ``x W_ih^T + b_ih`` and ``h W_hh^T + b_hh`` (each (B, 3H)) and ``h``."""
    return apply(GruCell, (x_gates, h_gates, h))[0]


def _proj(x, w, b):
    from .linalg import matmul
    from .shape import transpose

    y = matmul(x, transpose(w, -1, -2))
    return y if b is None else y + b


def _cell_args(op, input, hx, w_ih, w_hh, n):
    check_tensor(input, op)
    for t in (w_ih, w_hh):
        check_tensor(t, op, "weight")
    if not isinstance(hx, (tuple, list)) or len(hx) != n:
        raise TypeError(f"{op}: hx must be a tuple of {n} tensor(s), got {type(hx).__name__}")


@declare(LstmCell, method=False)
def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
              b_hh: Tensor | None = None):
    """One LSTM step, as ``torch.lstm_cell``: ``(h', c')`` from ``input`` (B, in) and ``hx = (h, c)``.

    ``gates = input W_ih^T + b_ih + h W_hh^T + b_hh`` split as ``i, f, g, o``;
    ``c' = sigma(f) c + sigma(i) tanh(g)``, ``h' = sigma(o) tanh(c')``.

    >>> import pylucid
    >>> h, c = pylucid.lstm_cell(pylucid.zeros(1, 2), (pylucid.zeros(1, 1), pylucid.ones(1, 1)),
    ...                          pylucid.zeros(4, 2), pylucid.zeros(4, 1))
    >>> round(c.item(), 4), round(h.item(), 4)
    (0.5, 0.2311)
    """
    _cell_args("lstm_cell", input, hx, w_ih, w_hh, 2)
    gates = _proj(input, w_ih, b_ih) + _proj(hx[0], w_hh, b_hh)
    return lstm_gates(gates, hx[1])


@declare(GruCell, method=False)
def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
             b_hh: Tensor | None = None) -> Tensor:
    """One GRU step, as ``torch.gru_cell``: ``h'`` from ``input`` (B, in) and ``hx`` (B, H).

    ``r = sigma(x_r + h_r)``, ``z = sigma(x_z + h_z)``, ``n = tanh(x_n + r h_n)``,
    ``h' = (1 - z) n + z hx`` with ``x_* = input W_ih^T + b_ih`` and ``h_* = hx W_hh^T + b_hh``.

    >>> import pylucid
    >>> pylucid.gru_cell(pylucid.zeros(1, 2), pylucid.ones(1, 1), pylucid.zeros(3, 2), pylucid.zeros(3, 1))
    tensor([[0.5000]])
    """
    check_tensor(hx, "gru_cell", "hx")
    _cell_args("gru_cell", input, (hx,), w_ih, w_hh, 1)
    return gru_gates(_proj(input, w_ih, b_ih), _proj(hx, w_hh, b_hh), hx)
