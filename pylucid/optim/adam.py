"""Adam and AdamW (decoupled weight decay), with AMSGrad and ``maximize``."""

from __future__ import annotations

from .. import ops as _ops
from .._tensor import Tensor as _Tensor
from ..creation import full, zeros_like
from .._interop import c_contiguous as _c_contiguous
from ..dtypes import float32, float64
from ..ops import add, div, sqrt
from .optimizer import (Optimizer, _addcdiv, _check_hyperparams, _maximum, _to_scalar,
                        _update_moments)

__all__ = ["Adam", "AdamW"]

#: parameter dtypes of the fused step (half-precision parameters keep the generic path)
_FUSED_DTYPES = (float32, float64)
_FUSED_NP = frozenset(d.numpy_dtype for d in _FUSED_DTYPES)


class Adam(Optimizer):
    r"""Adam (Kingma & Ba), PyTorch's formulation.

    .. math::
        m_t &= \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2 \\
        \theta_t &= \theta_{t-1} - \frac{\gamma}{1-\beta_1^t}\,
            \frac{m_t}{\sqrt{v_t}/\sqrt{1-\beta_2^t} + \epsilon}

    With ``amsgrad`` the running maximum of :math:`v_t` replaces it in the
    denominator. ``weight_decay`` adds :math:`\lambda\theta` to the gradient
    (L2), or with ``decoupled_weight_decay=True`` (AdamW) multiplies
    :math:`\theta` by :math:`1-\gamma\lambda` first.

    Args:
        params: parameters or parameter groups.
        lr: learning rate (default 1e-3).
        betas: :math:`(\beta_1, \beta_2)` (default (0.9, 0.999)).
        eps: :math:`\epsilon` (default 1e-8).
        weight_decay: :math:`\lambda` (default 0).
        amsgrad: use the AMSGrad variant.
        maximize: ascend the objective instead.
        decoupled_weight_decay: AdamW's weight decay.
        capturable: on CUDA (contiguous float32/float64 parameters), the step count and the learning rate
            are one-element device tensors read by the fused kernel, so the step can be captured into a CUDA
            graph (``pylucid.cuda.graph``, ``pylucid.compile(mode="reduce-overhead")``) and replayed with its
            bias corrections and a scheduler's learning rate advancing; elsewhere it changes nothing.
        foreach, differentiable, fused: accepted for compatibility, ignored.

    State per parameter: ``step`` (a Python int), ``exp_avg``, ``exp_avg_sq``
    and, with AMSGrad, ``max_exp_avg_sq``.

    >>> import pylucid
    >>> w = pylucid.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = pylucid.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    _group_defaults = {"amsgrad": False, "maximize": False, "decoupled_weight_decay": False}
    _state_names = ("exp_avg", "exp_avg_sq")
    #: set by ``GradScaler.step`` for the length of one step: a one-element float32 device flag, nonzero when a
    #: gradient held inf/NaN; the capturable kernel then leaves parameters, state and step count unchanged
    found_inf: _Tensor | None = None

    @property
    def _step_supports_amp_scaling(self) -> bool:
        """Whether ``GradScaler`` may hand this optimizer its inf flag instead of reading it on the host."""
        return all(g["capturable"] and not g["amsgrad"] for g in self.param_groups)

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        _check_hyperparams(type(self).__name__, lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        betas = (_to_scalar(betas[0]), _to_scalar(betas[1]))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _init_state(self, state, p, group) -> None:
        super()._init_state(state, p, group)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)

    def _step_group(self, group) -> None:
        # the whole group in one multi-tensor step where it can, else one at a time
        if not self._fused_step(group):
            found = self.found_inf
            if found is not None and bool(found.item()):
                return  # a gradient overflowed: GradScaler skips the step
            super()._step_group(group)

    def _update(self, p, g, state, step, lr, group) -> None:
        beta1, beta2 = map(_to_scalar, group["betas"])
        exp_avg, exp_avg_sq = _update_moments(state, g, beta1, beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        if group["amsgrad"]:
            max_sq = state["max_exp_avg_sq"]
            max_sq[...] = _maximum(max_sq, exp_avg_sq)
            denom = add(div(sqrt(max_sq), bias_correction2_sqrt), group["eps"])
        else:
            denom = add(div(sqrt(exp_avg_sq), bias_correction2_sqrt), group["eps"])
        p[...] = _addcdiv(p, exp_avg, denom, -step_size)

    def _fused_step(self, group) -> bool:
        """The group's step through ``pylucid._fused_adam_``: on CUDA one multi-tensor kernel launch per dtype,
        on the CPU one call that updates every tensor in cache-sized blocks (PyTorch's single-tensor arithmetic).

        Taken when that op exists and every parameter with a gradient is a float32/float64 tensor on one
        device, with a gradient of its dtype; on CUDA they must be contiguous and without AMSGrad. Other
        dtypes (half precision keeps PyTorch's per-op rounding), devices and layouts keep the generic path.
        Returns False, having changed nothing, otherwise.
        """
        fused_adam_ = getattr(_ops, "_fused_adam_", None)
        if fused_adam_ is None:
            return False
        live = [p for p in group["params"] if p.grad is not None]
        if not live:
            return False
        dev = live[0].device
        cpu = dev.type == "cpu"
        if not cpu and (dev.type != "cuda" or group["amsgrad"]):
            return False
        np_ok = _FUSED_NP
        for p in live:
            d, gd = p._data, p.grad._data
            if (p._device is not dev or d.dtype not in np_ok or gd.dtype != d.dtype
                    or not (cpu or (_c_contiguous(d) and _c_contiguous(gd)))):
                return False
        if cpu and self.found_inf is not None and bool(self.found_inf.item()):
            return True  # a gradient overflowed: GradScaler skips the step
        amsgrad = bool(group["amsgrad"])
        keys = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq")
        state = self.state
        capturable = not cpu and group["capturable"]
        by_step: dict = {}  # step -> (params, their grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)
        for p in live:
            st = state[p]
            if len(st) == 0:
                self._init_state(st, p, group)
            d = p._data
            bufs = []
            for key in keys:
                buf = st.get(key)
                if buf is None:  # AMSGrad switched on after the state was made
                    buf = st[key] = zeros_like(p)
                bd = buf._data
                if buf._device is not dev or bd.dtype != d.dtype or not (cpu or _c_contiguous(bd)):
                    # state made before Module.to(...) or loaded in another layout: move it next to p
                    buf = st[key] = buf.to(device=dev, dtype=p.dtype).contiguous()
                    bd = buf._data
                if bd.shape != d.shape and bd.size == d.size:
                    # a 0-d state that came back 1-d (a pickled 0-d tensor is rebuilt with one dim)
                    buf = st[key] = buf.reshape(p.shape)
                bufs.append(buf)
            if not capturable:
                step = st["step"] = _to_scalar(st["step"]) + 1
                lists = by_step.get(step)
                if lists is None:
                    lists = by_step[step] = ([], [], [], [], [])
                lists[0].append(p)
                lists[1].append(p.grad)
                lists[2].append(bufs[0])
                lists[3].append(bufs[1])
                if amsgrad:
                    lists[4].append(bufs[2])
        if capturable:
            self._capturable_step(group, live, dev)
            return True
        beta1, beta2 = (float(_to_scalar(b)) for b in group["betas"])
        lr = float(_to_scalar(group["lr"]))
        for step, (ps, grads, avgs, sqs, maxes) in by_step.items():
            fused_adam_(ps, grads, avgs, sqs, step=step, lr=lr, beta1=beta1, beta2=beta2,
                        eps=float(group["eps"]), weight_decay=float(group["weight_decay"]),
                        decoupled=bool(group["decoupled_weight_decay"]), maximize=bool(group["maximize"]),
                        max_exp_avg_sqs=maxes if amsgrad else None)
        return True

    def _capturable_step(self, group, live, dev) -> None:
        """``capturable=True`` on CUDA: the group's step count, learning rate and betas are one-element device
        tensors (made from the Python values on the first step; a scheduler writes the tensor lr and beta1 in
        place), counted and read by the kernel, so the step can be recorded into a CUDA graph and replayed. The
        parameters of a group share one step tensor (they step together)."""
        state = self.state
        dt = live[0].dtype
        step = state[live[0]]["step"]
        if not (isinstance(step, _Tensor) and step.device == dev and step.dtype is dt):
            step = full((), float(_to_scalar(step)), dtype=dt, device=dev)
        for p in live:
            state[p]["step"] = step
        def on_device(v):
            return v if isinstance(v, _Tensor) and v.device == dev and v.dtype is dt else \
                full((), float(_to_scalar(v)), dtype=dt, device=dev)

        lr = group["lr"] = on_device(group["lr"])
        beta1, beta2 = group["betas"] = tuple(on_device(b) for b in group["betas"])
        _ops._fused_adam_(live, [p.grad for p in live], [state[p]["exp_avg"] for p in live],
                          [state[p]["exp_avg_sq"] for p in live], step=step, lr=lr, beta1=beta1, beta2=beta2,
                          eps=float(group["eps"]), weight_decay=float(group["weight_decay"]),
                          decoupled=bool(group["decoupled_weight_decay"]), maximize=bool(group["maximize"]),
                          found_inf=self.found_inf)


class AdamW(Adam):
    r"""Adam with decoupled weight decay (Loshchilov & Hutter): :math:`\theta \leftarrow \theta(1-\gamma\lambda)`
    before the Adam update. Same arguments as :class:`Adam`; ``weight_decay`` defaults to 1e-2.

    >>> import pylucid
    >>> w = pylucid.tensor([1.0], requires_grad=True)
    >>> opt = pylucid.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([0.8500], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
