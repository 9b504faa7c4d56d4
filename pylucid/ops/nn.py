"""Registered nn ops: the layers and losses whose math is heavy enough to deserve a fused kernel.

Each op has a graph-mode ``backward`` written in pylucid ops (so a gradient
penalty through Linear/LayerNorm/losses works) and, for the benchmarked ones
(``linear``, ``linear_autocast``, ``layer_norm``, ``cross_entropy_loss``), a
first-order ``backward_fast`` on raw arrays. What a fast path needs from the
forward (the half copies of ``linear_autocast``, the layer-norm statistics, the
row log-sum-exp of cross-entropy) the forward returns as extra outputs that
carry no gradient, and the op's ``save_extra`` keeps them on the node. The
fused layer-norm gradient is an op of its own (``layer_norm_backward``) with
its own graph-mode backward, so it is differentiable again. The public,
validated entry points live in ``pylucid.nn.functional``; the functions here
take already-normalised arguments.

Numerics: half-precision inputs are normalised/soft-maxed in float32 and
rounded once (``_up``); log-softmax is computed as ``x - max - log(sum(exp(x - max)))``.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._state import state
from .._tensor import _TENSOR_TYPES, Tensor, _new_tensor
from ..errors import ShapeMismatch
from ._op import Op, amp_rounding, apply
from ._utils import check_tensor, keepdim_shape
from .registry import declare
from .schema import FORCE_FP32, KEEP_INPUT, PROMOTE, OpSchema

_REDUCTIONS = ("none", "mean", "sum")
_F32_NP = _dt.float32.numpy_dtype
_BF16_NP = _dt.bfloat16.numpy_dtype


def _up(be, a):
    """Half-precision arrays are computed in float32 (rounded once at the end)."""
    if a is not None and a.dtype.itemsize == 2 and a.dtype.kind in "fV":
        return a.astype("float32")
    return a


def _const(node, arr) -> Tensor:
    return _new_tensor(arr, node.device)


def _log_softmax_t(x: Tensor, dim: int) -> Tensor:
    """Stable, differentiable log-softmax from core ops (the max shift is a constant)."""
    from .elementwise import exp, log
    from .reduction import amax
    from .reduction import sum as _sum

    m = amax(x, dim, keepdim=True).detach()
    z = x - m
    return z - log(_sum(exp(z), dim, keepdim=True))


def _softmax_t(x: Tensor, dim: int) -> Tensor:
    from .elementwise import exp
    from .reduction import amax
    from .reduction import sum as _sum

    e = exp(x - amax(x, dim, keepdim=True).detach())
    return e / _sum(e, dim, keepdim=True)


def _np_log_softmax(be, x, axis, lse: bool = False):
    """``log_softmax(x)`` along ``axis``; with ``lse``, ``(log_softmax, logsumexp)`` (keepdims)."""
    m = be.max(x, axis=axis, keepdims=True)
    m = be.where(be.isfinite(m), m, 0)
    z = x - m
    with be.errstate():
        ls = be.log(be.sum(be.exp(z), axis=axis, keepdims=True))
    return (z - ls, m + ls) if lse else z - ls


def _reduce_arr(be, loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return be.sum(loss)
    return be.mean(loss, axis=None) if loss.size else be.asarray(float("nan"), dtype=loss.dtype)


def _grad_of_reduction(g: Tensor, shape, reduction: str) -> Tensor:
    """Broadcast the incoming gradient of a reduced loss back to the element-wise loss shape."""
    from .shape import broadcast_to

    if reduction == "none":
        return g
    n = 1
    for s in shape:
        n *= s
    gg = g / n if reduction == "mean" else g
    return broadcast_to(gg, shape)


# ---------------------------------------------------------------------------------------------------------------------
# linear
# ---------------------------------------------------------------------------------------------------------------------
class Linear(Op):
    """``y = x @ W^T + b``; ``dx = g @ W``, ``dW = g^T x`` (summed over leading dims), ``db = sum g``."""

    schema = OpSchema("linear", amp_policy=PROMOTE, saves_input=True, family="nn")

    @staticmethod
    def forward(be, x, w, b):
        if x.ndim > 2 and not be.folds_matmul:
            # one GEMM over the flattened leading dims, not a broadcast batched matmul
            x2 = x.reshape(-1, x.shape[-1])
            y = be.matmul(x2, w.T) if b is None else be.matmul_bias(x2, w.T, b)
            return y.reshape(x.shape[:-1] + (w.shape[0],))
        # (CUDA folds the leading dims into one GEMM itself, and adds the bias inside it: cuBLASLt's epilogue; the
        # array backends add it into the GEMM's fresh output, one pass, no second array)
        return be.matmul(x, w.T) if b is None else be.matmul_bias(x, w.T, b)

    def backward(self, g):
        from .elementwise import sum_to_size
        from .linalg import matmul
        from .shape import reshape, transpose

        x, w = self.input(0), self.input(1)
        ex, ew, eb = self.next_edges
        gx = matmul(g, w) if ex is not None else None
        gw = gb = None
        if ew is not None:
            g2 = reshape(g, (-1, g.shape[-1])) if g.ndim != 1 else reshape(g, (1, -1))
            x2 = reshape(x, (-1, x.shape[-1])) if x.ndim != 1 else reshape(x, (1, -1))
            gw = matmul(transpose(g2, 0, 1), x2)
        if eb is not None:
            gb = sum_to_size(g, self.shapes[2])
        return gx, gw, gb

    def backward_fast(self, be, g):
        x, w = self.input(0)._data, self.input(1)._data
        ex, ew, eb = self.next_edges
        gx = None
        if ex is not None:
            gx = be.matmul(g.reshape(-1, g.shape[-1]), w).reshape(x.shape) if g.ndim > 2 and not be.folds_matmul \
                else be.matmul(g, w)
        gw = gb = None
        if ew is not None:
            gw = be.matmul(g.reshape(-1, g.shape[-1]).T, x.reshape(-1, x.shape[-1]))
        if eb is not None:
            if be.name == "cpu" and g.ndim >= 2 and self.shapes[2] == g.shape[-1:] and g.dtype.kind == "f" and \
                    g.dtype.itemsize >= 4:
                # the column sums as a GEMV with a ones vector: NumPy's sum over the rows takes ~3x longer
                g2 = g.reshape(-1, g.shape[-1])
                gb = be.matmul(be.ones((g2.shape[0],), dtype=g.dtype), g2)
            else:
                gb = be.sum_to_shape(g, self.shapes[2])
        return gx, gw, gb


class LinearAutocast(Op):
    """``linear`` under autocast with the casts inside the op. With ``c`` the autocast dtype
    (float16/bfloat16) and float32 or ``c`` operands:

    * ``y = cast(x, c) @ cast(W, c)^T + b``: one half-precision GEMM (float32 accumulation), then
      ``b`` added in float32 and rounded to ``c`` once (on CUDA, and on the CPU where oneDNN's bfloat16 GEMM
      runs, ``b`` is rounded to ``c`` and added inside the GEMM before its one rounding, as PyTorch);
    * ``dx = g @ cast(W, c)`` in ``x``'s dtype, ``dW = g^T cast(x, c)`` in ``W``'s dtype,
      ``db = sum g`` in ``b``'s dtype: float32 accumulation written as float32 directly.

    The general path records a cast node per float32 operand (and a cast back in the backward);
    here the half copies of ``x`` and ``W`` made by the forward are its two extra outputs (no
    gradient; ``save_extra`` keeps them for the fast backward; ``apply`` returns None in their places), and float32 gradients come
    straight out of the GEMM and column sum. Values differ from the cast-by-cast composition only
    by rounding: float32 gradients are not first rounded to ``c`` (docs/semantics.md, autocast).
    ``apply`` makes no casts for it (``promote_args = ()``).

    >>> import pylucid
    >>> x, w = pylucid.ones(2, 3), pylucid.ones(4, 3, requires_grad=True)
    >>> with pylucid.amp.autocast("cpu", dtype=pylucid.bfloat16):
    ...     y = pylucid.nn.functional.linear(x, w)
    >>> y.dtype, y.grad_fn.name()
    (pylucid.bfloat16, 'LinearAutocastBackward')
    """

    schema = OpSchema("linear_autocast", amp_policy=KEEP_INPUT, saves_input=True, family="nn")
    promote_args = ()
    n_outputs = 3
    differentiable_outputs = (True, False, False)
    hidden_outputs = True

    @staticmethod
    def forward(be, x, w, b, dtype, rounded=None):
        # rounded: x's rounding to the half dtype, written by the kernel that made x (see ops._op.amp_rounding)
        c = dtype.numpy_dtype
        xc = rounded if rounded is not None else be.astype(x, c) if x.dtype != c else x
        wc = be.astype(w, c) if w.dtype != c else w
        # a float32 bias is added to the rounded product in float32 (CUDA: rounded to c and added inside the
        # GEMM, before its one rounding, as PyTorch's autocast computes addmm)
        return Linear.forward(be, xc, wc, b), xc, wc

    def save_extra(self, arrays, out):
        self.extra = out[1:]  # the half copies (x_c, W_c) of the forward

    def backward(self, g, _g_xc=None, _g_wc=None):
        # graph mode: the same arithmetic from pylucid ops (half operands promoted to float32, float32
        # accumulation), so second derivatives flow through the casts
        from .conversion import cast
        from .elementwise import sum_to_size
        from .linalg import matmul
        from .shape import reshape, transpose

        x, w, b = self.input(0), self.input(1), self.input(2)
        c = self.params["dtype"]
        ex, ew, eb = self.next_edges
        gx = gw = gb = None
        if ex is not None:
            gx = matmul(cast(g, x.dtype), cast(cast(w, c), x.dtype))
        if ew is not None:
            g2 = reshape(cast(g, w.dtype), (-1, g.shape[-1]))
            x2 = reshape(cast(cast(x, c), w.dtype), (-1, x.shape[-1]))
            gw = matmul(transpose(g2, 0, 1), x2)
        if eb is not None:
            gb = sum_to_size(cast(g, b.dtype), self.shapes[2])
        return gx, gw, gb

    def backward_fast(self, be, g, _g_xc=None, _g_wc=None):
        x, w, b = self.input(0)._data, self.input(1)._data, self.saved[2]
        xc, wc = self.extra
        ex, ew, eb = self.next_edges
        gx = gw = gb = None
        if ex is not None:
            gx = be.matmul_to(g, wc, x.dtype)
        if ew is not None:
            gw = be.matmul_to(g.reshape(-1, g.shape[-1]).T, xc.reshape(-1, xc.shape[-1]), w.dtype)
        if eb is not None:
            gb = be.sum_to_shape_as(g, self.shapes[2], b._data.dtype)
        return gx, gw, gb


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    ac = state.autocast
    if ac is not None and input.__class__ in _TENSOR_TYPES and weight.__class__ in _TENSOR_TYPES:
        c = ac.get(input._device.type)
        if c is not None and c.itemsize == 2 and _autocast_operands(c.numpy_dtype, input, weight, bias):
            r = None if input._device.backend.amp_rounded is None else amp_rounding(input, c.numpy_dtype)
            return apply(LinearAutocast, (input, weight, bias),
                         {"dtype": c} if r is None else {"dtype": c, "rounded": r})[0]
    return apply(Linear, (input, weight, bias))


def _autocast_operands(c, *tensors) -> bool:
    """Whether :class:`LinearAutocast` takes these operands: on one device, each float32 or ``c``, one at least
    float32 (with all of them ``c`` already, autocast changes nothing and ``Linear`` runs as it is)."""
    dev = tensors[0]._device
    f32 = False
    for t in tensors:
        if t is None:
            continue
        if t.__class__ not in _TENSOR_TYPES or t._device is not dev:
            return False
        dt = t._data.dtype
        if dt == _F32_NP:
            f32 = True
        elif dt != c:
            return False
    return f32


# ---------------------------------------------------------------------------------------------------------------------
# normalisation: layer_norm, batch_norm, rms_norm share "normalise over axes"
# ---------------------------------------------------------------------------------------------------------------------
def _xhat_t(x: Tensor, axes, eps: float) -> tuple:
    """``((x - mean) * rstd, rstd)`` over ``axes`` from pylucid ops (biased variance): differentiable in ``x``."""
    from .reduction import mean

    xc = x - mean(x, axes, keepdim=True)
    rstd = (mean(xc * xc, axes, keepdim=True) + eps) ** -0.5
    return xc * rstd, rstd


def _rows_ok(be, x) -> bool:
    """Whether a last-axis normalisation of ``x`` runs as :func:`_layer_norm_rows` (CPU, float32/float64)."""
    return be.name == "cpu" and x.dtype.kind == "f" and x.dtype.itemsize >= 4 and x.size and x.ndim


def _layer_norm_rows(be, x, w, b, eps):
    """``(y, mean, rstd)`` of layer norm over the last axis on the CPU: the row means as a GEMV with a ``1/n``
    vector and the sums of squares as a row-wise ``einsum`` (NumPy's reductions along a short last axis take
    several times longer), the rest as in-place passes."""
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    inv = be.full((n,), 1.0 / n, dtype=x.dtype)
    mean = be.matmul(x2, inv)
    y = x2 - mean[:, None]
    rstd = be.einsum("ij,ij->i", y, y)  # the row sums of squares without a squared copy
    rstd *= x.dtype.type(1.0 / n)
    rstd += x.dtype.type(eps)
    be.sqrt(rstd, out=rstd)
    be.reciprocal(rstd, out=rstd)
    y *= rstd[:, None]
    if w is not None:
        y *= w
    if b is not None:
        y += b
    lead = x.shape[:-1]
    return y.reshape(x.shape), mean.reshape(lead), rstd.reshape(lead)


def _layer_norm_rows_backward(be, g, x, mean, rstd, w):
    """``(dx, dweight, dbias)`` of :func:`_layer_norm_rows` (the last two None without ``w``), with every row and
    column sum a GEMV: with ``xc = x - mean`` and ``a = g w``, ``dx = rstd (a - mean(a) - xc rstd^2 mean(a xc))``
    (``xhat mean(a xhat)`` without forming ``xhat``), ``dweight = rstd^T (g xc)``, ``dbias = 1^T g``; the
    per-row factors multiply in place, so every (rows, n) pass but the centring and ``g xc`` writes no new array."""
    n = x.shape[-1]
    dt = x.dtype
    x2, g2 = x.reshape(-1, n), g.reshape(-1, n).astype(dt, copy=False)
    mean, rstd = mean.reshape(-1).astype(dt, copy=False), rstd.reshape(-1).astype(dt, copy=False)
    xc = x2 - mean[:, None]
    gxc = g2 * xc
    wv = w if w is not None else be.ones((n,), dtype=dt)
    q = be.matmul(gxc, wv)  # sum(a xc) per row
    ma = be.matmul(g2, wv)  # sum(a) per row
    ma *= dt.type(1.0 / n)
    a = g2 * w if w is not None else g2.copy()
    q *= rstd
    q *= rstd
    q *= dt.type(1.0 / n)  # rstd^2 mean(a xc)
    xc *= q[:, None]
    a -= xc
    a -= ma[:, None]
    a *= rstd[:, None]
    dx = a.reshape(x.shape)
    if w is None:
        return dx, None, None
    ones = be.ones((x2.shape[0],), dtype=dt)
    return dx, be.matmul(rstd, gxc).astype(w.dtype, copy=False), be.matmul(ones, g2).astype(w.dtype, copy=False)


def _layer_norm_grads(be, g, x, w, mean, rstd, axes, wshape, eps, need_w=False, need_b=False):
    """``(dx, dweight, dbias)`` of ``y = (x - mean) * rstd * w + b`` normalised over ``axes``, on raw arrays.

    With ``xhat = (x - mean) * rstd`` and ``a = g * w``: ``dx = rstd (a - mean(a) - xhat mean(a xhat))``,
    ``dweight = sum(g xhat)``, ``dbias = sum(g)``, summed to ``wshape`` (the shape ``w`` broadcasts as), and
    only with ``need_w`` / ``need_b`` (else None). ``mean`` and ``rstd`` are the forward's statistics in any
    shape of the reduced size (None: computed here). One normalised last axis goes to the backend's fused
    kernel (a CUDA kernel; the same arithmetic on the CPU).
    """
    if mean is not None and axes == (x.ndim - 1,):
        lead = x.shape[:-1]
        if _rows_ok(be, x) and (w is None or w.dtype == x.dtype):
            gx, gw, gb = _layer_norm_rows_backward(be, g, x, mean, rstd, w)
        else:
            gx, gw, gb = be.layer_norm_backward(g, x, mean.reshape(lead), rstd.reshape(lead), w)
        if need_b and gb is None:  # a bias without a weight: dbias = sum of g over the rows
            gb = be.sum_to_shape(_up(be, g), wshape).astype(g.dtype)
        return gx, (gw if need_w else None), (gb if need_b else None)
    gf, xf = _up(be, g), _up(be, x)
    if mean is None:
        xc = xf - be.mean(xf, axis=axes, keepdims=True)
        rstd = 1.0 / be.sqrt(be.mean(xc * xc, axis=axes, keepdims=True) + eps)
    else:
        kshape = keepdim_shape(x.shape, axes)
        xc = xf - mean.reshape(kshape)
        rstd = rstd.reshape(kshape)
    xhat = xc * rstd
    a = gf * w.reshape(wshape) if w is not None else gf
    m1 = be.mean(a, axis=axes, keepdims=True)
    m2 = be.mean(a * xhat, axis=axes, keepdims=True)
    gx = (rstd * (a - m1 - xhat * m2)).astype(x.dtype, copy=False)
    gw = be.sum_to_shape(gf * xhat, wshape).reshape(w.shape).astype(w.dtype) if need_w else None
    gb = be.sum_to_shape(gf, wshape).astype(g.dtype) if need_b else None
    return gx, gw, gb


class LayerNorm(Op):
    """``y = (x - mean) / sqrt(var + eps) * w + b`` over the last ``k`` dims (biased variance).

    Outputs ``(y, mean, rstd)``: the statistics carry no gradient and are what the backward
    reuses (``save_extra``); ``apply`` returns ``(y, None, None)`` (``hidden_outputs``). ``dx`` is the :class:`LayerNormBackward` op (differentiable again),
    ``dw = sum(g xhat)``, ``db = sum(g)``.
    """

    schema = OpSchema("layer_norm", amp_policy=FORCE_FP32, saves_input=True, family="nn",
                      accepts=("float", "int", "bool"))
    n_outputs = 3
    differentiable_outputs = (True, False, False)
    hidden_outputs = True
    # under CUDA autocast a half input is read as it is (float_out): no float32 copy of the activations
    amp_half_args = (0,)

    @staticmethod
    def forward(be, x, w, b, k, eps, float_out=False):
        if float_out:  # a half x under autocast (amp_half_args): the float32 result of the policy
            if k == 1 and x.ndim:
                return be.layer_norm(x, w, b, eps, float_out=True)
            x = x.astype(be.float32)
        if k == 1 and x.ndim:
            # one normalised axis (the transformer case): the backend's fused layer norm (a kernel on CUDA,
            # the same arithmetic as the general path below on the CPU for half inputs), on the CPU in float32
            # and float64 the GEMV row sums of _layer_norm_rows
            if _rows_ok(be, x) and all(a is None or a.dtype == x.dtype for a in (w, b)):
                return _layer_norm_rows(be, x, w, b, eps)
            return be.layer_norm(x, w, b, eps)
        xf = _up(be, x)
        axes = tuple(range(x.ndim - k, x.ndim))
        mu = be.mean(xf, axis=axes, keepdims=True)
        xc = xf - mu
        rstd = 1.0 / be.sqrt(be.mean(xc * xc, axis=axes, keepdims=True) + eps)
        y = xc * rstd
        if w is not None:
            y = y * w
        if b is not None:
            y = y + b
        return y.astype(x.dtype, copy=False), mu, rstd

    def save_extra(self, arrays, out):
        self.extra = out[1:]  # (mean, rstd)

    def _axes(self):
        n = len(self.shapes[0])
        return tuple(range(n - self.params["k"], n))

    def backward(self, g, _g_mean=None, _g_rstd=None):
        from .elementwise import sum_to_size

        x0, w = self.input(0), self.input(1)
        x = x0.float() if self.params.get("float_out") else x0  # autocast's float32 computation, as forward
        axes, eps = self._axes(), self.params["eps"]
        ex, ew, eb = self.next_edges
        gx = gw = gb = None
        if ex is not None:
            mean, rstd = (_const(self, a) for a in self.extra)
            gx = apply(LayerNormBackward, (g, x, w, mean, rstd),
                       {"axes": axes, "wshape": self.shapes[0][axes[0]:], "eps": eps})
            if gx.dtype != x0.dtype:
                gx = gx.to(x0.dtype)
        if ew is not None:
            gw = sum_to_size(g * _xhat_t(x, axes, eps)[0], self.shapes[1])
        if eb is not None:
            gb = sum_to_size(g, self.shapes[2])
        return gx, gw, gb

    def backward_fast(self, be, g, _g_mean=None, _g_rstd=None):
        x, w = self.input(0)._data, self.input(1)
        w = None if w is None else w._data
        ex, ew, eb = self.next_edges
        mean, rstd = self.extra
        axes = self._axes()
        gx, gw, gb = _layer_norm_grads(be, g, x, w, mean, rstd, axes, self.shapes[0][axes[0]:], self.params["eps"],
                                       need_w=ew is not None, need_b=eb is not None)
        return (gx if ex is not None else None), gw, gb

    accumulates_into = 0

    def backward_fast_accumulate(self, be, pending, g, _g_mean=None, _g_rstd=None):
        """:meth:`backward_fast` with ``pending`` (the gradient the input already has from elsewhere: a
        transformer's residual stream) added into ``dx`` by the CUDA kernel as it writes it, which
        saves an add kernel and a pass over ``dx`` per normalisation. None (declined) off the GPU, for
        several normalised axes, or where ``pending`` is not ``dx``'s shape and dtype."""
        if be.name != "cuda":
            return None
        x = self.input(0)._data
        ex, ew, eb = self.next_edges
        if ex is None or self.params["k"] != 1 or not x.ndim or pending.shape != x.shape or \
                pending.dtype != x.dtype:
            return None
        w = self.input(1)
        w = None if w is None else w._data
        mean, rstd = self.extra
        lead = x.shape[:-1]
        gx, gw, gb = be.layer_norm_backward(g, x, mean.reshape(lead), rstd.reshape(lead), w, residual=pending)
        if eb is not None and gb is None:  # a bias without a weight: dbias = sum of g over the rows
            gb = be.sum_to_shape(_up(be, g), self.shapes[2]).astype(g.dtype)
        return gx, (gw if ew is not None else None), (gb if eb is not None else None)


class LayerNormBackward(Op):
    """``dx`` of a normalisation over ``axes`` (layer norm; batch norm in training): inputs ``(g, x, w, mean,
    rstd)``, ``dx = rstd (a - mean(a) - xhat mean(a xhat))`` with ``xhat = (x - mean) rstd``, ``a = g w``.

    ``w`` (or None) broadcasts as ``wshape``; ``mean``/``rstd`` are the forward's statistics (None: computed
    from ``x``) and get no gradient. The forward is the fused kernel of ``_layer_norm_grads``; the backward,
    for an upstream ``u``, recomputes the statistics from ``x`` with pylucid ops (so it differentiates again):
    with ``P(v) = v - mean(v) - xhat mean(v xhat)`` and ``m2 = mean(a xhat)``,
    ``dg = w rstd P(u)``, ``dw = sum(g rstd P(u))``, and
    ``dx = rstd (h - mean(h) - xhat (mean(h xhat) + mean(u dx_fwd)))`` where
    ``h = -rstd (m2 u + mean(u xhat) a)``.
    """

    schema = OpSchema("layer_norm_backward", amp_policy=KEEP_INPUT, saves_input=True, family="nn",
                      accepts=("float", "int", "bool"))
    promote_args = (0, 1, 2)  # the statistics keep their (float32 for half input) dtype

    @staticmethod
    def forward(be, g, x, w, mean, rstd, axes, wshape, eps):
        return _layer_norm_grads(be, g, x, w, mean, rstd, axes, wshape, eps)[0]

    def backward(self, u):
        from .elementwise import sum_to_size
        from .reduction import mean as _mean_t

        g, x, w = self.input(0), self.input(1), self.input(2)
        p = self.params
        axes = p["axes"]

        def mean(t):
            return _mean_t(t, axes, keepdim=True)

        xhat, rstd = _xhat_t(x, axes, p["eps"])
        wb = None if w is None else w.reshape(p["wshape"])
        a = g * wb if wb is not None else g
        m2 = mean(a * xhat)
        pu = rstd * (u - mean(u) - xhat * mean(u * xhat))
        eg, ex, ew = self.next_edges[:3]
        gg = gx = gw = None
        if eg is not None:
            gg = pu * wb if wb is not None else pu
        if ew is not None:
            gw = sum_to_size(g * pu, p["wshape"]).reshape(w.shape)
        if ex is not None:
            dx = rstd * (a - mean(a) - xhat * m2)
            h = -rstd * (m2 * u + mean(u * xhat) * a)
            gx = rstd * (h - mean(h) - xhat * (mean(h * xhat) + mean(u * dx)))
        return gg, gx, gw, None, None


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    from ..errors import ShapeMismatch

    if normalized_shape.__class__ is not tuple:
        normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(normalized_shape)
    # the checks compare the arrays' shapes (plain tuples): a layer runs them on every call
    shp = input._data.shape if input.__class__ in _TENSOR_TYPES else tuple(input.shape)
    if k == 0 or len(shp) < k or shp[len(shp) - k:] != normalized_shape:
        raise ShapeMismatch(
            f"layer_norm: normalized_shape {list(normalized_shape)} does not match the trailing dims of the input "
            f"of shape {list(input.shape)}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t._data.shape if t.__class__ in _TENSOR_TYPES else tuple(t.shape)) != normalized_shape:
            raise ShapeMismatch(f"layer_norm: {name} of shape {list(t.shape)} must have normalized_shape "
                                f"{list(normalized_shape)}")
    return apply(LayerNorm, (input, weight, bias), {"k": k, "eps": float(eps)})[0]


@declare(LayerNormBackward, namespaces=(), method=False)
def layer_norm_backward(grad_output: Tensor, input: Tensor, normalized_shape, weight: Tensor | None = None,
                        eps: float = 1e-5) -> Tensor:
    """``d layer_norm / d input`` applied to ``grad_output`` (the ``layer_norm_backward`` op; statistics from
    ``input``), as ``torch.ops.aten.native_layer_norm_backward``'s first output."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    if not isinstance(normalized_shape, (tuple, list)) or not all(isinstance(d, int) for d in normalized_shape):
        raise TypeError(f"layer_norm_backward: normalized_shape must be an int or a tuple of ints, got "
                        f"{normalized_shape!r}")
    k = len(normalized_shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != tuple(normalized_shape):
        raise ShapeMismatch(f"layer_norm_backward: normalized_shape {list(normalized_shape)} does not match the "
                            f"trailing dims of the input of shape {list(input.shape)}")
    if tuple(grad_output.shape) != tuple(input.shape):
        raise ShapeMismatch(f"layer_norm_backward: grad_output of shape {list(grad_output.shape)} must have the "
                            f"input's shape {list(input.shape)}")
    axes = tuple(range(input.ndim - k, input.ndim))
    gx = apply(LayerNormBackward, (grad_output, input, weight, None, None),
               {"axes": axes, "wshape": tuple(input.shape[input.ndim - k:]), "eps": float(eps)})
    # a gradient has its input's dtype (PyTorch's kernel needs equal dtypes; an empty call returns input's)
    return gx if gx.dtype == input.dtype or grad_output.dtype == input.dtype else gx.to(input.dtype)


class BatchNorm(Op):
    """Batch normalisation over every dim but 1.

    Training: normalise with the batch mean and biased variance; outputs
    ``(y, batch_mean, batch_var_biased)`` (the two statistics carry no
    gradient, are float32 for half input and stay with the node: ``apply``
    returns ``(y, None, None)``). With ``momentum`` (not None) the
    running buffers (inputs 3 and 4) are updated in place by the same backend
    call: ``running = (1 - momentum) running + momentum batch`` with the
    unbiased batch variance. Eval: normalise with the running statistics.

    KeepInput under autocast (as PyTorch: half activations stay half; the
    statistics and the arithmetic are float32 inside the backend); the weight,
    bias and buffers keep their dtypes (only the input takes part in promotion).
    """

    schema = OpSchema("batch_norm", amp_policy=KEEP_INPUT, saves_input=True, family="nn",
                      accepts=("float", "int", "bool"))
    promote_args = (0,)
    n_outputs = 3
    differentiable_outputs = (True, False, False)
    hidden_outputs = True

    @staticmethod
    def forward(be, x, w, b, running_mean, running_var, training, eps, momentum=None):
        # the backend's fused batch norm (one kernel per call on CUDA; the same arithmetic on the CPU)
        return be.batch_norm(x, w, b, running_mean, running_var, training, eps, momentum)

    def save_extra(self, arrays, out):
        self.extra = out[1:]  # the statistics the first-order backward reuses, at the compute precision

    def _geometry(self):
        n = len(self.shapes[0])
        return (0,) + tuple(range(2, n)), (1, self.shapes[0][1]) + (1,) * (n - 2)

    def backward(self, g, _g_mean=None, _g_var=None):
        from .elementwise import sum_to_size

        x, w, b = self.input(0), self.input(1), self.input(2)
        axes, shape = self._geometry()
        eps = self.params["eps"]
        ex, ew, eb = self.next_edges[:3]
        gx = gw = gb = None
        if self.params["training"]:
            if ex is not None:
                gx = apply(LayerNormBackward, (g, x, w, None, None), {"axes": axes, "wshape": shape, "eps": eps})
            if ew is not None:
                gw = sum_to_size(g * _xhat_t(x, axes, eps)[0], shape).reshape(-1)
        else:
            rm, rv = self.input(3).detach().reshape(shape), self.input(4).detach().reshape(shape)
            rstd = (rv + eps) ** -0.5
            if ex is not None:
                gx = g * rstd * (w.reshape(shape) if w is not None else 1.0)
            if ew is not None:
                gw = sum_to_size(g * ((x - rm) * rstd), shape).reshape(-1)
        if eb is not None:
            gb = sum_to_size(g, shape).reshape(-1)
        # half activations with float32 parameters: each gradient in its input's dtype
        gx, gw, gb = (d if d is None or d.dtype == t.dtype else d.to(t.dtype) for d, t in ((gx, x), (gw, w), (gb, b)))
        return gx, gw, gb, None, None

    def backward_fast(self, be, g, _g_mean=None, _g_var=None):
        # first order: dx, dweight and dbias from one backend call (one kernel on CUDA) on the saved statistics
        x, w = self.input(0)._data, self.input(1)
        w = None if w is None else w._data
        p = self.params
        mean, var = self.extra if p["training"] else (self.input(3)._data, self.input(4)._data)
        ex, ew, eb = self.next_edges[:3]
        gx, gw, gb = be.batch_norm_backward(g, x, w, mean, var, p["training"], p["eps"], need_dx=ex is not None)
        gw = gw.astype(w.dtype, copy=False) if ew is not None else None
        gb = gb.astype(self.input(2)._data.dtype, copy=False) if eb is not None else None
        return gx, gw, gb, None, None


@declare(BatchNorm, namespaces=(), method=False)
def batch_norm_stats(input: Tensor, running_mean, running_var, weight, bias, training: bool, eps: float,
                     momentum: float | None = None):
    """``(y, None, None)``: the registered ``batch_norm`` op (see ``functional.batch_norm``), whose batch statistics
    stay with its node (``hidden_outputs``).

    With ``training`` and ``momentum`` the running buffers are updated in place (their versions bumped)."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of at least 2 dims (N, C, ...), got {input.ndim}-D")
    return batch_norm_apply(input, running_mean, running_var, weight, bias, training, eps, momentum)


def batch_norm_apply(input, running_mean, running_var, weight, bias, training, eps, momentum=None):
    """The ``BatchNorm`` call of :func:`batch_norm_stats` (its arguments checked by the caller): ``(y, None,
    None)``, the running buffers' versions bumped where the op updated them in place."""
    out = apply(BatchNorm, (input, weight, bias, running_mean, running_var),
                {"training": bool(training), "eps": float(eps),
                 "momentum": None if momentum is None or not training else float(momentum)})
    if training and momentum is not None:
        if running_mean is not None:
            running_mean._version[0] += 1
        if running_var is not None:
            running_var._version[0] += 1
    return out


class RMSNorm(Op):
    """``y = x / sqrt(mean(x^2) + eps) * w`` over the last ``k`` dims (graph-mode backward only)."""

    schema = OpSchema("rms_norm", amp_policy=FORCE_FP32, saves_input=True, family="nn")

    @staticmethod
    def forward(be, x, w, k, eps):
        xf = _up(be, x)
        axes = tuple(range(x.ndim - k, x.ndim))
        y = xf / be.sqrt(be.mean(xf * xf, axis=axes, keepdims=True) + eps)
        if w is not None:
            y = y * w
        return y.astype(x.dtype, copy=False)

    def backward(self, g):
        from .elementwise import sum_to_size
        from .reduction import mean

        x, w = self.input(0), self.input(1)
        n = len(self.shapes[0])
        axes = tuple(range(n - self.params["k"], n))
        r = (mean(x * x, axes, keepdim=True) + self.params["eps"]) ** -0.5
        gw_ = g * w if w is not None else g
        ex, ew = self.next_edges
        gx = r * (gw_ - x * (r * r) * mean(gw_ * x, axes, keepdim=True)) if ex is not None else None
        gw = sum_to_size(g * x * r, self.shapes[1]) if ew is not None else None
        return gx, gw


_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    from ..errors import ShapeMismatch

    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise ShapeMismatch(f"rms_norm: normalized_shape {list(normalized_shape)} does not match the trailing dims "
                            f"of the input of shape {list(input.shape)}")
    if eps is None:
        # PyTorch's default: the machine epsilon of the input's dtype
        eps = _EPS.get(input.dtype.name, _EPS["float32"])
    return apply(RMSNorm, (input, weight), {"k": k, "eps": float(eps)})


# ---------------------------------------------------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------------------------------------------------
def _class_coefficients(be, shape, target, weight, ignore_index, label_smoothing, reduction, prob_target):
    """The constant ``Q`` (same shape as the logits) with ``loss = -sum_c Q * log_softmax(x)``.

    Class indices: ``Q = valid * ((1-eps) * onehot(t) * w_t * s_nll + eps/C * w_c * s_smooth)`` where for
    ``reduction='mean'`` ``s_nll = s_smooth = 1/sum(valid * w_t)`` (PyTorch 2.13 divides the smoothing term by
    the same weighted count of non-ignored targets). Probabilities: ``Q = w_c * (t (1-eps) + eps/C) * s`` with
    ``s = 1/N``.
    """
    C = shape[1]
    wshape = (1, C) + (1,) * (len(shape) - 2)
    if prob_target:
        tq = target * (1 - label_smoothing) + label_smoothing / C if label_smoothing else target
        q = tq * weight.reshape(wshape) if weight is not None else tq
        if reduction == "mean":
            n = 1
            for i, s in enumerate(shape):
                if i != 1:
                    n *= s
            q = q / n
        return q, None
    t = target
    valid = t != ignore_index
    tc = be.where(valid, t, 0)
    classes = be.arange(C).reshape(wshape)
    onehot = (be.expand_dims(tc, 1) == classes)
    wt = weight[tc] if weight is not None else None
    validf = valid.astype(weight.dtype if weight is not None else "float64")
    if reduction == "mean":
        denom = be.sum(validf * wt) if weight is not None else be.sum(validf)
        s_nll = 1.0 / denom if denom != 0 else float("nan")
        s_smooth = s_nll
    else:
        s_nll = s_smooth = 1.0
    w_c = weight.reshape(wshape) if weight is not None else 1.0
    q = onehot * w_c * ((1 - label_smoothing) * s_nll)
    if label_smoothing:
        q = q + w_c * (label_smoothing / C * s_smooth)
    q = q * be.expand_dims(valid, 1)
    return q, valid


class CrossEntropyLoss(Op):
    """Fused stable log-softmax + NLL over dim 1: ``loss = -sum_c Q * log_softmax(x)`` (see ``_class_coefficients``).

    ``dx = Qg_sum * softmax(x) - Q*g`` per element, where ``Qg_sum = sum_c Q*g``; for probability targets
    ``dt = -(1-eps) w_c s log_softmax(x) g``.

    Outputs ``(loss, lse, count)``: besides the loss, the row log-sum-exp over dim 1 and the number of
    targets not equal to ``ignore_index`` (0-d; the fused kernel's is a float), which carry no gradient and
    are what the fast backward reuses (``save_extra``): ``softmax(x) = exp(x - lse)``, and ``count``
    divides a ``'mean'``. ``apply`` returns ``(loss, None, None)`` (``hidden_outputs``).
    """

    schema = OpSchema("cross_entropy_loss", amp_policy=FORCE_FP32, saves_input=True, family="nn",
                      accepts=("float", "int", "bool"))
    promote_args = (0, 2)
    n_outputs = 3
    differentiable_outputs = (True, False, False)
    hidden_outputs = True

    @staticmethod
    def forward(be, x, target, weight, ignore_index, reduction, label_smoothing, prob_target, float_out=False):
        # float_out (CUDA, half logits under autocast; see cross_entropy_loss): float32 loss from the half
        # logits read in place, so no float32 copy of a (rows, vocabulary) matrix is made
        if _ce_fused(be, x, weight, label_smoothing, prob_target):
            # CUDA: one fused kernel (row max, log-sum-exp, picked logit)
            rows, lse = be.cross_entropy(x, target, ignore_index, float_out=True) if float_out else \
                be.cross_entropy(x, target, ignore_index)
            if reduction == "none":
                out, count = rows, be.sum(target != ignore_index)
            else:  # sum, or mean over the rows not ignored (0/0 = NaN, as PyTorch): one more kernel
                out, count = be.cross_entropy_reduce(rows, target, ignore_index, reduction == "mean")
            return out.astype(rows.dtype if float_out else x.dtype, copy=False), lse, count
        xf = _up(be, x)
        if prob_target:
            target = target.astype(xf.dtype, copy=False)
        q, valid = _class_coefficients(be, x.shape, target, weight, ignore_index, label_smoothing, reduction,
                                       prob_target)
        logp, lse = _np_log_softmax(be, xf, 1, lse=True)
        with be.errstate():
            prod = be.where(q != 0, q * logp, 0)
        loss = -be.sum(prod, axis=1)
        count = be.sum(valid) if valid is not None else be.asarray(loss.size)
        if reduction != "none":
            loss = be.sum(loss)
        return loss.astype(x.dtype, copy=False), lse[:, 0], count

    def _q(self, be, target, weight, dtype):
        p = self.params
        tq = target.astype(dtype) if p["prob_target"] else target
        q, _ = _class_coefficients(be, self.shapes[0], tq, weight, p["ignore_index"], p["label_smoothing"],
                                   p["reduction"], p["prob_target"])
        return be.asarray(q, dtype=dtype)

    def _g(self, g):
        from .shape import unsqueeze

        return unsqueeze(g, 1) if self.params["reduction"] == "none" else g

    def backward(self, g, _g_lse=None, _g_count=None):
        from .reduction import sum as _sum

        x, target, weight = self.input(0), self.input(1), self.input(2)
        be = self.device.backend
        if self.params["prob_target"]:
            q = self._q_graph(target, weight, x)  # a function of the target, so second derivatives see it
        else:
            q = _const(self, self._q(be, target._data, None if weight is None else weight._data, x._data.dtype))
        qg = q * self._g(g)
        xc = x.float() if self.params.get("float_out") else x  # autocast's float32 computation, as forward
        logp = _log_softmax_t(xc, 1)
        from .elementwise import exp

        gx = _sum(qg, 1, keepdim=True) * exp(logp) - qg if self.next_edges[0] is not None else None
        if gx is not None and gx.dtype != x.dtype:
            gx = gx.to(x.dtype)
        gt = None
        if self.params["prob_target"] and self.next_edges[1] is not None:
            gt = self._target_grad(logp, None if weight is None else weight.detach(), x, g)
        return gx, gt, None

    def _q_graph(self, target, weight, x):
        p = self.params
        C = x.shape[1]
        eps = p["label_smoothing"]
        q = target * (1 - eps) + eps / C if eps else target
        if weight is not None:
            q = q * weight.detach().reshape((1, C) + (1,) * (x.ndim - 2))
        if p["reduction"] == "mean":
            n = 1
            for i, sz in enumerate(x.shape):
                if i != 1:
                    n *= sz
            q = q / n
        return q

    def _target_grad(self, logp, weight, x, g):
        p = self.params
        C = x.shape[1]
        scale = 1.0
        if p["reduction"] == "mean":
            n = 1
            for i, s in enumerate(x.shape):
                if i != 1:
                    n *= s
            scale = 1.0 / n
        wshape = (1, C) + (1,) * (x.ndim - 2)
        coef = logp * (-(1 - p["label_smoothing"]) * scale)
        if weight is not None:
            coef = coef * weight.reshape(wshape)
        if p["reduction"] == "none":
            g = g.reshape(g.shape[:1] + (1,) + tuple(g.shape[1:]))
        return coef * g

    def save_extra(self, arrays, out):
        self.extra = out[1:]  # (lse, count)

    def backward_fast(self, be, g, _g_lse=None, _g_count=None):
        x, target, weight = self.input(0)._data, self.input(1)._data, self.input(2)
        lse, count = self.extra
        p = self.params
        if self.next_edges[0] is not None and _ce_fused(be, x, weight, p["label_smoothing"], p["prob_target"]):
            red = p["reduction"]
            if red == "none":
                g_rows = g
            else:
                gs = g / count.astype(g.dtype, copy=False) if red == "mean" else g
                g_rows = be.broadcast_to(gs, (x.shape[0],))  # stride 0: the kernel reads the one value in place
            return be.cross_entropy_backward(g_rows, x, lse, target, p["ignore_index"]).astype(x.dtype, copy=False), \
                None, None
        xf = _up(be, x)
        q = self._q(be, target, None if weight is None else weight._data, xf.dtype)
        gf = _up(be, g)
        qg = q * (be.expand_dims(gf, 1) if self.params["reduction"] == "none" else gf)
        logp = xf - be.expand_dims(lse, 1)
        gx = be.sum(qg, axis=1, keepdims=True) * be.exp(logp) - qg if self.next_edges[0] is not None else None
        gt = None
        if self.params["prob_target"] and self.next_edges[1] is not None:
            w = None if weight is None else weight._data
            gt = self._target_grad(logp, w, x, gf)
            gt = gt.astype(target.dtype, copy=False)
        return (None if gx is None else gx.astype(x.dtype, copy=False)), gt, None


def _ce_fused(be, x, weight, label_smoothing, prob_target) -> bool:
    """The fused cross-entropy (``be.cross_entropy``: one CUDA kernel; on the CPU a gather of the picked logit,
    no dense one-hot) covers the common case: (N, C) logits with C > 0, class indices, no weight/smoothing."""
    floating = x.dtype.kind == "f" or (x.dtype.kind == "V" and x.dtype.itemsize == 2)  # bfloat16 is kind V
    return be.name in ("cuda", "cpu") and x.ndim == 2 and floating and not prob_target and weight is None \
        and not label_smoothing and x.shape[1] > 0


def cross_entropy_loss(input, target, weight=None, ignore_index: int = -100, reduction: str = "mean",
                       label_smoothing: float = 0.0) -> Tensor:
    """The fused op behind ``functional.cross_entropy`` (inputs of shape ``(N, C, d1, ...)``)."""
    prob = target.is_floating_point()
    params = {"ignore_index": int(ignore_index), "reduction": reduction, "label_smoothing": float(label_smoothing),
              "prob_target": prob}
    ac = state.autocast
    if (ac is not None and input.__class__ in _TENSOR_TYPES and input._device.type == "cuda"
            and ac.get("cuda") is not None and input.dtype in (_dt.float16, _dt.bfloat16) and input.ndim == 2
            and weight is None and not label_smoothing and not prob):
        # autocast's float32 cross entropy (the op is ForceFP32) without casting the logits: the CUDA kernels
        # read the half logits, compute in float32 and return a float32 loss; the logits' gradient is written
        # in their dtype, rounded once, as the cast's backward would round the float32 gradient
        state.autocast = None
        try:
            return apply(CrossEntropyLoss, (input, target, weight), {**params, "float_out": True})[0]
        finally:
            state.autocast = ac
    return apply(CrossEntropyLoss, (input, target, weight), params)[0]


class NLLLoss(Op):
    """``loss = -sum_c Q * x`` with ``x`` log-probabilities (``Q`` as in cross-entropy, no smoothing); linear in x."""

    schema = OpSchema("nll_loss", accepts=("float", "int", "bool"), amp_policy=FORCE_FP32, family="nn")
    promote_args = (0, 2)

    @staticmethod
    def forward(be, x, target, weight, ignore_index, reduction):
        q, _ = _class_coefficients(be, x.shape, target, weight, ignore_index, 0.0, reduction, False)
        with be.errstate():
            prod = be.where(q != 0, q * x, 0)
        loss = -be.sum(prod, axis=1)
        if reduction != "none":
            loss = be.sum(loss)
        return loss.astype(x.dtype, copy=False)

    def save_extra(self, arrays, out):
        be = self.device.backend
        x, target, weight = arrays
        p = self.params
        q, _ = _class_coefficients(be, x.shape, target, weight, p["ignore_index"], 0.0, p["reduction"], False)
        self.extra = be.asarray(q, dtype=x.dtype)

    def backward(self, g):
        from .shape import unsqueeze

        q = _const(self, self.extra)
        gg = unsqueeze(g, 1) if self.params["reduction"] == "none" else g
        return -(q * gg), None, None


def nll_loss_op(input, target, weight=None, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    return apply(NLLLoss, (input, target, weight), {"ignore_index": int(ignore_index), "reduction": reduction})


class MSELoss(Op):
    """``mean((x - y)^2)`` (or sum / none); ``dx = 2 (x - y) g'``, ``dy = -dx`` (summed back over broadcasting)."""

    schema = OpSchema("mse_loss", amp_policy=FORCE_FP32, saves_input=True, family="nn",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, y, reduction):
        d = x - y
        return _reduce_arr(be, d * d, reduction)

    def backward(self, g):
        from .elementwise import sum_to_size

        x, y = self.input(0), self.input(1)
        d = x - y
        gd = 2 * d * _grad_of_reduction(g, d.shape, self.params["reduction"])
        ex, ey = self.next_edges
        return (sum_to_size(gd, self.shapes[0]) if ex is not None else None,
                sum_to_size(-gd, self.shapes[1]) if ey is not None else None)


def mse_loss_op(input, target, reduction: str = "mean") -> Tensor:
    return apply(MSELoss, (input, target), {"reduction": reduction})


class HuberLoss(Op):
    """``0.5 d^2`` if ``|d| <= delta`` else ``delta (|d| - 0.5 delta)``; ``dd = clamp(d, -delta, delta)``."""

    schema = OpSchema("huber_loss", amp_policy=FORCE_FP32, saves_input=True, family="nn",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, y, reduction, delta):
        d = x - y
        a = be.abs(d)
        loss = be.where(a <= delta, 0.5 * d * d, delta * (a - 0.5 * delta))
        return _reduce_arr(be, loss.astype(d.dtype, copy=False), reduction)

    def backward(self, g):
        from .elementwise import sum_to_size
        from .indexing import where

        x, y = self.input(0), self.input(1)
        delta = self.params["delta"]
        d = x - y
        clipped = where(d > delta, delta, where(d < -delta, -delta, d))
        gd = clipped * _grad_of_reduction(g, d.shape, self.params["reduction"])
        ex, ey = self.next_edges
        return (sum_to_size(gd, self.shapes[0]) if ex is not None else None,
                sum_to_size(-gd, self.shapes[1]) if ey is not None else None)


def huber_loss_op(input, target, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    return apply(HuberLoss, (input, target), {"reduction": reduction, "delta": float(delta)})


class BCELoss(Op):
    """``-w (y log x + (1-y) log(1-x))`` with each log clamped at -100 (PyTorch);
    ``dx = w (x - y) / max(x (1-x), 1e-12)``, ``dy = w (log(1-x) - log x)``."""

    schema = OpSchema("bce_loss", amp_policy=FORCE_FP32, saves_input=True, family="nn",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, y, w, reduction):
        with be.errstate():
            lx = be.maximum(be.log(x), -100)
            l1x = be.maximum(be.log1p(-x), -100)
        loss = -(y * lx + (1 - y) * l1x)
        if w is not None:
            loss = loss * w
        return _reduce_arr(be, loss.astype(x.dtype, copy=False), reduction)

    def backward(self, g):
        from .elementwise import log, sum_to_size
        from .indexing import where

        x, y, w = self.input(0), self.input(1), self.input(2)
        gl = _grad_of_reduction(g, _broadcast_shape(self.shapes), self.params["reduction"])
        if w is not None:
            gl = gl * w
        ex, ey, _ = self.next_edges
        gx = gy = None
        if ex is not None:
            den = x * (1 - x)
            den = where(den > 1e-12, den, 1e-12)
            gx = sum_to_size(gl * (x - y) / den, self.shapes[0])
        if ey is not None:
            lx, l1x = log(x), log(1 - x)
            lx = where(lx > -100, lx, -100.0)
            l1x = where(l1x > -100, l1x, -100.0)
            gy = sum_to_size(gl * (l1x - lx), self.shapes[1])
        return gx, gy, None


def _broadcast_shape(shapes):
    n = max(len(s) for s in shapes if s is not None)
    out = [1] * n
    for s in shapes:
        if s is None:
            continue
        for i, d in enumerate(s):
            j = n - len(s) + i
            if d != 1:
                out[j] = d
    return tuple(out)


def bce_loss_op(input, target, weight=None, reduction: str = "mean") -> Tensor:
    return apply(BCELoss, (input, target, weight), {"reduction": reduction})


class BCEWithLogits(Op):
    """``w [(1-y) x + (1 + (pw-1) y) softplus(-x)]`` computed stably as ``log1p(exp(-|x|)) + max(-x, 0)``;
    ``dx = w ((pw y + 1 - y) sigmoid(x) - pw y)``, ``dy = -w (pw logsigmoid(x) - logsigmoid(-x))``."""

    schema = OpSchema("bce_with_logits", amp_policy=FORCE_FP32, saves_input=True, family="nn",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, y, w, pw, reduction):
        sp = be.log1p(be.exp(-be.abs(x))) + be.maximum(-x, 0)  # softplus(-x) = -log(sigmoid(x))
        if pw is not None:
            loss = (1 - y) * x + (1 + (pw - 1) * y) * sp
        else:
            loss = (1 - y) * x + sp
        if w is not None:
            loss = loss * w
        return _reduce_arr(be, loss.astype(x.dtype, copy=False), reduction)

    def backward(self, g):
        from .elementwise import exp, log, sum_to_size
        from .indexing import where

        x, y, w, pw = (self.input(i) for i in range(4))
        gl = _grad_of_reduction(g, _broadcast_shape(self.shapes), self.params["reduction"])
        if w is not None:
            gl = gl * w
        ex, ey = self.next_edges[:2]
        gx = gy = None
        # sigmoid and log-sigmoid from core ops, stable for either sign of x
        ez = exp(-(where(x > 0, x, -x)))
        sig = where(x >= 0, 1 / (1 + ez), ez / (1 + ez))
        if ex is not None:
            coef = (pw * y + 1 - y) if pw is not None else 1.0
            gx = sum_to_size(gl * (coef * sig - (pw * y if pw is not None else y)), self.shapes[0])
        if ey is not None:
            sp_neg = log(1 + ez) + where(x < 0, -x, 0.0)  # softplus(-x) = -logsigmoid(x)
            log_sig = -sp_neg
            log_sig_neg = log_sig - x  # logsigmoid(-x) = logsigmoid(x) - x
            gy = sum_to_size(-gl * ((pw if pw is not None else 1.0) * log_sig - log_sig_neg), self.shapes[1])
        return gx, gy, None, None


def bce_with_logits_op(input, target, weight=None, pos_weight=None, reduction: str = "mean") -> Tensor:
    return apply(BCEWithLogits, (input, target, weight, pos_weight), {"reduction": reduction})


# ---------------------------------------------------------------------------------------------------------------------
# embedding
# ---------------------------------------------------------------------------------------------------------------------
class Embedding(Op):
    """``y = weight[indices]``; ``dweight = scatter_add(g)`` with the ``padding_idx`` row kept at zero."""

    schema = OpSchema("embedding", amp_policy=PROMOTE, saves_input=True, family="nn")
    promote_args = (0,)
    # under autocast the looked-up rows are rounded to the autocast dtype, not the whole table
    amp_gathers = True

    @staticmethod
    def forward(be, weight, indices, padding_idx, amp_dtype=None):
        if be.name == "cpu":
            rows = be.take(weight, indices, axis=0)  # NumPy's take: the same rows, ~2x faster than weight[indices]
        else:
            rows = weight[indices]
        return rows if amp_dtype is None else be.astype(rows, amp_dtype.numpy_dtype)

    def backward(self, g):
        w = self.input(0)
        if g.dtype != w.dtype:  # amp_dtype: the rows' gradients summed in the table's dtype
            g = g.to(w.dtype)
        return apply(EmbeddingBackward, (g, self.input(1)),
                     {"num_weights": self.shapes[0][0], "padding_idx": self.params["padding_idx"]}), None


class EmbeddingBackward(Op):
    """Adjoint of ``embedding``: rows of ``g`` summed into a ``(num_weights, D)`` table; its gradient is a lookup."""

    schema = OpSchema("embedding_backward", amp_policy=KEEP_INPUT, saves_input=True, family="nn")
    promote_args = (0,)

    @staticmethod
    def forward(be, g, indices, num_weights, padding_idx):
        if be.name == "cuda" and g.ndim == indices.ndim + 1:
            from .._state import flags

            # CUDA kernel: atomic adds, or (under use_deterministic_algorithms) the sorted, fixed-order sum
            return be.embedding_backward(g, indices, num_weights, padding_idx if padding_idx >= 0 else None,
                                         deterministic=flags.deterministic)
        idx, rows = indices.reshape(-1), g.reshape((-1,) + g.shape[indices.ndim:])
        if be.name == "cpu" and rows.ndim == 2 and idx.size and g.dtype.kind == "f" and g.dtype.itemsize >= 4:
            out = _sorted_row_sums(be, idx, rows, num_weights)
        else:
            out = be.zeros((num_weights,) + g.shape[indices.ndim:], dtype=g.dtype)
            be.scatter_add(out, idx, rows)
        if padding_idx >= 0:
            out[padding_idx] = 0
        return out

    def backward(self, gg):
        idx = self.input(1)
        out = apply(Embedding, (gg, idx), {"padding_idx": -1})
        p = self.params["padding_idx"]
        if p >= 0:
            from .shape import unsqueeze

            keep = (idx != p).to(out.dtype)
            for _ in range(out.ndim - idx.ndim):
                keep = unsqueeze(keep, -1)
            out = out * keep
        return out, None


def _sorted_row_sums(be, idx, rows, num_weights):
    """``sum of rows[r] with idx[r] == k`` for every k: the rows gathered in index order (a stable sort), then one
    ``add.reduceat`` over the runs of equal indices, each run summed in order in the rows' dtype (as PyTorch's
    CPU embedding backward accumulates); several times faster than a scattered ``add.at`` or a ``bincount`` over
    every (index, column) pair."""
    order = be.argsort(idx, kind="stable")
    sidx = idx[order]
    first = be.empty(sidx.shape, dtype=bool)
    first[0] = True
    be.not_equal(sidx[1:], sidx[:-1], out=first[1:])
    starts = be.flatnonzero(first)
    out = be.zeros((num_weights, rows.shape[1]), dtype=rows.dtype)
    out[sidx[starts]] = be.add.reduceat(rows[order], starts, axis=0)
    return out


def embedding_op(weight, indices, padding_idx: int = -1) -> Tensor:
    return apply(Embedding, (weight, indices), {"padding_idx": int(padding_idx)})


# ---------------------------------------------------------------------------------------------------------------------
# dropout family: the random mask is drawn by the caller (pylucid's generators) and passed in as an input
# ---------------------------------------------------------------------------------------------------------------------
#: the dropout family's shared schema facts (op_policies.csv: KeepInput, not deterministic)
_RANDOM_MASK_SCHEMA = dict(amp_policy=KEEP_INPUT, saves_input=True, deterministic=False, seeded=True,
                           deterministic_note="the mask is drawn from the random generator; seed it with "
                                              "pylucid.manual_seed for reproducible masks", family="nn")


def _bf16_masked_scale(be, x, mask, scale):
    """``x * mask * scale`` of a bfloat16 ``x`` on the CPU, the values of bfloat16 arithmetic (``scale`` rounded to
    bfloat16, the product rounded once) computed in float32: the product of two bfloat16 values is exact in float32,
    so its one rounding to bfloat16 is the bfloat16 product's; ml_dtypes' bfloat16 ufuncs run value by value,
    several times slower than the float32 passes and the backend's block casts."""
    y = be.astype(x, be.float32)
    y *= be.float32(x.dtype.type(scale))
    y *= mask
    return be.astype(y, x.dtype)


class Dropout(Op):
    """``y = x * mask * scale`` with a broadcastable boolean ``mask`` (element or channel dropout)."""

    # float inputs and a boolean mask, as PyTorch (its dropout refuses integer and, on the CPU, complex inputs)
    schema = OpSchema("dropout", accepts=(("float",), ("bool",)), **_RANDOM_MASK_SCHEMA)
    promote_args = (0,)

    @staticmethod
    def forward(be, x, mask, scale):
        if be.name == "cpu" and x.dtype == _BF16_NP and mask.dtype == bool and mask.shape == x.shape:
            return _bf16_masked_scale(be, x, mask, scale)
        if x.dtype.kind == "f" and mask.dtype == bool:
            # the scale first, then the boolean mask in place, read as it is (no float copy of it): two passes, the
            # in-place one the cheaper of the two orders (the mask may broadcast: then the scale goes last)
            if mask.shape == x.shape:
                y = be.multiply(x, x.dtype.type(scale))
                y *= mask
                return y
            y = be.multiply(x, mask)
            y *= x.dtype.type(scale)
            return y
        return (x * mask.astype(x.dtype) * x.dtype.type(scale)).astype(x.dtype, copy=False)

    def backward(self, g):
        mask = self.input(1)
        return g * mask.to(g.dtype) * self.params["scale"], None

    def backward_fast(self, be, g):
        mask = self.input(1)._data
        if be.name == "cpu" and g.dtype == _BF16_NP and mask.dtype == bool and mask.shape == g.shape:
            return _bf16_masked_scale(be, g, mask, self.params["scale"]), None
        if g.dtype.kind == "f" and mask.dtype == bool:
            if mask.shape == g.shape:
                d = be.multiply(g, g.dtype.type(self.params["scale"]))
                d *= mask
                return d, None
            d = be.multiply(g, mask)
            if d.shape == g.shape:
                d *= g.dtype.type(self.params["scale"])
                return d, None
        return _graph_first_order(self, g)


@declare(Dropout, namespaces=(), method=False)
def dropout_mask_op(input: Tensor, mask: Tensor, scale: float) -> Tensor:
    return apply(Dropout, (input, mask), {"scale": float(scale)})


class AlphaDropout(Op):
    """``y = a (x * mask + alpha' (1 - mask)) + b`` (keeps SELU's mean and variance); ``dx = a mask g``."""

    schema = OpSchema("alpha_dropout", accepts=(("float",), ("bool",)), **_RANDOM_MASK_SCHEMA)
    promote_args = (0,)

    @staticmethod
    def forward(be, x, mask, a, b, alpha_p):
        m = mask.astype(x.dtype)
        return (a * (x * m + alpha_p * (1 - m)) + b).astype(x.dtype, copy=False)

    def backward(self, g):
        return g * self.input(1).to(g.dtype) * self.params["a"], None


@declare(AlphaDropout, namespaces=(), method=False)
def alpha_dropout_mask_op(input: Tensor, mask: Tensor, a: float, b: float, alpha_p: float) -> Tensor:
    return apply(AlphaDropout, (input, mask), {"a": float(a), "b": float(b), "alpha_p": float(alpha_p)})


# ---------------------------------------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------------------------------------
def _causal_arr(be, lq, s, dtype):
    """The additive causal mask (L, S): ``-inf`` above the diagonal (keys after the query position)."""
    return be.triu(be.full((lq, s), float("-inf"), dtype=dtype), 1)


def _graph_first_order(node, g):
    """The node's graph formula on a raw gradient, for first order (what the engine runs without a fast path)."""
    res = node.backward(_new_tensor(g, node.device))
    return tuple(None if r is None else r._data for r in res)


#: the most score elements (batch x heads x L x S) the CPU attention below keeps in one array
_SDPA_WHOLE_MAX = 1 << 22


def _sdpa_whole_ok(be, q, k, v, mask, drop) -> bool:
    """Whether the CPU attention runs as :func:`_sdpa_whole` (and its backward): float32/float64, no mask and no
    dropout besides ``causal``, one batch shape, and a score matrix small enough to hold whole."""
    bat = q.shape[:-2]
    return be.name == "cpu" and mask is None and drop is None and q.dtype.kind == "f" and q.dtype.itemsize >= 4 \
        and k.shape[:-2] == bat and v.shape[:-2] == bat and k.shape[-2] > 0 and q.shape[-2] > 0 and \
        q.size // max(q.shape[-1], 1) * k.shape[-2] <= _SDPA_WHOLE_MAX


def _sdpa_scores_t(be, q, k, scale, causal):
    """``(S^T, q * scale)``: the scaled, causally masked scores transposed, ``S^T[..., j, i] = k_j . q_i scale``
    (keys along the rows: the softmax's max and sum over keys become reductions over rows, which NumPy runs as
    whole-row vector passes; along the short last axis they are several times slower)."""
    qs = q * q.dtype.type(scale)
    st = be.matmul(k, be.swapaxes(qs, -1, -2))
    if causal:
        # key j is masked for query i when j > i (top-left aligned): below the diagonal of S^T
        st += be.tril(be.full(st.shape[-2:], float("-inf"), dtype=st.dtype), -1)
    return st, qs


def _sdpa_whole(be, q, k, v, scale, causal):
    """``(o, lse)`` of causal or unmasked attention on the CPU with the whole score matrix (see
    :func:`_sdpa_scores_t`); ``lse`` (..., L, 1) as the backend's tiled kernel gives it."""
    st, _ = _sdpa_scores_t(be, q, k, scale, causal)
    m = be.max(st, axis=-2, keepdims=True)
    st -= m
    be.exp(st, out=st)
    den = be.sum(st, axis=-2, keepdims=True)
    o = be.matmul(be.swapaxes(st, -1, -2), v)
    o /= be.swapaxes(den, -1, -2)
    be.log(den, out=den)
    den += m
    return o, be.ascontiguousarray(be.swapaxes(den, -1, -2))


def _sdpa_whole_backward(be, q, k, v, o, g, lse, scale, causal):
    """``(dq, dk, dv)`` of :func:`_sdpa_whole` from its ``o`` and ``lse``: ``P^T = exp(S^T - lse)``, ``dv = P^T g``,
    ``dS^T = P^T (v g^T - rowsum(g o))``, ``dq = dS k scale``, ``dk = dS^T q scale``."""
    st, qs = _sdpa_scores_t(be, q, k, scale, causal)
    st -= be.swapaxes(lse, -1, -2)
    be.exp(st, out=st)
    dv = be.matmul(st, g)
    dpt = be.matmul(v, be.swapaxes(g, -1, -2))
    dpt -= be.expand_dims(be.sum(g * o, axis=-1), -2)
    dpt *= st
    dq = be.matmul(be.swapaxes(dpt, -1, -2), k)
    dq *= q.dtype.type(scale)
    dk = be.matmul(dpt, qs)
    return dq, dk, dv


class ScaledDotProductAttention(Op):
    """``softmax(q k^T * scale + mask) [* dropout mask] @ v``.

    ``mask`` is additive (float, ``-inf`` where masked; boolean masks are converted by the caller);
    ``causal`` adds the causal mask (top-left aligned). Outputs ``(o, lse)``: ``lse`` is the row-wise
    log-sum-exp of the masked, scaled scores, carries no gradient, and is all a flash backward needs
    besides ``o`` (kept by ``save_extra``; ``apply`` returns ``(o, None)``: ``hidden_outputs``). On CUDA, half-precision (B, H, L, E) inputs without a dropout
    mask go through cuDNN's flash kernels (forward and first-order backward; the T x T matrix never
    exists); elsewhere the scores are materialised. Gradients (graph mode, differentiable again):
    ``dv = P^T g``, ``dS = P (dP - rowsum(dP P))``, ``dq = dS k scale``, ``dk = dS^T q scale``; a float
    additive mask that requires grad gets ``dS`` (summed over its broadcast dims).
    """

    # Promote (PyTorch's autocast list), not the reference table's ForceFP32: the softmax and its statistics are
    # computed in float32 for half inputs on every path (cuDNN's flash kernels; the scores upcast below), so
    # autocast keeps the GEMMs in the half dtype without a float32 softmax being lost
    # float query, key, value and additive mask (PyTorch refuses integer ones); the dropout mask is boolean
    schema = OpSchema("scaled_dot_product_attention", amp_policy=PROMOTE, saves_input=True, family="nn",
                      accepts=(("float",), ("float",), ("float",), ("float",), ("float", "int", "bool")))
    promote_args = (0, 1, 2, 3)
    n_outputs = 2
    differentiable_outputs = (True, False)
    hidden_outputs = True

    @staticmethod
    def forward(be, q, k, v, mask, drop, scale, drop_scale, causal=False):
        if drop is None and be.name == "cuda":
            r = be.sdpa(q, k, v, mask, scale, causal)
            if r is not None:
                return r
        if _sdpa_whole_ok(be, q, k, v, mask, drop):
            return _sdpa_whole(be, q, k, v, scale, causal)
        if drop is None and be.name == "cpu" and q.dtype.kind in "fV":
            return be.sdpa_cpu(q, k, v, mask, scale, causal)  # float32 GEMMs, tiled over query blocks
        s = _up(be, be.matmul(q, be.swapaxes(k, -1, -2))) * scale  # half scores: softmax in float32
        if mask is not None:
            s = s + mask
        if causal:
            s = s + _causal_arr(be, s.shape[-2], s.shape[-1], s.dtype)
        with be.errstate():
            logp, lse = _np_log_softmax(be, s, -1, lse=True)
            p = be.exp(logp)
        if drop is not None:
            p = p * drop.astype(p.dtype) * drop_scale
        return be.matmul(p.astype(q.dtype, copy=False), v), lse

    def save_extra(self, arrays, out):
        self.extra = out  # (o, lse)

    def backward(self, g, _g_lse=None):
        from .elementwise import sum_to_size
        from .linalg import matmul
        from .reduction import sum as _sum
        from .shape import transpose

        q, k, v, mask, drop = (self.input(i) for i in range(5))
        scale, ds = self.params["scale"], self.params["drop_scale"]
        em = self.next_edges[3] if len(self.next_edges) > 3 else None
        s = matmul(q, transpose(k, -1, -2)) * scale
        if mask is not None:
            # kept in the graph when the mask takes a gradient, so that gradient is differentiable again
            s = s + (mask if em is not None else mask.detach())
        if self.params["causal"]:
            s = s + _const(self, _causal_arr(self.device.backend, s.shape[-2], s.shape[-1], s.dtype.numpy_dtype))
        p = _softmax_t(s, -1)
        pd = p * drop.to(p.dtype) * ds if drop is not None else p
        eq, ek, ev = self.next_edges[:3]
        gv = sum_to_size(matmul(transpose(pd, -1, -2), g), self.shapes[2]) if ev is not None else None
        gq = gk = gm = None
        if eq is not None or ek is not None or em is not None:
            dp = matmul(g, transpose(v, -1, -2))
            if drop is not None:
                dp = dp * drop.to(dp.dtype) * ds
            # the gradient of the (masked, scaled) scores: the additive mask's gradient as it is
            dss = p * (dp - _sum(dp * p, -1, keepdim=True))
            if em is not None:
                gm = sum_to_size(dss, self.shapes[3])
            dsc = dss * scale
            if eq is not None:
                gq = sum_to_size(matmul(dsc, k), self.shapes[0])
            if ek is not None:
                gk = sum_to_size(matmul(transpose(dsc, -1, -2), q), self.shapes[1])
        return gq, gk, gv, gm, None

    def backward_fast(self, be, g, _g_lse=None):
        """First order: cuDNN's flash backward when the forward ran on it (a float32 ``lse`` of half
        inputs), else the graph formula on raw arrays."""
        mask_fixed = len(self.next_edges) < 4 or self.next_edges[3] is None  # the kernels give no mask gradient
        if be.name == "cuda" and self.input(4) is None and mask_fixed:
            o, lse = self.extra
            if lse.dtype.itemsize == 4 and o.dtype.itemsize == 2:
                mask = self.input(3)
                p = self.params
                r = be.sdpa_backward(self.input(0)._data, self.input(1)._data, self.input(2)._data, o, g, lse,
                                     None if mask is None else mask._data, p["scale"], p["causal"])
                if r is not None:
                    return r + (None, None)
        if be.name == "cpu" and self.input(4) is None and mask_fixed and self.input(0).dtype.is_floating_point:
            p = self.params
            mask = self.input(3)
            o, lse = self.extra
            q, k, v = (self.input(i)._data for i in range(3))
            if _sdpa_whole_ok(be, q, k, v, None if mask is None else mask._data, None):
                return _sdpa_whole_backward(be, q, k, v, o, g, lse, p["scale"], p["causal"]) + (None, None)
            return be.sdpa_cpu_backward(self.input(0)._data, self.input(1)._data, self.input(2)._data, o, g, lse,
                                        None if mask is None else mask._data, p["scale"], p["causal"]) + (None, None)
        return _graph_first_order(self, g)


def sdpa_op(query, key, value, additive_mask=None, dropout_mask=None, scale: float = 1.0,
            dropout_scale: float = 1.0, causal: bool = False) -> Tensor:
    """The attention output (the op's ``lse`` output stays with its node for the backward)."""
    return apply(ScaledDotProductAttention, (query, key, value, additive_mask, dropout_mask),
                 {"scale": float(scale), "drop_scale": float(dropout_scale), "causal": bool(causal)})[0]


# ----------------------------------------------------------------------------------------------------------
# distances (a composite of public ops)
# ----------------------------------------------------------------------------------------------------------
@declare(namespaces=("pylucid", "pylucid.nn.functional"), method=False)
def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between the rows of ``input`` ``(N, M)``: ``||x_i - x_j||_p`` for ``i < j``, in
    row-major order, shape ``(N (N - 1) / 2,)``. ``p = 0`` counts the differing coordinates; the gradient is 0 at
    a zero distance (PyTorch's rule).

    >>> import pylucid
    >>> pdist(pylucid.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).round(decimals=4)
    tensor([5.0000, 1.0000, 4.2426])
    """
    import pylucid as pl

    check_tensor(input, "pdist")
    if input.ndim != 2:
        raise ShapeMismatch(f"pdist: expected a 2-D input (N, M), got shape {list(input.shape)}")
    if not input.is_floating_point():
        raise TypeError(f"pdist: expected a floating input, got {input.dtype}")
    if not p >= 0:
        raise ValueError(f"pdist: p must be non-negative, got {p}")
    n = input.shape[0]
    rows = pl.arange(n, device=input.device)
    pairs = pl.nonzero(rows.reshape(n, 1) < rows.reshape(1, n))
    return _p_norm_last(pl.abs(input[pairs[:, 0]] - input[pairs[:, 1]]), p)


def _p_norm_last(d: Tensor, p: float) -> Tensor:
    """``||.||_p`` over the last dim of the absolute differences ``d``, with gradient 0 at a zero distance."""
    import pylucid as pl

    if p == 0:  # differentiable with gradient 0, as in PyTorch
        return (d != 0).sum(-1).to(d.dtype) + 0.0 * d.sum(-1)
    if p == 1:
        return d.sum(-1)
    if p == float("inf"):
        return pl.amax(d, -1) if d.shape[-1] else d.sum(-1)
    s = (d * d if p == 2 else d ** p).sum(-1)
    pos = s > 0
    # s^(1/p) with gradient 0 (not 0 * inf) at s = 0
    return pl.where(pos, pl.where(pos, s, 1.0 + 0.0 * s) ** (1.0 / p), 0.0 * s)


# ---------------------------------------------------------------- PyTorch's native normalization entry points
def _norm_stats(x, dims, eps):
    """Mean and ``1 / sqrt(biased variance + eps)`` over ``dims`` (kept), as the native kernels return them."""
    import pylucid as pl

    mean = pl.mean(x, dims, keepdim=True)
    rstd = pl.rsqrt(pl.var(x, dims, correction=0, keepdim=True) + eps)
    return mean, rstd


@declare(method=False)
def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None, bias: Tensor | None,
                      eps: float) -> tuple:
    """``(layer_norm(input, normalized_shape, weight, bias, eps), mean, rstd)`` (``torch.native_layer_norm``):
    ``mean`` and ``rstd = 1 / sqrt(var + eps)`` (biased variance) are taken over the trailing
    ``normalized_shape`` dims and keep them as size 1 (differentiable; PyTorch's carry no gradient).

    >>> import pylucid
    >>> out, mean, rstd = pylucid.native_layer_norm(pylucid.tensor([[1.0, 3.0]]), (2,), None, None, 0.0)
    >>> out, mean, rstd
    (tensor([[-1.,  1.]]), tensor([[2.]]), tensor([[1.]]))
    """
    from ..nn import functional as F

    check_tensor(input, "native_layer_norm")
    n = len(tuple(normalized_shape))
    out = F.layer_norm(input, tuple(normalized_shape), weight, bias, eps)
    mean, rstd = _norm_stats(input, tuple(range(input.ndim - n, input.ndim)), eps)
    return out, mean, rstd


@declare(method=False)
def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int, C: int, HxW: int,  # noqa: N803
                      group: int, eps: float) -> tuple:
    """``(group_norm(input, group, weight, bias, eps), mean, rstd)`` (``torch.native_group_norm``): ``mean`` and
    ``rstd = 1 / sqrt(var + eps)`` (biased variance) of each sample's group, shape ``(N, group)``; as in PyTorch
    all three outputs are differentiable. ``N``, ``C``, ``HxW`` restate the input's shape ``(N, C, *)``.

    >>> import pylucid
    >>> out, mean, rstd = pylucid.native_group_norm(pylucid.tensor([[[1.0], [3.0]]]), None, None, 1, 2, 1, 1, 0.0)
    >>> out.flatten(), mean, rstd
    (tensor([-1.,  1.]), tensor([[2.]]), tensor([[1.]]))
    """
    import pylucid as pl

    from ..nn import functional as F

    check_tensor(input, "native_group_norm")
    if input.shape[:2] != (N, C) or input.numel() != N * C * HxW:
        raise ShapeMismatch(f"native_group_norm: input of shape {tuple(input.shape)} does not match N={N}, C={C}, "
                            f"HxW={HxW}; accepted: an input of shape (N, C, *) with HxW elements per channel")
    out = F.group_norm(input, group, weight, bias, eps)
    mean, rstd = _norm_stats(pl.reshape(input, (N, group, (C // group) * HxW)), (-1,), eps)
    return out, mean.squeeze(-1), rstd.squeeze(-1)


@declare(method=False)
def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                      running_var: Tensor | None, training: bool, momentum: float, eps: float) -> tuple:
    """``(batch_norm(...), save_mean, save_invstd)`` (``torch.native_batch_norm``): in training, the batch mean and
    ``1 / sqrt(var + eps)`` (biased variance) per channel (dim 1), and ``running_mean``/``running_var`` are
    updated in place as ``batch_norm`` does; in evaluation both saved statistics are empty. They are
    differentiable (PyTorch's carry no gradient).

    >>> import pylucid
    >>> out, m, s = pylucid.native_batch_norm(pylucid.tensor([[1.0], [3.0]]), None, None, None, None, True, 0.1, 0.0)
    >>> out.flatten(), m, s
    (tensor([-1.,  1.]), tensor([2.]), tensor([1.]))
    """
    import pylucid as pl

    from ..nn import functional as F

    check_tensor(input, "native_batch_norm")
    if not isinstance(training, bool):
        raise TypeError(f"native_batch_norm: training must be a bool, got {type(training).__name__}")
    for name, v in (("momentum", momentum), ("eps", eps)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"native_batch_norm: {name} must be a float, got {type(v).__name__}")
    x = input
    if training:
        dims = (0, *range(2, x.ndim))
        mean, rstd = _norm_stats(x, dims, eps)
        mean, rstd = mean.reshape(-1), rstd.reshape(-1)
    else:
        mean = rstd = pl.zeros(0, dtype=x.dtype, device=x.device)
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    return out, mean, rstd


# ---------------------------------------------------------------- PyTorch's grid sampler entry points
_GRID_MODES = ("bilinear", "nearest", "bicubic")
_GRID_PADDINGS = ("zeros", "border", "reflection")


def _grid_sampler(op, input, grid, interpolation_mode, padding_mode, align_corners, ndim):
    from ..nn import functional as F

    check_tensor(input, op)
    check_tensor(grid, op)
    if input.ndim != ndim:
        raise ShapeMismatch(f"{op}: expected a {ndim}-D input, got {input.ndim}-D of shape {tuple(input.shape)}")
    if interpolation_mode not in range(len(_GRID_MODES)) or padding_mode not in range(len(_GRID_PADDINGS)):
        raise ValueError(f"{op}: interpolation_mode {interpolation_mode!r} / padding_mode {padding_mode!r}; accepted: "
                         "0 (bilinear), 1 (nearest), 2 (bicubic) and 0 (zeros), 1 (border), 2 (reflection)")
    if not isinstance(align_corners, bool):
        raise TypeError(f"{op}: align_corners must be a bool, got {type(align_corners).__name__}")
    return F.grid_sample(input, grid, _GRID_MODES[interpolation_mode], _GRID_PADDINGS[padding_mode], align_corners)


@declare(method=False)
def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """``nn.functional.grid_sample`` of a 4-D input with the modes as integers (``torch.grid_sampler_2d``):
    ``interpolation_mode`` 0 bilinear, 1 nearest, 2 bicubic; ``padding_mode`` 0 zeros, 1 border, 2 reflection.

    >>> import pylucid
    >>> x = pylucid.arange(4.0).reshape(1, 1, 2, 2)
    >>> pylucid.grid_sampler_2d(x, pylucid.zeros(1, 1, 1, 2), 0, 0, False)
    tensor([[[[1.5000]]]])
    """
    return _grid_sampler("grid_sampler_2d", input, grid, interpolation_mode, padding_mode, align_corners, 4)


@declare(method=False)
def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """``nn.functional.grid_sample`` of a 5-D input with the modes as integers (``torch.grid_sampler_3d``):
    ``interpolation_mode`` 0 bilinear (trilinear), 1 nearest; ``padding_mode`` 0 zeros, 1 border, 2 reflection.

    >>> import pylucid
    >>> x = pylucid.arange(8.0).reshape(1, 1, 2, 2, 2)
    >>> pylucid.grid_sampler_3d(x, pylucid.zeros(1, 1, 1, 1, 3), 0, 0, True)
    tensor([[[[[3.5000]]]]])
    """
    return _grid_sampler("grid_sampler_3d", input, grid, interpolation_mode, padding_mode, align_corners, 5)
