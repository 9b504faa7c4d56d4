"""The window creation functions of the ``pylucid`` namespace (``torch.hann_window`` and friends).

``periodic=True`` (the default) gives the first ``window_length`` samples of
the symmetric window of ``window_length + 1``, as PyTorch.
"""

from __future__ import annotations

from ..ops.registry import declare
from . import windows as _w


def _periodic(name: str, periodic) -> bool:
    """``periodic`` as PyTorch takes it: a Python bool only (``None``, ``1`` and strings are refused)."""
    if not isinstance(periodic, bool):
        raise TypeError(f"{name}: periodic must be a bool, got {type(periodic).__name__} ({periodic!r})")
    return periodic


@declare(method=False)
def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Hann window :math:`w_n = \sin^2(\pi n / (N - 1))`, ``N = window_length + 1`` when ``periodic``.

    >>> import pylucid
    >>> pylucid.hann_window(3, periodic=False)
    tensor([0., 1., 0.])
    """
    sym = not _periodic("hann_window", periodic)
    return _w.hann(window_length, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


@declare(method=False)
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    r"""The Hamming window :math:`w_n = \alpha - \beta \cos(2\pi n / (N - 1))`.

    >>> import pylucid
    >>> pylucid.hamming_window(3, periodic=False)
    tensor([0.0800, 1.0000, 0.0800])
    """
    sym = not _periodic("hamming_window", periodic)
    return _w.general_cosine(window_length, a=[alpha, beta], sym=sym, dtype=dtype, device=device,
                             requires_grad=requires_grad)


@declare(method=False)
def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Blackman window :math:`w_n = 0.42 - 0.5 \cos(2\pi n / (N-1)) + 0.08 \cos(4\pi n / (N-1))`.

    >>> import pylucid
    >>> [abs(round(v, 4)) for v in pylucid.blackman_window(4).tolist()]
    [0.0, 0.34, 1.0, 0.34]
    """
    sym = not _periodic("blackman_window", periodic)
    return _w.blackman(window_length, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


@declare(method=False)
def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    r"""The Bartlett (triangular) window :math:`w_n = 1 - |2n / (N - 1) - 1|`.

    >>> import pylucid
    >>> pylucid.bartlett_window(4)
    tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    sym = not _periodic("bartlett_window", periodic)
    return _w.bartlett(window_length, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


@declare(method=False)
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    r"""The Kaiser window :math:`w_n = I_0(\beta \sqrt{1 - (2n/(N-1) - 1)^2}) / I_0(\beta)`.

    >>> import pylucid
    >>> pylucid.kaiser_window(3, periodic=False, beta=0.0)
    tensor([1., 1., 1.])
    """
    sym = not _periodic("kaiser_window", periodic)
    return _w.kaiser(window_length, beta=beta, sym=sym, dtype=dtype, device=device,
                     requires_grad=requires_grad)
