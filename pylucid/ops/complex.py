"""Complex tensors: ``real``, ``imag``, ``conj``, ``angle``, ``view_as_real``/``view_as_complex``,
``complex``, ``polar`` and friends.

Complex autograd follows PyTorch's convention: the gradient carried for a
complex tensor ``z = x + iy`` is the conjugate Wirtinger derivative scaled by
two, i.e. for a real loss ``L`` it is ``dL/dx + i dL/dy``. With it, the
gradient of a real input that became complex is the real part of the complex
gradient, and a linear map ``A`` has adjoint ``A^H`` (conjugate transpose).

The backward formulas here are written in terms of these ops only (and real
arithmetic), never with a complex ``mul``: that keeps second derivatives exact
whatever the core's complex ``mul`` backward does.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._tensor import Tensor
from ..errors import DtypeMismatch, ShapeMismatch
from ._op import Op, apply
from ._utils import check_tensor
from .registry import declare
from .schema import KEEP_INPUT, OpSchema


class Real(Op):
    """Real part of a complex tensor (a view); ``dz = g + 0i``."""

    schema = OpSchema("real", amp_policy=KEEP_INPUT, family="complex")
    is_view = True

    @staticmethod
    def forward(be, z):
        return z.real

    def backward(self, g):
        return complex(g, _zeros_like(g))


class Imag(Op):
    """Imaginary part of a complex tensor (a view); ``dz = 0 + i g``."""

    schema = OpSchema("imag", amp_policy=KEEP_INPUT, family="complex")
    is_view = True

    @staticmethod
    def forward(be, z):
        return z.imag

    def backward(self, g):
        return complex(_zeros_like(g), g)


def _zeros_like(t):
    from .._tensor import _new_tensor

    return _new_tensor(t._device.backend.zeros(t._data.shape, dtype=t._data.dtype), t._device)


@declare(Real, as_property=True)  # x.real is an attribute, not a method (as in PyTorch)
def real(input: Tensor) -> Tensor:
    """Real part: a view of a complex tensor; a real tensor is returned unchanged (as PyTorch).

    >>> import pylucid
    >>> pylucid.real(pylucid.tensor([1 + 2j, 3 - 1j]))
    tensor([1., 3.])
    """
    check_tensor(input, "real")
    if not input.dtype.is_complex:
        return input
    return apply(Real, (input,))


@declare(Imag, as_property=True)  # x.imag is an attribute, not a method (as in PyTorch)
def imag(input: Tensor) -> Tensor:
    """Imaginary part of a complex tensor (a view). Real tensors raise, as in PyTorch.

    >>> import pylucid
    >>> pylucid.imag(pylucid.tensor([1 + 2j, 3 - 1j]))
    tensor([ 2., -1.])
    """
    check_tensor(input, "imag")
    if not input.dtype.is_complex:
        raise DtypeMismatch(f"imag: expected a complex tensor, got {input.dtype}; imag is not implemented for "
                            "real tensors")
    return apply(Imag, (input,))


class Conj(Op):
    """Complex conjugate ``x - iy``; ``dz = conj(g)``.

    pylucid has no lazy conjugate bit: ``conj`` always materialises (it is
    ``conj_physical``), so ``is_conj`` is always False.
    """

    schema = OpSchema("conj", amp_policy=KEEP_INPUT, family="complex")

    @staticmethod
    def forward(be, z):
        return be.conj(z)

    def backward(self, g):
        return conj(g)


@declare(Conj)
def conj(input: Tensor) -> Tensor:
    """Complex conjugate; a real tensor is returned unchanged.

    >>> import pylucid
    >>> pylucid.conj(pylucid.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    check_tensor(input, "conj")
    if not input.dtype.is_complex:
        return input
    return apply(Conj, (input,))


@declare()
def sgn(input: Tensor) -> Tensor:
    """``x / |x|`` for complex input (0 at 0), ``sign(x)`` for real input, as ``torch.sgn``.

    A composite: ``where(|x| == 0, 0, x / where(|x| == 0, 1, |x|))``; the safe
    denominator keeps the gradient at 0 finite (0) to every order.

    >>> import pylucid
    >>> pylucid.sgn(pylucid.tensor([3 + 4j, 0j]))
    tensor([0.6+0.8j, 0. +0.j ])
    >>> pylucid.sgn(pylucid.tensor([-2.0, 0.0, 5.0]))
    tensor([-1.,  0.,  1.])
    """
    from .elementwise import abs as _abs
    from .elementwise import div, sign
    from .indexing import where

    check_tensor(input, "sgn")
    if not input.dtype.is_complex:
        return sign(input)
    a = _abs(input)
    zero = a == 0
    return where(zero, 0.0, div(input, where(zero, 1.0, a)))


@declare()
def conj_physical(input: Tensor) -> Tensor:
    """Same as :func:`conj` (pylucid's conjugate is always materialised)."""
    return conj(input)


@declare()
def resolve_conj(input: Tensor) -> Tensor:
    """Identity: pylucid has no lazy conjugate bit."""
    return input


@declare()
def resolve_neg(input: Tensor) -> Tensor:
    """Identity: pylucid has no lazy negation bit."""
    return input


@declare()
def is_conj(input: Tensor) -> bool:
    """Always False: pylucid has no lazy conjugate bit."""
    return False


@declare(method=False)  # Tensor.is_complex is the Tensor's own method
def is_complex(input: Tensor) -> bool:
    """True for complex64/complex128 tensors.

    >>> import pylucid
    >>> pylucid.is_complex(pylucid.tensor([1j])), pylucid.is_complex(pylucid.tensor([1.0]))
    (True, False)
    """
    check_tensor(input, "is_complex")
    return input.dtype.is_complex


class Angle(Op):
    """Argument ``atan2(y, x)`` of ``z = x + iy`` (``pi`` for negative reals, 0 otherwise).

    Gradient (PyTorch's ``angle_backward``): ``dz = g (-y + ix) / |z|^2``, 0 at
    ``z = 0``; for real input the gradient is 0. It is written with real
    arithmetic on ``real(z)``/``imag(z)`` so second derivatives are exact.
    """

    schema = OpSchema("angle", amp_policy=KEEP_INPUT, saves_input=True, real_valued=True, family="complex")

    @staticmethod
    def forward(be, z):
        if z.dtype.kind == "c":
            return be.angle(z).astype(z.real.dtype)
        # real input: pi where x < 0, NaN stays NaN, 0 otherwise (+inf included: torch.angle)
        return be.where(z < 0, be.asarray(3.141592653589793, dtype=z.dtype),
                        be.where(z != z, z, be.zeros_like(z)))

    def backward(self, g):
        from .elementwise import div, mul, neg
        from .indexing import where

        z = self.input(0)
        if not z.dtype.is_complex:
            return mul(g, 0.0)
        x, y = real(z), imag(z)
        r2 = x * x + y * y
        zero = r2 == 0
        safe = where(zero, 1.0, r2)
        return complex(where(zero, 0.0, div(mul(neg(y), g), safe)), where(zero, 0.0, div(mul(x, g), safe)))


@declare(Angle)
def angle(input: Tensor) -> Tensor:
    """Element-wise argument (phase) in radians; real inputs give 0 or ``pi``.

    >>> import pylucid
    >>> pylucid.angle(pylucid.tensor([1j, -1.0 + 0j]))
    tensor([1.5708, 3.1416])
    """
    check_tensor(input, "angle")
    return apply(Angle, (input,))


class ViewAsReal(Op):
    """``(..., 2)`` real view of a complex tensor; ``dz = g[..., 0] + i g[..., 1]``."""

    schema = OpSchema("view_as_real", amp_policy=KEEP_INPUT, family="complex")
    is_view = True
    promote_args = ()

    @staticmethod
    def forward(be, z):
        return z.view(z.real.dtype).reshape(z.shape + (2,)) if z.ndim else be.stack([z.real, z.imag], -1)

    def backward(self, g):
        return complex(g[..., 0], g[..., 1])


@declare(ViewAsReal, method=False)
def view_as_real(input: Tensor) -> Tensor:
    """A real view with a trailing dim of size 2 holding (real, imag).

    >>> import pylucid
    >>> pylucid.view_as_real(pylucid.tensor([1 + 2j]))
    tensor([[1., 2.]])
    """
    check_tensor(input, "view_as_real")
    if not input.dtype.is_complex:
        raise DtypeMismatch(f"view_as_real: expected a complex tensor, got {input.dtype}")
    if input.ndim and not input._data.flags.c_contiguous and input._data.strides[-1] != input._data.itemsize:
        input = input.contiguous()
    return apply(ViewAsReal, (input,))


class ViewAsComplex(Op):
    """Complex view of a real ``(..., 2)`` tensor; ``dx = stack(real(g), imag(g))``."""

    schema = OpSchema("view_as_complex", amp_policy=KEEP_INPUT, family="complex")
    promote_args = ()

    @staticmethod
    def forward(be, x):
        x = be.ascontiguousarray(x)
        cdt = "complex64" if x.dtype.itemsize == 4 else "complex128"
        return x.view(cdt)[..., 0]

    def backward(self, g):
        return view_as_real(g)


@declare(ViewAsComplex, method=False)
def view_as_complex(input: Tensor) -> Tensor:
    """Interpret a real ``(..., 2)`` float32/float64 tensor as complex (the last dim is (real, imag)).

    >>> import pylucid
    >>> pylucid.view_as_complex(pylucid.tensor([[1.0, 2.0], [0.5, -1.0]]))
    tensor([1. +2.j, 0.5-1.j])
    """
    check_tensor(input, "view_as_complex")
    if input.dtype not in (_dt.float32, _dt.float64):
        raise DtypeMismatch(f"view_as_complex: expected a float32 or float64 tensor, got {input.dtype}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise ShapeMismatch(f"view_as_complex: the last dimension must have size 2, got shape {tuple(input.shape)}")
    return apply(ViewAsComplex, (input,))


class Complex(Op):
    """``z = re + i im`` from two real tensors (broadcasting); ``d re = real(g)``, ``d im = imag(g)``."""

    schema = OpSchema("complex", amp_policy=KEEP_INPUT, family="complex")

    @staticmethod
    def forward(be, re, im):
        cdt = "complex128" if re.dtype.itemsize == 8 else "complex64"
        out = be.empty(be.broadcast_shapes(re.shape, im.shape), dtype=cdt)
        out.real = re
        out.imag = im
        return out

    def backward(self, g):
        from .elementwise import sum_to_size

        sr, si = self.shapes
        er, ei = self.next_edges
        return (sum_to_size(real(g), sr) if er is not None else None,
                sum_to_size(imag(g), si) if ei is not None else None)


@declare(Complex, method=False)
def complex(real: Tensor, imag: Tensor) -> Tensor:  # noqa: A001 - mirrors torch.complex
    """Complex tensor ``real + i imag`` from two float tensors of the same dtype (broadcasting).

    float32 gives complex64, float64 gives complex128; PyTorch refuses other
    dtypes, and so does pylucid.

    >>> import pylucid
    >>> pylucid.complex(pylucid.tensor([1.0, 2.0]), pylucid.tensor([0.5, -1.0]))
    tensor([1.+0.5j, 2.-1.j ])
    """
    check_tensor(real, "complex", "real")
    check_tensor(imag, "complex", "imag")
    for n, t in (("real", real), ("imag", imag)):
        if t.dtype not in (_dt.float32, _dt.float64, _dt.float16):
            raise DtypeMismatch(f"complex: expected float32 or float64 tensors, got {n} of dtype {t.dtype}")
    if real.dtype is not imag.dtype:
        raise DtypeMismatch(f"complex: expected real and imag to have the same dtype, got {real.dtype} and "
                            f"{imag.dtype}")
    if real.dtype is _dt.float16:
        raise DtypeMismatch("complex: float16 (complex32) is not supported; use float32 or float64")
    try:
        return apply(Complex, (real, imag))
    except ValueError:
        raise ShapeMismatch(f"complex: shapes {tuple(real.shape)} and {tuple(imag.shape)} cannot be broadcast "
                            "together") from None


@declare(method=False)
def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002
    """``abs * (cos(angle) + i sin(angle))``; a composite of ``complex``, ``cos``, ``sin`` and ``mul``.

    >>> import pylucid
    >>> pylucid.polar(pylucid.tensor([2.0]), pylucid.tensor([0.0]))
    tensor([2.+0.j])
    """
    from .elementwise import cos, mul, sin

    check_tensor(abs, "polar", "abs")
    check_tensor(angle, "polar", "angle")
    if abs.dtype is not angle.dtype:
        raise DtypeMismatch(f"polar: expected abs and angle to have the same dtype, got {abs.dtype} and "
                            f"{angle.dtype}")
    if not abs.dtype.is_floating_point:
        raise DtypeMismatch(f"polar: expected both inputs to be floating tensors, got {abs.dtype.name}")
    with abs._device.backend.errstate():  # an infinite abs times cos(angle) = 0 is NaN, as PyTorch
        return complex(mul(abs, cos(angle)), mul(abs, sin(angle)))

