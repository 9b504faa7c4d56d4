"""Adagrad, with learning-rate decay and an initial accumulator value."""

from __future__ import annotations

from ..creation import full_like
from ..ops import add, sqrt
from .optimizer import Optimizer, _addcdiv, _addcmul, _check_hyperparams

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    r"""Adagrad (Duchi et al.), PyTorch's formulation.

    .. math::
        \tilde\gamma_t = \frac{\gamma}{1 + (t-1)\eta}, \qquad s_t = s_{t-1} + g_t^2, \qquad
        \theta_t = \theta_{t-1} - \tilde\gamma_t \frac{g_t}{\sqrt{s_t} + \epsilon}

    Args:
        params: parameters or parameter groups.
        lr: learning rate (default 1e-2).
        lr_decay: :math:`\eta` (default 0).
        weight_decay: L2 penalty (default 0).
        initial_accumulator_value: starting value of :math:`s` (default 0).
        eps: added to the denominator (default 1e-10).
        maximize: ascend the objective instead.
        foreach, differentiable, fused: accepted for compatibility, ignored.

    As in PyTorch, the state (``step``, ``sum``) is created for every
    parameter when the optimizer is built. Sparse gradients are not supported.

    >>> import pylucid
    >>> w = pylucid.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = pylucid.optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    _group_defaults = {"maximize": False}

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        _check_hyperparams("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                           initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(self.state[p], p, group)

    def _init_state(self, state, p, group) -> None:
        # at construction for every parameter; at its first step for one of a group added later
        state["step"] = 0
        state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self, p, g, state, step, lr, group) -> None:
        clr = lr / (1 + (step - 1) * group["lr_decay"])
        state_sum = state["sum"]
        state_sum[...] = _addcmul(state_sum, g, g, 1)
        std = add(sqrt(state_sum), group["eps"])
        p[...] = _addcdiv(p, g, std, -clr)
