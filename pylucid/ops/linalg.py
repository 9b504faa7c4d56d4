"""Linear algebra: ``matmul`` (BLAS/cuBLAS through the backend)."""

from __future__ import annotations

from .._tensor import Tensor
from ..errors import ShapeMismatch
from ._op import Op, apply
from .schema import PROMOTE, OpSchema


class Matmul(Op):
    """``y = a @ b`` with NumPy/PyTorch rules (1-d operands, batch broadcasting).

    ``da = g @ b^T`` and ``db = a^T @ g``, each summed back over broadcast
    batch dims; 1-d operands are treated as a row (``a``) or column (``b``).
    """

    schema = OpSchema("matmul", amp_policy=PROMOTE, saves_input=True, family="linalg")

    @staticmethod
    def forward(be, a, b):
        return be.matmul(a, b)

    def backward(self, g):
        from .elementwise import sum_to_size
        from .shape import reshape, transpose, unsqueeze

        a, b = self.input(0), self.input(1)
        sa, sb = self.shapes
        ea, eb = self.next_edges
        a2 = unsqueeze(a, 0) if a.ndim == 1 else a
        b2 = unsqueeze(b, 1) if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = unsqueeze(g2, -2 if b.ndim > 1 else 0)
        if b.ndim == 1:
            g2 = unsqueeze(g2, -1)
        ga = gb = None
        if ea is not None:
            ga = matmul(g2, transpose(b2, -1, -2))
            ga = reshape(sum_to_size(ga, a2.shape), sa)
        if eb is not None:
            gb = matmul(transpose(a2, -1, -2), g2)
            gb = reshape(sum_to_size(gb, b2.shape), sb)
        return ga, gb

    def backward_fast(self, be, g):
        a, b = self.input(0)._data, self.input(1)._data
        sa, sb = self.shapes
        ea, eb = self.next_edges
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = be.expand_dims(g2, -2 if b.ndim > 1 else 0)
        if b.ndim == 1:
            g2 = g2[..., None]
        ga = gb = None
        if ea is not None:
            ga = be.sum_to_shape(be.matmul(g2, be.swapaxes(b2, -1, -2)), a2.shape).reshape(sa)
        if eb is not None:
            gb = be.sum_to_shape(be.matmul(be.swapaxes(a2, -1, -2), g2), b2.shape).reshape(sb)
        return ga, gb


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with broadcasting (``@``).

    >>> import pylucid
    >>> pylucid.matmul(pylucid.ones(2, 3), pylucid.ones(3))
    tensor([3., 3.])
    """
    for name, x in (("input", input), ("other", other)):
        if not isinstance(x, Tensor):
            raise TypeError(f"matmul: {name} must be a Tensor, got {type(x).__name__}")
        if x.ndim == 0:
            raise ShapeMismatch(f"matmul: both arguments need at least 1 dim, got a 0-d {name}")
    ka = input.shape[-1]
    kb = other.shape[0] if other.ndim == 1 else other.shape[-2]
    if ka != kb:
        raise ShapeMismatch(
            f"matmul: shapes {tuple(input.shape)} and {tuple(other.shape)} cannot be multiplied ({ka} != {kb})"
        )
    try:
        return apply(Matmul, (input, other))
    except ValueError as exc:
        raise ShapeMismatch(
            f"matmul: batch dims of {tuple(input.shape)} and {tuple(other.shape)} do not broadcast: {exc}"
        ) from None


Tensor.matmul = matmul
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)
