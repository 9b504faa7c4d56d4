"""Multivariate distributions: ``MultivariateNormal`` (full covariance through its Cholesky factor),
``LowRankMultivariateNormal`` (``W W^T + diag(D)``, through the capacitance matrix ``I + W^T D^-1 W``), and the
matrix distributions ``LKJCholesky`` and ``Wishart``."""

from __future__ import annotations

import math
import warnings
from numbers import Number

import pylucid as _pl

from . import constraints
from .continuous import Beta, Chi2
from .distribution import Distribution, ExponentialFamily
from .utils import _standard_normal, broadcast_all, finfo, lazy_property

__all__ = ["LKJCholesky", "LowRankMultivariateNormal", "MultivariateNormal", "Wishart"]


def _batch_mv(bmat, bvec):
    """Matrix-vector products over broadcast batch dimensions."""
    return _pl.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """``x^T (L L^T)^-1 x`` for lower-triangular ``L`` (batch dimensions broadcast), by one triangular solve."""
    n = bx.shape[-1]
    batch = _pl.broadcast_shapes(tuple(bL.shape[:-2]), tuple(bx.shape[:-1]))
    L = bL.expand(*batch, n, n)
    x = bx.expand(*batch, n).unsqueeze(-1)
    return _pl.linalg.solve_triangular(L, x, upper=False).pow(2).sum((-2, -1))


def _precision_to_scale_tril(P):
    """The lower Cholesky factor ``L`` of ``P^-1`` without inverting ``P`` (PyTorch's construction): with the
    flip ``J`` (reversal of rows or columns), ``J chol(J P J) J`` is the upper factor ``U`` of ``P = U U^T``,
    so ``P^-1 = U^-T U^-1`` and ``L = U^-T``, one triangular solve."""
    Lf = _pl.linalg.cholesky(_pl.flip(P, (-2, -1)))
    L_inv = _pl.flip(Lf, (-2, -1)).mT
    eye = _pl.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return _pl.linalg.solve_triangular(L_inv, eye.expand(*L_inv.shape), upper=False)


class MultivariateNormal(Distribution):
    """The multivariate normal with mean ``loc`` and one of ``covariance_matrix``, ``precision_matrix`` or
    ``scale_tril`` (a lower Cholesky factor of the covariance).

    >>> import pylucid
    >>> from pylucid.distributions import MultivariateNormal
    >>> m = MultivariateNormal(pylucid.zeros(2), covariance_matrix=pylucid.eye(2))
    >>> round(m.log_prob(pylucid.zeros(2)).item(), 4)
    -1.8379
    """

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        for name, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                        ("precision_matrix", precision_matrix)):
            if m is None:
                continue
            if m.ndim < 2:
                raise ValueError(f"{name} must be at least two-dimensional, with optional leading batch dimensions")
            batch_shape = _pl.broadcast_shapes(tuple(m.shape[:-2]), tuple(loc.shape[:-1]))
            setattr(self, name, m.expand(*batch_shape, *m.shape[-2:]))
        self.loc = loc.expand(*batch_shape, loc.shape[-1])
        event_shape = self.loc.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = _pl.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + self.event_shape + self.event_shape
        new.loc = self.loc.expand(*batch_shape, *self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(*cov_shape))
        super(MultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(*self._matrix_shape)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return _pl.matmul(L, L.mT).expand(*self._matrix_shape)

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = _pl.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        L_inv = _pl.linalg.solve_triangular(L, eye.expand(*L.shape), upper=False)
        return _pl.matmul(L_inv.mT, L_inv).expand(*self._matrix_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, self.loc.dtype, self.loc.device, generator)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return H if len(self._batch_shape) == 0 else H.expand(*self._batch_shape)


def _add_identity(K):
    m = K.shape[-1]
    return K + _pl.eye(m, dtype=K.dtype, device=K.device)


def _batch_capacitance_tril(W, D):
    """The Cholesky factor of the capacitance matrix ``I + W^T D^-1 W``."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return _pl.linalg.cholesky(_add_identity(_pl.matmul(Wt_Dinv, W)))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    """``log det(W W^T + D)`` by the matrix determinant lemma: ``log det(capacitance) + log det(D)``."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    mahalanobis_term1 = (x.pow(2) / D).sum(-1)
    mahalanobis_term2 = _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)
    return mahalanobis_term1 - mahalanobis_term2


class LowRankMultivariateNormal(Distribution):
    """The multivariate normal with covariance ``cov_factor @ cov_factor.mT + diag(cov_diag)``."""

    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.ndim < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = _pl.broadcast_tensors(loc.unsqueeze(-1), cov_factor,
                                                                     cov_diag.unsqueeze(-1))
        except Exception as e:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor {tuple(cov_factor.shape)}"
                             f", cov_diag {tuple(cov_diag.shape)}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        batch_shape = self.loc.shape[:-1]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        loc_shape = batch_shape + self.event_shape
        new.loc = self.loc.expand(*loc_shape)
        new.cov_diag = self.cov_diag.expand(*loc_shape)
        new.cov_factor = self.cov_factor.expand(*loc_shape, self.cov_factor.shape[-1])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        super(LowRankMultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(
            *self._batch_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self):
        # chol(W W^T + D) = sqrt(D) chol(I + D^-1/2 W W^T D^-1/2), better conditioned than a direct factorisation
        cov_diag_sqrt_unsqueeze = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / cov_diag_sqrt_unsqueeze
        K = _add_identity(_pl.matmul(Dinvsqrt_W, Dinvsqrt_W.mT))
        return (cov_diag_sqrt_unsqueeze * _pl.linalg.cholesky(K)).expand(*self._matrix_shape)

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        return (_pl.matmul(W, W.mT) + _pl.diag_embed(self._unbroadcasted_cov_diag)).expand(*self._matrix_shape)

    @lazy_property
    def precision_matrix(self):
        # Woodbury: (W W^T + D)^-1 = D^-1 - D^-1 W capacitance^-1 W^T D^-1
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        ct = self._capacitance_tril
        batch = _pl.broadcast_shapes(tuple(ct.shape[:-2]), tuple(Wt_Dinv.shape[:-2]))
        A = _pl.linalg.solve_triangular(ct.expand(*batch, *ct.shape[-2:]),
                                        Wt_Dinv.expand(*batch, *Wt_Dinv.shape[-2:]), upper=False)
        precision = _pl.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - A.mT @ A
        return precision.expand(*self._matrix_shape)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended_shape(sample_shape)
        W_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_W = _standard_normal(W_shape, self.loc.dtype, self.loc.device, generator)
        eps_D = _standard_normal(shape, self.loc.dtype, self.loc.device, generator)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W)
                + self._unbroadcasted_cov_diag.sqrt() * eps_D)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, diff,
                                       self._capacitance_tril)
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                        self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + M)

    def entropy(self):
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                        self._capacitance_tril)
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return H if len(self._batch_shape) == 0 else H.expand(*self._batch_shape)


class LKJCholesky(Distribution):
    """The LKJ distribution over Cholesky factors of ``dim x dim`` correlation matrices, with
    ``concentration`` ``eta`` (density of the correlation matrix ``L L^T`` proportional to ``det^(eta - 1)``).
    Sampled by the onion method (Ghosh & Henderson 2003; Lewandowski et al. 2009), as PyTorch, but with the
    onion's Beta parameters for every row (docs/semantics/distributions.md); not reparameterised."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = tuple(self.concentration.shape)
        event_shape = (dim, dim)
        # the onion method (Lewandowski et al. 2009, section 3.2): row i >= 1 of the factor has squared norm
        # y_i ~ Beta(i / 2, eta + (dim - 2) / 2 - (i - 1) / 2) off the diagonal (row 0 has none: its y is unused)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        rows = _pl.arange(self.dim, dtype=self.concentration.dtype, device=self.concentration.device)
        beta_conc1 = 0.5 * rows.clamp(min=1)
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * (rows - 1).clamp(min=0)
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = tuple(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(*batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=(), generator=None):
        with _pl.no_grad():
            y = self._beta.sample(sample_shape, generator=generator).unsqueeze(-1)
            u_normal = _standard_normal(self._extended_shape(sample_shape), y.dtype, y.device, generator).tril(-1)
            norm = _pl.linalg.vector_norm(u_normal, dim=-1, keepdim=True)
            # the first row is all zeros (its norm too): its direction is irrelevant, set it to 0
            first = _pl.arange(self.dim, device=y.device).reshape(-1, 1) == 0
            u_hypersphere = _pl.where(first, 0.0, u_normal / _pl.where(first, 1.0, norm))
            w = _pl.sqrt(y) * u_hypersphere
            eps = finfo(w.dtype).tiny
            diag_elems = _pl.clamp(1 - _pl.sum(w ** 2, dim=-1), min=eps).sqrt()
            return w + _pl.diag_embed(diag_elems)

    def log_prob(self, value):
        # the density of the Cholesky factor: prod_i L_ii^(2 (eta - 1) + dim - i), normalised (Lewandowski et al.)
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = _pl.arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = _pl.sum(order * diag_elems.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = _pl.lgamma(alpha) * dm1
        numerator = _pl.special.multigammaln(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        normalize_term = pi_constant + numerator - denominator
        return unnormalized_log_pdf - normalize_term


def _mvdigamma(x, p):
    """The multivariate digamma ``sum_{i < p} digamma(x - i / 2)``."""
    offsets = _pl.arange(p, dtype=x.dtype, device=x.device) / 2
    return _pl.special.digamma(x.unsqueeze(-1) - offsets.expand(*x.shape, p)).sum(-1)


def _spd_solve(L, X):
    """``(L L^T)^-1 X`` by two triangular solves."""
    batch = _pl.broadcast_shapes(tuple(L.shape[:-2]), tuple(X.shape[:-2]))
    Lb = L.expand(*batch, *L.shape[-2:])
    A = _pl.linalg.solve_triangular(Lb, X.expand(*batch, *X.shape[-2:]), upper=False)
    return _pl.linalg.solve_triangular(Lb.mT, A, upper=True)


class Wishart(ExponentialFamily):
    """The Wishart distribution over positive-definite ``p x p`` matrices with ``df`` degrees of freedom and one
    of ``covariance_matrix``, ``precision_matrix`` or ``scale_tril``; reparameterised through Bartlett's
    decomposition (chi-square diagonal from reparameterised gamma draws, normal off-diagonal). An exponential
    family, so ``kl_divergence`` between two Wisharts is the Bregman divergence of ``_log_normalizer``.
    """

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite, "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if param.ndim < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = _pl.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = _pl.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape))
            self.df = df.expand(*batch_shape)
        event_shape = tuple(param.shape[-2:])
        if bool((self.df <= event_shape[-1] - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {event_shape[-1] - 1}.")
        for name, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                        ("precision_matrix", precision_matrix)):
            if m is not None:
                setattr(self, name, m.expand(*batch_shape, *event_shape))
        if bool((self.df < event_shape[-1]).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < "
                          "ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = _pl.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._bartlett_chi2()

    def _bartlett_chi2(self):
        """Bartlett's decomposition: the squared ``i``-th diagonal entry is chi-square with ``df - i`` degrees
        of freedom."""
        p = self._event_shape[-1]
        offsets = _pl.arange(p, dtype=self.df.dtype, device=self.df.device).expand(*self._batch_shape, p)
        return Chi2(self.df.unsqueeze(-1) - offsets, validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(*cov_shape)
        new.df = self.df.expand(*batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(*cov_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._bartlett_chi2()
        new._validate_args = self._validate_args
        return new

    @property
    def _matrix_shape(self):
        return self._batch_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(*self._matrix_shape)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(*self._matrix_shape)

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = _pl.eye(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return _spd_solve(L, eye).expand(*self._matrix_shape)

    @property
    def mean(self):
        return self.df.reshape(*self._batch_shape, 1, 1) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = _pl.where(factor <= 0, float("nan"), factor)
        return factor.reshape(*self._batch_shape, 1, 1) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self.df.reshape(*self._batch_shape, 1, 1) * (V.pow(2) + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape, generator):
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape, generator=generator).sqrt()
        chi = chi.clamp(min=finfo(chi.dtype).eps)
        normal = _standard_normal(tuple(sample_shape) + self._batch_shape + (p, p), chi.dtype, chi.device, generator)
        noise = _pl.diag_embed(chi) + normal.tril(-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def rsample(self, sample_shape=(), generator=None, max_try_correction=10):
        """Bartlett draws; a draw that is numerically singular (not positive definite) is redrawn, up to
        ``max_try_correction`` times (with a warning)."""
        import warnings

        sample_shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
        sample = self._bartlett_sampling(sample_shape, generator)
        is_singular = ~self.support.check(sample)
        if bool(is_singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                new = self._bartlett_sampling(sample_shape, generator)
                sample = _pl.where(is_singular.unsqueeze(-1).unsqueeze(-1), new, sample)
                is_singular = ~self.support.check(sample)
                if not bool(is_singular.any()):
                    break
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        logabsdet = _pl.linalg.slogdet(value)[1]
        trace = _spd_solve(L, value).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + L.diagonal(dim1=-2, dim2=-1).log().sum(-1))
                - _pl.special.multigammaln(nu / 2, p) + (nu - p - 1) / 2 * logabsdet - trace / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        return ((p + 1) * (p * _LOG_2 / 2 + L.diagonal(dim1=-2, dim2=-1).log().sum(-1))
                + _pl.special.multigammaln(nu / 2, p) - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-_pl.linalg.slogdet(-2 * x)[1] + _LOG_2 * p)
                + _pl.special.multigammaln(y + (p + 1) / 2, p))


_LOG_2 = math.log(2)
