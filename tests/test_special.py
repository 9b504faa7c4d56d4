"""Special functions beyond the generic suite: the derivatives PyTorch does not implement (they raise, naming the
op and the argument), the edge values of the incomplete gamma and zeta functions, accuracy against mpmath."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid as pl
import pylucid.special as S


@pytest.mark.parametrize("fn, tfn, arg", [(pl.igamma, torch.igamma, "input"), (pl.igammac, torch.igammac, "input"),
                                          (S.zeta, torch.special.zeta, "self")])
def test_gradient_w_r_t_the_first_argument_raises_as_torch(fn, tfn, arg):
    a = pl.tensor([1.5, 2.0], dtype=pl.float64, requires_grad=True)
    x = pl.tensor([0.5, 1.5], dtype=pl.float64)
    with pytest.raises(NotImplementedError, match=rf"{arg!r} is not implemented"):
        fn(a, x).sum().backward()
    ta = torch.tensor([1.5, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(NotImplementedError):
        tfn(ta, torch.tensor([0.5, 1.5], dtype=torch.float64)).sum().backward()


def test_in_place_igamma_matches_torch():
    a, x = np.array([0.5, 2.0, 3.0]), np.array([1.0, 0.5, 4.0])
    t = pl.tensor(a)
    t.igamma_(pl.tensor(x))
    ref = torch.tensor(a)
    ref.igamma_(torch.tensor(x))
    np.testing.assert_allclose(t.numpy(), ref.numpy(), rtol=1e-12)


def test_bessel_accuracy_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    x = np.array([-5.4215280659972755, 5.576059452216908, 0.3, 12.0])
    for name, fn in (("bessel_j0", lambda v: mpmath.besselj(0, v)), ("bessel_j1", lambda v: mpmath.besselj(1, v))):
        got = getattr(S, name)(pl.tensor(x)).numpy()
        want = np.array([float(fn(float(v))) for v in x])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_no_derivative_functions_give_outputs_that_do_not_require_grad():
    x = pl.tensor([0.5, 1.5], requires_grad=True)
    for name in ("bessel_j0", "modified_bessel_k1", "airy_ai", "spherical_bessel_j0"):
        assert not getattr(S, name)(x).requires_grad
    assert not S.chebyshev_polynomial_t(x, 3).requires_grad


def test_polynomials_of_large_n_agree_with_the_trigonometric_form():
    x = np.linspace(-0.99, 0.99, 9)
    n = 40
    got = S.chebyshev_polynomial_t(pl.tensor(x), n).numpy()
    np.testing.assert_allclose(got, np.cos(n * np.arccos(x)), atol=1e-11)
    got = S.chebyshev_polynomial_u(pl.tensor(x), n).numpy()
    th = np.arccos(x)
    np.testing.assert_allclose(got, np.sin((n + 1) * th) / np.sin(th), atol=1e-9)


def test_bad_arguments_name_the_op():
    with pytest.raises(TypeError, match="igamma: expected at least one Tensor"):
        pl.igamma(1.0, 2.0)
    with pytest.raises(TypeError, match="special.chebyshev_polynomial_t: expected a Tensor or a Python number"):
        S.chebyshev_polynomial_t(pl.tensor([0.5]), [3])


# ---------------------------------------------------------------- non-finite operands and refused dtypes
_NF = [float("nan"), float("inf"), -float("inf"), 0.5]


def test_nonfinite_values_agree_with_torch_where_torch_defines_them():
    x = pl.tensor(_NF)
    tx = torch.tensor(_NF)
    np.testing.assert_allclose(S.spherical_bessel_j0(x).numpy(), torch.special.spherical_bessel_j0(tx).numpy(),
                               equal_nan=True, rtol=1e-6)
    np.testing.assert_allclose(pl.polygamma(1, x).numpy(), torch.polygamma(1, tx).numpy(), equal_nan=True,
                               rtol=1e-5)
    # n < 0 (a NaN n truncates to the most negative integer) gives 0 even at NaN x, as PyTorch
    n = pl.tensor([float("nan")] * 4)
    np.testing.assert_array_equal(S.chebyshev_polynomial_t(x, n).numpy(),
                                  torch.special.chebyshev_polynomial_t(tx, torch.tensor([float("nan")] * 4)).numpy())


def test_nan_operands_give_nan():
    nan = pl.tensor([float("nan")])
    assert bool(pl.isnan(pl.igamma(nan, pl.tensor([float("inf")]))).all())
    assert bool(pl.isnan(S.legendre_polynomial_p(nan, 3)).all())


@pytest.mark.parametrize("fn", [S.airy_ai, S.spherical_bessel_j0, lambda z: S.hermite_polynomial_h(z, 2)])
def test_no_derivative_special_functions_refuse_complex(fn):
    with pytest.raises(pl.DtypeMismatch):
        fn(pl.tensor([1 + 1j]))


def test_mvlgamma_refuses_bool():
    with pytest.raises(RuntimeError):
        torch.mvlgamma(torch.tensor(True), 1)
    with pytest.raises(pl.DtypeMismatch):
        pl.mvlgamma(pl.tensor(True), 1)


def test_polygamma_of_float32_is_the_float64_value_rounded_once():
    # PyTorch's float32 kernel gives NaN (an overflowed n! times an underflowed zeta); its float64 is exact
    x = np.array([0.5, 2.8, 10.0, 50.0, 100.0], dtype=np.float32)
    for n in (30, 99):
        expect = torch.polygamma(n, torch.tensor(x, dtype=torch.float64)).float().numpy()
        got = pl.polygamma(n, pl.tensor(x))
        assert got.dtype == pl.float32
        np.testing.assert_allclose(got.numpy(), expect, rtol=1e-6)
    assert np.isnan(torch.polygamma(99, torch.tensor(x)).numpy()).any()
