"""Activation functions: sigmoid, tanh, the ReLU family, GELU, SiLU, softplus and friends.

Each is declared once, in ``pylucid`` and in ``pylucid.nn.functional``; the
``nn.functional`` forms take PyTorch's ``inplace=False`` argument (``inplace=True``
writes the result into ``input``, as the ``name_`` variant does). relu and
gelu, the activations of the benchmarked models, have a first-order fast path
on raw arrays besides the graph-mode formula. Non-smooth points follow
PyTorch: ``relu'(0) = 0``, ``hardtanh``/``relu6`` pass no gradient at their
boundaries (``clamp`` does), ``leaky_relu'(0) = negative_slope``, ``elu'(0) = alpha``.
"""

from __future__ import annotations

from .. import dtypes as _dt
from .._state import state as _state
from .._tensor import _TENSOR_TYPES, Tensor
from ..errors import DtypeMismatch
from ._op import Op, check_inplace_leaf, commit_inplace
from ._utils import check_tensor, conj_if_complex
from .compare import gt, le, logical_and, lt
from .elementwise import _unary, _via_float32, abs, add, div, erf, exp, mul, neg, sub
from .indexing import where
from .registry import declare
from .schema import FORCE_FP32, KEEP_INPUT, PROMOTE, OpSchema

_SQRT1_2 = 0.7071067811865476  # 1/sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327  # 1/sqrt(2 pi)
_GELU_K = 0.7978845608028654  # sqrt(2/pi)
_GELU_C = 0.044715
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


#: where every activation is exported
_NAMESPACES = ("pylucid", "pylucid.nn.functional")


def _result(input: Tensor, out: Tensor, inplace: bool, name: str) -> Tensor:
    """``out``, or (``inplace=True``) ``out`` written into ``input``, as the in-place variant ``name`` does."""
    if not inplace:
        return out
    check_inplace_leaf(input, name)
    return commit_inplace(input, out, name)


# ---------------------------------------------------------------- sigmoid, logit, tanh
class Sigmoid(Op):
    """``y = 1 / (1 + e^-x)``; saves its output: ``dx = g y (1 - y)`` (``g conj(y (1 - y))`` for complex).

    The forward is scipy's ``expit`` (cupyx's on CUDA): no overflow warning and
    exact 0/1 saturation for large ``|x|``. ``expit`` has no complex kernel:
    complex input uses ``1 / (1 + exp(-x))``, as PyTorch.
    """

    schema = OpSchema("sigmoid", amp_policy=PROMOTE, saves_output=True, real_valued=True, family="activation")

    @staticmethod
    def forward(be, x):
        if x.dtype.kind == "c":
            with be.errstate():
                return 1 / (1 + be.exp(-x))
        return _via_float32(be, be.special.expit, x)

    def backward(self, g):
        y = self.output()
        d = mul(y, sub(1, y))
        return mul(g, conj_if_complex(d))


@declare(Sigmoid, namespaces=_NAMESPACES, inplace=True, inplace_functions=True)
def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid ``1 / (1 + exp(-input))`` (``pylucid.special.expit``); no overflow for large ``|x|``.

    >>> import pylucid
    >>> pylucid.sigmoid(pylucid.tensor([0.0, 1000.0, -1000.0]))
    tensor([0.5000, 1.0000, 0.0000])
    """
    return _unary(Sigmoid, input)


class Logit(Op):
    """``y = log(z / (1 - z))`` with ``z = clamp(x, eps, 1 - eps)`` when ``eps`` is given.

    ``dx = g / (x (1 - x))``; outside ``[eps, 1 - eps]`` the gradient is 0
    (the clamp), and without ``eps`` it is NaN outside ``[0, 1]`` (PyTorch).
    """

    schema = OpSchema("logit", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="activation",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, eps=None):
        with be.errstate():
            # a NaN eps clamps nothing (PyTorch's kernel compares with it: every comparison is false)
            z = x if eps is None or eps != eps else be.clip(x, x.dtype.type(eps), x.dtype.type(1 - eps))
            return be.log(z / (1 - z)).astype(x.dtype, copy=False)

    def backward(self, g):
        from .compare import logical_or

        x = self.input(0)
        eps = self.params.get("eps")
        d = div(g, mul(x, sub(1, x)))
        if eps is None:
            return where(logical_or(lt(x, 0), gt(x, 1)), float("nan"), d)
        return where(logical_or(lt(x, eps), gt(x, 1 - eps)), 0.0, d)


@declare(Logit, inplace=True, inplace_functions=True)
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """Inverse sigmoid ``log(p / (1 - p))``; with ``eps``, ``p`` is first clamped to ``[eps, 1 - eps]``.

    ``logit(0) = -inf``, ``logit(1) = inf``, NaN outside ``[0, 1]``.

    >>> import pylucid
    >>> pylucid.logit(pylucid.tensor([0.5, 0.0]), eps=1e-6)
    tensor([  0.0000, -13.8155])
    """
    if eps is not None and not isinstance(eps, (int, float)):
        raise TypeError(f"logit: eps must be a float or None, got {type(eps).__name__}")
    return _unary(Logit, input, {"eps": eps})


class Tanh(Op):
    """``y = tanh x``; saves its output: ``dx = g (1 - y^2)`` (``g conj(1 - y^2)`` for complex)."""

    schema = OpSchema("tanh", amp_policy=PROMOTE, saves_output=True, real_valued=True, family="activation")

    @staticmethod
    def forward(be, x):
        return be.tanh(x)

    def backward(self, g):
        y = self.output()
        d = sub(1, mul(y, y))
        return mul(g, conj_if_complex(d))


@declare(Tanh, namespaces=_NAMESPACES, inplace=True, inplace_functions=True)
def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent.

    >>> import pylucid
    >>> pylucid.tanh(pylucid.tensor([0.0, 100.0]))
    tensor([0., 1.])
    """
    return _unary(Tanh, input)


# ---------------------------------------------------------------- the ReLU family
class Relu(Op):
    """``y = max(x, 0)``; saves its output (``x > 0`` iff ``y > 0``): ``dx = g [not y <= 0]``, ``relu'(0) = 0``."""

    schema = OpSchema("relu", amp_policy=KEEP_INPUT, saves_output=True, family="activation",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x):
        return be.relu(x)  # one kernel on CUDA (half storage included); NumPy's maximum on the CPU

    def backward(self, g):
        # PyTorch's threshold_backward: zero where y <= 0, so a NaN input passes g through
        return where(le(self.output(), 0), 0.0, g)

    def backward_fast(self, be, g):
        return be.relu_backward(self.output_array(), g)  # where(y <= 0, 0, g); one kernel on CUDA


@declare(Relu, namespaces=_NAMESPACES, inplace=True, inplace_functions=True)
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """Rectified linear unit ``max(input, 0)``; NaN stays NaN; integer tensors stay integer.

    >>> import pylucid
    >>> pylucid.relu(pylucid.tensor([-1.0, 0.0, 2.0]))
    tensor([0., 0., 2.])
    """
    if isinstance(input, Tensor) and input._data.dtype == bool:
        raise TypeError("relu: bool tensors are not supported")
    return _result(input, _unary(Relu, input), inplace, "relu_")


class Hardtanh(Op):
    """``y = clamp(x, min_val, max_val)``; ``dx = g`` strictly inside, 0 at and beyond the bounds (PyTorch)."""

    schema = OpSchema("hardtanh", amp_policy=KEEP_INPUT, saves_input=True, family="activation",
                      accepts=("float", "int"))

    @staticmethod
    def forward(be, x, min_val=-1.0, max_val=1.0):
        t = x.dtype.type
        return be.minimum(be.maximum(x, t(min_val)), t(max_val))

    def backward(self, g):
        x = self.input(0)
        p = self.params
        return where(logical_and(gt(x, p["min_val"]), lt(x, p["max_val"])), g, 0.0)


class Relu6(Hardtanh):
    """``y = min(max(x, 0), 6)`` = ``hardtanh(x, 0, 6)``; no gradient at 0 and 6 (PyTorch)."""

    schema = OpSchema("relu6", amp_policy=KEEP_INPUT, saves_input=True, family="activation",
                      accepts=("float", "int"))


@declare(Hardtanh, namespaces=_NAMESPACES, method=False, inplace=True, inplace_functions=True)
def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``clamp(input, min_val, max_val)`` with PyTorch's hardtanh gradient: zero at the bounds.

    >>> import pylucid
    >>> pylucid.hardtanh(pylucid.tensor([-3.0, 0.5, 3.0]))
    tensor([-1.0000,  0.5000,  1.0000])
    """
    if max_val < min_val:
        raise ValueError(f"hardtanh: max_val ({max_val}) must be greater than or equal to min_val ({min_val})")
    return _result(input, _unary(Hardtanh, input, {"min_val": min_val, "max_val": max_val}), inplace, "hardtanh_")


@declare(Relu6, namespaces=_NAMESPACES, method=False)
def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(input, 0), 6)``.

    >>> import pylucid
    >>> pylucid.relu6(pylucid.tensor([-1.0, 3.0, 9.0]))
    tensor([0., 3., 6.])
    """
    return _result(input, _unary(Relu6, input, {"min_val": 0.0, "max_val": 6.0}), inplace, "relu6")


class LeakyRelu(Op):
    """``y = x`` for ``x > 0`` else ``negative_slope x``; ``dx = g`` or ``g negative_slope`` (slope at 0)."""

    schema = OpSchema("leaky_relu", amp_policy=KEEP_INPUT, saves_input=True, real_valued=True, family="activation",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, negative_slope=0.01):
        s = x.dtype.type(negative_slope)
        # a select by max (slope in (0, 1]) or min (slope > 1): the same values as the where, NaN included,
        # in one cheap pass (NumPy's where with a computed condition is several times slower)
        with be.errstate():  # ml_dtypes' bfloat16 maximum warns on NaN
            if 0 < negative_slope <= 1:
                return be.maximum(x, x * s)
            if negative_slope > 1:
                return be.minimum(x, x * s)
            return be.where(x > 0, x, x * s)

    def _branch(self):
        """The saved tensor whose sign picks the branch: the input (LeakyReluOnOutput: output)."""
        return self.input(0)

    def _branch_array(self):
        return self.input(0)._data

    def backward(self, g):
        return where(gt(self._branch(), 0), g, mul(g, self.params["negative_slope"]))

    def backward_fast(self, be, g):
        x = self._branch_array()
        s = g.dtype.type(self.params["negative_slope"])
        if x.shape == g.shape and x.dtype == g.dtype and g.dtype.kind == "f" and (g.dtype.type(1) - s) + s == 1:
            # g times a factor that is exactly 1 where x > 0 and exactly the slope elsewhere (the check above:
            # (1 - s) + s rounds to 1 in this dtype), so each product equals the where's choice
            d = (x > 0).astype(g.dtype)
            d *= g.dtype.type(1) - s
            d += s
            d *= g
            return d
        return be.where(x > 0, g, g * s)


class LeakyReluOnOutput(LeakyRelu):
    """:class:`LeakyRelu` for ``inplace=True`` with a positive slope: the output is saved instead of
    the input (its sign is the input's, NaN included, so the gradient is the same), as PyTorch's
    ``leaky_relu_`` backward reads the result. The in-place write then needs no snapshot of the old
    input, which had cost two more passes over it and an allocation (DCGAN's discriminator: 100 to
    170 us against 60 to 150 us per call)."""

    # the op is leaky_relu, its one registered schema (what it computes, its dtypes, its name for
    # ONNX, vmap and forward-mode rules); only what the node keeps differs, the dispatch reading
    # these two class facts
    _saves_input, _saves_output = False, True

    def _branch(self):
        return self.output()

    def _branch_array(self):
        return self.output_array()


@declare(LeakyRelu, namespaces=_NAMESPACES, method=False, inplace=True, inplace_functions=True)
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, ``negative_slope * input`` elsewhere.

    >>> import pylucid
    >>> pylucid.leaky_relu(pylucid.tensor([-2.0, 3.0]), 0.5)
    tensor([-1.,  3.])
    """
    if not isinstance(negative_slope, (int, float)):
        raise TypeError(f"leaky_relu: negative_slope must be a number, got {type(negative_slope).__name__}")
    op = LeakyReluOnOutput if inplace and negative_slope > 0 else LeakyRelu
    out = _unary(op, input, {"negative_slope": negative_slope})
    return _result(input, out, inplace, "leaky_relu_")


class Elu(Op):
    """``y = scale x`` for ``x > 0`` else ``scale alpha (e^(input_scale x) - 1)`` (PyTorch's elu kernel).

    ``dx = g scale`` for ``x > 0`` else ``g scale alpha input_scale e^(input_scale x)``;
    at 0 the negative branch (``alpha`` for plain elu). ``selu`` and ``celu`` are
    this formula with other constants.
    """

    schema = OpSchema("elu", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="activation",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x, alpha=1.0, scale=1.0, input_scale=1.0):
        t = x.dtype.type
        # expm1 of min(x, 0): the positive side is not used and must not overflow
        neg_side = be.expm1(be.minimum(x, t(0)) * t(input_scale)) * t(alpha * scale)
        return be.where(x > 0, x * t(scale), neg_side)

    def backward(self, g):
        x = self.input(0)
        p = self.params
        neg_side = mul(g, mul(exp(mul(x, p["input_scale"])), p["alpha"] * p["scale"] * p["input_scale"]))
        return where(gt(x, 0), mul(g, p["scale"]), neg_side)


class Selu(Elu):
    """``selu(x) = scale elu(x, alpha)`` with the self-normalising constants."""

    schema = OpSchema("selu", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="activation",
                      accepts=("float", "int", "bool"))


@declare(Elu, namespaces=_NAMESPACES, method=False, inplace=True, inplace_functions=True)
def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Exponential linear unit: ``input`` where positive, ``alpha * (exp(input) - 1)`` elsewhere.

    >>> import pylucid
    >>> pylucid.elu(pylucid.tensor([-1.0, 2.0]))
    tensor([-0.6321,  2.0000])
    """
    return _result(input, _unary(Elu, input, {"alpha": float(alpha), "scale": 1.0, "input_scale": 1.0}), inplace,
                   "elu_")


@declare(Selu, namespaces=_NAMESPACES, method=False, inplace=True, inplace_functions=True)
def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """Scaled ELU with ``alpha = 1.6733`` and ``scale = 1.0507`` (Klambauer et al.).

    >>> import pylucid
    >>> pylucid.selu(pylucid.tensor([1.0]))
    tensor([1.0507])
    """
    return _result(input, _unary(Selu, input, {"alpha": _SELU_ALPHA, "scale": _SELU_SCALE, "input_scale": 1.0}),
                   inplace, "selu_")


@declare(Elu, namespaces=_NAMESPACES, method=False, inplace=True, inplace_functions=True)
def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))``: the ``elu`` op with ``input_scale = 1/alpha``.

    >>> import pylucid
    >>> pylucid.celu(pylucid.tensor([-1.0, 2.0]), alpha=2.0)
    tensor([-0.7869,  2.0000])
    """
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    return _result(input, _unary(Elu, input, {"alpha": float(alpha), "scale": 1.0, "input_scale": 1.0 / alpha}),
                   inplace, "celu_")


# ---------------------------------------------------------------- smooth activations
class Gelu(Op):
    """Gaussian error linear unit, one op with ``approximate`` ('none' or 'tanh').

    - ``'none'``: ``y = x Phi(x)``, ``dx = g (Phi(x) + x phi(x))`` (the table's ``gelu_exact``).
    - ``'tanh'``: ``y = x/2 (1 + tanh(k (x + c x^3)))``, ``k = sqrt(2/pi)``, ``c = 0.044715``.
    """

    schema = OpSchema("gelu", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="activation",
                      accepts=("float", "int", "bool"))
    # under CUDA autocast a half input is read as it is (float_out): the kernels compute in float32 and write the
    # float32 result; the input's gradient is written in its dtype, rounded once, as the cast's backward would
    amp_half_args = (0,)

    @staticmethod
    def forward(be, x, approximate="none", derivative=False, float_out=False):
        # float_out (CUDA, half x under autocast; see gelu): the float32 result of the policy from the half x read
        # as it is, with no float32 copy of x
        if float_out:  # a half x under autocast (amp_half_args)
            return be.gelu(x, approximate, float_out=True)
        if derivative and be.name == "cpu":
            # NumPy's float32 erf form writes its derivative next to the output (save_extra);
            # oneDNN's writes none
            return be.gelu(x, approximate, derivative=True)
        # float64 (scipy's exact erf), half, the tanh form; CUDA: one fused kernel each way
        return be.gelu(x, approximate)

    def save_extra(self, arrays, out):
        # ``derivative=True``: the forward wrote ``Phi(x) + x phi(x)`` next to the output, in one allocation
        b = out.base
        self.extra = b[1].reshape(out.shape) if b is not None and b.shape == (2, out.size) else None

    def backward(self, g):
        x0 = self.input(0)
        x = x0.float() if self.params.get("float_out") else x0  # autocast's float32 computation, as forward
        if self.params["approximate"] == "tanh":
            th = tanh(mul(add(x, mul(mul(x, mul(x, x)), _GELU_C)), _GELU_K))
            d_inner = mul(add(mul(mul(x, x), 3 * _GELU_C), 1), _GELU_K)
            d = add(mul(add(th, 1), 0.5), mul(mul(x, 0.5), mul(sub(1, mul(th, th)), d_inner)))
        else:
            cdf = mul(add(erf(mul(x, _SQRT1_2)), 1), 0.5)
            pdf = mul(exp(mul(mul(x, x), -0.5)), _INV_SQRT_2PI)
            d = add(cdf, mul(x, pdf))
        gx = mul(g, d)
        return gx.to(x0.dtype) if gx.dtype != x0.dtype else gx

    def backward_fast(self, be, g):
        d = self.extra
        if d is not None and d.shape == g.shape:
            return (g * d).astype(g.dtype, copy=False)
        x = self.input(0)._data
        # float_out: a float32 g for the half x; the gradient in x's dtype, rounded once (as the cast's backward)
        return be.gelu_backward(g, x, self.params["approximate"]).astype(x.dtype, copy=False)


@declare(Gelu, namespaces=_NAMESPACES, method=False)
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU ``x * Phi(x)`` (``approximate='none'``) or its tanh approximation (``approximate='tanh'``).

    >>> import pylucid
    >>> pylucid.gelu(pylucid.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    >>> pylucid.gelu(pylucid.tensor([1.0]), approximate="tanh")
    tensor([0.8412])
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    # the CPU float32 forward also writes the derivative when a gradient will be asked for
    need = input.__class__ in _TENSOR_TYPES and input._requires_grad and _state.grad_enabled
    return _unary(Gelu, input, {"approximate": approximate, "derivative": need})


class Silu(Op):
    """``y = x sigmoid(x)``; ``dx = g s (1 + x (1 - s))`` with ``s = sigmoid(x)``."""

    schema = OpSchema("silu", amp_policy=PROMOTE, saves_input=True, real_valued=True, family="activation")

    @staticmethod
    def forward(be, x):
        if x.dtype.kind == "c":  # expit has no complex loop: x / (1 + e^-x)
            return x / (1 + be.exp(-x))
        return x * _via_float32(be, be.special.expit, x)

    def backward(self, g):
        x = self.input(0)
        s = sigmoid(x)
        return mul(g, conj_if_complex(mul(s, add(mul(x, sub(1, s)), 1))))


@declare(Silu, namespaces=_NAMESPACES, method=False)
def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """Sigmoid linear unit (swish) ``input * sigmoid(input)``.

    >>> import pylucid
    >>> pylucid.silu(pylucid.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7311])
    """
    return _result(input, _unary(Silu, input), inplace, "silu")


class Softplus(Op):
    """``y = log(1 + e^(beta x)) / beta``, and ``y = x`` where ``beta x > threshold`` (PyTorch).

    The log term is computed as ``logaddexp(0, beta x)``: no overflow for any
    ``x``, exact ``e^(beta x)`` tails for very negative ``x``. ``dx = g sigmoid(beta x)``
    (``g`` above the threshold).
    """

    schema = OpSchema("softplus", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="activation")

    @staticmethod
    def forward(be, x, beta=1.0, threshold=20.0):
        t = x.dtype.type
        bx = x * t(beta)
        return be.where(bx > threshold, x, be.logaddexp(t(0), bx) / t(beta))

    def backward(self, g):
        x = self.input(0)
        beta, threshold = self.params["beta"], self.params["threshold"]
        bx = mul(x, beta)
        return where(gt(bx, threshold), g, mul(g, sigmoid(bx)))


@declare(Softplus, namespaces=_NAMESPACES, method=False)
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """Smooth ReLU ``log(1 + exp(beta * input)) / beta``; linear where ``beta * input > threshold``.

    Stable for large and very negative inputs (``softplus(-100) = 3.7e-44`` in float64, not 0).

    >>> import pylucid
    >>> pylucid.softplus(pylucid.tensor([0.0, 100.0]))
    tensor([  0.6931, 100.0000])
    """
    for k, v in (("beta", beta), ("threshold", threshold)):
        if not isinstance(v, (int, float)):
            raise TypeError(f"softplus: {k} must be a number, got {type(v).__name__}")
    return _unary(Softplus, input, {"beta": beta, "threshold": threshold})


class Mish(Op):
    """``y = x tanh(softplus(x))``; ``dx = g (t + x s (1 - t^2))``, ``t = tanh(softplus x)``, ``s = sigmoid x``."""

    schema = OpSchema("mish", amp_policy=FORCE_FP32, saves_input=True, real_valued=True, family="activation")

    @staticmethod
    def forward(be, x):
        t = x.dtype.type
        return x * be.tanh(be.logaddexp(t(0), x))

    def backward(self, g):
        x = self.input(0)
        t = tanh(softplus(x))
        return mul(g, add(t, mul(mul(x, sigmoid(x)), sub(1, mul(t, t)))))


@declare(Mish, namespaces=_NAMESPACES, method=False)
def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """Mish ``input * tanh(softplus(input))`` (Misra, 2019).

    >>> import pylucid
    >>> pylucid.mish(pylucid.tensor([0.0, 1.0]))
    tensor([0.0000, 0.8651])
    """
    return _result(input, _unary(Mish, input), inplace, "mish")


class Hardsigmoid(Op):
    """``y = relu6(x + 3) / 6``; ``dx = g / 6`` strictly inside ``(-3, 3)``, else 0 (PyTorch).

    The reference table calls this op ``hard_sigmoid``.
    """

    schema = OpSchema("hardsigmoid", amp_policy=KEEP_INPUT, saves_input=True, real_valued=True, family="activation",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x):
        t = x.dtype.type
        return be.minimum(be.maximum(x + t(3), t(0)), t(6)) / t(6)

    def backward(self, g):
        x = self.input(0)
        return where(logical_and(gt(x, -3), lt(x, 3)), div(g, 6), 0.0)


class Hardswish(Op):
    """``y = x relu6(x + 3) / 6``; ``dx = 0`` up to -3, ``g (x/3 + 1/2)`` inside ``(-3, 3)``, ``g`` from 3 (PyTorch).

    The reference table calls this op ``hard_swish``.
    """

    schema = OpSchema("hardswish", amp_policy=KEEP_INPUT, saves_input=True, real_valued=True, family="activation",
                      accepts=("float", "int", "bool"))

    @staticmethod
    def forward(be, x):
        t = x.dtype.type
        return x * be.minimum(be.maximum(x + t(3), t(0)), t(6)) / t(6)

    def backward(self, g):
        x = self.input(0)
        return where(le(x, -3), 0.0, where(lt(x, 3), mul(g, add(div(x, 3), 0.5)), g))


@declare(Hardsigmoid, namespaces=_NAMESPACES, method=False)
def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """Piecewise-linear sigmoid ``relu6(input + 3) / 6``.

    >>> import pylucid
    >>> pylucid.hardsigmoid(pylucid.tensor([-4.0, 0.0, 4.0]))
    tensor([0.0000, 0.5000, 1.0000])
    """
    return _result(input, _unary(Hardsigmoid, input), inplace, "hardsigmoid")


@declare(Hardswish, namespaces=_NAMESPACES, method=False)
def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * relu6(input + 3) / 6`` (MobileNetV3).

    >>> import pylucid
    >>> pylucid.hardswish(pylucid.tensor([-4.0, 1.0, 4.0]))
    tensor([-0.0000,  0.6667,  4.0000])
    """
    return _result(input, _unary(Hardswish, input), inplace, "hardswish")


# ---------------------------------------------------------------- composites (no op of their own)
@declare(namespaces=_NAMESPACES, method=False)
def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(input)) = -softplus(-input)``: a composite, stable for large ``|x|``.

    >>> import pylucid
    >>> pylucid.logsigmoid(pylucid.tensor([0.0, -100.0]))
    tensor([  -0.6931, -100.0000])
    """
    check_tensor(input, "logsigmoid")
    if not input.dtype.is_floating_point:  # as PyTorch: no integer, bool or complex kernel
        raise DtypeMismatch(f"logsigmoid: input has dtype {input.dtype.name}; logsigmoid accepts float16, "
                            "bfloat16, float32, float64 tensors")
    return neg(softplus(neg(input)))


@declare(namespaces=_NAMESPACES, method=False)
def softsign(input: Tensor) -> Tensor:
    """``input / (1 + |input|)`` (a composite).

    >>> import pylucid
    >>> pylucid.softsign(pylucid.tensor([1.0, -3.0]))
    tensor([ 0.5000, -0.7500])
    """
    return div(input, add(abs(input), 1))


@declare(namespaces=_NAMESPACES, method=False)
def tanhshrink(input: Tensor) -> Tensor:
    """``input - tanh(input)`` (a composite).

    >>> import pylucid
    >>> pylucid.tanhshrink(pylucid.tensor([0.0]))
    tensor([0.])
    """
    return sub(input, tanh(input))


@declare(namespaces=_NAMESPACES, method=False)
def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0 (a composite).

    >>> import pylucid
    >>> pylucid.softshrink(pylucid.tensor([-1.0, 0.2, 1.0]))
    tensor([-0.5000,  0.0000,  0.5000])
    """
    if lambd < 0:
        raise ValueError(f"softshrink: lambd must be >= 0, got {lambd}")
    # the inner branch is x * 0, not 0: NaN stays NaN, as in PyTorch
    return where(gt(input, lambd), sub(input, lambd), where(lt(input, -lambd), add(input, lambd), mul(input, 0.0)))


@declare(namespaces=_NAMESPACES)
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0 (a composite).

    >>> import pylucid
    >>> pylucid.hardshrink(pylucid.tensor([-1.0, 0.2, 1.0]))
    tensor([-1.,  0.,  1.])
    """
    check_tensor(input, "hardshrink")
    if not input.dtype.is_floating_point:  # as PyTorch: no integer, bool or complex kernel
        raise DtypeMismatch(f"hardshrink: input has dtype {input.dtype.name}; hardshrink accepts float16, "
                            "bfloat16, float32, float64 tensors")
    # zero inside the band [-lambd, lambd]; NaN is outside it and stays NaN, as in PyTorch
    return where(logical_and(le(input, lambd), le(-lambd, input)), 0.0, input)


#: the values an integer (or bool) tensor can hold: threshold's ``value`` must fit, as in PyTorch
_INT_RANGE = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-2 ** 15, 2 ** 15 - 1),
              "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1), "bool": (0, 1)}


@declare(namespaces=_NAMESPACES, method=False, inplace=True, inplace_functions=True)
def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``input`` where ``input > threshold``, else ``value`` (a composite).

    >>> import pylucid
    >>> pylucid.threshold(pylucid.tensor([0.5, 2.0]), 1.0, -1.0)
    tensor([-1.,  2.])
    """
    # PyTorch's kernel: ``x <= threshold ? value : x`` (NaN is kept), compared in the op math type (float32 for
    # half inputs); integer inputs take the threshold and value cast to integers and stay integer
    x = input
    if input.dtype.category < _dt.FLOAT:
        lo, hi = _INT_RANGE.get(input.dtype.name, (None, None))
        for name, v in (("threshold", threshold), ("value", value)):
            if lo is not None and not lo <= v <= hi:
                raise ValueError(f"threshold: {name} {v} cannot be converted to {input.dtype.name} without overflow")
        threshold, value = int(threshold), int(value)
    elif input.dtype.itemsize == 2:
        x = input.float()
    return _result(input, where(le(x, threshold), value, input), inplace, "threshold_")


@declare(namespaces=_NAMESPACES, method=False, inplace=True, inplace_functions=True)
def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False, *, generator=None) -> Tensor:
    """Randomized leaky ReLU: ``x`` where ``x > 0``, else ``a x``.

    In training ``a ~ U(lower, upper)`` per element, drawn from pylucid's generator (``generator=``, or the
    global one: ``pylucid.manual_seed``), and the gradient is ``a`` there; in evaluation
    ``a = (lower + upper) / 2`` (``leaky_relu``). A composite.

    >>> import pylucid
    >>> pylucid.rrelu(pylucid.tensor([-3.0, 2.0]), 0.25, 0.75)
    tensor([-1.5000,  2.0000])
    """
    from .. import random as _random

    if not (isinstance(lower, (int, float)) and isinstance(upper, (int, float))) or lower > upper:
        raise ValueError(f"rrelu: expected numbers lower <= upper, got lower={lower!r}, upper={upper!r}")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace=inplace)
    u = _random.rand(*input.shape, generator=generator, dtype=input.dtype, device=input.device)
    out = where(gt(input, 0), input, mul(input, add(mul(u, upper - lower), lower)))
    return _result(input, out, inplace, "rrelu_")
