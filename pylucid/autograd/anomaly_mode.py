"""``detect_anomaly``: record where each node was created and raise on NaN/inf gradients."""

from __future__ import annotations

from .._state import state
from .grad_mode import _ModeSwitch, _SetMode


class detect_anomaly(_ModeSwitch):  # noqa: N801
    """Context manager (and decorator): forward stacks are recorded, and a NaN or inf
    gradient raises ``LucidError`` naming the op and the line that created it."""

    _field = "anomaly"

    def __init__(self, check_nan: bool = True) -> None:
        self._value = self.check_nan = check_nan


class set_detect_anomaly(_SetMode):  # noqa: N801
    """Turn anomaly detection on or off; takes effect immediately, as in PyTorch, and undoes itself on exit."""

    _field = "anomaly"

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        super().__init__(mode and check_nan)


def is_anomaly_enabled() -> bool:
    return state.anomaly
