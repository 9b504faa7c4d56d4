"""Backends: the only code that imports an array library to compute.

``ArrayBackend`` is parameterised by its array module ``xp`` (NumPy or CuPy)
and implements the primitive set the ops call. Primitives that are plain
array-API functions (``exp``, ``sum``, ``where``, ...) are forwarded to ``xp``
by name; primitives whose behaviour differs between libraries, or that need a
kernel of our own, are methods here and overridden per device.
"""

from .base import ArrayBackend

__all__ = ["ArrayBackend"]
