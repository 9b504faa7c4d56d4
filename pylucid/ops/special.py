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
from ..errors import DtypeMismatch, ShapeMismatch
from ._op import Op, apply, operand
from ._utils import camel, check_tensor, norm_dim
from .registry import declare, op_function
from .schema import FORCE_FP32, OpSchema

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)
# the namespaces of the functions both torch and torch.special have; the others are in torch.special only
_BOTH = ("pylucid", "pylucid.special")
_SPECIAL = ("pylucid.special",)


def _sp(be, name, *args):
    """``be.special.<name>(*args)``; half precision goes through float32 (SciPy has no half kernels)."""
    # floating dtypes: NumPy's (kind "f") and ml_dtypes' bfloat16 (kind "V")
    dt = next((a.dtype for a in args if hasattr(a, "dtype") and a.ndim >= 0 and a.dtype.kind in "fV"), None)
    fn = getattr(be.special, name)
    with be.errstate():
        if dt is not None and dt.itemsize == 2:
            out = fn(*[a.astype("float32") if hasattr(a, "dtype") and a.dtype == dt else a for a in args])
            return out.astype(dt)
        out = fn(*args)
        # (inside: a float64 result beyond the dtype's range becomes inf without an overflow warning)
        return out.astype(dt, copy=False) if dt is not None and out.dtype != dt else out


def _const(arr, dev):
    return _new_tensor(arr, dev)


# ------------------------------------------------------------------------------------------ softmax family
#: the CPU softmax shifts every row by the tensor's maximum ``hi`` instead of the row's own when each row has an
#: entry within this distance of ``hi``: ``exp(x - hi)`` then neither overflows nor loses a row to underflow, and
#: the rounding of ``x - hi`` adds at most ``_SHIFT_WINDOW`` units of ``eps/2`` of relative error (a few 1e-7 in
#: float32) to what the row's own maximum gives; NumPy's per-row max over a short last axis costs more than the
#: rest of the softmax together. Otherwise (a wider spread, inf, NaN) the row maxima are used.
_SHIFT_WINDOW = 8.0


def _cpu_shift(be, x2):
    """The shift for the rows of the 2-D float ``x2``: the scalar maximum when every row holds an entry within
    ``_SHIFT_WINDOW`` of it (checked on a lower bound of each row's maximum: the largest of five sampled
    columns), else the ``(rows, 1)`` row maxima."""
    n = x2.shape[1]
    hi = be.maximum.reduce(x2, axis=None)
    lb = x2[:, 0].copy()
    for j in (n // 4, n // 2, (3 * n) // 4, n - 1):
        be.maximum(lb, x2[:, j], out=lb)
    lo = be.minimum.reduce(lb, axis=None)
    if hi - lo <= _SHIFT_WINDOW:  # False for NaN and infinite values
        return hi
    # a row holding NaN or +inf, or only -inf, becomes NaN (inf - inf), as in PyTorch
    return be.maximum.reduce(x2, axis=1, keepdims=True)


def _softmax_cpu(be, x, log: bool):
    """Softmax (``log``: log-softmax) over the last axis of a non-empty CPU float array: a shift, one ``exp``
    pass in place, the row sums as one matrix-vector product, one scaling pass (half computed in float32)."""
    xf = x.astype(be.float32) if x.dtype.itemsize == 2 else x
    n = xf.shape[-1]
    x2 = xf.reshape(-1, n)
    ones = be.ones(n, dtype=x2.dtype)
    with be.errstate():
        if log:  # the row maxima: ``x - hi`` would cancel against ``log(sum)`` for rows far below hi
            y = be.subtract(x2, be.maximum.reduce(x2, axis=1, keepdims=True))
            s = be.matmul(be.exp(y), ones)
            be.log(s, out=s)
            y -= s[:, None]
        else:
            y = be.subtract(x2, _cpu_shift(be, x2))
            be.exp(y, out=y)
            s = be.matmul(y, ones)
            be.reciprocal(s, out=s)
            y *= s[:, None]
    return y.reshape(x.shape).astype(x.dtype, copy=False)


def _softmax_backward_cpu(be, y, g):
    """``y (g - rowsum(g y))`` over the last axis on CPU float arrays: the row dot products in one ``einsum``."""
    n = y.shape[-1]
    y2, g2 = y.reshape(-1, n), g.reshape(-1, n)
    if y2.dtype.itemsize == 2:
        y2, g2 = y2.astype(be.float32), g2.astype(be.float32)
    d = be.subtract(g2, be.einsum("ij,ij->i", g2, y2)[:, None])
    d *= y2
    return d.reshape(y.shape).astype(y.dtype, copy=False)


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
            if be.name == "cpu" and x.size and x.dtype.kind in "fV":
                return _softmax_cpu(be, x, False)
            return be.softmax(x)  # fused kernel on CUDA
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
            if be.name == "cpu" and y.size and y.dtype == g.dtype and y.dtype.kind in "fV":
                return _softmax_backward_cpu(be, y, g)
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
            if be.name == "cpu" and x.dtype.kind in "fV":
                return _softmax_cpu(be, x, True)
            return be.softmax(x, log=True)  # fused kernel on CUDA
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

    @staticmethod
    def forward(be, x):
        out = _sp(be, "gammaln", x)
        # PyTorch gives +inf at -inf (SciPy -inf): |Gamma| has no limit there, lgamma's poles are +inf
        return be.where(be.isneginf(x), be.inf, out).astype(out.dtype, copy=False)

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
        out = _sp(be, "polygamma", n if be.name == "cpu" else be.asarray(n, dtype="int64"), x)
        # at -inf the poles accumulate: no limit (SciPy answers +-inf), NaN as PyTorch
        return be.where(x == -math.inf, be.asarray(math.nan, dtype=out.dtype), out)

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
        with be.errstate():  # sin(inf) is NaN, as PyTorch, without NumPy's warning
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

    check_tensor(input, "special.ndtri")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):  # 2p - 1 must not wrap around in uint8
        input = input.to(_dt.get_default_dtype())
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
    check_tensor(input, "multigammaln")
    if input._data.dtype == bool:
        raise DtypeMismatch("multigammaln: the input tensor may not be a bool tensor (as in PyTorch)")
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


# ------------------------------------------------------------------------------------------ incomplete gamma, zeta
def _binary_args(name, input, other):
    input, other = operand(name, input), operand(name, other)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"{name}: expected at least one Tensor argument, got two numbers")
    return input, other


def _not_implemented(op, arg):
    raise NotImplementedError(f"{op}: the derivative with respect to {arg!r} is not implemented (as in PyTorch)")


class _IgammaFamily(Op):
    """Regularised incomplete gamma ``P(a, x)`` / ``Q(a, x) = 1 - P(a, x)`` (``be.special.gammainc``/``gammaincc``).

    ``dP/dx = x^(a-1) exp(-x) / Gamma(a)`` (``dQ/dx`` its negative), computed as
    ``exp((a-1) log x - x - lgamma(a))``. There is no closed form for the
    derivative with respect to ``a``: PyTorch raises there, so does pylucid.
    """

    scipy_name = ""
    _sign = 1.0

    @classmethod
    def forward(cls, be, a, x):
        a, x = _same_kind(be, a, x)
        return _sp(be, cls.scipy_name, a, x)

    def backward(self, g):
        from .elementwise import exp, log, mul, sub, sum_to_size

        if self.next_edges[0] is not None:
            _not_implemented(self.schema.name, "input")
        a, x = self.input(0), self.input(1)
        lg = lgamma(a) if isinstance(a, Tensor) else math.lgamma(a)
        d = exp(sub(sub(mul(log(x), a - 1.0), x), lg))
        return None, sum_to_size(mul(g, d if self._sign > 0 else -d), self.shapes[1])


class Igamma(_IgammaFamily):
    schema = _special_schema("igamma")
    scipy_name = "gammainc"


class Igammac(_IgammaFamily):
    schema = _special_schema("igammac")
    scipy_name = "gammaincc"
    _sign = -1.0


@declare(Igamma, inplace=True)
def igamma(input, other) -> Tensor:
    """Regularised lower incomplete gamma ``P(a, x) = 1/Gamma(a) int_0^x t^(a-1) e^-t dt`` (``a = input``,
    ``x = other``; ``pylucid.special.gammainc``). Differentiable in ``other`` only, as PyTorch.

    >>> import pylucid
    >>> pylucid.igamma(pylucid.tensor([1.0, 2.0]), pylucid.tensor([1.0, 1.0])).round(decimals=4)
    tensor([0.6321, 0.2642])
    """
    return apply(Igamma, _binary_args("igamma", input, other))


@declare(Igammac, inplace=True)
def igammac(input, other) -> Tensor:
    """Regularised upper incomplete gamma ``Q(a, x) = 1 - P(a, x)`` (``pylucid.special.gammaincc``).

    >>> import pylucid
    >>> pylucid.igammac(pylucid.tensor([1.0]), pylucid.tensor([1.0])).round(decimals=4)
    tensor([0.3679])
    """
    return apply(Igammac, _binary_args("igammac", input, other))


@declare(namespaces=_SPECIAL, method=False)
def gammainc(input, other) -> Tensor:
    """``torch.special.gammainc``: :func:`igamma`."""
    return igamma(input, other)


@declare(namespaces=_SPECIAL, method=False)
def gammaincc(input, other) -> Tensor:
    """``torch.special.gammaincc``: :func:`igammac`."""
    return igammac(input, other)


@declare(method=True, inplace=True)
def mvlgamma(input: Tensor, p: int) -> Tensor:
    """``torch.mvlgamma``: the multivariate log-gamma :func:`pylucid.special.multigammaln`."""
    return multigammaln(input, p)


class Zeta(Op):
    """Hurwitz zeta ``zeta(x, q) = sum_{k>=0} (k + q)^-x`` (``be.special.zeta``).

    ``d/dq = -x zeta(x + 1, q)``; PyTorch has no derivative with respect to
    ``x`` and raises, as does pylucid.

    >>> import pylucid
    >>> pylucid.special.zeta(pylucid.tensor([2.0, 4.0]), 1.0).round(decimals=4)
    tensor([1.6449, 1.0823])
    """

    schema = _special_schema("zeta")

    @staticmethod
    def forward(be, x, q):
        x, q = _same_kind(be, x, q)
        return _sp(be, "zeta", x, q)

    def backward(self, g):
        from .elementwise import mul, sum_to_size

        if self.next_edges[0] is not None:
            _not_implemented("special.zeta", "self")
        x, q = self.input(0), self.input(1)
        return None, sum_to_size(mul(g, mul(zeta(x + 1.0, q), -x)), self.shapes[1])


@declare(Zeta, namespaces=_SPECIAL, method=False)
def zeta(input, other) -> Tensor:
    """The Hurwitz zeta function ``zeta(input, other)`` (the Riemann zeta at ``other = 1``)."""
    return apply(Zeta, _binary_args("special.zeta", input, other))


class Erfcx(Op):
    """Scaled complementary error function ``exp(x^2) erfc(x)``, finite for large ``x``;
    ``dx = (2 x erfcx(x) - 2/sqrt(pi)) g``.

    >>> import pylucid
    >>> pylucid.special.erfcx(pylucid.tensor([0.0, 30.0])).round(decimals=4)
    tensor([1.0000, 0.0188])
    """

    schema = _special_schema("erfcx", saves_output=True)

    @staticmethod
    def forward(be, x):
        return _sp(be, "erfcx", x)

    def backward(self, g):
        from .elementwise import mul, sub

        return mul(g, sub(mul(mul(self.output(), self.input(0)), 2.0), 2.0 / _SQRT_PI))


erfcx = op_function(Erfcx, namespaces=_SPECIAL, method=False)


# ------------------------------------------------------------------------------------------ Bessel, Airy
def _nodiff_schema(name: str) -> OpSchema:
    """The special functions PyTorch gives no derivative (their outputs do not require grad); real arguments only,
    as PyTorch (its kernels have no complex version)."""
    return OpSchema(name, amp_policy=FORCE_FP32, real_valued=True, differentiable=False, family="special",
                    accepts=("float", "int", "bool"))


class _Bessel(Op):
    """Base of the Bessel-type functions without a derivative (as PyTorch): ``be.special.<scipy_name>``.

    ``j0 j1 y0 y1`` are the Bessel functions of the first and second kind,
    ``i0 i1 k0 k1`` the modified ones and ``k0e k1e`` the scaled
    ``exp(x) K_n(x)``; ``y*``/``k*`` are ``-inf``/``inf`` at 0 and NaN for
    ``x < 0``.
    """

    scipy_name = ""

    @classmethod
    def forward(cls, be, x):
        if cls.scipy_name in ("k0e", "k1e") and x.dtype.kind == "f" and x.dtype.itemsize == 4:
            # CuPy's float32 kernels of these are a few ulps off: float64, rounded once
            return _scaled_k_tail(be, x, _sp(be, cls.scipy_name, x.astype("float64")),
                                  1 if cls.scipy_name == "k1e" else 0).astype(x.dtype)
        out = _sp(be, cls.scipy_name, x)
        if cls.scipy_name in ("k0e", "k1e"):
            out = _scaled_k_tail(be, x, out, 1 if cls.scipy_name == "k1e" else 0)
        return out


def _scaled_k_tail(be, x, out, order):
    """``exp(x) K_n(x)`` where a library formed it as ``exp(x) * K_n(x)`` and overflowed to NaN (CuPy's
    kernels do, from x ~ 88 in float32): Hankel's asymptotic series, which for x > 80 reaches double
    precision in six terms,

        exp(x) K_n(x) ~ sqrt(pi / 2x) sum_k a_k / x^k,  a_k = a_{k-1} (4n^2 - (2k-1)^2) / (8k),  a_0 = 1.

    Only NaNs at positive x are replaced, so a correct library result is returned as it is."""
    bad = be.isnan(out) & (x > 0)
    if not (be.can_sync() and bool(bad.any())):
        return out
    xs = be.where(bad, x, be.full(x.shape, 100.0, x.dtype)).astype("float64")
    mu = 4.0 * order * order
    term = be.ones_like(xs)
    total = be.ones_like(xs)
    with be.errstate():
        for k in range(1, 7):
            term = term * ((mu - (2 * k - 1) ** 2) / (8.0 * k)) / xs
            total = total + term
        tail = be.sqrt(3.141592653589793 / (2.0 * xs)) * total
    return be.where(bad, tail.astype(out.dtype), out)


def _bessel(name, scipy_name, doc):
    cls = type(camel(name), (_Bessel,), {"schema": _nodiff_schema(name), "scipy_name": scipy_name, "__doc__": doc,
                                          "__module__": __name__})
    return cls, op_function(cls, namespaces=_SPECIAL, method=False)


BesselJ0, bessel_j0 = _bessel("bessel_j0", "j0", """Bessel function of the first kind of order 0, ``J_0(x)``.

    >>> import pylucid
    >>> pylucid.special.bessel_j0(pylucid.tensor([0.0, 1.0])).round(decimals=4)
    tensor([1.0000, 0.7652])
    """)
BesselJ1, bessel_j1 = _bessel("bessel_j1", "j1", "Bessel function of the first kind of order 1, ``J_1(x)``.")
BesselY0, bessel_y0 = _bessel("bessel_y0", "y0", "Bessel function of the second kind of order 0 (``-inf`` at 0).")
BesselY1, bessel_y1 = _bessel("bessel_y1", "y1", "Bessel function of the second kind of order 1 (``-inf`` at 0).")
ModifiedBesselI0, modified_bessel_i0 = _bessel("modified_bessel_i0", "i0", "Modified Bessel function ``I_0(x)``.")
ModifiedBesselI1, modified_bessel_i1 = _bessel("modified_bessel_i1", "i1", "Modified Bessel function ``I_1(x)``.")
ModifiedBesselK0, modified_bessel_k0 = _bessel("modified_bessel_k0", "k0",
                                               "Modified Bessel function of the second kind ``K_0(x)``.")
ModifiedBesselK1, modified_bessel_k1 = _bessel("modified_bessel_k1", "k1",
                                               "Modified Bessel function of the second kind ``K_1(x)``.")
ScaledModifiedBesselK0, scaled_modified_bessel_k0 = _bessel("scaled_modified_bessel_k0", "k0e",
                                                            "``exp(x) K_0(x)``, finite for large ``x``.")
ScaledModifiedBesselK1, scaled_modified_bessel_k1 = _bessel("scaled_modified_bessel_k1", "k1e",
                                                            "``exp(x) K_1(x)``, finite for large ``x``.")


class SphericalBesselJ0(Op):
    """Spherical Bessel function of the first kind of order 0, ``sin(x) / x`` (1 at 0); no derivative, as PyTorch.

    Below ``|x| = 0.5`` the Taylor series ``1 - x^2/6 + x^4/120 - ...`` avoids the cancellation of ``sin(x)/x``.

    >>> import pylucid
    >>> pylucid.special.spherical_bessel_j0(pylucid.tensor([0.0, 1.5707964])).round(decimals=4)
    tensor([1.0000, 0.6366])
    """

    schema = _nodiff_schema("spherical_bessel_j0")

    @staticmethod
    def forward(be, x):
        xf = x.astype("float32") if x.dtype.itemsize == 2 else x
        with be.errstate():
            big = be.sin(xf) / xf
            x2 = xf * xf
            small = 1 + x2 * (-1 / 6 + x2 * (1 / 120 + x2 * (-1 / 5040 + x2 * (1 / 362880 + x2 * (-1 / 39916800)))))
            out = be.where(be.abs(xf) < 0.5, small, big)
            out = be.where(be.isinf(xf), 0, out)  # the limit of sin(x)/x at +-inf, as PyTorch
        return out.astype(x.dtype, copy=False)


spherical_bessel_j0 = op_function(SphericalBesselJ0, namespaces=_SPECIAL, method=False)


class AiryAi(Op):
    """Airy function ``Ai(x)``, a solution of ``y'' = x y`` decaying for ``x -> inf`` (``be.airy_ai``); no
    derivative, as PyTorch.

    >>> import pylucid
    >>> pylucid.special.airy_ai(pylucid.tensor([0.0])).round(decimals=4)
    tensor([0.3550])
    """

    schema = _nodiff_schema("airy_ai")

    @staticmethod
    def forward(be, x):
        xf = x.astype("float32") if x.dtype.itemsize == 2 else x
        with be.errstate():
            return be.airy_ai(xf).astype(x.dtype, copy=False)


airy_ai = op_function(AiryAi, namespaces=_SPECIAL, method=False)


# ------------------------------------------------------------------------------------------ orthogonal polynomials
def _poly_eval(be, kind, x, n):
    """``p_n(x)`` of the family ``kind`` by its three-term recurrence, for an integer array ``n`` (truncated, as
    PyTorch) broadcast against ``x``; ``n < 0`` gives 0. Every element runs the recurrence up to ``max(n)`` and
    keeps its own step, so one pass serves the whole array (the cost is ``max(n)`` vector steps)."""
    x, n = be.broadcast_arrays(x, n)
    n = n.astype("int64")
    one = be.ones_like(x)
    first = {"t": x, "u": 2 * x, "v": 2 * x - 1, "w": 2 * x + 1, "h": 2 * x, "he": x, "l": 1 - x, "p": x}[kind]
    out = be.where(n == 0, one, be.where(n == 1, first, be.zeros_like(x)))  # n < 0: 0, even at x = NaN
    top = int(n.max()) if n.size else 0
    p, q = one, first
    for k in range(1, top):  # q = p_k, p = p_{k-1}  ->  p_{k+1}
        if kind in ("t", "u", "v", "w"):
            r = 2 * x * q - p
        elif kind == "h":
            r = 2 * x * q - 2 * k * p
        elif kind == "he":
            r = x * q - k * p
        elif kind == "l":
            r = ((2 * k + 1 - x) * q - k * p) / (k + 1)
        else:  # legendre
            r = ((2 * k + 1) * x * q - k * p) / (k + 1)
        p, q = q, r
        out = be.where(n == k + 1, r, out)
    return out


class _Polynomial(Op):
    """Base of the orthogonal polynomials ``p_n(x)`` (PyTorch's ``special.*_polynomial_*``): ``n`` is truncated to
    an integer, ``n < 0`` gives 0; evaluated by the three-term recurrence. No derivative, as PyTorch."""

    kind = ""
    shifted = False

    @classmethod
    def forward(cls, be, x, n):
        x, n = _same_kind(be, x, n)
        dt = x.dtype  # apply gave both operands the (floating) compute dtype
        xf = x.astype("float32") if dt.itemsize == 2 else x
        if cls.shifted:
            xf = 2 * xf - 1
        with be.errstate():
            return _poly_eval(be, cls.kind, xf, be.asarray(n)).astype(dt, copy=False)


_POLYS = {
    "chebyshev_polynomial_t": ("t", False, "Chebyshev polynomial of the first kind ``T_n(x)``: "
                                           "``T_{k+1} = 2x T_k - T_{k-1}``, ``T_0 = 1``, ``T_1 = x``.\n\n"
                                           "    >>> import pylucid\n"
                                           "    >>> x = pylucid.tensor([0.5, 2.0])\n"
                                           "    >>> pylucid.special.chebyshev_polynomial_t(x, 3)\n"
                                           "    tensor([-1., 26.])\n"),
    "chebyshev_polynomial_u": ("u", False, "Chebyshev polynomial of the second kind ``U_n(x)`` (``U_1 = 2x``)."),
    "chebyshev_polynomial_v": ("v", False, "Chebyshev polynomial of the third kind ``V_n(x)`` (``V_1 = 2x - 1``)."),
    "chebyshev_polynomial_w": ("w", False, "Chebyshev polynomial of the fourth kind ``W_n(x)`` (``W_1 = 2x + 1``)."),
    "shifted_chebyshev_polynomial_t": ("t", True, "``T_n(2x - 1)``: the Chebyshev polynomial on ``[0, 1]``."),
    "shifted_chebyshev_polynomial_u": ("u", True, "``U_n(2x - 1)``."),
    "shifted_chebyshev_polynomial_v": ("v", True, "``V_n(2x - 1)``."),
    "shifted_chebyshev_polynomial_w": ("w", True, "``W_n(2x - 1)``."),
    "hermite_polynomial_h": ("h", False, "Physicists' Hermite polynomial ``H_n(x)``: "
                                         "``H_{k+1} = 2x H_k - 2k H_{k-1}``."),
    "hermite_polynomial_he": ("he", False, "Probabilists' Hermite polynomial ``He_n(x)``: "
                                           "``He_{k+1} = x He_k - k He_{k-1}``."),
    "laguerre_polynomial_l": ("l", False, "Laguerre polynomial ``L_n(x)``: "
                                          "``(k+1) L_{k+1} = (2k+1-x) L_k - k L_{k-1}``."),
    "legendre_polynomial_p": ("p", False, "Legendre polynomial ``P_n(x)``: "
                                          "``(k+1) P_{k+1} = (2k+1) x P_k - k P_{k-1}``."),
}


def _polynomial(name, kind, shifted, doc):
    cls = type(camel(name), (_Polynomial,), {"schema": _nodiff_schema(name), "kind": kind, "shifted": shifted,
                                             "__doc__": doc, "__module__": __name__})

    def fn(input, n) -> Tensor:
        x, k = _binary_args(f"special.{name}", input, n)
        if isinstance(x, Tensor) and isinstance(k, Tensor) and x.shape != k.shape:
            from .shape import broadcast_shapes

            try:
                broadcast_shapes(tuple(x.shape), tuple(k.shape))
            except ShapeMismatch:
                raise ShapeMismatch(f"special.{name}: input of shape {tuple(x.shape)} and n of shape "
                                    f"{tuple(k.shape)} cannot be broadcast together") from None
        return apply(cls, (x, k))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return cls, declare(cls, namespaces=_SPECIAL, method=False)(fn)


for _name, (_kind, _shifted, _doc) in _POLYS.items():
    _cls, _fn = _polynomial(_name, _kind, _shifted, _doc)
    globals()[_cls.__name__] = _cls
    globals()[_name] = _fn
del _name, _kind, _shifted, _doc, _cls, _fn

