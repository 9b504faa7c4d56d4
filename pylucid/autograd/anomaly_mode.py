"""``detect_anomaly``: record where each node was created and raise on NaN/inf gradients."""

from __future__ import annotations

from .._state import state


class detect_anomaly:  # noqa: N801
    """Context manager (and decorator): forward stacks are recorded, and a NaN or inf
    gradient raises ``LucidError`` naming the op and the line that created it."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = state.anomaly
        state.anomaly = self.check_nan
        return self

    def __exit__(self, *exc) -> None:
        state.anomaly = self._prev

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with detect_anomaly(self.check_nan):
                return fn(*a, **k)

        return wrapper


class set_detect_anomaly(detect_anomaly):  # noqa: N801
    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        super().__init__(mode and check_nan)
        self._prev = state.anomaly
        state.anomaly = self.check_nan

    def __enter__(self):
        return self


def is_anomaly_enabled() -> bool:
    return state.anomaly
