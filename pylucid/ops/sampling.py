"""Samplers with a reparameterised gradient: ``_standard_gamma`` (with ``_standard_gamma_grad``) and the
non-differentiable ``binomial`` draw; what ``pylucid.distributions`` builds Gamma, Chi2, Beta, Dirichlet and
Binomial samples from.

Implicit reparameterisation (Figurnov et al. 2018, as PyTorch's ``_standard_gamma``): a draw
``x ~ Gamma(alpha, 1)`` is ``x = F^{-1}(u; alpha)`` for a uniform ``u`` independent of ``alpha``, where
``F(x; alpha) = P(alpha, x)`` is the regularised lower incomplete gamma function. Holding ``u = F(x; alpha)``
fixed and differentiating,

    dx/dalpha = -(dF/dalpha)(x; alpha) / (dF/dx)(x; alpha) = -(dP/dalpha)(alpha, x) / (x^(alpha-1) e^-x / Gamma(alpha)).

``_standard_gamma_grad(alpha, x)`` evaluates this with PyTorch's three approximations (the same
constants, so the values agree with ``torch._standard_gamma_grad``):

- ``x < 0.8``: the series ``P(alpha, x) = x^alpha sum_k (-x)^k / (k! (alpha + k))`` (six terms) divided by
  ``Gamma(alpha)``, differentiated in ``alpha`` term by term;
- ``alpha > 8``: Rice's saddle-point expansion of the gamma CDF (a separate polynomial in
  ``|x - alpha| <= 0.1 alpha``, where the expansion is singular);
- otherwise: a bivariate rational approximation in ``u = log(x / alpha)``, ``v = log(alpha)``
  (``exp(p(u, v) / q(u, v))``, fitted by Pyro).

The op ``standard_gamma`` returns the draw (drawn by the caller from pylucid's generator, like dropout's mask)
and its backward is ``g * _standard_gamma_grad(alpha, x)`` written in pylucid ops on the saved output, so the
second derivative also follows the chain rule through ``x(alpha)``.
"""

from __future__ import annotations

from .._tensor import Tensor, _new_tensor
from ..errors import DtypeMismatch
from ._op import Op, apply
from ._utils import check_tensor
from .registry import declare
from .schema import KEEP_INPUT, OpSchema

_TINY = {"float16": 6.103515625e-05, "bfloat16": 1.1754943508222875e-38, "float32": 1.1754943508222875e-38,
         "float64": 2.2250738585072014e-308}

# the rational approximation's coefficients: coef_v[i] = C0[i] + u (C1[i] + u C2[i])
_RATIONAL = (
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1.0, 0.32668115, 0.10406089, 0.0014179084),
    (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
    (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
     -1.5247877e-07),
)


class StandardGamma(Op):
    """``x ~ Gamma(alpha, 1)``: the caller's draw ``sample`` returned with the implicit gradient
    ``dx/dalpha = _standard_gamma_grad(alpha, x)`` (module docstring)."""

    schema = OpSchema("standard_gamma", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True,
                      deterministic=False, deterministic_note="the draw comes from the random generator; seed it "
                                                              "with pylucid.manual_seed for reproducible draws",
                      family="sampling")
    promote_args = (0,)

    @staticmethod
    def forward(be, alpha, sample):
        return sample.astype(alpha.dtype, copy=True)

    def backward(self, g):
        return g * _standard_gamma_grad(self.input(0), self.output(0)), None


@declare(StandardGamma, method=False)
def _standard_gamma(input: Tensor, generator=None) -> Tensor:
    """Draws from ``Gamma(input, 1)`` (shape and dtype of ``input``), differentiable in ``input`` by implicit
    reparameterisation (module docstring). Draws that underflow are clamped to the dtype's smallest normal
    number, as PyTorch does.

    >>> import pylucid
    >>> x = pylucid._standard_gamma(pylucid.full((3,), 2.0), generator=pylucid.Generator().manual_seed(0))
    >>> x.shape, bool((x > 0).all())
    ((3,), True)
    """
    from ..random import _gen_for

    check_tensor(input, "_standard_gamma")
    if not input.dtype.is_floating_point:
        raise TypeError(f"_standard_gamma: expected a floating tensor, got {input.dtype}")
    dev = input.device
    be = dev.backend
    src = _gen_for(dev, generator)._source()
    alpha = input._data.astype("float64")
    # PyTorch draws 0 (then clamped to the smallest normal number) for an alpha that is not positive or is NaN,
    # and inf for an infinite one; NumPy's sampler refuses them
    bad = ~(alpha > 0)
    inf = be.isinf(alpha)
    with be.device_ctx():
        raw = src.standard_gamma(be.where(bad | inf, 1.0, alpha))
        raw = be.asarray(raw)
        raw = be.where(bad, 0.0, be.where(inf, float("inf"), raw)).astype(input._data.dtype, copy=False)
    draw = _new_tensor(raw, dev).clamp(min=_TINY[input.dtype.name])
    return apply(StandardGamma, (input, draw))


@declare(method=False)
def _standard_gamma_grad(input: Tensor, output: Tensor) -> Tensor:
    """``dx/dalpha`` of a ``Gamma(alpha, 1)`` draw ``x`` (``input`` = alpha, ``output`` = x), by PyTorch's
    approximations (module docstring); NaN results of the series branch become 0, as in PyTorch.

    >>> import pylucid
    >>> g = pylucid._standard_gamma_grad(pylucid.tensor([1.0]), pylucid.tensor([0.5]))
    >>> round(g.item(), 3)  # torch._standard_gamma_grad gives the same
    0.807
    """
    import pylucid as pl

    check_tensor(input, "_standard_gamma_grad")
    check_tensor(output, "_standard_gamma_grad")
    if input.dtype is not output.dtype:
        raise DtypeMismatch(f"_standard_gamma_grad: input ({input.dtype.name}) and output ({output.dtype.name}) must "
                            "have the same dtype, as in PyTorch")
    with input._device.backend.errstate():  # NaN/inf draws give NaN gradients, as PyTorch, without warnings
        return _standard_gamma_grad_of(pl, *pl.broadcast_tensors(input, output))


def _standard_gamma_grad_of(pl, alpha, x):
    """The body of :func:`_standard_gamma_grad` on broadcast tensors."""
    small = x < 0.8
    large = (alpha > 8.0) & ~small
    # each branch sees only safe arguments where it is not selected, so no NaN / inf reaches the gradients
    one = pl.ones_like(x)
    # -- Taylor series for small x
    xs = pl.where(small, x, 0.5 * one)
    numer = one
    denom = alpha
    series1 = numer / denom
    series2 = numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-xs / i)
        denom = denom + 1
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    pow_x_alpha = pl.pow(xs, alpha)
    gamma_pdf = pl.pow(xs, alpha - 1) * pl.exp(-xs)
    gamma_cdf = pow_x_alpha * series1
    gamma_cdf_alpha = (pl.log(xs) - pl.special.digamma(alpha)) * gamma_cdf - pow_x_alpha * series2
    res_small = -gamma_cdf_alpha / gamma_pdf
    res_small = pl.where(pl.isnan(res_small), pl.zeros_like(res_small), res_small)
    # -- Rice saddle-point expansion for large alpha
    al = pl.where(large, alpha, 10.0 * one)
    xl = pl.where(large, x, 5.0 * one)
    near = (0.9 * al <= xl) & (xl <= 1.1 * al)
    numer_1 = 1 + 24 * al * (1 + 12 * al)
    numer_2 = 1440 * (al * al) + 6 * xl * (53 - 120 * xl) - 65 * xl * xl / al + al * (107 + 3600 * xl)
    res_near = numer_1 * numer_2 / (1244160 * (al * al) * (al * al))
    xf = pl.where(near, 0.5 * al, xl)  # away from x = alpha, where the far formula is singular
    den = pl.sqrt(8 * al)
    term2 = den / (al - xf)
    term3 = pl.pow(xf - al - al * pl.log(xf / al), -1.5)
    term23 = pl.where(xf < al, term2 - term3, term2 + term3)
    term1 = pl.log(xf / al) * term23 - pl.sqrt(2 / al) * (al + xf) / ((al - xf) * (al - xf))
    stirling = 1 + 1 / (12 * al) * (1 + 1 / (24 * al))
    res_far = -stirling * (xf * term1) / den
    res_large = pl.where(near, res_near, res_far)
    # -- bivariate rational approximation otherwise
    mid = ~small & ~large
    am = pl.where(mid, alpha, one)
    xm = pl.where(mid, x, one)
    u = pl.log(xm / am)
    v = pl.log(am)
    c = [_RATIONAL[0][i] + u * (_RATIONAL[1][i] + u * _RATIONAL[2][i]) for i in range(8)]
    p = c[0] + v * (c[1] + v * (c[2] + v * c[3]))
    q = c[4] + v * (c[5] + v * (c[6] + v * c[7]))
    res_mid = pl.exp(p / q)
    return pl.where(small, res_small, pl.where(large, res_large, res_mid))


@declare(method=False)
def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Binomial draws: successes in ``count`` trials of probability ``prob`` (broadcast together; the dtype
    of ``count``). Not differentiable.

    >>> import pylucid
    >>> pylucid.binomial(pylucid.tensor([0.0, 5.0]), pylucid.tensor([0.3, 1.0]))
    tensor([0., 5.])
    """
    import pylucid as pl

    from ..random import _gen_for

    check_tensor(count, "binomial")
    check_tensor(prob, "binomial")
    if not count.dtype.is_floating_point:
        raise DtypeMismatch(f"binomial: count must be a floating tensor, got {count.dtype.name} (as PyTorch)")
    if prob.dtype is not count.dtype:
        raise DtypeMismatch(f"binomial: prob ({prob.dtype.name}) must have count's dtype ({count.dtype.name})")
    count_b, prob_b = pl.broadcast_tensors(count.detach(), prob.detach())
    if count_b.numel():
        be = count.device.backend
        c = count_b._data
        # (comparisons, not min/max: a NaN, which gives a NaN draw, must not hide an invalid value)
        if bool(be.any(c < 0)) or bool(be.any(be.isinf(c))):
            raise ValueError("binomial: count must be non-negative and finite")
        if bool(be.any(prob_b._data < 0)) or bool(be.any(prob_b._data > 1)):
            raise ValueError("binomial: prob must be in [0, 1]")
    dev = count.device
    be = dev.backend
    src = _gen_for(dev, generator)._source()
    with be.device_ctx():
        c, pr = count_b._data, prob_b._data.astype("float64")
        nan = be.isnan(c) | be.isnan(pr)  # NaN in, NaN out, as PyTorch
        n = be.where(nan, 0, c).astype("int64")
        draw = be.asarray(src.binomial(n, be.where(nan, 0.0, pr))).astype(count._data.dtype, copy=False)
        draw = be.where(nan, be.asarray(float("nan"), dtype=draw.dtype), draw)
    return _new_tensor(draw, dev)
