"""NAdam: Adam with Nesterov momentum and momentum decay."""

from __future__ import annotations

from ..ops import add, div, sqrt
from .optimizer import Optimizer, _addcdiv, _check_hyperparams, _to_scalar, _update_moments

__all__ = ["NAdam"]


class NAdam(Optimizer):
    r"""NAdam (Dozat), PyTorch's formulation.

    .. math::
        \mu_t &= \beta_1\big(1 - \tfrac12 \cdot 0.96^{t\psi}\big), \qquad
        \Pi_t = \textstyle\prod_{i \le t} \mu_i \\
        m_t &= \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2 \\
        \theta_t &= \theta_{t-1} - \gamma \Big(\frac{1-\mu_t}{1-\Pi_t} g_t
            + \frac{\mu_{t+1}}{1-\Pi_{t}\mu_{t+1}} m_t\Big) \Big/ \Big(\sqrt{v_t / (1-\beta_2^t)} + \epsilon\Big)

    Args:
        params: parameters or parameter groups.
        lr: learning rate (default 2e-3).
        betas: :math:`(\beta_1, \beta_2)` (default (0.9, 0.999)).
        eps: added to the denominator (default 1e-8).
        weight_decay: L2 penalty, or decoupled (default 0).
        momentum_decay: :math:`\psi` (default 4e-3).
        decoupled_weight_decay: NAdamW-style weight decay.
        maximize: ascend the objective instead.
        foreach, capturable, differentiable: accepted for compatibility, ignored.

    State per parameter: ``step`` and ``mu_product`` (Python numbers: PyTorch
    keeps ``mu_product`` as a float32 tensor, pylucid in double precision),
    ``exp_avg``, ``exp_avg_sq``.

    >>> import pylucid
    >>> w = pylucid.tensor([1.0], requires_grad=True)
    >>> opt = pylucid.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([0.8944], requires_grad=True)
    """

    _group_defaults = {"maximize": False, "decoupled_weight_decay": False}
    _state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_hyperparams("NAdam", lr=lr, eps=eps, betas=betas, weight_decay=weight_decay,
                           momentum_decay=momentum_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, state, p, group) -> None:
        # PyTorch's order: the two numbers first, then the buffers
        state["step"], state["mu_product"] = 0, 1.0
        super()._init_state(state, p, group)

    def _update(self, p, g, state, step, lr, group) -> None:
        beta1, beta2 = group["betas"]
        momentum_decay = group["momentum_decay"]
        bias_correction2 = 1 - beta2**step
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product = state["mu_product"] = _to_scalar(state["mu_product"]) * mu
        exp_avg, exp_avg_sq = _update_moments(state, g, beta1, beta2)
        denom = add(sqrt(div(exp_avg_sq, bias_correction2)), group["eps"])
        mu_product_next = mu_product * mu_next
        p_new = _addcdiv(p, g, denom, -lr * (1.0 - mu) / (1.0 - mu_product))
        p[...] = _addcdiv(p_new, exp_avg, denom, (-lr * mu_next) / (1.0 - mu_product_next))
