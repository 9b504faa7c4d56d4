"""RAdam: Adam with a rectified adaptive learning rate."""

from __future__ import annotations

from ..ops import add, div, mul, sqrt, sub
from .optimizer import Optimizer, _check_hyperparams, _update_moments

__all__ = ["RAdam"]


class RAdam(Optimizer):
    r"""RAdam (Liu et al.), PyTorch's formulation.

    .. math::
        \rho_\infty = \frac{2}{1-\beta_2} - 1, \qquad
        \rho_t = \rho_\infty - \frac{2 t \beta_2^t}{1-\beta_2^t}, \qquad
        \hat m_t = \frac{m_t}{1-\beta_1^t}

    When :math:`\rho_t > 5` the step is
    :math:`\gamma \hat m_t \, r_t \sqrt{1-\beta_2^t} / (\sqrt{v_t} + \epsilon)` with
    :math:`r_t = \sqrt{\frac{(\rho_t-4)(\rho_t-2)\rho_\infty}{(\rho_\infty-4)(\rho_\infty-2)\rho_t}}`;
    otherwise it is the un-adapted :math:`\gamma \hat m_t`.

    Args:
        params: parameters or parameter groups.
        lr: learning rate (default 1e-3).
        betas: :math:`(\beta_1, \beta_2)` (default (0.9, 0.999)).
        eps: added to the denominator (default 1e-8).
        weight_decay: L2 penalty, or decoupled (default 0).
        decoupled_weight_decay: RAdamW-style weight decay.
        maximize: ascend the objective instead.
        foreach, capturable, differentiable: accepted for compatibility, ignored.

    State per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``.

    >>> import pylucid
    >>> w = pylucid.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = pylucid.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    _group_defaults = {"maximize": False, "decoupled_weight_decay": False}
    _state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False) -> None:
        _check_hyperparams("RAdam", lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, g, state, step, lr, group) -> None:
        beta1, beta2 = group["betas"]
        exp_avg, exp_avg_sq = _update_moments(state, g, beta1, beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        corrected = div(exp_avg, bias_correction1)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = div(bias_correction2**0.5, add(sqrt(exp_avg_sq), group["eps"]))
            p[...] = sub(p, mul(mul(mul(corrected, lr), adaptive_lr), rect))
        else:
            p[...] = sub(p, mul(corrected, lr))
