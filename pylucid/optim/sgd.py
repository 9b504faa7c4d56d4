"""SGD with momentum, dampening, Nesterov momentum, weight decay and ``maximize``."""

from __future__ import annotations

from .. import ops as _ops
from ..creation import empty_like
from ..dtypes import float32, float64
from ..ops import add, clone, mul
from .._interop import c_contiguous as _c_contiguous
from .optimizer import Optimizer, _to_scalar

_FUSED_DTYPES = (float32, float64)
_FUSED_NP = frozenset(d.numpy_dtype for d in _FUSED_DTYPES)

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent (PyTorch's formulation of momentum).

    .. math::
        g_t &= \nabla f(\theta_{t-1}) + \lambda \theta_{t-1} \\
        b_t &= \mu b_{t-1} + (1 - \tau) g_t \quad (b_1 = g_1) \\
        \theta_t &= \theta_{t-1} - \gamma \,(g_t + \mu b_t \text{ if nesterov else } b_t)

    Args:
        params: parameters or parameter groups.
        lr: learning rate :math:`\gamma` (default 1e-3).
        momentum: :math:`\mu` (default 0).
        dampening: :math:`\tau` (default 0).
        weight_decay: L2 penalty :math:`\lambda` (default 0).
        nesterov: Nesterov momentum (needs ``momentum > 0`` and ``dampening == 0``).
        maximize: ascend the objective instead.
        foreach, differentiable, fused: accepted for compatibility, ignored.

    State per parameter: ``momentum_buffer`` (when ``momentum != 0``).

    >>> import pylucid
    >>> w = pylucid.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = pylucid.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad()
    ...     (w * w).sum().backward()
    ...     opt.step()
    >>> w
    tensor([ 0.4600, -0.9200], requires_grad=True)
    """

    _group_defaults = {"nesterov": False, "maximize": False}

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        if _to_scalar(lr) < 0.0:
            raise ValueError(f"SGD: invalid learning rate {lr} (expected >= 0)")
        if momentum < 0.0:
            raise ValueError(f"SGD: invalid momentum value {momentum} (expected >= 0)")
        if weight_decay < 0.0:
            raise ValueError(f"SGD: invalid weight_decay value {weight_decay} (expected >= 0)")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def _step_group(self, group) -> None:
        # no step count, and no state at all without momentum (PyTorch's layout): the template's loop does not fit
        lr = _to_scalar(group["lr"])
        momentum, dampening, nesterov = group["momentum"], group["dampening"], group["nesterov"]
        if self._fused_step(group, lr, momentum, dampening, nesterov):
            return
        states = self.state
        for p, g in self._grads(group, group["maximize"], group["weight_decay"]):
            if momentum != 0:
                state = states[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = clone(g.detach())
                else:
                    buf[...] = add(mul(buf, momentum), g if dampening == 0 else mul(g, 1 - dampening))
                g = add(g, mul(buf, momentum)) if nesterov else buf
            # PyTorch: param.add_(grad, alpha=-lr)
            p[...] = add(p, mul(g, -lr))

    def _fused_step(self, group, lr, momentum, dampening, nesterov) -> bool:
        """The group's step through ``pylucid._fused_sgd_`` (on CUDA one multi-tensor kernel launch; on the CPU
        in-place passes with the arithmetic of the loop below, without its temporaries and copies).

        Taken when every parameter with a gradient is a contiguous float32/float64 tensor on one device with a
        contiguous gradient of its dtype, and the momentum buffers (where they exist) match; returns False,
        having changed nothing, otherwise. Parameters without a buffer yet (the first step) get one, filled with
        their gradient by the kernel, as PyTorch's ``clone``.
        """
        live = [p for p in group["params"] if p.grad is not None]
        if not live:
            return False
        dev = live[0]._device
        np_ok = _FUSED_NP
        for p in live:
            d, gd = p._data, p.grad._data
            if (p._device != dev or d.dtype not in np_ok or gd.dtype != d.dtype or not _c_contiguous(d)
                    or not _c_contiguous(gd)):
                return False
        hp = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=group["weight_decay"],
                  nesterov=nesterov, maximize=group["maximize"])
        if momentum == 0:
            _ops._fused_sgd_(live, [p.grad for p in live], [], **hp)
            return True
        states = self.state
        old, new = ([], [], []), []  # (params, grads, buffers) with a buffer; params without one
        for p in live:
            buf = states[p].get("momentum_buffer")
            if buf is None:
                new.append(p)
                continue
            bd = buf._data
            if buf._device != dev or bd.dtype != p._data.dtype or not _c_contiguous(bd) or bd.shape != p._data.shape:
                return False
            old[0].append(p)
            old[1].append(p.grad)
            old[2].append(buf)
        if old[0]:
            _ops._fused_sgd_(old[0], old[1], old[2], first_step=False, **hp)
        if new:
            bufs = []
            for p in new:
                bufs.append(empty_like(p))
                states[p]["momentum_buffer"] = bufs[-1]
            _ops._fused_sgd_(new, [p.grad for p in new], bufs, first_step=True, **hp)
        return True
