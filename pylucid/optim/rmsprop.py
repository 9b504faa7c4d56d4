"""RMSprop, with centering and momentum."""

from __future__ import annotations

from ..creation import zeros_like
from ..ops import add, div, mul, sqrt
from .optimizer import Optimizer, _addcdiv, _addcmul, _check_hyperparams, _lerp

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop (Hinton), PyTorch's formulation.

    .. math::
        v_t &= \alpha v_{t-1} + (1-\alpha) g_t^2, \qquad
        \bar g_t = \alpha \bar g_{t-1} + (1-\alpha) g_t \;(\text{centered}) \\
        d_t &= \sqrt{v_t - \bar g_t^2} + \epsilon \;(\text{centered}) \text{ or } \sqrt{v_t} + \epsilon \\
        b_t &= \mu b_{t-1} + g_t / d_t, \quad \theta_t = \theta_{t-1} - \gamma b_t
            \;(\mu > 0) \text{ or } \theta_t = \theta_{t-1} - \gamma g_t / d_t

    Args:
        params: parameters or parameter groups.
        lr: learning rate (default 1e-2).
        alpha: smoothing constant (default 0.99).
        eps: added to the denominator (default 1e-8).
        weight_decay: L2 penalty (default 0).
        momentum: :math:`\mu` (default 0).
        centered: normalise by the estimated variance of the gradient.
        maximize: ascend the objective instead.
        capturable, foreach, differentiable: accepted for compatibility, ignored.

    State per parameter: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0), ``grad_avg`` (centered).

    >>> import pylucid
    >>> w = pylucid.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = pylucid.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    _group_defaults = {"momentum": 0, "centered": False, "maximize": False}
    _state_names = ("square_avg",)

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0,
                 momentum: float = 0, centered: bool = False, capturable: bool = False, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False) -> None:
        _check_hyperparams("RMSprop", lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, state, p, group) -> None:
        super()._init_state(state, p, group)
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = zeros_like(p)

    def _update(self, p, g, state, step, lr, group) -> None:
        alpha, momentum = group["alpha"], group["momentum"]
        square_avg = state["square_avg"]
        square_avg[...] = _addcmul(mul(square_avg, alpha), g, g, 1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg[...] = _lerp(grad_avg, g, 1 - alpha)
            avg = sqrt(_addcmul(square_avg, grad_avg, grad_avg, -1))
        else:
            avg = sqrt(square_avg)
        avg = add(avg, group["eps"])
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf[...] = add(mul(buf, momentum), div(g, avg))
            p[...] = add(p, mul(buf, -lr))
        else:
            p[...] = _addcdiv(p, g, avg, -lr)
