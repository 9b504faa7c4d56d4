"""Adamax: Adam with the infinity norm."""

from __future__ import annotations

from ..ops import abs as _abs
from ..ops import add, mul
from .optimizer import Optimizer, _addcdiv, _check_hyperparams, _lerp, _maximum

__all__ = ["Adamax"]


class Adamax(Optimizer):
    r"""Adamax (Kingma & Ba, section 7), PyTorch's formulation.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad
        u_t = \max(\beta_2 u_{t-1}, |g_t| + \epsilon), \qquad
        \theta_t = \theta_{t-1} - \frac{\gamma}{1-\beta_1^t} \frac{m_t}{u_t}

    Args:
        params: parameters or parameter groups.
        lr: learning rate (default 2e-3).
        betas: :math:`(\beta_1, \beta_2)` (default (0.9, 0.999)).
        eps: added to :math:`|g|` (default 1e-8).
        weight_decay: L2 penalty (default 0).
        maximize: ascend the objective instead.
        foreach, differentiable, capturable: accepted for compatibility, ignored.

    State per parameter: ``step``, ``exp_avg``, ``exp_inf``.

    >>> import pylucid
    >>> w = pylucid.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = pylucid.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    _group_defaults = {"maximize": False}
    _state_names = ("exp_avg", "exp_inf")

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        _check_hyperparams("Adamax", lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _update(self, p, g, state, step, lr, group) -> None:
        beta1, beta2 = group["betas"]
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg[...] = _lerp(exp_avg, g, 1 - beta1)
        exp_inf[...] = _maximum(mul(exp_inf, beta2), add(_abs(g), group["eps"]))
        clr = lr / (1 - beta1**step)
        p[...] = _addcdiv(p, exp_avg, exp_inf, -clr)
