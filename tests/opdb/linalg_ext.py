"""Op-database entries for the linear-algebra primitives (issue 3).

Composites (mm, bmm, kron, tensordot, matrix_power, norms, lstsq, ...) have no
registry entry; tests/test_linalg.py runs them through the same checks.
SVD/eigh outputs are defined up to the sign of each singular/eigen vector, so
those entries fix the sign (first row non-negative) before comparing; the
fixing factor is piecewise constant, so gradients are unaffected.
"""

from __future__ import annotations

import numpy as np
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch
from tests.opdb import ErrorInput, OpEntry, Sample
from tests.opdb.core import U, noncontig

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
    OpEntry("einsum", lambda eq, *a: pl.einsum(eq, *a), lambda eq, *a: torch.einsum(eq, *a),
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
                     Sample(("i->", np.array([2.0])), name="1elem")],
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
    OpEntry("solve_triangular", lambda a, b, **k: L.solve_triangular(a, b, **k),
            lambda a, b, **k: TL.solve_triangular(a, b, **k),
            lambda: [Sample((well(3), U(3, 2, seed=1)), {"upper": True}, "upper"),
                     Sample((well(2), U(2, 1, seed=1)), {"upper": False, "unitriangular": True}, "lower-unit"),
                     Sample((well(2, 2), U(1, 2, seed=1)), {"upper": False, "left": False}, "right-batch-bcast")],
            error_inputs=lambda: [ErrorInput((np.zeros((2, 2)), U(2, 1)), {"upper": True}, L.LinAlgError,
                                             "linalg.solve_triangular: the triangular matrix is singular")],
            **_TOL),
    OpEntry("lu_factor", lambda a: L.lu_factor(a), lambda a: TL.lu_factor(a),
            lambda: [Sample((U(3, 3),)), Sample((U(2, 2, 2),), name="batch", gradcheck=False)], **_TOL),
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
    OpEntry("qr", lambda a, **k: L.qr(a, **k), lambda a, **k: TL.qr(a, **k),
            lambda: [Sample((U(3, 3),)), Sample((U(3, 2),), name="tall"), Sample((U(2, 3),), name="wide"),
                     Sample((U(2, 2, 3),), name="wide-batch", gradcheck=False),
                     Sample((U(3, 3),), {"mode": "complete"}, "complete-square", gradcheck=False)], **_TOL),
    OpEntry("pinv", lambda a, **k: L.pinv(a, **k), lambda a, **k: TL.pinv(a, **k),
            lambda: [Sample((U(3, 3),)), Sample((U(4, 3),), name="tall"), Sample((U(2, 2, 3),), name="wide-batch"),
                     Sample((spd(3),), {"hermitian": True}, "hermitian", gradcheck=False)], **_TOL),
    # linalg.vector_norm runs the registered ``norm`` op (ops/reduction.py): a second front end, a second entry
    OpEntry("norm", lambda x, **k: L.vector_norm(x, **k), lambda x, **k: TL.vector_norm(x, **k),
            lambda: [Sample((U(3, 4),)), Sample((U(3, 4),), {"ord": 1, "dim": 1}, "l1"),
                     Sample((U(3, 4),), {"ord": 3, "dim": (0, 1), "keepdim": True}, "l3"),
                     Sample((U(3, 4),), {"ord": 0.5, "dim": 0}, "l0.5"),
                     Sample((U(3, 4),), {"ord": float("inf"), "dim": 1}, "inf"),
                     Sample((U(3, 4),), {"ord": float("-inf")}, "-inf"),
                     Sample((U(3, 4),), {"ord": 0}, "l0", gradcheck=False),
                     Sample((np.zeros(3),), name="zero-vector", gradcheck=False),
                     Sample((np.array([1.0, -2.0, 2.0]),), {"ord": float("inf")}, "inf-ties", gradcheck=False),
                     Sample((np.array(1.5),), name="0d"), Sample((U(0, 3),), {"dim": 1}, "empty"),
                     Sample((noncontig(3, 4),), {"dim": 0}, "noncontig")],
            error_inputs=lambda: [ErrorInput((U(3),), {"ord": "fro"}, TypeError, "linalg.vector_norm: ord must be"),
                                  ErrorInput((U(3),), {"dim": 2}, IndexError, "dimension out of range")]),
]
