"""NAdam: Adam with Nesterov momentum and momentum decay."""

from __future__ import annotations

from ..ops import add, div, mul, sqrt
from .optimizer import Optimizer, _addcdiv, _addcmul, _check_hyperparams, _init_state, _lerp, _step_no_grad, _to_scalar

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

    @_step_no_grad
    def step(self, closure=None):
        """One NAdam step; returns ``closure()``'s loss when a closure is given."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay, momentum_decay = group["eps"], group["weight_decay"], group["momentum_decay"]
            decoupled, maximize = group["decoupled_weight_decay"], group["maximize"]
            for p, g, state in self._params_with_grad(group, maximize, weight_decay, lr if decoupled else None):
                if len(state) == 0:
                    _init_state(state, p, ("exp_avg", "exp_avg_sq"), mu_product=1.0)
                step = state["step"] = _to_scalar(state["step"]) + 1
                bias_correction2 = 1 - beta2**step
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                mu_product = state["mu_product"] = _to_scalar(state["mu_product"]) * mu
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg[...] = _lerp(exp_avg, g, 1 - beta1)
                exp_avg_sq[...] = _addcmul(mul(exp_avg_sq, beta2), g, g, 1 - beta2)
                denom = add(sqrt(div(exp_avg_sq, bias_correction2)), eps)
                mu_product_next = mu_product * mu_next
                p_new = _addcdiv(p, g, denom, -lr * (1.0 - mu) / (1.0 - mu_product))
                p[...] = _addcdiv(p_new, exp_avg, denom, (-lr * mu_next) / (1.0 - mu_product_next))
        return loss
