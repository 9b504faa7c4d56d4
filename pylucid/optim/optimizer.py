"""``Optimizer``: parameter groups, per-parameter state, ``zero_grad``, hooks and
PyTorch-format ``state_dict``/``load_state_dict``.

Every optimizer in :mod:`pylucid.optim` is built from public pylucid ops and
updates its parameters in place under :func:`pylucid.no_grad` (DESIGN.md §1,
§7). The update formulas follow PyTorch's single-tensor implementations
(``foreach=False``), so the same parameters and gradients give the same
trajectory; ``foreach``/``fused``/``capturable``/``differentiable`` are
accepted for compatibility and ignored.

State tensors and parameters are updated with ``x[...] = new_value`` under
``no_grad``: the cheapest public in-place write (one array assignment and a
version bump; ``copy_`` and ``add_`` go through more dispatch).

Per-parameter state holds pylucid Tensors (``exp_avg``, ``momentum_buffer``,
...) and plain Python numbers for scalar state (``step``, ``mu_product``):
PyTorch keeps those as 0-d tensors, but a Python number costs no op per step
and gives the same arithmetic (PyTorch reads them back with ``.item()`` before
use). ``load_state_dict`` accepts either form.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Any

from .. import ops as _ops
from .._tensor import Tensor
from ..autograd import enable_grad, no_grad
from ..autograd.graph import RemovableHandle, _hook_ids
from ..creation import zeros_like
from ..ops import add, mul, neg

__all__ = ["Optimizer", "required", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook"]


class _RequiredParameter:
    """Singleton marking a default every parameter group must set (``lr`` in old optimizers)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

_GLOBAL_STEP_PRE_HOOKS: OrderedDict = OrderedDict()
_GLOBAL_STEP_POST_HOOKS: OrderedDict = OrderedDict()


def _add_hook(hooks: OrderedDict, hook: Callable, prepend: bool = False) -> RemovableHandle:
    key = next(_hook_ids)
    hooks[key] = hook
    if prepend:
        hooks.move_to_end(key, last=False)
    return RemovableHandle(hooks, key)


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """Register ``hook(optimizer, args, kwargs) -> None or (args, kwargs)`` run before every optimizer's step."""
    return _add_hook(_GLOBAL_STEP_PRE_HOOKS, hook)


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """Register ``hook(optimizer, args, kwargs) -> None`` run after every optimizer's step."""
    return _add_hook(_GLOBAL_STEP_POST_HOOKS, hook)


def _to_scalar(x):
    """A Python number from a number or a one-element Tensor (``lr`` may be given as a Tensor)."""
    cls = type(x)
    if cls is float or cls is int:  # the common case, read per parameter and step: no attribute lookup
        return x
    if isinstance(x, Tensor) or hasattr(x, "item"):
        return x.item()
    return x




def _maximum(a: Tensor, b: Tensor) -> Tensor:
    """Element-wise maximum; ``pylucid.maximum`` when the op exists, else ``where(a >= b, a, b)``."""
    fn = getattr(_ops, "maximum", None)
    if fn is not None:
        return fn(a, b)
    return _ops.where(_ops.ge(a, b), a, b)


def _addcmul(x: Tensor, a: Tensor, b: Tensor, value: float) -> Tensor:
    """``x + value * a * b`` in PyTorch's order of evaluation (``(value*a)*b``)."""
    return _ops.add(x, _ops.mul(_ops.mul(a, value), b))


def _addcdiv(x: Tensor, a: Tensor, b: Tensor, value: float) -> Tensor:
    """``x + value * a / b`` in PyTorch's order of evaluation (``(value*a)/b``)."""
    return _ops.add(x, _ops.div(_ops.mul(a, value), b))


def _lerp(x: Tensor, end: Tensor, weight: float) -> Tensor:
    """``x + weight * (end - x)`` with PyTorch's two-sided formula (``end - (end - x)(1 - weight)`` for
    ``weight >= 0.5``): one ``pylucid.lerp`` op when it exists, else three ops."""
    fn = getattr(_ops, "lerp", None)
    if fn is not None:
        return fn(x, end, weight)
    if weight < 0.5:
        return _ops.add(x, _ops.mul(_ops.sub(end, x), weight))
    return _ops.sub(end, _ops.mul(_ops.sub(end, x), 1.0 - weight))


def _update_moments(state: dict, g: Tensor, beta1: float, beta2: float) -> tuple[Tensor, Tensor]:
    """Adam's moment estimates, updated in place in ``state``: ``exp_avg = beta1 * exp_avg + (1 - beta1) * g``
    (as ``lerp``, PyTorch's rounding) and ``exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g``; returns both."""
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    exp_avg[...] = _lerp(exp_avg, g, 1 - beta1)
    exp_avg_sq[...] = _addcmul(mul(exp_avg_sq, beta2), g, g, 1 - beta2)
    return exp_avg, exp_avg_sq


def _step_no_grad(fn):
    """Decorator for ``step``: run the update with graph recording off."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        with no_grad():
            return fn(self, *args, **kwargs)

    return wrapper


def _patch_step_function(cls) -> None:
    """Wrap ``cls.step`` once so step hooks run and ``_opt_called`` is recorded (for the lr schedulers)."""
    step = cls.step
    if getattr(step, "_hooked", False):
        return

    @functools.wraps(step)
    def step_with_hooks(self, *args, **kwargs):
        if _GLOBAL_STEP_PRE_HOOKS or self._optimizer_step_pre_hooks:
            for hook in chain(_GLOBAL_STEP_PRE_HOOKS.values(), self._optimizer_step_pre_hooks.values()):
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            f"{type(self).__name__}.step: a step pre-hook must return None or a tuple "
                            f"(new_args, new_kwargs), got {result!r}"
                        )
                    args, kwargs = result
        self._opt_called = True
        self._follow_param_devices()
        out = step(self, *args, **kwargs)
        if _GLOBAL_STEP_POST_HOOKS or self._optimizer_step_post_hooks:
            for hook in chain(self._optimizer_step_post_hooks.values(), _GLOBAL_STEP_POST_HOOKS.values()):
                hook(self, args, kwargs)
        return out

    step_with_hooks._hooked = True
    cls.step = step_with_hooks


class Optimizer:
    """Base class of all optimizers.

    Args:
        params: an iterable of Tensors, of ``(name, Tensor)`` pairs, or of dicts
            (parameter groups: ``{"params": [...], "lr": ...}``; options missing
            from a group take the optimizer's defaults).
        defaults: the default value of every option.

    Attributes:
        param_groups: list of dicts, each with ``"params"`` (a list of Tensors) and every option.
        state: ``defaultdict(dict)`` keyed by parameter Tensor: that parameter's state.

    :meth:`step` is a template: it evaluates the closure, loops over the
    groups and the parameters that have a gradient, creates each parameter's
    state on its first step (``step = 0`` and the zero tensors named in
    ``_state_names``) and calls the optimizer's ``_update(p, g, state, step,
    lr, group)``, which changes ``p`` in place, under ``no_grad``. An optimizer
    overrides ``_init_state`` for state that depends on the group's options,
    ``_step_group`` when it needs a whole group at once, or ``step`` itself
    (L-BFGS).

    >>> import pylucid
    >>> w = pylucid.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = pylucid.optim.SGD([w], lr=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step(); w
    tensor([0., 0.], requires_grad=True)
    >>> opt.zero_grad(); w.grad is None
    True
    """

    #: group options that older pickles and state dicts may lack: ``__setstate__`` fills them in
    _group_defaults: dict[str, Any] = {}

    def __init__(self, params, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict = OrderedDict()
        _patch_step_function(type(self))
        if isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params should be an iterable of Tensors or dicts, got a single Tensor; "
                "pass [tensor] or model.parameters()"
            )
        if isinstance(params, (set, frozenset)):
            # stricter than PyTorch (which accepts a set here): a set's order changes between runs, and the
            # state dict identifies parameters by position
            raise TypeError(
                f"{type(self).__name__}: optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets changes between runs; use a list instead"
            )
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError(f"{type(self).__name__}: optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    # -- pickling (PyTorch's layout) ------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                     "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())
        _patch_step_function(type(self))
        if self._group_defaults:
            for group in self.param_groups:
                for key, value in self._group_defaults.items():
                    group.setdefault(key, value)

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    # -- parameter groups ----------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group (a dict with ``"params"``); missing options take the defaults.

        Raises TypeError for non-Tensor parameters or a ``set`` (unordered),
        ValueError for a non-leaf Tensor, a missing required option, or a
        parameter already in another group.
        """
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}.add_param_group: param_group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                f"{name}: optimizer parameters need to be organized in ordered collections, but the ordering of "
                "tensors in sets changes between runs; use a list instead"
            )
        else:
            params = list(params)
        tensors, names = [], []
        for p in params:
            if isinstance(p, tuple) and len(p) == 2:
                names.append(p[0])
                p = p[1]
            tensors.append(p)
        if names:
            if len(names) != len(tensors):
                raise ValueError(f"{name}: all optimizer params should be with or without names; "
                                 "some names are missing")
            param_group["param_names"] = names
        param_group["params"] = tensors
        for p in tensors:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not self.defaults.get("differentiable", None) and not (p.is_leaf or p.retains_grad):
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor (it has grad_fn {p.grad_fn.name()})")
        for key, default in self.defaults.items():
            if default is required and key not in param_group:
                raise ValueError(f"{name}: parameter group didn't specify a value of required optimization "
                                 f"parameter {key}")
            param_group.setdefault(key, default)
        ids = [id(p) for p in tensors]
        if len(ids) != len(set(ids)):
            warnings.warn(f"{name}: optimizer contains a parameter group with duplicate parameters",
                          UserWarning, stacklevel=3)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & set(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # -- gradients ---------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to ``None`` (default), or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    # -- the step: a template every optimizer but L-BFGS fills in --------------------------------
    #: the state tensors (zeros shaped like the parameter) a parameter's first step creates after its ``step``
    #: count, in the order ``state_dict`` lists them; what depends on a group's options ``_init_state`` adds
    _state_names: tuple[str, ...] = ()

    @_step_no_grad
    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one optimization step; ``closure`` re-evaluates the model and returns the loss.

        Evaluates the closure (grad mode on), then runs :meth:`_step_group` on
        every parameter group with recording off; returns the closure's loss
        (``None`` without a closure).
        """
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _step_group(self, group: dict[str, Any]) -> None:
        """Update the parameters of ``group`` that have a gradient, one at a time.

        Each gradient comes through :meth:`_grads` (negated for ``maximize``,
        with the group's L2 or decoupled weight decay); a parameter's empty
        state is filled by :meth:`_init_state`, its ``step`` count goes up by
        one, then :meth:`_update` changes it in place. An optimizer that needs
        all the group's parameters at once (Adam's fused multi-tensor step), or
        keeps no step count (SGD), overrides this.
        """
        lr = _to_scalar(group["lr"])
        decoupled_lr = lr if group.get("decoupled_weight_decay") else None
        states = self.state
        for p, g in self._grads(group, group.get("maximize", False), group.get("weight_decay", 0), decoupled_lr):
            state = states[p]
            if len(state) == 0:
                self._init_state(state, p, group)
            step = state["step"] = _to_scalar(state["step"]) + 1
            self._update(p, g, state, step, lr, group)

    def _init_state(self, state: dict[str, Any], p: Tensor, group: dict[str, Any]) -> None:
        """Fill a parameter's empty state: ``step = 0``, then a zero tensor like ``p`` per name in ``_state_names``."""
        state["step"] = 0
        for name in self._state_names:
            state[name] = zeros_like(p)

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], step: int, lr: float,
                group: dict[str, Any]) -> None:
        """The optimizer's formula: update ``p`` (and its ``state`` tensors) in place from its gradient ``g``.

        ``step`` is the parameter's step count (1 on its first update), ``lr``
        the group's learning rate as a Python number, ``group`` the group's
        options.
        """
        raise NotImplementedError(f"{type(self).__name__}: an optimizer implements step() or _update()")

    def _eval_closure(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # -- hooks ---------------------------------------------------------------------------
    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)``, run before ``step``."""
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs) -> None``, run after ``step``."""
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        return _add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        return _add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        return _add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        return _add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # -- state dict ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The optimizer state in PyTorch's layout.

        ``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``:
        parameters are replaced by their index in the order of the groups.
        As in PyTorch, the state tensors are the live ones (not copies):
        ``copy.deepcopy`` the result, or save it, before training further.
        """
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        mapping: dict[int, int] = {}
        start = 0

        def pack_group(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            mapping.update({id(p): i for i, p in enumerate(group["params"], start) if id(p) not in mapping})
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        sd = {"state": packed_state, "param_groups": groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            result = hook(self, sd)
            if result is not None:
                sd = result
        return sd

    @staticmethod
    def _cast_state_value(param: Tensor, value, key=None):
        """A private copy of a saved state value, on ``param``'s device (floating tensors in its dtype)."""
        if isinstance(value, Tensor):
            if key == "step":
                return value.item()
            dtype = param.dtype if param.dtype.is_floating_point and value.dtype.is_floating_point else None
            out = value.to(device=param.device, dtype=dtype)
            # a fresh tensor: the loaded state must not alias the caller's dict
            return out.clone() if out is value else out.detach()
        if isinstance(value, dict):
            return {k: Optimizer._cast_state_value(param, v, k) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(Optimizer._cast_state_value(param, v) for v in value)
        return copy.deepcopy(value)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state from :meth:`state_dict` (the groups must match in number and size).

        State tensors are copied (cast to each parameter's floating dtype and
        device), so training resumes bit for bit; group options (``lr`` ...)
        come from the saved dict.
        """
        name = type(self).__name__
        state_dict = dict(state_dict)
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError(f"{name}.load_state_dict: loaded state dict has {len(saved_groups)} parameter groups, "
                             f"the optimizer has {len(groups)}")
        for i, (g, s) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(f"{name}.load_state_dict: loaded parameter group {i} has {len(s['params'])} "
                                 f"parameters, the optimizer's group has {len(g['params'])}")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = self._cast_state_value(param, v)
            else:
                state[k] = copy.deepcopy(v)

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    def _follow_param_devices(self) -> None:
        """Move state tensors to their parameter's device (after ``Module.to("cuda")``, say).

        ``Module.to`` moves parameters in place, so the optimizer still holds
        them; their state follows here, lazily, on the next ``step``.
        """
        # (runs every step over every state entry: the Python number entries, step counts, are passed over first)
        for p, st in self.state.items():
            dev = p._device
            for k, v in st.items():
                c = v.__class__
                if c is not int and c is not float and isinstance(v, Tensor) and v._device is not dev:
                    st[k] = v.to(dev)

    # -- helpers for subclasses ----------------------------------------------------------
    @staticmethod
    def _grads(group, maximize: bool = False, weight_decay: float = 0, decoupled_lr: float | None = None) -> Iterable:
        """(param, grad) for the parameters of ``group`` that have a gradient: the step's common preamble.

        The gradient is negated when ``maximize``. A nonzero ``weight_decay`` is
        applied as L2 (``grad + weight_decay * param``), or, when ``decoupled_lr``
        is given (AdamW-style), by scaling the parameter in place by
        ``1 - decoupled_lr * weight_decay`` before the update.
        """
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize:
                g = neg(g)
            if weight_decay != 0:
                if decoupled_lr is None:
                    g = add(g, mul(p, weight_decay))
                else:
                    p[...] = mul(p, 1 - decoupled_lr * weight_decay)
            yield p, g


_LABELS = {"lr": "learning rate", "eps": "epsilon value", "initial_accumulator_value": "initial_accumulator_value"}


def _check_hyperparams(name: str, **values) -> None:
    """Raise ValueError naming optimizer ``name`` for the first invalid value, checked in the order given.

    ``betas`` must be a pair in ``[0, 1)``, ``rho`` in ``[0, 1]``, everything
    else ``>= 0`` (a NaN fails, as in PyTorch's ``not 0.0 <= x`` checks).
    ``lr`` and the betas may be one-element Tensors.
    """
    for key, value in values.items():
        if key == "betas":
            for i in (0, 1):
                if not 0.0 <= _to_scalar(value[i]) < 1.0:
                    raise ValueError(f"{name}: invalid beta parameter at index {i}: {value[i]} (expected in [0, 1))")
        elif key == "rho":
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: invalid rho value {value} (expected in [0, 1])")
        elif not 0.0 <= (_to_scalar(value) if key == "lr" else value):
            raise ValueError(f"{name}: invalid {_LABELS.get(key, key + ' value')} {value} (expected >= 0)")
