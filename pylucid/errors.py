"""Typed errors raised by pylucid.

Every error names the op (or API) that raised it, what it was given and what it
accepts, so a user never has to read a NumPy traceback to find the mistake.
"""

from __future__ import annotations


class LucidError(RuntimeError):
    """Base class of pylucid's own runtime errors."""


class ShapeMismatch(LucidError, ValueError):
    """Shapes that cannot be broadcast or combined by an op."""


class DtypeMismatch(LucidError, TypeError):
    """A dtype an op does not accept, or two dtypes that cannot be combined."""


class DeviceMismatch(LucidError):
    """Tensors of different devices passed to one op."""


class VersionMismatch(LucidError):
    """A tensor saved for backward was modified in place before backward ran."""


class ScalarOverflow(LucidError, ValueError):
    """A Python number out of the range of the dtype it is converted to (a ``RuntimeError`` as in PyTorch, and a
    ``ValueError`` as pylucid's other range checks)."""


class DeviceUnavailable(LucidError):
    """A device was asked for that this machine cannot provide (no CuPy, no GPU)."""


class NonDeterministicError(LucidError):
    """A non-deterministic op was called under ``use_deterministic_algorithms(True)``."""
