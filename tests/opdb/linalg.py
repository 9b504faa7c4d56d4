"""Op-database entries for linear algebra (``pylucid/ops/linalg.py``, ``pylucid.linalg``): matmul, einsum,
dot/outer, the decompositions and solvers, and the composites (mm, bmm, kron, tensordot, matrix_power, the
norm front ends, lstsq, ...).

SVD/eigh outputs are defined up to the sign of each singular/eigen vector, so
those entries fix the sign (first row non-negative) before comparing; the
fixing factor is piecewise constant, so gradients are unaffected.
"""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch
from tests.opdb import INF, C, ErrorInput, OpEntry, Sample, U, noncontig, optional
from tests.opdb.reduction import norm_at_zero_samples

L, TL = pl.linalg, torch.linalg


def spd(n, *batch, seed=0):
    a = U(*batch, n, n, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def well(n, *batch, seed=0):
    """A well-conditioned square matrix."""
    return U(*batch, n, n, seed=seed) + 3 * np.eye(n)


def _fix(u, vh=None, sign=None):
    s = sign(u[..., :1, :]).detach()
    return (u * s,) if vh is None else (u * s, vh * s.transpose(-1, -2))


def _svd_pl(a, **k):
    u, s, vh = L.svd(a, **k)
    k_ = s.shape[-1]
    return _fix(u[..., :k_], vh[..., :k_, :], pl.sign) + (s,)


def _svd_t(a, **k):
    u, s, vh = TL.svd(a, **k)
    k_ = s.shape[-1]
    return _fix(u[..., :k_], vh[..., :k_, :], torch.sign) + (s,)


def _phase(v, sgn):
    """Eigenvectors with the phase fixed (first row real positive): the loss must not depend on the phase."""
    return v * sgn(v[..., :1, :]).conj()


def _cond_by_inverse(a, p=None):
    """``torch.linalg.cond`` written out for the orders it computes from the inverse (``'fro'``, +-1, +-inf), as
    PyTorch does: a singular matrix's inverse is all inf, and a NaN product (``0 * inf``) becomes inf. Out of
    place, so the gradient runs (PyTorch's own cond backward fails on its in-place write into ``inv_ex``'s
    output); ``p`` of ``None`` or +-2 (a mutation's) is PyTorch's cond itself."""
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        return TL.cond(a, p)
    inv, info = TL.inv_ex(a)
    inv = torch.where((info > 0)[..., None, None], torch.full_like(inv, INF), inv)
    r = TL.matrix_norm(a, p) * TL.matrix_norm(inv, p)
    return torch.where(r.isnan(), torch.full_like(r, INF), r)


def _tri(n, *batch, seed=0, upper=False):
    a = well(n, *batch, seed=seed)
    return np.triu(a) if upper else np.tril(a)


def _geqrf(a):
    """LAPACK's compact QR of ``a`` (from PyTorch, as sample arrays for ormqr)."""
    return tuple(t.numpy() for t in torch.geqrf(torch.tensor(a)))


def _low_rank(m, n, r, *batch):
    """An ``m x n`` matrix of rank ``r``."""
    return U(*batch, m, r) @ U(*batch, r, n, seed=1)


def _sq_samples(make=well, empty_gradcheck=True):
    return lambda: [Sample((make(3),), name="3x3"), Sample((make(2, 2),), name="batch"),
                    Sample((make(1),), name="1x1"),
                    Sample((np.zeros((0, 2, 2)),), name="empty-batch", gradcheck=empty_gradcheck)]


def rank_deficient(n=3, seed=0):
    """Rank n-1 up to rounding (the last row is the sum of the others): det is ~1e-16, not exactly 0.

    PyTorch's det backward returns 0 for an *exactly* singular matrix (its LU path multiplies by det = 0), while
    the true derivative is the (non-zero) cofactor matrix; pylucid returns the cofactors (tests/test_linalg.py).
    """
    a = U(n, n, seed=seed)
    a[-1] = a[:-1].sum(0)
    return a


def sym(a):
    """Symmetrise, so finite differences see the function of the full matrix that the op's gradient describes."""
    return (a + a.mT) / 2


_TOL = dict(atol=1e-4, rtol=1e-4)

ENTRIES = [
    OpEntry("matmul", pl.matmul, torch.matmul,
            lambda: [Sample((U(3, 4), U(4, 5, seed=1)), name="2d"), Sample((U(4), U(4, 2, seed=1)), name="1d-2d"),
                     Sample((U(3, 4), U(4, seed=1)), name="2d-1d"), Sample((U(4), U(4, seed=1)), name="dot"),
                     Sample((U(2, 3, 4), U(4, 2, seed=1)), name="batch-bcast"),
                     Sample((U(2, 1, 3, 4), U(5, 4, 2, seed=1)), name="batch-bcast-both"),
                     Sample((U(3, 0), U(0, 2, seed=1)), name="empty-k"),
                     Sample((C(2, 3, seed=2), C(3, 2, seed=3)), name="complex"),
                     Sample((C(2, 3, seed=2), C(3)), name="complex-vector")],
            atol=1e-5, rtol=1e-5,
            error_inputs=lambda: [ErrorInput((U(3, 4), U(3, 4)), exc=ShapeMismatch, match=r"matmul: shapes \(3, 4\)")]),
    OpEntry("einsum", pl.einsum, torch.einsum,
            lambda: [Sample(("bij,bjk->bik", U(2, 3, 4), U(2, 4, 2, seed=1)), name="bmm"),
                     Sample(("ij,jk", U(3, 4), U(4, 2, seed=1)), name="implicit-mm"),
                     Sample(("ii->i", U(3, 3)), name="diagonal"), Sample(("ii", U(3, 3)), name="trace"),
                     Sample(("...ij,...jk->...ik", U(2, 1, 3, 2), U(3, 2, 2, seed=1)), name="ellipsis-bcast"),
                     Sample(("i,j->ij", U(3), U(2, seed=1)), name="outer"),
                     Sample(("ij,jk,kl->il", U(2, 3), U(3, 2, seed=1), U(2, 2, seed=2)), name="three"),
                     Sample(("iij,jk->ik", U(2, 2, 3), U(3, 2, seed=1)), name="repeated-in-one"),
                     Sample(("ij,k->i", U(2, 3), U(4, seed=1)), name="sum-only-in-one"),
                     Sample(("ab,ab->a", U(3, 1), U(1, 4, seed=1)), name="size1-bcast"),
                     Sample(("ij,jk->ik", U(0, 3), U(3, 2, seed=1)), name="empty"),
                     Sample(("ij,jk->ik", noncontig(3, 4), U(4, 2, seed=1)), name="noncontig"),
                     Sample(("i->", np.array([2.0])), name="1elem"),
                     Sample(("ij,kj->ik", U(3, 4), U(3, 4, seed=1)), name="abt")],
            error_inputs=lambda: [ErrorInput(("ij,jk->ik", U(2, 3), U(4, 2)), {}, ShapeMismatch,
                                             r"einsum: subscript 'j' has size 3 in one operand and 4"),
                                  ErrorInput(("ij,jk->ik", U(2, 3)), {}, ValueError, "names 2 operands, got 1"),
                                  ErrorInput(("ij->q", U(2, 3)), {}, ValueError, "output letter 'q'")],
            **_TOL),
    OpEntry("dot", pl.dot, torch.dot, lambda: [Sample((U(4), U(4, seed=1))), Sample((U(0), U(0, seed=1)), name="empty"),
                                              Sample((noncontig(3, 1)[:, 0], U(3, seed=1)), name="noncontig")],
            error_inputs=lambda: [ErrorInput((U(3), U(4)), {}, ShapeMismatch, r"dot: inconsistent tensor sizes: "
                                             r"shapes \(3,\) and \(4,\)"),
                                  ErrorInput((U(2, 3), U(3)), {}, ShapeMismatch, "dot: expected two 1-d tensors")]),
    OpEntry("outer", pl.outer, torch.outer, lambda: [Sample((U(3), U(4, seed=1))), Sample((U(0), U(2, seed=1)),
                                                                                          name="empty")],
            error_inputs=lambda: [ErrorInput((U(2, 2), U(3)), {}, ShapeMismatch, "outer: expected two 1-d")]),
    OpEntry("det", L.det, TL.det, lambda: _sq_samples()() + [
                Sample((rank_deficient(),), name="rank-n-1"),
                Sample((np.zeros((0, 0)),), name="0x0")],
            gradgrad=True,
            error_inputs=lambda: [ErrorInput((U(2, 3),), {}, ShapeMismatch, r"linalg.det: A must be a batch of "
                                             r"square matrices, got shape \(2, 3\)"),
                                  ErrorInput((np.arange(4).reshape(2, 2),), {}, pl.DtypeMismatch, "linalg.det")],
            **_TOL),
    OpEntry("slogdet", L.slogdet, TL.slogdet, _sq_samples(empty_gradcheck=False), **_TOL),
    OpEntry("inv", L.inv, TL.inv, _sq_samples(),
            error_inputs=lambda: [ErrorInput((np.zeros((2, 2)),), {}, L.LinAlgError, "linalg.inv: the input matrix "
                                             "is singular")], **_TOL),
    OpEntry("solve", L.solve, TL.solve,
            lambda: [Sample((well(3), U(3, 2, seed=1)), name="matrix"), Sample((well(3), U(3, seed=1)), name="vector"),
                     Sample((well(3, 2), U(2, 3, seed=1)), name="batched-vector"),
                     Sample((well(3, 2), U(3, 1, seed=1)), name="broadcast"),
                     Sample((well(3), U(2, 3, seed=1)), {"left": False}, "right")],
            error_inputs=lambda: [ErrorInput((np.zeros((2, 2)), U(2)), {}, L.LinAlgError, "linalg.solve: the input "
                                             "matrix A is singular"),
                                  ErrorInput((well(3), U(4)), {}, ShapeMismatch, "linalg.solve: incompatible")],
            **_TOL),
    OpEntry("cholesky", lambda a, **k: L.cholesky(sym(a), **k), lambda a, **k: TL.cholesky(sym(a), **k),
            lambda: [Sample((spd(3),)), Sample((spd(2, 2),), name="batch", gradcheck=False),
                     Sample((spd(2),), {"upper": True}, "upper")],
            amp=False,  # the sym() wrapper is Promote; cholesky itself is KeepInput (tests/test_linalg.py)
            error_inputs=lambda: [ErrorInput((-np.eye(2),), {}, L.LinAlgError, "linalg.cholesky: the input is not "
                                             "positive-definite")], **_TOL),
    OpEntry("solve_triangular", L.solve_triangular, TL.solve_triangular,
            lambda: [Sample((well(3), U(3, 2, seed=1)), {"upper": True}, "upper"),
                     Sample((well(2), U(2, 1, seed=1)), {"upper": False, "unitriangular": True}, "lower-unit"),
                     Sample((well(2, 2), U(1, 2, seed=1)), {"upper": False, "left": False}, "right-batch-bcast")],
            error_inputs=lambda: [ErrorInput((np.zeros((2, 2)), U(2, 1)), {"upper": True}, L.LinAlgError,
                                             "linalg.solve_triangular: the triangular matrix is singular")],
            **_TOL),
    OpEntry("lu_factor", L.lu_factor, TL.lu_factor,
            lambda: [Sample((U(3, 3),)), Sample((U(2, 2, 2),), name="batch", gradcheck=False),
                     Sample((U(2, 3),), name="wide"), Sample((U(3, 2),), name="tall"),
                     Sample((U(2, 4, 3),), name="tall-batch", gradcheck=False)], **_TOL),
    OpEntry("matrix_exp", L.matrix_exp, TL.matrix_exp,
            lambda: [Sample((U(3, 3),)), Sample((U(2, 2, 2),), name="batch"), Sample((np.zeros((2, 2)),), name="zero"),
                     Sample((np.array([[1.0]]),), name="1x1")], **_TOL),
    OpEntry("svd", _svd_pl, _svd_t,
            lambda: [Sample((U(3, 3),), {"full_matrices": False}), Sample((U(4, 3),), {"full_matrices": False}, "tall"),
                     Sample((U(2, 3, 4),), {"full_matrices": False}, "wide-batch"),
                     Sample((U(4, 3),), {"full_matrices": True}, "full")], amp=False, **_TOL),
    # svd/eigh: the sign-fixing mul is Promote, so the AMP check would test mul, not the op (tests/test_linalg.py)
    OpEntry("eigh", lambda a, **k: (lambda w, v: (w,) + _fix(v, sign=pl.sign))(*L.eigh(sym(a), **k)),
            lambda a, **k: (lambda w, v: (w,) + _fix(v, sign=torch.sign))(*TL.eigh(sym(a), **k)),
            lambda: [Sample((spd(3),)), Sample((U(2, 3, 3),), name="batch"),
                     Sample((U(3, 3),), {"UPLO": "U"}, "upper")], amp=False, **_TOL),
    OpEntry("qr", L.qr, TL.qr,
            lambda: [Sample((U(3, 3),)), Sample((U(3, 2),), name="tall"), Sample((U(2, 3),), name="wide"),
                     Sample((U(2, 2, 3),), name="wide-batch", gradcheck=False),
                     Sample((U(3, 3),), {"mode": "complete"}, "complete-square", gradcheck=False)], **_TOL),
    OpEntry("pinv", L.pinv, TL.pinv,
            lambda: [Sample((U(3, 3),)), Sample((U(4, 3),), name="tall"), Sample((U(2, 2, 3),), name="wide-batch"),
                     Sample((spd(3),), {"hermitian": True}, "hermitian", gradcheck=False)], **_TOL),
    # linalg.vector_norm runs the registered ``norm`` op (ops/reduction.py): a second front end, a second entry
    OpEntry("norm", L.vector_norm, TL.vector_norm,
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"ord": 1, "dim": 1}, "l1"),
                     Sample((U(3, 4),), {"ord": 3, "dim": (0, 1), "keepdim": True}, "l3"),
                     Sample((U(3, 4),), {"ord": 0.5, "dim": 0}, "l0.5"),
                     Sample((U(3, 4),), {"ord": float("inf"), "dim": 1}, "inf"),
                     Sample((U(3, 4),), {"ord": float("-inf")}, "-inf"),
                     Sample((U(3, 4),), {"ord": 0}, "l0", gradcheck=False),
                     Sample((np.zeros(3),), name="zero-vector", gradcheck=False),
                     Sample((np.array([1.0, -2.0, 2.0]),), {"ord": float("inf")}, "inf-ties", gradcheck=False),
                     Sample((np.array(1.5),), name="0d"), Sample((U(0, 3),), {"dim": 1}, "empty"),
                     Sample((noncontig(3, 4),), {"dim": 0}, "noncontig"), *norm_at_zero_samples("ord")],
            variant="vector_norm",
            error_inputs=lambda: [ErrorInput((U(3),), {"ord": "fro"}, TypeError, "linalg.vector_norm: ord must be"),
                                  ErrorInput((U(3),), {"dim": 2}, IndexError, "dimension out of range")]),
    # the declared functions themselves, where the entries above wrap them (symmetrised input)
    OpEntry("cholesky", L.cholesky, TL.cholesky, lambda: [Sample((spd(3),)), Sample((spd(2),), {"upper": True},
                                                                                    "upper")],
            variant="direct", grad=False, amp=False),
    OpEntry("eigh", L.eigh, TL.eigh, lambda: [Sample((np.diag([1.0, 2.0, 3.0]),))], variant="direct", grad=False,
            amp=False),
    # Tensor.qr(some=True): the older PyTorch method
    OpEntry("qr", pl.Tensor.qr, torch.Tensor.qr, lambda: [Sample((U(3, 3),)), Sample((U(4, 3),), {"some": True},
                                                                                     "tall")],
            variant="method", grad=False, **_TOL),
    # -- composites: products --------------------------------------------------------------------
    OpEntry("mm", pl.mm, torch.mm, lambda: [Sample((U(3, 4), U(4, 2, seed=1)))], **_TOL),
    OpEntry("bmm", pl.bmm, torch.bmm, lambda: [Sample((U(2, 3, 4), U(2, 4, 2, seed=1)))], **_TOL),
    OpEntry("mv", pl.mv, torch.mv, lambda: [Sample((U(3, 4), U(4, seed=1))),
                                           Sample((C(2, 3, seed=2), C(3)), name="complex")], **_TOL),
    OpEntry("vdot", pl.vdot, torch.vdot, lambda: [Sample((U(4), U(4, seed=1))), Sample((C(3), C(3, seed=1)),
                                                                                     name="complex")], **_TOL),
    OpEntry("inner", pl.inner, torch.inner, lambda: [Sample((U(2, 4), U(3, 4, seed=1))),
                                                    Sample((U(3, 4), U(3, 4, seed=1)), name="same"),
                                                    Sample((np.array(2.0), U(3, seed=1)), name="scalar")], **_TOL),
    OpEntry("tensordot", pl.tensordot, torch.tensordot,
            lambda: [Sample((U(2, 3, 4), U(3, 4, 2, seed=1)), {"dims": 2}),
                     Sample((U(2, 3, 4), U(3, 2, 2, seed=1)), {"dims": ([1, 0], [0, 2])}, "lists")], **_TOL),
    OpEntry("kron", pl.kron, torch.kron, lambda: [Sample((U(2, 3), U(3, 2, seed=1))),
                                                 Sample((U(2, 2), U(2, 3, seed=1)), name="2x2"),
                                                 Sample((U(2), U(3, 2, seed=1)), name="1d-2d")], **_TOL),
    OpEntry("addmm", pl.addmm, torch.addmm,
            lambda: [Sample((U(3), U(2, 4, seed=1), U(4, 3, seed=2)), {"beta": 0.5, "alpha": 2.0}),
                     Sample((U(3, 2), U(3, 4, seed=1), U(4, 2, seed=2)), {"beta": 0.5, "alpha": 2.0}, "full-input"),
                     Sample((np.full((2, 3), np.nan), U(2, 4, seed=1), U(4, 3, seed=2)), {"beta": 0}, "beta0",
                            grad_args=(1, 2))], **_TOL),
    OpEntry("addmv", pl.addmv, torch.addmv, lambda: [Sample((U(3), U(3, 4, seed=1), U(4, seed=2)))], **_TOL),
    OpEntry("baddbmm", pl.baddbmm, torch.baddbmm,
            lambda: [Sample((U(2, 3, 3), U(2, 3, 4, seed=1), U(2, 4, 3, seed=2))),
                     Sample((U(2, 3, 2), U(2, 3, 4, seed=1), U(2, 4, 2, seed=2)), {"beta": 0.5, "alpha": 2.0},
                            "scaled")],
            **_TOL),
    OpEntry("chain_matmul", pl.chain_matmul, lambda *m: torch.linalg.multi_dot(m),
            lambda: [Sample((U(2, 5), U(5, 3, seed=1), U(3, 4, seed=2)))], **_TOL),
    OpEntry("linalg.multi_dot", lambda *a: L.multi_dot(list(a)), lambda *a: TL.multi_dot(list(a)),
            lambda: [Sample((U(2, 5), U(5, 3, seed=1), U(3, 4, seed=2))),
                     Sample((U(3), U(3, 2, seed=1), U(2, seed=2)), name="vectors")], **_TOL),
    OpEntry("linalg.vecdot", L.vecdot, TL.vecdot, lambda: [Sample((U(2, 3), U(3, seed=1))),
                                                         Sample((U(3, 2), U(3, 2, seed=1)), {"dim": 0},
                                                                "dim0")], **_TOL),
    OpEntry("cross", pl.cross, torch.cross,
            lambda: [Sample((U(4, 3), U(4, 3, seed=1)), {"dim": 1}), Sample((U(4, 3), U(1, 3, seed=1)), {"dim": -1},
                                                                         "broadcast"),
                     Sample((U(3, 2), U(3, 2, seed=1)), {"dim": 0}, "dim0")], **_TOL),
    OpEntry("cross", L.cross, TL.cross, lambda: [Sample((U(4, 3), U(1, 3, seed=1)))], variant="linalg", **_TOL),
    # -- composites: powers, determinants, spectra, least squares -------------------------------------------
    *[OpEntry("matrix_power", pl.matrix_power, torch.matrix_power,
              lambda n=n: [Sample((well(3, 2) / 3, n)), Sample((well(3) / 4, n),
                                                               name="single")], variant=str(n), **_TOL)
      for n in (0, 1, 3, -2)],
    OpEntry("logdet", pl.logdet, torch.logdet, lambda: [Sample((spd(3),))], **_TOL),
    OpEntry("linalg.svdvals", L.svdvals, TL.svdvals, lambda: [Sample((U(3, 4),)), Sample((U(2, 4, 3),), name="batch")],
            **_TOL),
    OpEntry("linalg.eigvalsh", lambda a: L.eigvalsh(sym(a)), lambda a: TL.eigvalsh(sym(a)),
            lambda: [Sample((spd(3),))], **_TOL),
    OpEntry("linalg.eigvalsh", L.eigvalsh, TL.eigvalsh, lambda: [Sample((spd(3),)), Sample((spd(3),), {"UPLO": "U"},
                                                                                          "upper")],
            variant="direct", grad=False),
    OpEntry("linalg.lstsq", lambda a, b: L.lstsq(a, b).solution, lambda a, b: TL.lstsq(a, b).solution,
            lambda: [Sample((U(4, 3), U(4, 2, seed=1))), Sample((U(5, 3), U(5, 2, seed=1)), name="5x3")], **_TOL),
    OpEntry("linalg.lu_solve", lambda a, b, **k: L.lu_solve(*L.lu_factor(a), b, **k),
            lambda a, b, **k: TL.lu_solve(*TL.lu_factor(a), b, **k),
            lambda: [Sample((well(2), U(2, 2, seed=1))), Sample((well(2), U(1, 2, seed=1)), {"left": False}, "right"),
                     Sample((well(2), U(2, 1, seed=1)), {"adjoint": True}, "adjoint")], **_TOL),
    OpEntry("linalg.matrix_rank", L.matrix_rank, TL.matrix_rank,
            lambda: [Sample((U(3, 4),)), Sample((rank_deficient(),), name="rank-2"),
                     Sample((spd(3),), {"hermitian": True}, "hermitian")], grad=False),
    OpEntry("linalg.cholesky_ex", lambda a: L.cholesky_ex(sym(a)), lambda a: TL.cholesky_ex(sym(a)),
            lambda: [Sample((spd(3),))], amp=False, **_TOL),
    OpEntry("linalg.inv_ex", L.inv_ex, TL.inv_ex, lambda: [Sample((well(3),)), Sample((well(2, 2),), name="batch")],
            **_TOL),
    OpEntry("linalg.diagonal", L.diagonal, TL.diagonal,
            lambda: [Sample((U(2, 3, 4),)), Sample((U(3, 4),), name="2d"), Sample((U(2, 3, 4),), {"offset": 1},
                                                                                  "offset"),
                     Sample((U(2, 3, 4),), {"offset": -1}, "negative-offset"),
                     Sample((U(2, 3, 4),), {"dim1": 0, "dim2": 2}, "dims")]),
    OpEntry("pinverse", pl.Tensor.pinverse, torch.Tensor.pinverse, lambda: [Sample((U(4, 3),))], **_TOL),
    *optional(lambda: OpEntry("pinverse", pl.pinverse, torch.pinverse, lambda: [Sample((U(4, 3),))], variant="function",
                              **_TOL)),
    OpEntry("inverse", pl.inverse, torch.inverse, lambda: [Sample((well(3),)), Sample((well(2, 2),), name="batch")],
            **_TOL),
    # -- composites: the norm front ends (the vector norms run the one registered norm op) ---------------------
    *[OpEntry("linalg.matrix_norm", L.matrix_norm, TL.matrix_norm,
              lambda o=o: [Sample((U(2, 3, 4), o))], variant=str(o), runs=("norm",) if o == "fro" else (), **_TOL)
      for o in ("fro", "nuc", 2, -2, 1, -1, INF, -INF)],
    OpEntry("linalg.matrix_norm", L.matrix_norm, TL.matrix_norm,
            lambda: [Sample((U(3, 4),)), Sample((U(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, "dims-keep")],
            variant="default", runs=("norm",), **_TOL),
    OpEntry("linalg.norm", L.norm, TL.norm,
            lambda: [Sample((U(3, 4),)), Sample((U(2, 3),), {"ord": 1, "dim": 1}, "dim"),
                     Sample((U(3, 4),), {"ord": "nuc"}, "nuc"), Sample((U(4),), {"ord": 3}, "vector-3"),
                     Sample((U(3, 4),), {"ord": 2}, "spectral")],
            runs=("norm",), **_TOL),
    # -- torch.* front ends and the pylucid.linalg composites of the LU, Cholesky and SVD routines ------------
    OpEntry("eig", lambda a: (lambda w, v: (w, _phase(v, pl.sgn)))(*L.eig(a)),
            lambda a: (lambda w, v: (w, _phase(v, torch.sgn)))(*TL.eig(a)),
            lambda: [Sample((U(3, 3),)), Sample((U(2, 3, 3, seed=3),), name="batch"),
                     Sample((C(3, 3),), name="complex"), Sample((np.array([[2.0]]),), name="1x1"),
                     Sample((np.zeros((0, 2, 2)),), name="empty-batch")],
            amp=False, **_TOL),
    OpEntry("linalg.eigvals", L.eigvals, TL.eigvals,
            lambda: [Sample((U(3, 3),)), Sample((C(2, 2),), name="complex"),
                     Sample((np.array([[0.0, -1.0], [1.0, 0.0]]),), name="rotation")], **_TOL),
    OpEntry("lu", pl.lu, torch.lu,
            lambda: [Sample((U(3, 3),)), Sample((U(2, 3, 4),), name="wide-batch"),
                     Sample((U(3, 3),), {"get_infos": True}, "infos")], **_TOL),
    OpEntry("lu_unpack", lambda a, **k: pl.lu_unpack(*L.lu_factor(a), **k),
            lambda a, **k: torch.lu_unpack(*TL.lu_factor(a), **k),
            lambda: [Sample((U(3, 3),)), Sample((U(4, 2),), name="tall"),
                     Sample((U(2, 2, 4),), name="wide-batch", gradcheck=False),
                     Sample((U(3, 3),), {"unpack_pivots": False}, "no-pivots"),
                     Sample((U(3, 3),), {"unpack_data": False}, "no-data", grad_args=())], **_TOL),
    OpEntry("linalg.lu", L.lu, TL.lu,
            lambda: [Sample((U(3, 3),)), Sample((U(2, 3),), name="wide"), Sample((U(3, 2),), name="tall"),
                     Sample((U(2, 4, 3),), name="tall-batch", gradcheck=False),
                     Sample((np.zeros((0, 2, 2)),), name="empty-batch")],
            **_TOL),
    OpEntry("linalg.lu_factor_ex", L.lu_factor_ex, TL.lu_factor_ex,
            lambda: [Sample((U(3, 3),)), Sample((U(2, 3, 4),), name="wide-batch"),
                     Sample((np.ones((3, 3)),), name="singular", grad_args=())], **_TOL),
    OpEntry("lu_solve", pl.lu_solve, torch.lu_solve,
            lambda: [Sample((U(3, 2, seed=1), *(a.numpy() for a in torch.linalg.lu_factor(torch.tensor(well(3))))),
                            grad_args=(0, 1))], **_TOL),
    # the cholesky_solve/cholesky_inverse gradient is PyTorch's full-matrix formula of A = L L^H, while the solves
    # read one triangle: finite differences agree with it on a tril(L) (triu) argument, so the entries pass one
    OpEntry("cholesky_solve", lambda b, l, upper=False: pl.cholesky_solve(b, l.triu() if upper else l.tril(), upper),
            lambda b, l, upper=False: torch.cholesky_solve(b, l.triu() if upper else l.tril(), upper),
            lambda: [Sample((U(3, 2, seed=1), _tri(3))), Sample((U(2, 1, seed=1), _tri(2, upper=True), True),
                                                                 name="upper"),
                     Sample((U(2, 3, 1, seed=1), _tri(3)), name="batch-bcast", gradcheck=False)], **_TOL),
    OpEntry("cholesky_inverse", lambda l, upper=False: pl.cholesky_inverse(l.triu() if upper else l.tril(), upper),
            lambda l, upper=False: torch.cholesky_inverse(l.triu() if upper else l.tril(), upper),
            lambda: [Sample((_tri(3),)), Sample((_tri(3, upper=True), True), name="upper"),
                     Sample((_tri(2, 2),), name="batch")], **_TOL),
    OpEntry("cholesky_solve", pl.cholesky_solve, torch.cholesky_solve, lambda: [Sample((U(3, 2, seed=1), _tri(3)))],
            variant="direct", grad=False, **_TOL),
    OpEntry("cholesky_inverse", pl.cholesky_inverse, torch.cholesky_inverse, lambda: [Sample((_tri(3),))],
            variant="direct", grad=False, **_TOL),
    OpEntry("cholesky", pl.cholesky, torch.cholesky,
            lambda: [Sample((spd(3),)), Sample((spd(2),), {"upper": True}, "upper")], variant="torch",
            gradcheck_max_numel=0, **_TOL),
    OpEntry("qr", pl.qr, torch.qr, lambda: [Sample((U(4, 3),)), Sample((U(3, 3),), {"some": False}, "complete")],
            variant="torch", **_TOL),
    OpEntry("triangular_solve", pl.triangular_solve, torch.triangular_solve,
            lambda: [Sample((U(3, 2, seed=1), _tri(3, upper=True))),
                     Sample((U(3, 2, seed=1), _tri(3)), {"upper": False, "transpose": True}, "lower-transpose"),
                     Sample((U(3, 1, seed=1), _tri(3, upper=True)), {"unitriangular": True}, "unit"),
                     Sample((U(2, 3, 1, seed=1), _tri(3, upper=True)), name="batch-bcast")], **_TOL),
    OpEntry("svd", lambda a, **k: (lambda u, s, v: _fix(u, v.mT, pl.sign) + (s,))(*pl.svd(a, **k)),
            lambda a, **k: (lambda u, s, v: _fix(u, v.mT, torch.sign) + (s,))(*torch.svd(a, **k)),
            lambda: [Sample((U(3, 3),)), Sample((U(4, 3),), name="tall"), Sample((U(2, 3, 4),), name="wide-batch")],
            variant="torch", amp=False, **_TOL),
    OpEntry("svd", lambda a, **k: pl.svd(a, **k)[1], lambda a, **k: torch.svd(a, **k)[1],
            lambda: [Sample((U(4, 3),), {"some": False}, "full-values")], variant="torch-full", amp=False, **_TOL),
    OpEntry("svd", pl.svd, torch.svd, lambda: [Sample((U(4, 3),), {"compute_uv": False}, "values")],
            variant="torch-no-uv", amp=False, **_TOL),
    # the norm-product reference is written out: PyTorch's own cond backward fails there
    *[OpEntry("linalg.cond", L.cond, TL.cond if p in (None, 2, -2, "nuc") else _cond_by_inverse,
              lambda p=p: [Sample((well(3), p)), Sample((well(3, 2), p), name="batch")],
              variant=str(p), **_TOL) for p in (None, 2, -2, "fro", "nuc", 1, -1, INF, -INF)],
    OpEntry("linalg.cond", L.cond, TL.cond,
            lambda: [Sample((U(3, 5),), name="wide"), Sample((np.ones((2, 2)), 1), name="singular", grad_args=())],
            variant="edges", **_TOL),
    OpEntry("linalg.solve_ex", L.solve_ex, TL.solve_ex,
            lambda: [Sample((well(3), U(3, 2, seed=1))), Sample((well(2, 2), U(2, seed=1)), name="vector-batch"),
                     Sample((well(3), U(2, 3, seed=1)), {"left": False}, "right")], **_TOL),
    OpEntry("linalg.tensorinv", L.tensorinv, TL.tensorinv,
            lambda: [Sample((well(6).reshape(6, 2, 3), 1)), Sample((well(4).reshape(2, 2, 2, 2),), name="ind2")],
            **_TOL),
    OpEntry("linalg.tensorsolve", L.tensorsolve, TL.tensorsolve,
            lambda: [Sample((well(6).reshape(2, 3, 6), U(2, 3, seed=1))),
                     Sample((well(6).reshape(6, 2, 3), U(2, 3, seed=1), (0,)), name="dims")], **_TOL),
    OpEntry("linalg.vander", L.vander, TL.vander,
            lambda: [Sample((U(3),)), Sample((U(2, 3),), {"N": 5}, "batch-N"),
                     Sample((np.array([0.0, 1.5, -2.0]),), name="zero"), Sample((np.array([1, 2, 3]),), name="int")],
            error_inputs=lambda: [ErrorInput((U(3),), {"N": 1}, ValueError,
                                             "linalg.vander: N must be greater than 1")]),
    # the reference builds the powers with pow: torch.vander's own backward fails (an in-place cumprod)
    OpEntry("vander", pl.vander, lambda x, N=None, increasing=False: (lambda v: v if increasing else v.flip(-1))(
                x.unsqueeze(-1) ** torch.arange(len(x) if N is None else N)),
            lambda: [Sample((U(3),)), Sample((U(3), 4, True), name="increasing"),
                     Sample((U(3), 1), name="N1", grad_args=()),
                     Sample((U(0),), name="empty", grad_args=()), Sample((np.array([1, 2, 3]),), name="int")]),
    OpEntry("linalg.householder_product", L.householder_product, TL.householder_product,
            lambda: [Sample((U(4, 3), U(2, seed=1))), Sample((U(2, 3, 3), U(2, 3, seed=1)), name="batch-square"),
                     Sample((U(3, 2), U(0, seed=1)), name="no-reflectors", grad_args=())], **_TOL),
    OpEntry("orgqr", pl.orgqr, torch.orgqr, lambda: [Sample((U(4, 3), U(3, seed=1)))], **_TOL),
    # -- Householder QR pieces, LDL (no derivative in PyTorch) -----------------------------------------------
    OpEntry("geqrf", pl.geqrf, torch.geqrf,
            lambda: [Sample((U(5, 3),)), Sample((U(2, 3, 4),), name="wide-batch"), Sample((np.zeros((0, 2)),),
                                                                                        name="empty")],
            grad=False, gradgrad=False, **_TOL),
    OpEntry("ormqr", pl.ormqr, torch.ormqr,
            lambda: [Sample((*_geqrf(U(4, 3)), U(4, 2, seed=1))),
                     Sample((*_geqrf(U(4, 3)), U(2, 4, seed=1), False, True), name="right-transpose"),
                     Sample((*_geqrf(U(4, 3)), U(4, 3, seed=1), True, True), name="left-transpose"),
                     Sample((*_geqrf(U(2, 3, 3)), U(2, 3, 2, seed=1)), name="batch")], **_TOL),
    OpEntry("ldl_factor", L.ldl_factor_ex, TL.ldl_factor_ex,
            lambda: [Sample((sym(U(4, 4)),)), Sample((sym(U(2, 3, 3)),), name="batch"),
                     Sample((np.array([[0.0, 1.0], [1.0, 0.0]]),), name="2x2-pivot"),
                     Sample((np.zeros((2, 2)),), name="singular"), Sample((np.zeros((0, 0)),), name="empty")],
            grad=False, gradgrad=False, amp=False, **_TOL),
    OpEntry("linalg.ldl_factor", L.ldl_factor, TL.ldl_factor,
            lambda: [Sample((sym(U(4, 4)),)), Sample((spd(3),), {"hermitian": True}, "hermitian")],
            grad=False, gradgrad=False, **_TOL),
    OpEntry("ldl_solve", lambda a, b, **k: L.ldl_solve(*L.ldl_factor(a, **k), b, **k),
            lambda a, b, **k: TL.ldl_solve(*TL.ldl_factor(a, **k), b, **k),
            lambda: [Sample((sym(U(4, 4)), U(4, 2, seed=1))), Sample((sym(U(2, 3, 3)), U(3, 1, seed=1)), name="bcast"),
                     Sample((spd(3), U(3, 2, seed=1)), {"hermitian": True}, "hermitian")],
            grad=False, gradgrad=False, amp=False, **_TOL),
    # -- randomized low-rank SVD / PCA: on matrices of rank <= q the singular values (and their gradient
    # u^T g v) do not depend on the random sketch; finite differences would (a new sketch per call)
    OpEntry("svd_lowrank", lambda a, **k: pl.svd_lowrank(a, **k)[1], lambda a, **k: torch.svd_lowrank(a, **k)[1],
            lambda: [Sample((_low_rank(7, 5, 3),), {"q": 3}, gradcheck=False),
                     Sample((_low_rank(4, 6, 2, 2),), {"q": 2, "niter": 1}, "wide-batch", gradcheck=False)],
            amp=False, **_TOL),
    OpEntry("pca_lowrank", lambda a, **k: pl.pca_lowrank(a, **k)[1], lambda a, **k: torch.pca_lowrank(a, **k)[1],
            lambda: [Sample((_low_rank(7, 5, 3),), {"q": 3}, gradcheck=False),
                     Sample((_low_rank(6, 4, 2),), {"q": 2, "center": False}, "uncentered", gradcheck=False)],
            amp=False, **_TOL),
]
