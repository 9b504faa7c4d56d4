"""``pylucid.linalg``: decompositions, solvers, norms and products, as ``torch.linalg``.

The ops live in :mod:`pylucid.ops.linalg`; every one is batched over leading
dims, computes half precision in float32, and has a graph-mode gradient
(PyTorch's formulas), so second derivatives work. Failures on the input
(singular matrix for ``inv``/``solve``, not positive-definite for
``cholesky``) raise :class:`LinAlgError` naming the op.

>>> import pylucid
>>> A = pylucid.tensor([[4.0, 1.0], [1.0, 3.0]])
>>> pylucid.linalg.solve(A, pylucid.tensor([1.0, 2.0]))
tensor([0.0909, 0.6364])
"""

from __future__ import annotations

from .ops.linalg import LinAlgError  # noqa: F401 - not a function: exported by name (in __all__)
from .ops.registry import namespace as _namespace

globals().update(_namespace("pylucid.linalg"))
__all__ = sorted([*_namespace("pylucid.linalg"), "LinAlgError"])
