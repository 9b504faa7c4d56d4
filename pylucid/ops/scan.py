"""Scans (cumulative ops along one dim): ``cumsum cumprod cummax cummin logcumsumexp diff``.

``cumsum``/``cumprod`` of bool and integer inputs give int64 (PyTorch's
promotion, so an int32 cumsum does not overflow silently). ``cummax``/
``cummin`` return ``(values, indices)`` and scatter the gradient to the
indices (``sorting.ValueSelectingOp``). ``diff`` is a composite of slicing
and subtraction.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._state import state as _state
from .._tensor import Tensor, _new_tensor
from ..errors import DtypeMismatch
from ._op import Op, apply
from ._utils import check_tensor, conj_if_complex, norm_dim
from .registry import declare
from .schema import FORCE_FP32, KEEP_INPUT, OpSchema
from .sorting import ValueSelectingOp, ValuesIndices, scalar_selection


def _scan_dim(input, dim, op):
    check_tensor(input, op)
    if dim is None:
        raise TypeError(f"{op}: dim is required (an int), got None")
    return norm_dim(dim, input.ndim if input.ndim else 1, op)


# ------------------------------------------------------------------------------------------ cumsum
class Cumsum(Op):
    """``y_i = sum_{j<=i} x_j`` (``reverse``: ``sum_{j>=i}``); ``dx = reverse cumsum of g``.

    ``reverse`` is internal: it makes the backward a cumsum of its own kind,
    so every order of derivative is a cumsum.
    """

    schema = OpSchema("cumsum", amp_policy=KEEP_INPUT, family="scan")

    @staticmethod
    def forward(be, x, dim, reverse):
        if x.ndim == 0:
            return x.astype("int64") if x.dtype.kind in "biu" else x.copy()
        dt = "int64" if x.dtype.kind in "biu" else (x.dtype if x.dtype.itemsize != 2 else "float32")
        if reverse:
            return be.flip(be.cumsum(be.flip(x, axis=dim), axis=dim, dtype=dt), axis=dim).astype(
                x.dtype if x.dtype.kind not in "biu" else "int64", copy=False)
        return be.cumsum(x, axis=dim, dtype=dt).astype(x.dtype if x.dtype.kind not in "biu" else "int64", copy=False)

    def backward(self, g):
        p = self.params
        return _cumsum(g, p["dim"], not p["reverse"])


def _cumsum(x, dim, reverse=False):
    return apply(Cumsum, (x,), {"dim": dim, "reverse": reverse})


@declare(Cumsum, inplace=True)
def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Cumulative sum along ``dim``; bool and integer inputs give int64 (no silent int32 overflow).

    >>> import pylucid
    >>> pylucid.cumsum(pylucid.tensor([1, 2, 3], dtype=pylucid.int32), 0)
    tensor([1, 3, 6])
    """
    d = _scan_dim(input, dim, "cumsum")
    if dtype is not None:
        input = input.to(_dt.as_dtype(dtype))
    return _cumsum(input, d)


# ------------------------------------------------------------------------------------------ cumprod
def _triu_mask(be, n, dtype):
    """``M[k, i] = 1`` where ``i >= k`` (output ``i`` depends on input ``k``)."""
    return be.triu(be.ones((n, n), dtype=dtype))


class Cumprod(Op):
    """``y_i = prod_{j<=i} x_j``; ``dx_k = sum_{i>=k} g_i prod_{j<=i, j!=k} x_j``.

    Without zeros that is ``revcumsum(g y) / x``. With zeros the formula is
    built explicitly: row ``k`` of an ``(n, n)`` matrix is the input with
    ``x_k`` replaced by 1, whose cumprod gives every ``prod_{j<=i, j!=k}``
    (exact for any number of zeros and differentiable again; ``n^2`` memory
    per slice, only when the input has a zero).
    """

    schema = OpSchema("cumprod", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True, family="scan")

    @staticmethod
    def forward(be, x, dim):
        if x.ndim == 0:
            return x.astype("int64") if x.dtype.kind in "biu" else x.copy()
        if x.dtype.kind in "biu":
            return be.cumprod(x, axis=dim, dtype="int64")
        if x.dtype.itemsize == 2:
            return be.cumprod(x, axis=dim, dtype="float32").astype(x.dtype)
        with be.errstate():  # complex overflow gives inf/NaN quietly, as PyTorch
            return be.cumprod(x, axis=dim)

    def backward(self, g):
        from .elementwise import div, mul
        from .indexing import where
        from .reduction import sum as _sum
        from .shape import transpose, unsqueeze

        x = self.input(0)
        dim = self.params["dim"]
        be = self.device.backend
        if x.ndim == 0:
            return g
        y = self.output()
        if x.dtype.is_complex:
            # PyTorch's convention for complex inputs: multiply by the conjugate of the local derivative
            from .complex import conj

            x, y = conj(x), conj(y)
        if not bool(be.any(x._data == 0)):
            return div(_cumsum(mul(g, y), dim, reverse=True), x)
        xl = transpose(x, dim, -1)
        gl = transpose(g, dim, -1)
        n = xl.shape[-1]
        eye = _new_tensor(be.eye(n, dtype=bool), self.device)
        rows = where(eye, 1.0, unsqueeze(xl, -2).expand(*xl.shape[:-1], n, n))  # [..., k, j]
        c = cumprod(rows, -1)  # [..., k, i] = prod_{j<=i, j!=k} x_j (x already conjugated when complex)
        mask = _new_tensor(_triu_mask(be, n, x._data.dtype), self.device)
        dx = _sum(mul(mul(c, unsqueeze(gl, -2)), mask), -1)
        return transpose(dx, dim, -1)



@declare(Cumprod, inplace=True)
def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Cumulative product along ``dim``; bool and integer inputs give int64. Gradients are exact with zeros.

    >>> import pylucid
    >>> x = pylucid.tensor([2.0, 0.0, 3.0], requires_grad=True)
    >>> y = pylucid.cumprod(x, 0); y
    tensor([2., 0., 0.], grad_fn=<CumprodBackward>)
    >>> y.sum().backward(); x.grad
    tensor([1., 8., 0.])
    """
    d = _scan_dim(input, dim, "cumprod")
    if dtype is not None:
        input = input.to(_dt.as_dtype(dtype))
    return apply(Cumprod, (input,), {"dim": d})


# ------------------------------------------------------------------------------------------ cummax / cummin
def _cum_extreme(be, x, dim, ufunc):
    if x.ndim == 0:
        return scalar_selection(be, x)
    if x.dtype.kind == "V":  # ml_dtypes' bfloat16: run the scan in float32 (exact) and round the values back
        values, idx = _cum_extreme(be, x.astype("float32"), dim, ufunc)
        return values.astype(x.dtype), idx
    values = ufunc.accumulate(x, axis=dim)
    n = x.shape[dim]
    shape = [1] * x.ndim
    shape[dim] = n
    pos = be.arange(n).reshape(shape)
    # the index moves to every element equal to the running extreme (>=: the last of ties, as PyTorch)
    # and to every NaN (PyTorch's NaN propagation keeps the index of the latest NaN)
    hit = x == values
    if x.dtype.kind in "fc":
        hit = hit | be.isnan(x)
    idx = be.maximum.accumulate(be.where(hit, pos, 0), axis=dim).astype("int64")
    return values, idx


class Cummax(ValueSelectingOp):
    """``(values, indices)``: running maximum along ``dim`` and where it was attained (the latest of ties)."""

    schema = OpSchema("cummax", amp_policy=KEEP_INPUT, saves_output=True, family="scan",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim, keepdim):
        return _cum_extreme(be, x, dim, be.maximum)


class Cummin(ValueSelectingOp):
    """``(values, indices)``: running minimum along ``dim`` and where it was attained (the latest of ties)."""

    schema = OpSchema("cummin", amp_policy=KEEP_INPUT, saves_output=True, family="scan",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, dim, keepdim):
        return _cum_extreme(be, x, dim, be.minimum)


@declare(Cummax)
def cummax(input: Tensor, dim: int) -> ValuesIndices:
    """Running maximum along ``dim`` and its indices; the gradient flows to the indexed elements.

    >>> import pylucid
    >>> pylucid.cummax(pylucid.tensor([1.0, 3.0, 2.0, 3.0]), 0)
    ValuesIndices(values=tensor([1., 3., 3., 3.]), indices=tensor([0, 1, 1, 3]))
    """
    d = _scan_dim(input, dim, "cummax")
    return ValuesIndices(*apply(Cummax, (input,), {"dim": d, "keepdim": True}))


@declare(Cummin)
def cummin(input: Tensor, dim: int) -> ValuesIndices:
    """Running minimum along ``dim`` and its indices.

    >>> import pylucid
    >>> pylucid.cummin(pylucid.tensor([2, 1, 3]), 0)
    ValuesIndices(values=tensor([2, 1, 1]), indices=tensor([0, 1, 1]))
    """
    d = _scan_dim(input, dim, "cummin")
    return ValuesIndices(*apply(Cummin, (input,), {"dim": d, "keepdim": True}))


# ------------------------------------------------------------------------------------------ logcumsumexp
class Logcumsumexp(Op):
    """``y_i = log sum_{j<=i} exp(x_j)``, accumulated with ``logaddexp`` (stable for huge and ``-inf`` entries).

    Backward ``dx_k = sum_{i>=k} g_i exp(x_k - y_i)``. A first-order backward
    works in log space, ``O(n)``: ``dx = exp(x + P) - exp(x + N)`` with ``P``
    (``N``) the reverse logcumsumexp of ``log g - y`` over the positive
    (negative) entries of ``g``. That form is not differentiable in ``g`` where
    ``g == 0`` (a zero entry drops out of both sums), so under
    ``create_graph`` the formula forms the ``(n, n)`` matrix ``exp(x_k - y_i)``
    masked to ``i >= k`` instead: every entry is at most 1 (``y`` is
    non-decreasing), so nothing overflows, and it is differentiable again in
    ``g``, ``x`` and ``y``, at ``n^2`` memory per slice.
    """

    schema = OpSchema("logcumsumexp", amp_policy=FORCE_FP32, saves_input=True, saves_output=True, real_valued=True,
                      family="scan")

    @staticmethod
    def forward(be, x, dim):
        if x.ndim == 0:
            return x.copy()
        if x.dtype.kind == "c":
            return _complex_logcumsumexp(be, x, dim)
        xf = x.astype("float32") if x.dtype.itemsize == 2 else x
        with be.errstate():
            return be.logaddexp.accumulate(xf, axis=dim).astype(x.dtype, copy=False)

    def backward(self, g):
        from .elementwise import exp, mul, sub
        from .indexing import where
        from .reduction import sum as _sum
        from .shape import transpose, unsqueeze

        x = self.input(0)
        if x.ndim == 0:
            return g
        dim = self.params["dim"]
        y = self.output()
        be = self.device.backend
        if not _state.grad_enabled and x._data.dtype.kind != "c":
            with be.errstate():  # -inf inputs: -inf - -inf is NaN where PyTorch's gradient is NaN too
                return sub(exp(x + _signed_part_lse(g, y, dim, 1.0)), exp(x + _signed_part_lse(g, y, dim, -1.0)))
        xl, yl, gl = transpose(x, dim, -1), transpose(y, dim, -1), transpose(g, dim, -1)
        n = xl.shape[-1]
        upper = _new_tensor(be.triu(be.ones((n, n), dtype=bool)), self.device)
        with be.errstate():
            e = exp(where(upper, sub(unsqueeze(xl, -1), unsqueeze(yl, -2)), -float("inf")))  # [..., k, i]
            return transpose(_sum(mul(conj_if_complex(e), unsqueeze(gl, -2)), -1), dim, -1)


def _complex_logcumsumexp(be, x, dim):
    """The complex scan, element by element along ``dim`` from ``-inf``, with PyTorch's combination
    ``hi + log1p(exp(lo - hi))`` (``hi`` the operand with the larger real part, the new element on a tie), so the
    imaginary parts carry the same multiples of 2 pi as PyTorch's; two ``-inf`` real parts give ``-inf + 0j``."""
    xm = be.moveaxis(x, dim, -1)
    out = be.empty_like(xm)
    acc = be.full(xm.shape[:-1], complex(-float("inf"), 0.0), dtype=x.dtype)
    nan = x.dtype.type(complex(float("nan"), float("nan")))
    with be.errstate():
        for i in range(xm.shape[-1]):
            v = xm[..., i]
            new_hi = v.real >= acc.real
            hi, lo = be.where(new_hi, v, acc), be.where(new_hi, acc, v)
            both_inf = be.isinf(hi.real) & (hi.real == lo.real)
            summed = hi + be.log1p(be.exp(lo - hi))
            summed = be.where(both_inf & (hi.real < 0), x.dtype.type(complex(-float("inf"), 0.0)), summed)
            summed = be.where(both_inf & (hi.real > 0), be.log(be.exp(hi) + be.exp(lo)), summed)
            acc = be.where(be.isnan(acc.real) | be.isnan(v.real), nan, summed)
            out[..., i] = acc
    return be.moveaxis(out, -1, dim)


def _signed_part_lse(g, y, dim, sign):
    """``log sum_{i>=k, sign*g_i>0} |g_i| exp(-y_i)`` along ``dim``: a reverse logcumsumexp (``-inf`` if empty)."""
    from .elementwise import log, mul
    from .indexing import where
    from .shape import flip

    gs = mul(g, sign)
    keep = gs > 0
    # the inner where keeps log away from zero and negative entries, the outer drops them
    lg = where(keep, log(where(keep, gs, 1.0)), -float("inf")) - y
    return flip(logcumsumexp(flip(lg, dim), dim), dim)


@declare(Logcumsumexp)
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))`` computed stably (huge logits and ``-inf`` entries are fine).

    >>> import pylucid
    >>> pylucid.logcumsumexp(pylucid.tensor([1e4, 1e4, -float("inf")]), 0)
    tensor([10000.0000, 10000.6934, 10000.6934])
    """
    d = _scan_dim(input, dim, "logcumsumexp")
    if input._data.dtype.kind in "biu":
        raise DtypeMismatch(f"logcumsumexp: input has dtype {input.dtype.name}; logcumsumexp accepts float and "
                            "complex tensors (as PyTorch: no integer or bool kernel)")
    return apply(Logcumsumexp, (input,), {"dim": d})


# ------------------------------------------------------------------------------------------ diff
@declare()
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """``n``-th forward difference along ``dim``: ``out[i] = x[i+1] - x[i]`` (composite of slicing and ``sub``).

    ``prepend``/``append`` are concatenated along ``dim`` first. Bool inputs
    use ``logical_xor`` (as PyTorch). ``n`` larger than the size gives an
    empty result.

    >>> import pylucid
    >>> pylucid.diff(pylucid.tensor([1, 4, 9, 16])), pylucid.diff(pylucid.tensor([1, 4, 9, 16]), n=2)
    (tensor([3, 5, 7]), tensor([2, 2]))
    """
    from .compare import logical_xor
    from .elementwise import sub
    from .shape import cat

    check_tensor(input, "diff")
    if input.ndim == 0:
        raise ValueError("diff: expected a tensor with at least one dimension, got a 0-d tensor")
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"diff: order n must be a non-negative int, got {n!r}")
    d = norm_dim(dim, input.ndim, "diff")
    if n == 0:  # as PyTorch: the input itself (a copy); prepend and append are not used
        return input.clone()
    parts = [t for t in (prepend, input, append) if t is not None]
    for t in (prepend, append):
        if t is not None and t.ndim != input.ndim:
            raise ValueError(f"diff: prepend/append must have the same number of dims as input ({input.ndim}), "
                             f"got {t.ndim}")
    x = cat(parts, d) if len(parts) > 1 else input
    head = (slice(None),) * d
    for _ in range(n):
        if x.shape[d] == 0:
            break
        hi, lo = x[head + (slice(1, None),)], x[head + (slice(None, -1),)]
        x = logical_xor(hi, lo) if x.dtype == _dt.bool_ else sub(hi, lo)
    return x



# ------------------------------------------------------------------------------------------ trapezoid rules
def _along(t, d, start, stop=None):
    """``t`` sliced along dim ``d`` (``start:stop``)."""
    return t[(slice(None),) * d + (slice(start, stop),)]


def _trapezoid_args(op, y, x, dx, dim):
    check_tensor(y, op, "y")
    for name, t in (("y", y), ("x", x)):
        if isinstance(t, Tensor) and t._data.dtype == bool:
            raise DtypeMismatch(f"{op}: received a bool input for `{name}`, but bool is not supported (as PyTorch)")
    if y.ndim == 0:
        raise ValueError(f"{op}: y must have at least one dimension, got a 0-d tensor")
    d = norm_dim(dim, y.ndim, op)
    if x is not None and dx is not None:
        raise TypeError(f"{op}: pass either x or dx, not both")
    if x is None:
        return d, None, 1 if dx is None else dx
    check_tensor(x, op, "x")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ValueError(f"{op}: a 1-d x must have y.shape[dim] = {y.shape[d]} elements, got {x.shape[0]}")
        from .shape import reshape

        x = reshape(x, (-1,) + (1,) * (y.ndim - 1 - d))
        xd = 0
    else:
        xd = x.ndim - (y.ndim - d)
        if xd < 0 or x.shape[xd] != y.shape[d]:
            raise ValueError(f"{op}: x of shape {tuple(x.shape)} does not match y of shape {tuple(y.shape)} "
                             f"along dim {dim}")
    from .elementwise import sub

    return d, sub(_along(x, xd, 1), _along(x, xd, 0, -1)), None


@declare(method=False)
def trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: with spacing ``dx`` (default 1)
    ``dx * (sum(y) - (y[0] + y[-1]) / 2)``, with sample points ``x``
    ``sum((x[i+1] - x[i]) (y[i+1] + y[i]) / 2)`` (PyTorch's two formulas).

    ``x`` is 1-d (its length ``y.shape[dim]``) or broadcasts with ``y``. A
    composite of slicing, ``sum`` and arithmetic.

    >>> import pylucid
    >>> pylucid.trapezoid(pylucid.tensor([1.0, 2.0, 4.0])), pylucid.trapezoid(
    ...     pylucid.tensor([1.0, 2.0, 4.0]), pylucid.tensor([0.0, 1.0, 3.0]))
    (tensor(4.5000), tensor(7.5000))
    """
    from .elementwise import add, div, mul, sub
    from .reduction import sum as _sum

    d, steps, h = _trapezoid_args("trapezoid", y, x, dx, dim)
    if y.shape[d] == 0:  # PyTorch: zeros of y's dtype, not connected to the graph
        from ..creation import zeros

        return zeros(tuple(n for i, n in enumerate(y.shape) if i != d), dtype=y.dtype, device=y.device)
    with y._device.backend.errstate():  # inf - inf is NaN, as PyTorch
        if steps is None:
            ends = mul(add(_along(y, d, 0, 1), _along(y, d, -1)), 0.5)
            return mul(sub(_sum(y, d), _sum(ends, d)), h)
        return div(_sum(mul(steps, add(_along(y, d, 1), _along(y, d, 0, -1))), d), 2.0)


@declare(method=False)
def trapz(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """:func:`trapezoid` under its older name.

    >>> import pylucid
    >>> pylucid.trapz(pylucid.tensor([1.0, 2.0, 4.0]), dx=2.0)
    tensor(9.)
    """
    return trapezoid(y, x, dx=dx, dim=dim)


@declare(method=False)
def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """Cumulative trapezoidal rule along ``dim``: ``cumsum`` of the panel areas ``dx (y[i] + y[i+1]) / 2`` (or
    ``(x[i+1] - x[i]) (y[i] + y[i+1]) / 2``); one element fewer than ``y`` along ``dim``.

    >>> import pylucid
    >>> pylucid.cumulative_trapezoid(pylucid.tensor([1.0, 2.0, 4.0]))
    tensor([1.5000, 4.5000])
    """
    from .elementwise import add, div, mul

    d, steps, h = _trapezoid_args("cumulative_trapezoid", y, x, dx, dim)
    with y._device.backend.errstate():  # inf + -inf is NaN, as PyTorch
        pairs = add(_along(y, d, 0, -1), _along(y, d, 1))
        panels = mul(pairs, h / 2.0) if steps is None else div(mul(steps, pairs), 2.0)
        return cumsum(panels, d)


# ------------------------------------------------------------------------------------------ gradient
def _gradient_spacing(input, spacing, dims):
    """Per dim: a number (uniform spacing) or a 1-d coordinates tensor."""
    if spacing is None:
        spacing = 1
    if isinstance(spacing, Tensor) and spacing.ndim == 0:
        spacing = spacing.item()
    if not isinstance(spacing, (list, tuple)):
        if isinstance(spacing, Tensor):
            spacing = [spacing]
        else:
            return [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise ValueError(f"gradient: expected spacing to be a number or a list of {len(dims)} entries (one per "
                         f"dim), got {len(spacing)}")
    for s, d in zip(spacing, dims):
        if isinstance(s, Tensor):
            if s.ndim == 0:
                continue
            if s.ndim != 1 or s.shape[0] != input.shape[d]:
                raise ValueError(f"gradient: the coordinates for dim {d} must be 1-d with {input.shape[d]} "
                                 f"elements, got shape {tuple(s.shape)}")
    return [s.item() if isinstance(s, Tensor) and s.ndim == 0 else s for s in spacing]


@declare(method=False)
def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """Estimate the derivative of ``input`` along each dim in ``dim`` (all dims when ``None``) by central
    differences in the interior and one-sided differences of order ``edge_order`` (1 or 2) at the ends.

    ``spacing``: a number (uniform spacing for every dim), a list of numbers
    (one per dim) or a list of 1-d coordinate tensors (second-order accurate
    for unevenly spaced points). Returns a tuple with one tensor per dim
    (PyTorch's formulas; a composite of slicing and arithmetic).

    >>> import pylucid
    >>> pylucid.gradient(pylucid.tensor([1.0, 4.0, 9.0, 16.0]))
    (tensor([3., 4., 6., 7.]),)
    >>> pylucid.gradient(pylucid.tensor([1.0, 4.0, 9.0, 16.0]), spacing=2.0, edge_order=2)
    (tensor([1., 2., 3., 4.]),)
    """
    from .elementwise import add, div, mul, sub
    from .shape import cat, reshape

    check_tensor(input, "gradient")
    if input._data.dtype.kind == "u" and input._data.dtype.itemsize == 1:
        raise DtypeMismatch("gradient: uint8 input is not supported (as PyTorch: its differences would wrap)")
    if input.ndim == 0:
        raise ValueError("gradient: input must have at least one dimension, got a 0-d tensor")
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    if dim is None:
        dims = list(range(input.ndim))
    elif isinstance(dim, (list, tuple)):
        dims = [norm_dim(d, input.ndim, "gradient") for d in dim]
    else:
        dims = [norm_dim(dim, input.ndim, "gradient")]
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise ValueError(f"gradient: each dimension size must be at least edge_order + 1 = {edge_order + 1}, "
                             f"dim {d} has size {input.shape[d]}")
    with input._device.backend.errstate():  # inf - inf, repeated coordinates (0 steps): NaN/inf, as PyTorch
        out = []
        for d, h in zip(dims, _gradient_spacing(input, spacing, dims)):
            f = input

            def s(start, stop=None, d=d, f=f):
                return _along(f, d, start, stop)

            if not isinstance(h, Tensor):
                center = div(div(sub(s(2), s(0, -2)), h), 2)
                if edge_order == 1:
                    first, last = div(sub(s(1, 2), s(0, 1)), h), div(sub(s(-1), s(-2, -1)), h)
                else:
                    first = div(sub(add(mul(s(0, 1), -1.5), mul(s(1, 2), 2)), mul(s(2, 3), 0.5)), h)
                    last = div(add(add(mul(s(-3, -2), 0.5), mul(s(-2, -1), -2)), mul(s(-1), 1.5)), h)
            else:
                shape = [1] * input.ndim
                shape[d] = -1
                step = sub(h[1:], h[:-1])
                h1, h2 = step[:-1], step[1:]
                a = reshape(div(_neg(h2), mul(h1, add(h1, h2))), shape)
                b = reshape(div(sub(h2, h1), mul(h1, h2)), shape)
                c = reshape(div(h1, mul(h2, add(h1, h2))), shape)
                center = add(add(mul(a, s(0, -2)), mul(b, s(1, -1))), mul(c, s(2)))
                e0, l0 = step[0], step[-1]
                if edge_order == 1:
                    first, last = div(sub(s(1, 2), s(0, 1)), e0), div(sub(s(-1), s(-2, -1)), l0)
                else:
                    e1, l1 = step[1], step[-2]
                    fa = div(_neg(add(mul(e0, 2.0), e1)), mul(e0, add(e0, e1)))
                    fb = div(add(e0, e1), mul(e0, e1))
                    fc = div(_neg(e0), mul(e1, add(e0, e1)))
                    first = add(add(mul(fa, s(0, 1)), mul(fb, s(1, 2))), mul(fc, s(2, 3)))
                    la = div(l0, mul(l1, add(l0, l1)))
                    lb = div(_neg(add(l0, l1)), mul(l0, l1))
                    lc = div(add(mul(l0, 2.0), l1), mul(l0, add(l0, l1)))
                    last = add(add(mul(la, s(-3, -2)), mul(lb, s(-2, -1))), mul(lc, s(-1)))
            out.append(cat([first, center, last], d))
        return tuple(out)


def _neg(t):
    """``-t`` (graph-mode), for the coordinate formulas above."""
    from .elementwise import neg

    return neg(t)
