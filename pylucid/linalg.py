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

from .ops.linalg import (
    LinAlgError,
    cholesky,
    cross,
    det,
    eigh,
    eigvalsh,
    inv,
    linalg_norm,
    lstsq,
    lu_factor,
    lu_solve,
    matmul,
    matrix_exp,
    matrix_norm,
    matrix_power,
    matrix_rank,
    multi_dot,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    svdvals,
    vecdot,
    vector_norm,
)

norm = linalg_norm

__all__ = ["LinAlgError", "cholesky", "cross", "det", "eigh", "eigvalsh", "inv", "lstsq", "lu_factor", "lu_solve",
           "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr",
           "slogdet", "solve", "solve_triangular", "svd", "svdvals", "vecdot", "vector_norm", "inv_ex",
           "cholesky_ex", "diagonal"]


def inv_ex(A, *, check_errors: bool = False):
    """``(inverse, info)``: like :func:`inv`; ``info`` is 0 (a singular input raises unless caught)."""
    from .creation import zeros

    return inv(A), zeros(*A.shape[:-2], dtype="int32")


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False):
    """``(L, info)``: like :func:`cholesky`; ``info`` is 0 (a non-positive-definite input raises)."""
    from .creation import zeros

    return cholesky(A, upper=upper), zeros(*A.shape[:-2], dtype="int32")


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Main diagonal of the last two dims (``offset=0`` only); a differentiable composite."""
    from .ops.linalg import _diagonal

    if offset != 0 or (dim1, dim2) != (-2, -1):
        raise ValueError("linalg.diagonal: only offset=0, dim1=-2, dim2=-1 are supported")
    return _diagonal(A)
