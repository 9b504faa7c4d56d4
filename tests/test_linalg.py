"""Linear algebra beyond the generic suite: the composite products and norms (forward, gradient vs PyTorch,
second derivatives), the documented singularities, errors and dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid.errors import ShapeMismatch
from tests.opdb import OpEntry, Sample, U
from tests.opdb.linalg import spd, sym, well

L, TL = pl.linalg, torch.linalg
_suite = pytest.importorskip("tests.test_ops")

# composites: no registry entry, same checks as the generic suite (forward, grad vs torch, gradcheck, gradgradcheck)
COMPOSITES = [
    OpEntry("mm", pl.mm, torch.mm, lambda: [Sample((U(3, 4), U(4, 2, seed=1)))]),
    OpEntry("bmm", pl.bmm, torch.bmm, lambda: [Sample((U(2, 3, 4), U(2, 4, 2, seed=1)))]),
    OpEntry("mv", pl.mv, torch.mv, lambda: [Sample((U(3, 4), U(4, seed=1)))]),
    OpEntry("vdot", pl.vdot, torch.vdot, lambda: [Sample((U(4), U(4, seed=1)))]),
    OpEntry("inner", pl.inner, torch.inner, lambda: [Sample((U(2, 4), U(3, 4, seed=1))),
                                                    Sample((np.array(2.0), U(3, seed=1)), name="scalar")]),
    OpEntry("tensordot", lambda a, b, **k: pl.tensordot(a, b, **k), lambda a, b, **k: torch.tensordot(a, b, **k),
            lambda: [Sample((U(2, 3, 4), U(3, 4, 2, seed=1)), {"dims": 2}),
                     Sample((U(2, 3, 4), U(3, 2, 2, seed=1)), {"dims": ([1, 0], [0, 2])}, "lists")]),
    OpEntry("kron", pl.kron, torch.kron, lambda: [Sample((U(2, 3), U(3, 2, seed=1))),
                                                 Sample((U(2), U(3, 2, seed=1)), name="1d-2d")]),
    OpEntry("addmm", lambda i, a, b, **k: pl.addmm(i, a, b, **k), lambda i, a, b, **k: torch.addmm(i, a, b, **k),
            lambda: [Sample((U(3), U(2, 4, seed=1), U(4, 3, seed=2)), {"beta": 0.5, "alpha": 2.0}),
                     Sample((np.full((2, 3), np.nan), U(2, 4, seed=1), U(4, 3, seed=2)), {"beta": 0}, "beta0",
                            grad_args=(1, 2))]),
    OpEntry("addmv", pl.addmv, torch.addmv, lambda: [Sample((U(3), U(3, 4, seed=1), U(4, seed=2)))]),
    OpEntry("baddbmm", pl.baddbmm, torch.baddbmm, lambda: [Sample((U(2, 3, 3), U(2, 3, 4, seed=1),
                                                                   U(2, 4, 3, seed=2)))]),
    OpEntry("cross", lambda a, b, **k: L.cross(a, b, **k), lambda a, b, **k: TL.cross(a, b, **k),
            lambda: [Sample((U(4, 3), U(1, 3, seed=1))), Sample((U(3, 2), U(3, 2, seed=1)), {"dim": 0}, "dim0")]),
    *[OpEntry("matrix_power", lambda a, n=n: pl.matrix_power(a, n), lambda a, n=n: torch.matrix_power(a, n),
              lambda: [Sample((well(3, 2) / 3,))]) for n in (0, 1, 3, -2)],
    OpEntry("logdet", pl.logdet, torch.logdet, lambda: [Sample((spd(3),))]),
    OpEntry("svdvals", L.svdvals, TL.svdvals, lambda: [Sample((U(3, 4),)), Sample((U(2, 4, 3),), name="batch")]),
    OpEntry("eigvalsh", lambda a: L.eigvalsh(sym(a)), lambda a: TL.eigvalsh(sym(a)), lambda: [Sample((spd(3),))]),
    OpEntry("lstsq", lambda a, b: L.lstsq(a, b).solution, lambda a, b: TL.lstsq(a, b).solution,
            lambda: [Sample((U(4, 3), U(4, 2, seed=1)))]),
    OpEntry("lu_solve", lambda a, b, **k: L.lu_solve(*L.lu_factor(a), b, **k),
            lambda a, b, **k: TL.lu_solve(*TL.lu_factor(a), b, **k),
            lambda: [Sample((well(2), U(2, 2, seed=1))), Sample((well(2), U(1, 2, seed=1)), {"left": False}, "right"),
                     Sample((well(2), U(2, 1, seed=1)), {"adjoint": True}, "adjoint")]),
    *[OpEntry("matrix_norm", lambda a, o=o: L.matrix_norm(a, o), lambda a, o=o: TL.matrix_norm(a, o),
              lambda: [Sample((U(2, 3, 4),))]) for o in ("fro", "nuc", 2, -2, 1, -1, float("inf"), float("-inf"))],
    OpEntry("norm", lambda a, **k: L.norm(a, **k), lambda a, **k: TL.norm(a, **k),
            lambda: [Sample((U(2, 3),)), Sample((U(2, 3),), {"ord": 1, "dim": 1}, "dim"),
                     Sample((U(2, 3),), {"ord": "nuc"}, "nuc")]),
    OpEntry("torch.norm", lambda a, **k: pl.norm(a, **k), lambda a, **k: torch.norm(a, **k),
            lambda: [Sample((U(2, 3),)), Sample((U(2, 3),), {"p": 3, "dim": 1}, "p3")]),
    OpEntry("multi_dot", lambda *a: L.multi_dot(list(a)), lambda *a: TL.multi_dot(list(a)),
            lambda: [Sample((U(2, 5), U(5, 3, seed=1), U(3, 4, seed=2))),
                     Sample((U(3), U(3, 2, seed=1), U(2, seed=2)), name="vectors")]),
    OpEntry("vecdot", lambda a, b: L.vecdot(a, b), lambda a, b: TL.vecdot(a, b),
            lambda: [Sample((U(2, 3), U(3, seed=1)))]),
]
_IDS = [f"{e.name}-{i}" for i, e in enumerate(COMPOSITES)]


@pytest.mark.parametrize("entry", COMPOSITES, ids=_IDS)
def test_composite_forward(entry):
    for dtype in ("float32", "float64"):
        _suite.test_forward(OpEntry(**{**entry.__dict__, "atol": 1e-4, "rtol": 1e-4}), dtype, "cpu")


@pytest.mark.parametrize("entry", COMPOSITES, ids=_IDS)
def test_composite_grads(entry):
    _suite.test_grad_vs_torch(entry, "cpu")
    _suite.test_gradcheck(entry)
    _suite.test_gradgradcheck(entry)


def test_einsum_fast_path_is_matmul():
    a, b = pl.randn(4, 8, 16), pl.randn(4, 16, 8)
    np.testing.assert_allclose(pl.einsum("bij,bjk->bik", a, b).numpy(), (a @ b).numpy(), rtol=1e-5, atol=1e-5)


def test_shape_errors_name_both_shapes():
    with pytest.raises(ShapeMismatch, match=r"mm: .*\(2, 3\) and \(4, 5\)"):
        pl.mm(pl.ones(2, 3), pl.ones(4, 5))
    with pytest.raises(ShapeMismatch, match=r"bmm: .*\(2, 3, 4\) and \(3, 4, 5\)"):
        pl.bmm(pl.ones(2, 3, 4), pl.ones(3, 4, 5))
    with pytest.raises(ShapeMismatch, match=r"tensordot"):
        pl.tensordot(pl.ones(2, 3), pl.ones(4, 5), dims=1)
    with pytest.raises(ShapeMismatch, match=r"cross: dim -1 must have size 3"):
        pl.cross(pl.ones(2, 4), pl.ones(2, 4))


def test_singular_inputs_raise_linalg_error():
    assert issubclass(L.LinAlgError, pl.LucidError)
    with pytest.raises(L.LinAlgError, match="linalg.inv"):
        L.inv(pl.ones(2, 2))
    with pytest.raises(L.LinAlgError, match="linalg.solve"):
        L.solve(pl.ones(2, 2), pl.ones(2))
    with pytest.raises(L.LinAlgError, match="linalg.cholesky"):
        L.cholesky(-pl.eye(2))


def test_det_gradient_of_exactly_singular_matrix_is_the_cofactor_matrix():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    x = pl.tensor(a, requires_grad=True)
    L.det(x).backward()
    cof = np.array([[np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) * (-1) ** (i + j) for j in range(3)]
                    for i in range(3)])
    np.testing.assert_allclose(x.grad.numpy(), cof, atol=1e-10)
    assert pl.autograd.gradcheck(L.det, (pl.tensor(a, requires_grad=True),))


@pytest.mark.parametrize("which", ["eigh", "svd"])
def test_repeated_values_give_nonfinite_vector_gradients_like_torch(which):
    a = np.diag([1.0, 1.0, 2.0])
    x, xt = pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    if which == "eigh":
        L.eigh(x)[1].sum().backward()
        TL.eigh(xt)[1].sum().backward()
    else:
        L.svd(x)[0].sum().backward()
        TL.svd(xt)[0].sum().backward()
    assert not np.isfinite(x.grad.numpy()).all() and not torch.isfinite(xt.grad).all()
    y = pl.tensor(a, requires_grad=True)  # values alone stay finite
    (L.eigvalsh(y) if which == "eigh" else L.svdvals(y)).sum().backward()
    assert np.isfinite(y.grad.numpy()).all()


@pytest.mark.parametrize("fn", [L.det, L.inv, L.matrix_exp, lambda a: L.cholesky(a), lambda a: L.eigh(a)[0],
                                lambda a: L.svd(a)[1], lambda a: L.qr(a)[1], L.pinv])
def test_half_precision_computes_in_float32_and_keeps_dtype(fn):
    a = pl.tensor(spd(3) / 10).to(pl.float16)
    out = fn(a)
    assert out.dtype is pl.float16
    np.testing.assert_allclose(out.float().numpy(), fn(a.float()).numpy(), rtol=2e-2, atol=2e-2)


def test_amp_policy_keeps_input_dtype_for_decompositions():
    a = pl.tensor(spd(3), dtype=pl.float32)
    with pl.amp.autocast("cpu", dtype=pl.float16):
        assert L.cholesky(a).dtype is pl.float32
        assert L.eigh(a)[1].dtype is pl.float32
        assert L.svd(a)[0].dtype is pl.float32
        assert pl.einsum("ij,jk", a, a).dtype is pl.float16


def test_complex_forward():
    a = np.array([[2 + 1j, 1j], [0.5, 3 - 1j]])
    x, xt = pl.tensor(a), torch.tensor(a)
    for f, g in ((L.det, TL.det), (L.inv, TL.inv), (lambda m: L.svdvals(m), TL.svdvals)):
        np.testing.assert_allclose(f(x).numpy(), g(xt).numpy(), atol=1e-12)
    np.testing.assert_allclose(pl.vdot(x[0], x[1]).numpy(), torch.vdot(xt[0], xt[1]).numpy())


def test_linalg_names_are_torch_linalg_names():
    for name in L.__all__:
        assert hasattr(TL, name), f"pylucid.linalg.{name} is not a torch.linalg name"
    for name in ("matmul", "det", "slogdet", "matrix_exp", "matrix_power", "cross"):  # in both namespaces
        assert getattr(L, name) is getattr(pl, name), name


def test_linalg_diagonal_is_a_view_with_torch_defaults():
    a = np.arange(24.0).reshape(2, 3, 4)
    x, xt = pl.tensor(a), torch.tensor(a)
    for kw in ({}, {"offset": 1}, {"offset": -1}, {"dim1": 0, "dim2": 2}):
        d = L.diagonal(x, **kw)
        np.testing.assert_array_equal(d.numpy(), TL.diagonal(xt, **kw).numpy())
        assert np.shares_memory(d._data, x._data)
    y, yt = pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (L.diagonal(y, offset=1) * 2.0).sum().backward()
    (TL.diagonal(yt, offset=1) * 2.0).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), yt.grad.numpy())


def test_torch_level_names_match_torch():
    a = well(3)
    x, xt = pl.tensor(a), torch.tensor(a)
    np.testing.assert_allclose(pl.inverse(x).numpy(), torch.inverse(xt).numpy(), atol=1e-12)
    np.testing.assert_allclose(x.inverse().numpy(), xt.inverse().numpy(), atol=1e-12)
    r = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(pl.pinverse(pl.tensor(r)).numpy(), torch.pinverse(torch.tensor(r)).numpy(), atol=1e-12)
    np.testing.assert_allclose(pl.tensor(r).pinverse().numpy(), torch.tensor(r).pinverse().numpy(), atol=1e-12)
    for some, mode in ((True, "reduced"), (False, "complete")):
        q, rr = pl.tensor(r).qr(some)
        qt, rt = TL.qr(torch.tensor(r), mode=mode)
        assert tuple(q.shape) == tuple(qt.shape) and tuple(rr.shape) == tuple(rt.shape)
        np.testing.assert_allclose((q @ rr).numpy(), r, atol=1e-12)
    np.testing.assert_allclose(pl.ger(x[0], x[1]).numpy(), torch.ger(xt[0], xt[1]).numpy())
    np.testing.assert_allclose((x[0] @ x).numpy(), (xt[0] @ xt).numpy())


def test_mv_and_products_without_broadcasting_name_their_layout():
    with pytest.raises(ShapeMismatch, match=r"mv: expected a \(n, m\) matrix and a \(m,\) vector .*\(2, 3\) and \(2,"):
        pl.mv(pl.ones(2, 3), pl.ones(2))
    with pytest.raises(ShapeMismatch, match=r"mm: .*\(2, 3\) and \(3,\)"):
        pl.mm(pl.ones(2, 3), pl.ones(3))
    with pytest.raises(ShapeMismatch, match=r"bmm: .*\(2, 3, 4\) and \(3, 4, 5\)"):
        pl.bmm(pl.ones(2, 3, 4), pl.ones(3, 4, 5))
    with pytest.raises(TypeError, match="mm: mat2 must be a Tensor, got list"):
        pl.mm(pl.ones(2, 2), [[1.0, 0.0], [0.0, 1.0]])


# ---------------------------------------------------------------- the torch-parity additions
def _close(a, b, atol=1e-6):
    a, b = a.detach().numpy(), b.detach().numpy()
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, atol=atol, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 5, 3)], ids=str)
def test_lstsq_outputs_per_driver_match_torch(driver, shape):
    a, b = U(*shape), U(*shape[:-1], 2, seed=1)
    mine = L.lstsq(pl.tensor(a, requires_grad=True), pl.tensor(b), driver=driver)
    ref = TL.lstsq(torch.tensor(a, requires_grad=True), torch.tensor(b), driver=driver)
    for m, r in zip(mine, ref):
        _close(m, r)
        assert m.requires_grad == r.requires_grad


def test_lstsq_residuals_need_full_rank_for_gelsd_and_are_differentiable():
    a = U(5, 3)
    a[:, 2] = a[:, 0]
    assert L.lstsq(pl.tensor(a), pl.tensor(U(5, 2, seed=1)), driver="gelsd").residuals.shape == (0,)
    a, b = U(5, 3), U(5, 2, seed=1)
    A, TA = pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (g,) = pl.autograd.grad(L.lstsq(A, pl.tensor(b), driver="gelsd").residuals.sum(), [A])
    (tg,) = torch.autograd.grad(TL.lstsq(TA, torch.tensor(b), driver="gelsd").residuals.sum(), [TA])
    _close(g, tg)
    with pytest.raises(ValueError, match="linalg.lstsq: driver must be one of"):
        L.lstsq(A, pl.tensor(b), driver="gelsx")


def test_tensor_tolerances_of_pinv_and_matrix_rank_match_torch():
    a = U(3, 4, 4)
    a[1, :, 3] = a[1, :, 0]
    for kw in ({"atol": np.array([0.1, 5.0, 0.0])}, {"rtol": np.array([0.1, 0.5, 0.0])},
               {"atol": np.array([0.0, 1.0, 2.0]), "rtol": np.array(0.2)}):
        kp = {k: pl.tensor(v) for k, v in kw.items()}
        kt = {k: torch.tensor(v) for k, v in kw.items()}
        assert (L.matrix_rank(pl.tensor(a), **kp).numpy() == TL.matrix_rank(torch.tensor(a), **kt).numpy()).all()
        _close(L.pinv(pl.tensor(a), **kp), TL.pinv(torch.tensor(a), **kt))


@pytest.mark.parametrize("case", [
    lambda m: m.linalg.solve_triangular(m.zeros(0, 0), m.zeros(0, 2), upper=True),
    lambda m: m.linalg.solve_triangular(m.eye(2), m.zeros(2, 0), upper=False),
    lambda m: m.linalg.lu_solve(*m.linalg.lu_factor(m.zeros(0, 0)), m.zeros(0, 2)),
    lambda m: m.linalg.lu_solve(*m.linalg.lu_factor(m.zeros(2, 0, 0)), m.zeros(2, 1, 0), left=False),
    lambda m: m.linalg.lu_factor(m.zeros(0, 3))[0],
    lambda m: m.linalg.lu(m.zeros(0, 3))[2],
    lambda m: m.linalg.matrix_norm(m.zeros(0, 3), 2),
    lambda m: m.linalg.matrix_norm(m.zeros(3, 0), float("inf")),
    lambda m: m.linalg.norm(m.zeros(0, 3), 1),
    lambda m: m.linalg.norm(m.tensor(-3.0)),
    lambda m: m.linalg.vector_norm(m.tensor(-2.0), 3, dim=0),
    lambda m: m.linalg.ldl_solve(*m.linalg.ldl_factor(m.zeros(0, 0)), m.zeros(0, 2)),
    lambda m: m.geqrf(m.zeros(0, 2))[1],
], ids=["st-0x0", "st-no-rhs", "lu_solve-0x0", "lu_solve-empty-batch", "lu_factor-0x3", "lu-0x3", "mnorm2-empty",
        "mnorm-inf-empty", "norm1-empty", "norm-0d", "vnorm-0d", "ldl-0x0", "geqrf-empty"])
def test_empty_and_0d_inputs_match_torch(case):
    _close(case(pl), case(torch))


def test_lu_family_matches_torch_on_square_wide_and_tall():
    for shape in ((3, 3), (3, 5), (5, 3), (2, 4, 3)):
        a = U(*shape)
        for m, r in zip(L.lu(pl.tensor(a)), TL.lu(torch.tensor(a))):
            _close(m, r)
        A, TA = pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        cot = U(*shape, seed=2)
        (g,) = pl.autograd.grad(L.lu_factor(A)[0], [A], [pl.tensor(cot)])
        (tg,) = torch.autograd.grad(TL.lu_factor(TA)[0], [TA], [torch.tensor(cot)])
        _close(g, tg)


def test_ex_functions_report_singular_input_in_info():
    sing = np.ones((2, 2))
    _, info = L.solve_ex(pl.tensor(sing), pl.tensor(U(2, 1)))
    assert int(info) == int(TL.solve_ex(torch.tensor(sing), torch.tensor(U(2, 1))).info) == 2
    assert int(L.inv_ex(pl.tensor(sing))[1]) == 2
    assert int(L.lu_factor_ex(pl.tensor(sing))[2]) == 2
    a = np.array([[[4.0, 2, 0], [2, 1, 0], [0, 0, 1]], [[1.0, 0, 0], [0, 2, 0], [0, 0, 3]]])
    low, info = L.cholesky_ex(pl.tensor(a))
    assert info.numpy().tolist() == TL.cholesky_ex(torch.tensor(a)).info.numpy().tolist() == [2, 0]
    _close(low[1], TL.cholesky(torch.tensor(a[1])))
    with pytest.raises(L.LinAlgError, match="linalg.solve"):
        L.solve_ex(pl.tensor(sing), pl.tensor(U(2, 1)), check_errors=True)
    with pytest.raises(L.LinAlgError, match="linalg.lu_factor_ex"):
        L.lu_factor_ex(pl.tensor(sing), check_errors=True)
    assert float(L.cond(pl.tensor(sing), 1)) == float("inf")


def test_eig_loss_that_depends_on_the_phase_raises_like_torch():
    a = U(3, 3)
    A = pl.tensor(a, requires_grad=True)
    w, v = L.eig(A)
    with pytest.raises(L.LinAlgError, match="linalg.eig: the eigenvectors are defined up to a phase"):
        pl.autograd.grad(v.imag.sum(), [A])
    with pytest.raises(RuntimeError, match="ill-defined"):
        TA = torch.tensor(a, requires_grad=True)
        torch.autograd.grad(TL.eig(TA)[1].imag.sum(), [TA])
    # the eigenvalues alone: V^{-H} diag(gL) V^H, real for a real A
    (g,) = pl.autograd.grad(L.eigvals(A).real.sum(), [A])
    TA = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad(TL.eigvals(TA).real.sum(), [TA])
    _close(g, tg)


def test_eig_is_complex_even_when_every_eigenvalue_is_real():
    w, v = L.eig(pl.tensor(np.diag([1.0, 2.0]).astype(np.float32)))
    assert w.dtype == pl.complex64 and v.dtype == pl.complex64


def test_geqrf_backward_raises_not_implemented_naming_the_op():
    a = pl.tensor(U(3, 2), requires_grad=True)
    with pytest.raises(NotImplementedError, match="geqrf: the derivative is not implemented"):
        pl.geqrf(a)[0].sum().backward()


def test_householder_product_rebuilds_the_q_of_qr():
    a = U(5, 3)
    h, tau = pl.geqrf(pl.tensor(a))
    q = L.householder_product(h, tau)
    _close(q, TL.qr(torch.tensor(a)).Q)


def test_tensorinv_and_tensorsolve_invert_tensordot():
    a = well(6).reshape(6, 2, 3)
    inv = L.tensorinv(pl.tensor(a), ind=1)
    _close(pl.tensordot(inv, pl.tensor(a), 1), pl.eye(2 * 3).reshape(2, 3, 2, 3).to(pl.float64))
    with pytest.raises(ShapeMismatch, match="linalg.tensorinv"):
        L.tensorinv(pl.tensor(U(2, 3)), ind=1)


@pytest.mark.parametrize("eq, dts", [("ii", "int32"), ("ii", "bool"), ("ij->i", "int32"), ("ij,k->i", "uint8"),
                                     ("ij,jk->ik", "int32"), ("ij->ji", "int32"), ("i,j->ij", "bool")])
def test_einsum_integer_results_have_torchs_dtype(eq, dts):
    terms = eq.split("->")[0].split(",")
    xs = [np.arange(1, 10).reshape(3, 3)[:len(t), :len(t)][0 if len(t) == 1 else slice(None)].astype(dts)
          for t in terms]
    p = pl.einsum(eq, *[pl.tensor(x) for x in xs])
    t = torch.einsum(eq, *[torch.tensor(x) for x in xs])
    assert str(t.dtype).removeprefix("torch.") == p.dtype.name
    np.testing.assert_array_equal(p.numpy(), t.numpy())


def test_vander_of_integers_is_int64_and_cholesky_of_nan_raises():
    x = np.array([1, 2, 3], dtype=np.int32)
    assert pl.vander(pl.tensor(x), 1).dtype == pl.int64 == getattr(pl, str(torch.vander(torch.tensor(x), 1).dtype)[6:])
    a = np.eye(3, dtype=np.float32)
    a[0, 0] = np.nan
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(torch.tensor(a))
    with pytest.raises(pl.linalg.LinAlgError, match="linalg.cholesky"):
        pl.linalg.cholesky(pl.tensor(a))


_SUMS = [("ab,ab->a", [(3, 1), (1, 4)]), ("i,i", [(1,), (3,)]), ("ab,ab,ab->a", [(3, 1), (3, 1), (1, 4)])]
_NO_SUMS = [("ab,ab->a", [(3, 4), (1, 4)]), ("ab,a->a", [(3, 1), (3,)]), ("ii->i", [(1, 1)])]


# PyTorch has no bool bmm: bool operands only where its contraction sums
@pytest.mark.parametrize("eq, shapes, dt", [(*c, dt) for c in _SUMS for dt in ("int32", "uint8", "bool")]
                         + [(*c, dt) for c in _NO_SUMS for dt in ("int32", "uint8")])
def test_einsum_integer_dtype_with_size_one_labels_is_torchs(eq, shapes, dt):
    # a label of size 1 in one operand: PyTorch sums it in the other (an int64 sum) before the product
    xs = [np.arange(1, 1 + int(np.prod(s))).reshape(s).astype(dt) for s in shapes]
    p = pl.einsum(eq, *[pl.tensor(x) for x in xs])
    t = torch.einsum(eq, *[torch.tensor(x) for x in xs])
    assert str(t.dtype).removeprefix("torch.") == p.dtype.name
    np.testing.assert_array_equal(p.numpy(), t.numpy())


def test_complex_matmul_with_infinite_entries_is_the_textbook_product():
    a = np.array([[-2.4 - 0.5j, 1.8 + 1j, 1.1 - 0.3j], [1j, 2, 3]], dtype=np.complex64)
    b = np.array([[np.inf, 1], [-0.5 + 3.3j, np.nan], [-0.2 - 0.3j, 2j]], dtype=np.complex64)
    _close(pl.tensor(a) @ pl.tensor(b), torch.tensor(a) @ torch.tensor(b))
    _close(pl.tensor(a) @ pl.tensor(b.real.copy()), torch.tensor(a) @ torch.tensor(b.real.copy()).to(torch.complex64))


def test_slogdet_sign_of_a_nan_determinant_is_zero():
    a = np.array([[[np.nan, 1], [2, 1]], [[2, 1], [1, 3]], [[np.inf, 0], [0, 1]]], dtype=np.float32)
    for p, t in zip(L.slogdet(pl.tensor(a)), TL.slogdet(torch.tensor(a))):
        _close(p, t)


@pytest.mark.parametrize("p", [1, -1, "fro", float("inf")])
def test_cond_of_a_nan_matrix_is_inf(p):
    a = np.array([[np.nan, np.inf], [-np.inf, 1.0]], dtype=np.float32)
    _close(L.cond(pl.tensor(a), p), TL.cond(torch.tensor(a), p))


def test_lu_of_a_matrix_with_nan_propagates_it_as_lapack():
    rng = np.random.default_rng(0)
    for shape in [(3, 3), (2, 3), (3, 2), (2, 3, 4)]:
        a = rng.standard_normal(shape).astype(np.float32)
        a.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
        for p, t in zip(L.lu_factor_ex(pl.tensor(a)), TL.lu_factor_ex(torch.tensor(a))):
            _close(p, t, atol=1e-5)
        for p, t in zip(L.lu(pl.tensor(a)), TL.lu(torch.tensor(a))):
            _close(p, t, atol=1e-5)
    # a NaN below the first pivot is never the largest: the pivot is chosen among the other entries
    a = np.array([[1.0, 2, 0], [np.nan, 1, 1], [3, 0, 1]], dtype=np.float32)
    for p, t in zip(L.lu_factor(pl.tensor(a)), TL.lu_factor(torch.tensor(a))):
        _close(p, t)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_of_a_failed_matrix_is_lapacks_partial_factor(upper):
    a = np.array([[[np.nan, np.inf, 1], [np.inf, 11, 0.6], [1, 0.6, 4]], [[4, 2, 1], [2, 5, 3], [1, 3, -5]],
                  [[4, 2, 1], [2, 5, 3], [1, 3, 5]]], dtype=np.float32)
    p, t = L.cholesky_ex(pl.tensor(a), upper=upper), TL.cholesky_ex(torch.tensor(a), upper=upper)
    assert p[1].numpy().tolist() == t.info.numpy().tolist() == [1, 3, 0]
    _close(p[0], t.L, atol=1e-5)


def test_input_shape_is_checked_with_beta_zero_and_small_argument_checks():
    with pytest.raises(RuntimeError):
        torch.addmm(torch.ones(2, 3), torch.ones(2, 4), torch.ones(4, 4), beta=0)
    with pytest.raises(ShapeMismatch, match="addmm: input of shape"):
        pl.addmm(pl.ones(2, 3), pl.ones(2, 4), pl.ones(4, 4), beta=0)
    _close(pl.addmm(pl.ones(4), pl.ones(2, 4), pl.ones(4, 4), beta=0),
           torch.addmm(torch.ones(4), torch.ones(2, 4), torch.ones(4, 4), beta=0))
    with pytest.raises(TypeError):
        TL.vecdot(torch.ones(3, 2), torch.ones(3, 2), dim=None)
    with pytest.raises(TypeError, match="linalg.vecdot: argument 'dim' must be an int"):
        L.vecdot(pl.ones(3, 2), pl.ones(3, 2), dim=None)
    with pytest.raises(RuntimeError):
        TL.tensorinv(torch.tensor(2.0), 1)
    with pytest.raises(ShapeMismatch, match="linalg.tensorinv: ind=1"):
        L.tensorinv(pl.tensor(2.0), 1)


def test_householder_product_without_reflectors_ignores_nan():
    a = U(3, 2)
    a[0, 0] = np.nan
    A, TA = pl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    q, tq = L.householder_product(A, pl.zeros(0, dtype=pl.float64)), TL.householder_product(TA, torch.zeros(0).double())
    _close(q, tq)
    q.sum().backward()
    assert A.grad is not None and not bool(A.grad.isnan().any())
