"""Adadelta."""

from __future__ import annotations

from .. import _threads
from ..dtypes import float32, float64
from ..ops import add, div, mul, sqrt
from .optimizer import Optimizer, _addcmul, _check_hyperparams, _to_scalar

__all__ = ["Adadelta"]

#: elements per block of the CPU step (four arrays and three scratch buffers per block): measured on the MNIST
#: CNN's parameters, 2 threads, 1 << 17 ran fastest (1 << 15 on one thread is within 2%; smaller blocks made the
#: threads wait on each other's Python between the ufunc calls)
_BLOCK = 1 << 17
#: below this many elements in all a group's step runs on one thread (a pool hand-off is tens of microseconds)
_PAR_MIN = 1 << 17


class Adadelta(Optimizer):
    r"""Adadelta (Zeiler), PyTorch's formulation.

    .. math::
        v_t &= \rho v_{t-1} + (1-\rho) g_t^2, \qquad
        \Delta_t = \frac{\sqrt{u_{t-1} + \epsilon}}{\sqrt{v_t + \epsilon}}\, g_t \\
        u_t &= \rho u_{t-1} + (1-\rho) \Delta_t^2, \qquad \theta_t = \theta_{t-1} - \gamma \Delta_t

    Args:
        params: parameters or parameter groups.
        lr: scale applied to the delta (default 1.0).
        rho: running-average coefficient (default 0.9).
        eps: added inside the square roots (default 1e-6).
        weight_decay: L2 penalty (default 0).
        maximize: ascend the objective instead.
        foreach, capturable, differentiable: accepted for compatibility, ignored.

    State per parameter: ``step``, ``square_avg``, ``acc_delta``.

    On the CPU a group of contiguous float32/float64 parameters (with gradients and state of their dtype) is
    updated on raw arrays, in cache-sized blocks split across the ``set_num_threads`` threads, with the same
    operations in the same order as the per-tensor formula (the same bits); other groups take that formula.

    >>> import pylucid
    >>> w = pylucid.tensor([1.0], requires_grad=True)
    >>> opt = pylucid.optim.Adadelta([w], lr=1.0)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([0.9968], requires_grad=True)
    """

    _group_defaults = {"maximize": False}
    _state_names = ("square_avg", "acc_delta")

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach: bool | None = None, *, capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_hyperparams("Adadelta", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _step_group(self, group) -> None:
        if not self._cpu_step(group):
            super()._step_group(group)

    def _update(self, p, g, state, step, lr, group) -> None:
        rho, eps = group["rho"], group["eps"]
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg[...] = _addcmul(mul(square_avg, rho), g, g, 1 - rho)
        std = sqrt(add(square_avg, eps))
        delta = mul(div(sqrt(add(acc_delta, eps)), std), g)
        acc_delta[...] = _addcmul(mul(acc_delta, rho), delta, delta, 1 - rho)
        p[...] = add(p, mul(delta, -lr))

    def _cpu_step(self, group) -> bool:
        """The group's step on CPU arrays (see the class docstring); False, having changed nothing, where a
        parameter, gradient or state tensor is not a contiguous CPU array of one float32/float64 dtype."""
        live = [p for p in group["params"] if p.grad is not None]
        if not live:
            return False
        dev = live[0].device
        if dev.type != "cpu":
            return False
        states = self.state
        for p in live:
            g = p.grad
            if p.device != dev or p.dtype not in (float32, float64) or g.dtype is not p.dtype or \
                    not p._data.flags.c_contiguous or not g._data.flags.c_contiguous or g._data.shape != p._data.shape:
                return False
            st = states[p]
            for key in self._state_names:
                buf = st.get(key)
                if buf is not None and (buf.device != dev or buf.dtype is not p.dtype or
                                        buf._data.shape != p._data.shape or not buf._data.flags.c_contiguous):
                    return False
        rows = []
        for p in live:
            st = states[p]
            if len(st) == 0:
                self._init_state(st, p, group)
            st["step"] = _to_scalar(st["step"]) + 1
            rows.append((p._data.reshape(-1), p.grad._data.reshape(-1), st["square_avg"]._data.reshape(-1),
                         st["acc_delta"]._data.reshape(-1)))
        spans = [(i, s, min(s + _BLOCK, r[0].size)) for i, r in enumerate(rows) for s in range(0, r[0].size, _BLOCK)]
        be = dev.backend
        hp = (float(group["rho"]), float(group["eps"]), float(_to_scalar(group["lr"])),
              float(group["weight_decay"]), bool(group["maximize"]))

        def run(lo, hi):
            _adadelta_blocks(be, rows, spans[lo:hi], *hp)

        if len(spans) > 1 and sum(r[0].size for r in rows) >= _PAR_MIN:
            _threads.parallel_chunks(run, len(spans))
        else:
            run(0, len(spans))
        for p in live:  # written in place, as an in-place op would (one bump each)
            st = states[p]
            for t in (p, st["square_avg"], st["acc_delta"]):
                t._version[0] += 1
        return True


def _adadelta_blocks(be, rows, spans, rho, eps, lr, weight_decay, maximize) -> None:
    """Adadelta on the blocks ``spans`` (``(row, start, end)``) of ``rows`` (flat ``(param, grad, square_avg,
    acc_delta)`` arrays), in place: :meth:`Adadelta._update`'s operations (PyTorch's single-tensor order: the
    ``addcmul`` products as ``(value * a) * b``) as ufunc passes with ``out=`` into three scratch buffers."""
    scratch: dict = {}
    for i, s, e in spans:
        p, g, v, u = (a[s:e] for a in rows[i])
        dt = p.dtype
        bufs = scratch.get(dt)
        if bufs is None:
            n = max(b - a for _, a, b in spans)
            bufs = scratch[dt] = tuple(be.empty(n, dtype=dt) for _ in range(3))
        tg, ta, tb = (b[:e - s] for b in bufs)
        c = dt.type
        if maximize:
            be.negative(g, out=tg)
            g = tg
        if weight_decay != 0:  # g + weight_decay * p
            be.multiply(p, c(weight_decay), out=ta)
            be.add(g, ta, out=tg)
            g = tg
        # v = v * rho + ((1 - rho) * g) * g
        be.multiply(g, c(1 - rho), out=ta)
        ta *= g
        v *= c(rho)
        v += ta
        # std = sqrt(v + eps) into ta; delta = (sqrt(u + eps) / std) * g into tb
        be.add(v, c(eps), out=ta)
        be.sqrt(ta, out=ta)
        be.add(u, c(eps), out=tb)
        be.sqrt(tb, out=tb)
        tb /= ta
        tb *= g
        # u = u * rho + ((1 - rho) * delta) * delta
        be.multiply(tb, c(1 - rho), out=ta)
        ta *= tb
        u *= c(rho)
        u += ta
        # p = p + delta * (-lr)
        tb *= c(-lr)
        p += tb
