"""Adadelta."""

from __future__ import annotations

from ..ops import add, div, mul, sqrt
from .optimizer import Optimizer, _addcmul, _check_hyperparams

__all__ = ["Adadelta"]


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

    def _update(self, p, g, state, step, lr, group) -> None:
        rho, eps = group["rho"], group["eps"]
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg[...] = _addcmul(mul(square_avg, rho), g, g, 1 - rho)
        std = sqrt(add(square_avg, eps))
        delta = mul(div(sqrt(add(acc_delta, eps)), std), g)
        acc_delta[...] = _addcmul(mul(acc_delta, rho), delta, delta, 1 - rho)
        p[...] = add(p, mul(delta, -lr))
