"""``GradScaler``: dynamic loss scaling for mixed-precision training (PyTorch's ``torch.amp.GradScaler``).

Float16 gradients underflow; multiplying the loss by a large ``scale`` keeps
them representable, and the scaler divides them back before the optimizer
step. When a gradient overflowed (inf or NaN) the step is skipped and the
scale shrinks (``backoff_factor``); after ``growth_interval`` clean steps it
grows (``growth_factor``).

Built from public pylucid ops only. The scale lives as a Python float rounded
to float32 (PyTorch keeps a float32 0-d tensor on the device; the values are
the same), and the inf check of each gradient is ``sum(grad * 0)``, which is
NaN exactly when the gradient holds an inf or a NaN.

With an optimizer that can step under a device-side inf check (a ``capturable``
Adam/AdamW on CUDA: ``optimizer._step_supports_amp_scaling``), the scale and the
growth tracker move to the device at the first such ``step`` and stay there:
``step`` hands the inf flag to the optimizer (``optimizer.found_inf``), whose
kernel skips the update on the device, and ``update`` computes the next scale on
the device, so neither reads a value on the host and the whole iteration can be
captured into a CUDA graph and replayed.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from enum import Enum
from typing import Any

from .. import dtypes as _dt
from .._tensor import Tensor
from ..autograd import no_grad
from ..creation import tensor as _tensor
from ..ops import add, eq, gt, logical_or, mul, ne, reciprocal, where
from ..ops import sum as _sum

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _float32(x: float) -> float:
    """Round to float32 (the scale is a float32 value in PyTorch); values beyond its range become inf."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _tensor(x, dtype=_dt.float32).item()


class GradScaler:
    """Dynamic loss scaling; ``device`` ``"cuda"`` (default, as PyTorch) or ``"cpu"``.

    Usage::

        scaler = pylucid.amp.GradScaler("cpu")
        with pylucid.amp.autocast("cpu", dtype=pylucid.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)        # unscales, skips the step if a grad is inf/NaN
        scaler.update()               # adjusts the scale

    Skipped steps are reported three ways: ``step`` returns ``None`` (the
    optimizer's return value otherwise), ``scaler._found_inf_per_device(opt)``
    maps each device to a 0-d float32 tensor (1.0 = inf/NaN found; valid until
    ``update``, as in PyTorch) and ``scaler.last_step_skipped`` stays set
    after ``update``.

    Args:
        device: device type of the gradients (``"cuda"`` or ``"cpu"``). With
            ``"cuda"`` and no GPU, the scaler warns and disables itself.
        init_scale: initial scale (default ``2**16``).
        growth_factor: scale multiplier after ``growth_interval`` clean steps (> 1).
        backoff_factor: scale multiplier after an inf/NaN (< 1).
        growth_interval: clean steps between growths (default 2000).
        enabled: ``False`` makes every method a pass-through.

    >>> import pylucid
    >>> w = pylucid.tensor([1.0], requires_grad=True)
    >>> opt = pylucid.optim.SGD([w], lr=0.1)
    >>> from pylucid.amp.grad_scaler import GradScaler
    >>> scaler = GradScaler("cpu", init_scale=4.0)
    >>> scaler.scale((w * 3).sum()).backward(); w.grad
    tensor([12.])
    >>> scaler.step(opt); scaler.update(); w, scaler.get_scale()
    (tensor([0.7000], requires_grad=True), 4.0)
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        device = str(device)
        if device not in ("cpu", "cuda"):
            raise ValueError(f"GradScaler: device must be 'cpu' or 'cuda', got {device!r}")
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            from .. import cuda

            if not cuda.is_available():
                warnings.warn("GradScaler is enabled for 'cuda', but CUDA is not available; disabling. "
                              "Pass device='cpu' to scale on the CPU.", UserWarning, stacklevel=2)
                self._enabled = False
        self.last_step_skipped = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError(f"GradScaler: the growth factor must be > 1.0, got {growth_factor}")
            if backoff_factor >= 1.0:
                raise ValueError(f"GradScaler: the backoff factor must be < 1.0, got {backoff_factor}")
            self._init_scale = init_scale
            self._scale: float | None = None
            self._scale_tensors: dict = {}
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: int | None = None
            #: (scale, growth tracker) as 0-d float32 / int64 device tensors once a capturable optimizer stepped
            self._dev: tuple[Tensor, Tensor] | None = None
            self._per_optimizer_states: dict[int, dict[str, Any]] = defaultdict(_refresh_per_optimizer_state)

    # -- scale ---------------------------------------------------------------------------
    def _lazy_init(self) -> None:
        if self._scale is None:
            self._scale = _float32(self._init_scale)
            self._growth_tracker = self._init_growth_tracker

    def _check_initialized(self, funcname: str) -> None:
        if self._scale is None:
            raise RuntimeError(f"GradScaler.{funcname}: the scale is not initialized; call scaler.scale(loss) "
                               "earlier in the iteration")

    def _scale_tensor(self, device) -> Tensor:
        """The scale as a 0-d float32 tensor on ``device`` (cached until the scale changes)."""
        if self._dev is not None and self._dev[0].device == device:
            return self._dev[0]
        key = (str(device), self._scale)
        t = self._scale_tensors.get(key)
        if t is None:
            t = _tensor(self._scale, dtype=_dt.float32, device=device)
            self._scale_tensors = {key: t}
        return t

    def scale(self, outputs):
        """Multiply ``outputs`` (a Tensor or nested lists/tuples of Tensors) by the scale.

        The scale is a 0-d float32 tensor, so it does not widen float16 outputs that have dimensions (a 0-d
        float16 loss becomes float32, as in PyTorch).
        """
        if not self._enabled:
            return outputs
        self._lazy_init()
        if isinstance(outputs, Tensor):
            return mul(outputs, self._scale_tensor(outputs.device))

        def apply_scale(val):
            if isinstance(val, Tensor):
                return mul(val, self._scale_tensor(val.device))
            if isinstance(val, (list, tuple)):
                return type(val)(apply_scale(v) for v in val)
            if hasattr(val, "__iter__"):
                return map(apply_scale, val)
            raise ValueError(f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, got "
                             f"{type(val).__name__}")

        return apply_scale(outputs)

    # -- unscale ---------------------------------------------------------------------------
    def _unscale_grads_(self, optimizer, inv_scale: float | Tensor, allow_fp16: bool) -> dict:
        """Multiply every grad by ``inv_scale`` in place; per device, 1.0 if any grad held inf/NaN."""
        nonfinite: dict = {}
        # inf * 0 is the point of the probe: silence the array library's "invalid value" warning
        with no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype == _dt.float16:
                        raise ValueError("GradScaler: attempting to unscale FP16 gradients; keep the parameters "
                                         "(and so their gradients) in float32 and let autocast run in float16")
                    # NaN exactly when g holds an inf or a NaN (inf * 0 = NaN); checked before unscaling, as PyTorch
                    probe = _sum(mul(g, 0.0), dtype=_dt.float32)
                    key = str(g.device)
                    nonfinite[key] = probe if key not in nonfinite else add(nonfinite[key], probe)
                    if isinstance(inv_scale, Tensor):  # the device-resident scale's inverse
                        g.copy_(mul(g, inv_scale))
                    elif inv_scale != 1.0:
                        # the inverse scale is a float32 value, as in PyTorch
                        g.copy_(mul(g, _tensor(inv_scale, dtype=_dt.float32, device=g.device)))
        return {dev: ne(v, v).to(_dt.float32) for dev, v in nonfinite.items()}

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place (e.g. before gradient clipping).

        Call at most once per optimizer between ``update`` calls, and before ``step``.
        """
        if not self._enabled:
            return
        self._check_initialized("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("GradScaler.unscale_() has already been called on this optimizer since the last "
                               "update()")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("GradScaler.unscale_() is being called after step()")
        inv_scale = reciprocal(self._dev[0]) if self._dev is not None else _float32(1.0 / self._scale)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    # -- step / update -----------------------------------------------------------------
    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and run ``optimizer.step(*args, **kwargs)`` unless a grad is inf/NaN.

        Returns the optimizer's return value, or ``None`` when the step was skipped.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: closure use is not supported when the scaler is enabled")
        self._check_initialized("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("GradScaler.step() has already been called since the last update()")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        found = state["found_inf_per_device"]
        if self._device == "cuda" and getattr(optimizer, "_step_supports_amp_scaling", False) and len(found) == 1:
            # the optimizer skips its update on the device when the flag is set: no host read of the flag
            self._to_device()
            (flag,) = found.values()
            optimizer.found_inf = flag
            try:
                retval = optimizer.step(*args, **kwargs)
            finally:
                optimizer.found_inf = None
            self._last_found = flag
            state["stage"] = OptState.STEPPED
            return retval
        retval = None
        skipped = bool(sum(v.item() for v in found.values()))
        if not skipped:
            retval = optimizer.step(*args, **kwargs)
        self._last_found = skipped
        state["stage"] = OptState.STEPPED
        return retval

    @property
    def last_step_skipped(self) -> bool:
        """Whether the last ``step`` skipped the optimizer (read from the device after a device-side check)."""
        found = self.__dict__.get("_last_found", False)
        return bool(found.item()) if isinstance(found, Tensor) else found

    @last_step_skipped.setter
    def last_step_skipped(self, value: bool) -> None:
        self._last_found = bool(value)

    def _to_device(self) -> None:
        """Move the scale and the growth tracker to the CUDA device (once; they stay there)."""
        if self._dev is not None:
            return
        from ..backend import cuda as _cuda_backend

        if _cuda_backend.CAPTURING[0]:
            raise RuntimeError("GradScaler.step: the first step with a capturable optimizer must run before a CUDA "
                               "graph captures (the scale moves to the device then); run one iteration eagerly "
                               "first, as pylucid.compile does")
        from ..creation import full

        self._dev = (full((), self._scale, dtype=_dt.float32, device="cuda"),
                     full((), self._growth_tracker, dtype=_dt.int64, device="cuda"))

    def _update_on_device(self, found_infs: list) -> None:
        """``update()``'s rule as device ops written into the scale and tracker tensors in place."""
        scale, tracker = self._dev
        found = found_infs[0]
        for f in found_infs[1:]:
            found = add(found, f.to(found.device))
        with no_grad():
            hit = gt(found, 0.0)
            successful = add(tracker, 1)
            grow = logical_or(hit, eq(successful, self._growth_interval))  # the tracker resets on either
            grown = mul(scale, _float32(self._growth_factor))
            grown = where(eq(grown, float("inf")), scale, grown)  # a scale that would overflow is kept
            new_scale = where(hit, mul(scale, _float32(self._backoff_factor)), where(grow, grown, scale))
            scale.copy_(new_scale)
            tracker.copy_(where(grow, 0, successful))

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Set the scale for the next iteration.

        With ``new_scale`` use it directly. Otherwise: after an inf/NaN in any
        optimizer since the last update, ``scale *= backoff_factor`` and the
        growth counter resets; else the counter grows and, on reaching
        ``growth_interval``, ``scale *= growth_factor`` (kept only if finite).
        """
        if not self._enabled:
            return
        self._check_initialized("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise ValueError("GradScaler.update: new_scale should be a float or a 1-element tensor with "
                                     "requires_grad=False")
                if self._dev is not None:
                    with no_grad():
                        self._dev[0].copy_(new_scale.reshape(()))
                    self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
                    return
                new_scale = new_scale.item()
            self._scale = _float32(float(new_scale))
            if self._dev is not None:
                with no_grad():
                    self._dev[0].fill_(self._scale)
        else:
            found_infs = [f for s in self._per_optimizer_states.values() for f in s["found_inf_per_device"].values()]
            if not found_infs:
                raise RuntimeError("GradScaler.update: no inf checks were recorded prior to update (call "
                                   "scaler.step(optimizer) or scaler.unscale_(optimizer) first)")
            if self._dev is not None:
                self._update_on_device(found_infs)
            elif sum(f.item() for f in found_infs):
                self._scale = _float32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = _float32(self._scale * self._growth_factor)
                    if grown != float("inf"):
                        self._scale = grown
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # -- accessors ---------------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (``init_scale`` before the first ``scale`` call; 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        if self._dev is not None:
            return float(self._dev[0].item())
        return float(self._init_scale) if self._scale is None else self._scale

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        if self._dev is not None:
            return int(self._dev[1].item())
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker

    def is_enabled(self) -> bool:
        return self._enabled

    def _found_inf_per_device(self, optimizer) -> dict:
        """Per device, a 0-d float32 tensor: 1.0 if ``optimizer``'s grads held inf/NaN (until ``update``)."""
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    # -- state dict ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``, ``_growth_tracker`` (empty if
        disabled), as PyTorch."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("GradScaler.load_state_dict: the source state dict is empty, possibly because it was "
                               "saved from a disabled instance of GradScaler")
        self._init_scale = float(state_dict["scale"])
        if self._dev is not None:  # device-resident: the tensors keep their storage (a captured graph reads it)
            with no_grad():
                self._dev[0].fill_(_float32(self._init_scale))
                self._dev[1].fill_(int(state_dict["_growth_tracker"]))
        if self._scale is not None:
            self._scale = _float32(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise RuntimeError("A GradScaler instance may only be pickled at the beginning of an iteration, or "
                                   "at the end after scaler.update()")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
            state["_scale_tensors"] = {}
            state["_dev"] = None
            state["_last_found"] = self.last_step_skipped
            state["_per_optimizer_states"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._enabled:
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
