"""Special functions and the softmax family: ``softmax log_softmax erfc lgamma digamma polygamma i0 i1 i0e i1e
xlogy xlog1py entr sinc ndtr log_ndtr``, and the ``pylucid.special`` composites ``gammaln psi multigammaln ndtri``.

Forwards call ``be.special`` (``scipy.special`` on the CPU,
``cupyx.scipy.special`` on CUDA); half-precision inputs are computed in
float32 and rounded once (SciPy has no float16/bfloat16 kernels). Each
backward is written with pylucid ops (the derivative of one special function
is another: ``lgamma' = digamma``, ``digamma' = polygamma(1, .)``,
``i0' = i1``, ...), so higher derivatives work. The special functions are
``ForceFP32`` under autocast (numerically sensitive) and ``real_valued``.
"""

from __future__ import annotations

import math

from .. import dtypes as _dt
from .._tensor import Tensor, _new_tensor
from ._op import Op, apply, operand
from ._utils import check_tensor, norm_dim
from .registry import declare, op_function
from .schema import FORCE_FP32, OpSchema

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)
# the namespaces of the functions both torch and torch.special have; the others are in torch.special only
_BOTH = ("pylucid", "pylucid.special")
_SPECIAL = ("pylucid.special",)


def _sp(be, name, *args):
    """``be.special.<name>(*args)``; half precision goes through float32 (SciPy has no half kernels)."""
    dt = next((a.dtype for a in args if hasattr(a, "dtype") and a.ndim >= 0 and a.dtype.kind == "f"), None)
    fn = getattr(be.special, name)
    with be.errstate():
        if dt is not None and dt.itemsize == 2:
            out = fn(*[a.astype("float32") if hasattr(a, "dtype") and a.dtype == dt else a for a in args])
            return out.astype(dt)
        out = fn(*args)
    return out.astype(dt, copy=False) if dt is not None and out.dtype != dt else out


def _const(arr, dev):
    return _new_tensor(arr, dev)


# ------------------------------------------------------------------------------------------ softmax family
class Softmax(Op):
    """``y = exp(x - max) / sum exp(x - max)`` over ``dim``: ForceFP32, saves its output.

    Subtracting the max keeps huge logits finite; ``-inf`` entries give 0
    (a slice of only ``-inf`` gives NaN, as PyTorch). Backward:
    ``dx = y (g - sum(g y))``.
    """

    schema = OpSchema("softmax", amp_policy=FORCE_FP32, saves_output=True, real_valued=True, family="special",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim):
        if x.ndim and dim == x.ndim - 1:
            return be.softmax(x)  # fused kernel on CUDA; the same arithmetic as below on the CPU
        xf = x.astype("float32") if x.dtype.itemsize == 2 else x
        with be.errstate():
            e = be.exp(xf - be.max(xf, axis=dim, keepdims=True)) if x.size else xf
            return (e / be.sum(e, axis=dim, keepdims=True)).astype(x.dtype, copy=False)

    def backward(self, g):
        from .elementwise import mul, sub
        from .reduction import sum as _sum

        y = self.output()
        return mul(y, sub(g, _sum(mul(g, y), self.params["dim"], keepdim=True)))

    def backward_fast(self, be, g):
        y = self.output_array()
        dim = self.params["dim"]
        if y.ndim and dim == y.ndim - 1:
            return be.softmax_backward(y, g)
        return y * (g - be.sum(g * y, axis=dim, keepdims=True))


class LogSoftmax(Op):
    """``y = x - max - log sum exp(x - max)`` over ``dim``: ForceFP32, saves its output.

    Finite for huge logits (``1e4``) and ``-inf`` entries. Backward:
    ``dx = g - exp(y) sum(g)``.
    """

    schema = OpSchema("log_softmax", amp_policy=FORCE_FP32, saves_output=True, real_valued=True, family="special",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim):
        if not x.size:
            return x.copy()
        if x.ndim and dim == x.ndim - 1:
            return be.softmax(x, log=True)  # fused kernel on CUDA; the same arithmetic as below on the CPU
        xf = x.astype("float32") if x.dtype.itemsize == 2 else x
        with be.errstate():
            s = xf - be.max(xf, axis=dim, keepdims=True)
            return (s - be.log(be.sum(be.exp(s), axis=dim, keepdims=True))).astype(x.dtype, copy=False)

    def backward(self, g):
        from .elementwise import exp, mul, sub
        from .reduction import sum as _sum

        return sub(g, mul(exp(self.output()), _sum(g, self.params["dim"], keepdim=True)))

    def backward_fast(self, be, g):
        y = self.output_array()
        dim = self.params["dim"]
        if y.ndim and dim == y.ndim - 1:
            return be.softmax_backward(y, g, log=True)
        return g - be.exp(y) * be.sum(g, axis=dim, keepdims=True)


def _softmax_args(op, input, dim, dtype):
    check_tensor(input, op)
    if dim is None:
        raise TypeError(f"{op}: dim is required (PyTorch's implicit dim choice is deprecated); pass dim=-1")
    if dtype is not None:
        input = input.to(_dt.as_dtype(dtype))
    return input, norm_dim(dim, input.ndim if input.ndim else 1, op) if input.ndim else None


@declare(Softmax, namespaces=_BOTH)
def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x), dim)``, computed stably (``dtype`` casts the input first).

    >>> import pylucid
    >>> pylucid.softmax(pylucid.tensor([0.0, 1e4, 1e4]), dim=0)
    tensor([0.0000, 0.5000, 0.5000])
    """
    x, d = _softmax_args("softmax", input, dim, dtype)
    return apply(Softmax, (x,), {"dim": d})


@declare(LogSoftmax, namespaces=_BOTH)
def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """``x - logsumexp(x, dim)``, finite for huge logits.

    >>> import pylucid
    >>> pylucid.log_softmax(pylucid.tensor([1e4, -1e4]), dim=0)
    tensor([     0., -20000.])
    """
    x, d = _softmax_args("log_softmax", input, dim, dtype)
    return apply(LogSoftmax, (x,), {"dim": d})


# ------------------------------------------------------------------------------------------ unary special functions
def _special_schema(name: str, saves_output: bool = False) -> OpSchema:
    """The schema the special functions share: ForceFP32 (numerically sensitive), real-valued, saves its input."""
    return OpSchema(name, amp_policy=FORCE_FP32, saves_input=True, saves_output=saves_output, real_valued=True,
                    family="special", accepts=() if name == "sinc" else ("float", "int", "bool"))


class _ScipyUnary(Op):
    """Base of the unary ops whose forward is ``be.special.<scipy_name>`` (half precision through float32)."""

    scipy_name = ""

    @classmethod
    def forward(cls, be, x):
        return _sp(be, cls.scipy_name, x)


class Erfc(_ScipyUnary):
    """Complementary error function ``1 - erf(x)``, accurate for large ``x``; ``dx = -2/sqrt(pi) exp(-x^2) g``.

    >>> import pylucid
    >>> pylucid.erfc(pylucid.tensor([0.0, 1.0]))
    tensor([1.0000, 0.1573])
    """

    schema = _special_schema("erfc")
    scipy_name = "erfc"

    def backward(self, g):
        from .elementwise import exp, mul, neg, square

        return mul(g, mul(exp(neg(square(self.input(0)))), -2.0 / _SQRT_PI))


erfc = op_function(Erfc, namespaces=_BOTH)


class Lgamma(_ScipyUnary):
    """``log |Gamma(x)|`` (``pylucid.special.gammaln``); poles give ``inf``. ``dx = digamma(x) g``.

    >>> import pylucid
    >>> pylucid.lgamma(pylucid.tensor([1.0, 5.0]))
    tensor([0.0000, 3.1781])
    """

    schema = _special_schema("lgamma")
    scipy_name = "gammaln"

    def backward(self, g):
        from .elementwise import mul

        return mul(g, digamma(self.input(0)))


lgamma = op_function(Lgamma)


@declare(namespaces=_SPECIAL, method=False)
def gammaln(input: Tensor) -> Tensor:
    """``torch.special.gammaln``: :func:`lgamma` under SciPy's name."""
    return lgamma(input)


class Digamma(Op):
    """The digamma function ``psi(x) = Gamma'(x) / Gamma(x)`` (``-inf`` at 0, as PyTorch); ``dx = polygamma(1, x) g``.

    >>> import pylucid
    >>> pylucid.digamma(pylucid.tensor([1.0, 2.0]))
    tensor([-0.5772,  0.4228])
    """

    schema = _special_schema("digamma")

    @staticmethod
    def forward(be, x):
        out = _sp(be, "psi", x)
        # PyTorch (and the limit from the right) give -inf at 0; SciPy gives NaN for -0.0 and inf for +0.0
        return be.where(x == 0, -be.inf, out).astype(out.dtype, copy=False)

    def backward(self, g):
        from .elementwise import mul

        return mul(g, polygamma(1, self.input(0)))


digamma = op_function(Digamma, namespaces=_BOTH)


@declare(namespaces=_SPECIAL, method=False)
def psi(input: Tensor) -> Tensor:
    """``torch.special.psi``: :func:`digamma` under its other name."""
    return digamma(input)


class Polygamma(Op):
    """``y = psi^(n)(x)``, the ``n``-th derivative of digamma; ``dx = psi^(n+1)(x) g``."""

    schema = _special_schema("polygamma")

    @staticmethod
    def forward(be, x, n):
        if n == 0:
            return Digamma.forward(be, x)
        # on CUDA n goes in as an integer array: cupyx's polygamma calls cupy.where(n == 0, ...), which
        # rejects the Python bool a Python int gives; the CPU keeps SciPy's scalar path (unchanged numerics)
        return _sp(be, "polygamma", n if be.name == "cpu" else be.asarray(n, dtype="int64"), x)

    def backward(self, g):
        from .elementwise import mul

        return mul(g, polygamma(self.params["n"] + 1, self.input(0)))


@declare(Polygamma, namespaces=_BOTH, method=False)
def polygamma(n: int, input: Tensor) -> Tensor:
    """``psi^(n)(x)``: the ``n``-th derivative of the digamma function (``n >= 0``).

    >>> import pylucid
    >>> pylucid.polygamma(1, pylucid.tensor([1.0]))
    tensor([1.6449])
    """
    check_tensor(input, "polygamma")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative int, got {n!r}")
    return apply(Polygamma, (input,), {"n": n})


@declare(Polygamma, name="polygamma", namespaces=(), method="polygamma")
def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """``Tensor.polygamma(n)``: ``polygamma(n, self)`` (the tensor comes second in the function, as PyTorch)."""
    return polygamma(n, self)


def _bessel_pair_backward(self, g, partner, scaled):
    """Graph formula for ``i1``/``i1e``: ``i1' = i0 - i1/x``, ``i1e' = i0e - i1e (sign(x) + 1/x)``; 1/2 at 0."""
    from .elementwise import add, div, mul, sign, sub
    from .indexing import where

    x = self.input(0)
    y = self.output()
    zero = _const(x._data == 0, self.device)
    xs = where(zero, 1.0, x)
    inner = div(y, xs)
    if scaled:
        inner = add(inner, mul(y, sign(x)))
    return mul(g, where(zero, 0.5, sub(partner(x), inner)))


class I0(_ScipyUnary):
    """Modified Bessel function of the first kind of order 0; ``dx = i1(x) g``.

    >>> import pylucid
    >>> pylucid.i0(pylucid.tensor([0.0, 1.0]))
    tensor([1.0000, 1.2661])
    """

    schema = _special_schema("i0")
    scipy_name = "i0"

    def backward(self, g):
        from .elementwise import mul

        return mul(g, i1(self.input(0)))


i0 = op_function(I0, namespaces=_BOTH)


class I1(_ScipyUnary):
    """Modified Bessel function of the first kind of order 1; ``dx = (i0(x) - i1(x)/x) g`` (1/2 at 0)."""

    schema = _special_schema("i1", saves_output=True)
    scipy_name = "i1"

    def backward(self, g):
        return _bessel_pair_backward(self, g, i0, scaled=False)


i1 = op_function(I1, namespaces=_SPECIAL, method=False)


class I0e(_ScipyUnary):
    """Exponentially scaled ``i0``: ``exp(-|x|) i0(x)``; ``dx = (i1e(x) - sign(x) i0e(x)) g``."""

    schema = _special_schema("i0e", saves_output=True)
    scipy_name = "i0e"

    def backward(self, g):
        from .elementwise import mul, sign, sub

        x = self.input(0)
        return mul(g, sub(i1e(x), mul(sign(x), self.output())))


i0e = op_function(I0e, namespaces=_SPECIAL, method=False)


class I1e(_ScipyUnary):
    """Exponentially scaled ``i1``: ``exp(-|x|) i1(x)``; ``dx = (i0e - i1e (sign(x) + 1/x)) g`` (1/2 at 0)."""

    schema = _special_schema("i1e", saves_output=True)
    scipy_name = "i1e"

    def backward(self, g):
        return _bessel_pair_backward(self, g, i0e, scaled=True)


i1e = op_function(I1e, namespaces=_SPECIAL, method=False)


class Entr(_ScipyUnary):
    """Elementwise entropy ``y = -x ln x`` (0 at 0, ``-inf`` for ``x < 0``); ``dx = -(1 + ln x) g`` (as PyTorch:
    ``+inf`` at 0)."""

    schema = _special_schema("entr")
    scipy_name = "entr"

    def backward(self, g):
        from .elementwise import add, log, mul, neg

        return mul(g, neg(add(log(self.input(0)), 1.0)))


entr = op_function(Entr, namespaces=_SPECIAL, method=False)


class Sinc(Op):
    """Normalised sinc ``sin(pi x) / (pi x)``, 1 at 0; ``dx = (cos(pi x) - sinc(x)) / x g`` (0 at 0).

    >>> import pylucid
    >>> pylucid.sinc(pylucid.tensor([0.0, 0.5]))
    tensor([1.0000, 0.6366])
    """

    schema = _special_schema("sinc", saves_output=True)

    @staticmethod
    def forward(be, x):
        xf = x.astype("float32") if x.dtype.itemsize == 2 else x
        return be.sinc(xf).astype(x.dtype, copy=False)

    def backward(self, g):
        from .elementwise import cos, div, mul, sub
        from .indexing import where

        x = self.input(0)
        zero = _const(x._data == 0, self.device)
        xs = where(zero, 1.0, x)
        return mul(g, where(zero, 0.0, div(sub(cos(mul(xs, math.pi)), self.output()), xs)))


sinc = op_function(Sinc, namespaces=_BOTH)


class Ndtr(_ScipyUnary):
    """Standard normal CDF ``Phi(x)``; ``dx = exp(-x^2/2) / sqrt(2 pi) g``."""

    schema = _special_schema("ndtr")
    scipy_name = "ndtr"

    def backward(self, g):
        from .elementwise import exp, mul, square

        return mul(g, mul(exp(mul(square(self.input(0)), -0.5)), 1.0 / _SQRT_2PI))


ndtr = op_function(Ndtr, namespaces=_SPECIAL, method=False)


class LogNdtr(_ScipyUnary):
    """``log Phi(x)``, finite far into the left tail; ``dx = exp(-x^2/2 - log Phi(x)) / sqrt(2 pi) g``."""

    schema = _special_schema("log_ndtr", saves_output=True)
    scipy_name = "log_ndtr"

    def backward(self, g):
        from .elementwise import exp, mul, square, sub

        x = self.input(0)
        return mul(g, mul(exp(sub(mul(square(x), -0.5), self.output())), 1.0 / _SQRT_2PI))


log_ndtr = op_function(LogNdtr, namespaces=_SPECIAL, method=False)


@declare(namespaces=_SPECIAL, method=False)
def ndtri(input: Tensor) -> Tensor:
    """Inverse of the standard normal CDF: ``sqrt(2) * erfinv(2p - 1)`` (a composite; ``+-inf`` at 0 and 1,
    NaN outside ``[0, 1]``).

    >>> import pylucid
    >>> pylucid.special.ndtri(pylucid.tensor([0.5, 0.975]))
    tensor([0.0000, 1.9600])
    """
    from .elementwise import erfinv

    return erfinv(input * 2 - 1) * math.sqrt(2.0)


@declare(namespaces=_SPECIAL, method=False)
def multigammaln(input: Tensor, p: int) -> Tensor:
    """Multivariate log-gamma ``sum_{i<p} lgamma(x - i/2) + p(p-1)/4 log(pi)`` (a composite of ``lgamma``).

    >>> import pylucid
    >>> pylucid.special.multigammaln(pylucid.tensor([2.5]), 2)
    tensor([0.8570])
    """
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"multigammaln: p must be a positive int, got {p!r}")
    from .elementwise import add

    out = lgamma(input)
    for i in range(1, p):
        out = add(out, lgamma(input - i / 2))
    return add(out, p * (p - 1) / 4 * math.log(math.pi))


# ------------------------------------------------------------------------------------------ xlogy / xlog1py
def _same_kind(be, x, y):
    """Python scalars take the tensor's dtype (weak scalars: ``log`` of a bare float must not widen it)."""
    if not hasattr(x, "dtype"):
        x = be.asarray(x, dtype=y.dtype)
    if not hasattr(y, "dtype"):
        y = be.asarray(y, dtype=x.dtype)
    return x, y


class _XLogFamily(Op):
    """``y = x * f(y)`` with ``y = 0`` where ``x == 0`` (unless the other operand is NaN).

    ``dx = f(other)``, zeroed where ``x == 0`` and ``other`` is outside
    ``f``'s domain (as PyTorch); ``d other = x f'(other)``. The mask is
    piecewise constant, so it is a constant of the graph formula.
    """

    _edge = 0.0
    _log = "log"  # the backend function f: log or log1p

    @classmethod
    def forward(cls, be, x, y):
        x, y = _same_kind(be, x, y)
        with be.errstate():
            out = x * getattr(be, cls._log)(y)
            return be.where((x == 0) & ~be.isnan(y), 0, out).astype(out.dtype, copy=False)

    @classmethod
    def _f(cls, t):
        raise NotImplementedError

    @classmethod
    def _df(cls, x, t):
        raise NotImplementedError

    def backward(self, g):
        from .elementwise import mul, sum_to_size
        from .indexing import where

        x, other = self.input(0), self.input(1)
        sx, so = self.shapes
        ex, eo = self.next_edges
        gx = go = None
        if ex is not None:
            # PyTorch: f(other) g, zeroed where x == 0 and other is outside f's domain
            be = self.device.backend
            xd = x._data if sx is not None else be.asarray(x)
            od = other._data if so is not None else be.asarray(other)
            dead = _const(be.broadcast_to((xd == 0) & (od <= self._edge), be.broadcast_shapes(xd.shape, od.shape)),
                          self.device)
            safe = where(dead, 1.0, other) if so is not None else other
            gx = sum_to_size(where(dead, 0.0, mul(g, self._f(safe))), sx)
        if eo is not None:
            go = sum_to_size(mul(g, self._df(x, other)), so)
        return gx, go


class Xlogy(_XLogFamily):
    """``y = x log(other)``, 0 where ``x == 0``."""

    _edge = 0.0
    schema = _special_schema("xlogy")

    @classmethod
    def _f(cls, t):
        from .elementwise import log

        return log(t) if isinstance(t, Tensor) else math.log(t)

    @classmethod
    def _df(cls, x, t):
        from .elementwise import div

        return div(x, t)


class Xlog1py(_XLogFamily):
    """``y = x log1p(other)``, 0 where ``x == 0``."""

    _edge = -1.0
    _log = "log1p"
    schema = _special_schema("xlog1py")

    @classmethod
    def _f(cls, t):
        from .elementwise import add, log

        return log(add(t, 1.0)) if isinstance(t, Tensor) else math.log1p(t)

    @classmethod
    def _df(cls, x, t):
        from .elementwise import add, div

        return div(x, add(t, 1.0))


def _xlog(cls, name, input, other):
    input, other = operand(name, input), operand(name, other)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"{name}: expected at least one Tensor argument, got two numbers")
    return apply(cls, (input, other))


@declare(Xlogy, namespaces=_BOTH)
def xlogy(input, other) -> Tensor:
    """``input * log(other)``, with 0 where ``input == 0`` (unless ``other`` is NaN).

    >>> import pylucid
    >>> pylucid.xlogy(pylucid.tensor([0.0, 2.0]), pylucid.tensor([0.0, 1.0]))
    tensor([0., 0.])
    """
    return _xlog(Xlogy, "xlogy", input, other)


@declare(Xlog1py, namespaces=_SPECIAL, method=False)
def xlog1py(input, other) -> Tensor:
    """``input * log1p(other)``, with 0 where ``input == 0`` (``pylucid.special.xlog1py``)."""
    return _xlog(Xlog1py, "xlog1py", input, other)
