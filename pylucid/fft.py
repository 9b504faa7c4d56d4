"""``pylucid.fft``: discrete Fourier transforms, as ``torch.fft``.

Every transform takes ``n`` (1-d) or ``s`` (n-d) to zero-pad or trim the
input first, ``dim`` and ``norm``: ``"backward"`` (default: no scaling
forward, ``1/n`` on the inverse), ``"ortho"`` (``1/sqrt(n)`` both ways) or
``"forward"`` (``1/n`` forward, none on the inverse). They are composites of
three primitives in :mod:`pylucid.ops.fft` (``fft_c2c``, ``fft_r2c``,
``fft_c2r``), whose gradients are FFTs again, so every transform is
differentiable any number of times.

>>> import pylucid
>>> pylucid.fft.fft(pylucid.tensor([1.0, 0.0, 0.0, 0.0]))
tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
"""

from __future__ import annotations

from .ops.registry import namespace as _namespace

globals().update(_namespace("pylucid.fft"))
__all__ = sorted(_namespace("pylucid.fft"))
