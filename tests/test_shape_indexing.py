"""Shape/layout and indexing tests that do not fit the generic op suite: the composites
against PyTorch (values and gradients), views that must not copy, advanced-index
placement (hypothesis against NumPy), setitem gradients and scatter edge cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pylucid as pl
from pylucid.errors import ShapeMismatch


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _both(a, requires_grad=True):
    t = torch.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")
    p = pl.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")
    return p, t


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [x for v in o for x in _flat(v)]
    return [o]


def _check(pfn, tfn, *arrays, grad=True):
    """Forward values and (when floating) gradients of a random cotangent, vs PyTorch."""
    pins, tins = zip(*(_both(a) for a in arrays))
    pout, tout = _flat(pfn(*pins)), _flat(tfn(*tins))
    assert len(pout) == len(tout)
    for p, t in zip(pout, tout):
        assert tuple(p.shape) == tuple(t.shape)
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)
    if not grad:
        return
    live = [(p, t) for p, t in zip(pout, tout) if t.requires_grad]
    if not live:
        return
    rng = np.random.default_rng(7)
    cots = [rng.standard_normal(tuple(t.shape)) for _, t in live]
    leaves = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    pg = pl.autograd.grad([p for p, _ in live], [pins[i] for i in leaves], [pl.tensor(c) for c in cots],
                          allow_unused=True)
    tg = torch.autograd.grad([t for _, t in live], [tins[i] for i in leaves], [torch.tensor(c) for c in cots],
                             allow_unused=True)
    for a, b in zip(pg, tg):
        if b is None:
            assert a is None or np.allclose(a.numpy(), 0)
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


X = _rand(3, 4)
X3 = _rand(2, 3, 4)
V = _rand(5)

COMPOSITES = [
    ("unflatten", lambda x: x.unflatten(1, (2, -1)), lambda x: x.unflatten(1, (2, -1)), (X,)),
    ("ravel", lambda x: x.t().ravel(), lambda x: x.t().ravel(), (X,)),
    ("movedim", lambda x: pl.movedim(x, (0, 1), (2, 0)), lambda x: torch.movedim(x, (0, 1), (2, 0)), (X3,)),
    ("moveaxis", lambda x: pl.moveaxis(x, -1, 0), lambda x: torch.moveaxis(x, -1, 0), (X3,)),
    ("squeeze-tuple", lambda x: x.reshape(1, 3, 1, 4).squeeze((0, 2)),
     lambda x: x.reshape(1, 3, 1, 4).squeeze((0, 2)), (X,)),
    ("expand_as", lambda x, y: x[:1].expand_as(y), lambda x, y: x[:1].expand_as(y), (X, _rand(2, 3, 4))),
    ("broadcast_tensors", lambda a, b: pl.broadcast_tensors(a, b), lambda a, b: torch.broadcast_tensors(a, b),
     (_rand(3, 1), _rand(4))),
    ("hstack", lambda a, b: pl.hstack([a, b]), lambda a, b: torch.hstack([a, b]), (X, _rand(3, 2))),
    ("hstack-1d", lambda a, b: pl.hstack([a, b]), lambda a, b: torch.hstack([a, b]), (V, _rand(2))),
    ("vstack", lambda a, b: pl.vstack([a, b]), lambda a, b: torch.vstack([a, b]), (_rand(4), X)),
    ("dstack", lambda a, b: pl.dstack([a, b]), lambda a, b: torch.dstack([a, b]), (X, X * 2)),
    ("column_stack", lambda a, b: pl.column_stack([a, b]), lambda a, b: torch.column_stack([a, b]),
     (_rand(3), _rand(3, 2))),
    ("stack-neg", lambda a, b: pl.stack([a, b], -1), lambda a, b: torch.stack([a, b], -1), (X, X * 3)),
    ("cat-0d-promote", lambda a, b: pl.cat([a, b.to(pl.float32)]), lambda a, b: torch.cat([a, b.float()]),
     (X, _rand(2, 4))),
    ("split-int", lambda x: x.split(2, 1), lambda x: x.split(2, 1), (_rand(3, 5),)),
    ("split-sizes", lambda x: x.split([1, 0, 4], 1), lambda x: x.split([1, 0, 4], 1), (_rand(3, 5),)),
    ("chunk", lambda x: x.chunk(3, 1), lambda x: x.chunk(3, 1), (_rand(2, 7),)),
    ("chunk-fewer", lambda x: x.chunk(4, 0), lambda x: x.chunk(4, 0), (_rand(6, 2),)),
    ("unbind", lambda x: x.unbind(1), lambda x: x.unbind(1), (X,)),
    ("tensor_split-n", lambda x: x.tensor_split(3, 1), lambda x: x.tensor_split(3, 1), (_rand(2, 7),)),
    ("tensor_split-idx", lambda x: x.tensor_split([1, 6, -1], 1), lambda x: x.tensor_split([1, 6, -1], 1),
     (_rand(2, 7),)),
    ("hsplit", lambda x: pl.hsplit(x, 2), lambda x: torch.hsplit(x, 2), (X,)),
    ("fliplr", lambda x: pl.fliplr(x), lambda x: torch.fliplr(x), (X,)),
    ("flipud", lambda x: pl.flipud(x), lambda x: torch.flipud(x), (X,)),
    *[(f"rot90-{k}", lambda x, k=k: pl.rot90(x, k, (1, 2)), lambda x, k=k: torch.rot90(x, k, (1, 2)), (X3,))
      for k in (-1, 0, 1, 2, 3, 5)],
    ("repeat", lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3), (X,)),
    ("repeat-0", lambda x: x.repeat(0, 2), lambda x: x.repeat(0, 2), (X,)),
    ("tile-short", lambda x: x.tile((2,)), lambda x: x.tile((2,)), (X,)),
    ("repeat_interleave-int", lambda x: x.repeat_interleave(2, 1), lambda x: x.repeat_interleave(2, 1), (X,)),
    ("repeat_interleave-flat", lambda x: x.repeat_interleave(3), lambda x: x.repeat_interleave(3), (X,)),
    ("repeat_interleave-tensor", lambda x: x.repeat_interleave(pl.tensor([2, 0, 1]), dim=0),
     lambda x: x.repeat_interleave(torch.tensor([2, 0, 1]), dim=0), (X,)),
    ("diag-1d", lambda x: pl.diag(x, 1), lambda x: torch.diag(x, 1), (V,)),
    ("diag-2d", lambda x: pl.diag(x, -1), lambda x: torch.diag(x, -1), (X,)),
    ("trace", lambda x: pl.trace(x), lambda x: torch.trace(x), (X,)),
    ("narrow", lambda x: x.narrow(1, -3, 2), lambda x: x.narrow(1, -3, 2), (X,)),
    ("narrow_copy", lambda x: pl.narrow_copy(x, 0, 1, 2), lambda x: torch.narrow_copy(x, 0, 1, 2), (X,)),
    ("meshgrid-ij", lambda a, b: pl.meshgrid(a, b, indexing="ij"), lambda a, b: torch.meshgrid(a, b, indexing="ij"),
     (_rand(3), _rand(4))),
    ("meshgrid-xy", lambda a, b, c: pl.meshgrid(a, b, c, indexing="xy"),
     lambda a, b, c: torch.meshgrid(a, b, c, indexing="xy"), (_rand(3), _rand(4), _rand(2))),
    ("atleast_3d", lambda a, b, c: pl.atleast_3d(a, b, c), lambda a, b, c: torch.atleast_3d(a, b, c),
     (np.array(1.5), V, X)),
    ("atleast_2d", lambda a: pl.atleast_2d(a), lambda a: torch.atleast_2d(a), (V,)),
    ("atleast_1d", lambda a: pl.atleast_1d(a), lambda a: torch.atleast_1d(a), (np.array(2.0),)),
    ("take", lambda x: pl.take(x, pl.tensor([[0, -1], [5, 5]])),
     lambda x: torch.take(x, torch.tensor([[0, -1], [5, 5]])), (X,)),
    ("take_along_dim", lambda x: pl.take_along_dim(x, pl.tensor([[0], [2], [1]]), 1),
     lambda x: torch.take_along_dim(x, torch.tensor([[0], [2], [1]]), 1), (X,)),
    ("take_along_dim-bcast", lambda x: pl.take_along_dim(x, pl.tensor([[3, 0]]), 1),
     lambda x: torch.take_along_dim(x, torch.tensor([[3, 0]]), 1), (X,)),
    ("take_along_dim-flat", lambda x: pl.take_along_dim(x, pl.tensor([11, 0])),
     lambda x: torch.take_along_dim(x, torch.tensor([11, 0])), (X,)),
    ("index_copy", lambda x, s: x.index_copy(1, pl.tensor([3, 0]), s),
     lambda x, s: x.index_copy(1, torch.tensor([3, 0]), s), (X, _rand(3, 2))),
    ("index_fill", lambda x: x.index_fill(0, pl.tensor([0, 2]), -1.0),
     lambda x: x.index_fill(0, torch.tensor([0, 2]), -1.0), (X,)),
    ("masked_fill", lambda x: x.masked_fill(x > 0, 0.5), lambda x: x.masked_fill(x > 0, 0.5), (X,)),
    ("masked_fill-bcast", lambda x: x.masked_fill(pl.tensor([True, False, False, True]), 2.0),
     lambda x: x.masked_fill(torch.tensor([True, False, False, True]), 2.0), (X,)),
    ("masked_select", lambda x: x.masked_select(x > 0), lambda x: x.masked_select(x > 0), (X,)),
    ("masked_select-bcast", lambda x: x.masked_select(pl.tensor([True, False, True, True])),
     lambda x: x.masked_select(torch.tensor([True, False, True, True])), (X,)),
    ("masked_scatter", lambda x, s: x.masked_scatter(x > 0, s), lambda x, s: x.masked_scatter(x > 0, s),
     (X, _rand(3, 5))),
    ("scatter-src-larger-grad", lambda x, s: x.scatter_add(1, pl.tensor([[0, 1]]), s),
     lambda x, s: x.scatter_add(1, torch.tensor([[0, 1]]), s[:1, :2]), (X, _rand(2, 3))),
]


@pytest.mark.parametrize("name,pfn,tfn,arrays", COMPOSITES, ids=[c[0] for c in COMPOSITES])
def test_composite_vs_torch(name, pfn, tfn, arrays):
    if name == "scatter-src-larger-grad":
        # PyTorch's scatter_add backward rejects a src larger than index; compare the used part
        x, s = pl.tensor(arrays[0], requires_grad=True), pl.tensor(arrays[1], requires_grad=True)
        out = pfn(x, s)
        out.backward(pl.ones(3, 4))
        expected = np.zeros((2, 3))
        expected[0, :2] = 1
        np.testing.assert_array_equal(s.grad.numpy(), expected)
        return
    _check(pfn, tfn, *arrays)


def test_nonzero_where_single_arg():
    x = pl.tensor([[0, 2], [3, 0]])
    a = pl.where(x > 0)
    b = torch.where(torch.tensor([[0, 2], [3, 0]]) > 0)
    assert all(np.array_equal(p.numpy(), t.numpy()) for p, t in zip(a, b))
    assert pl.argwhere(x).tolist() == torch.argwhere(torch.tensor([[0, 2], [3, 0]])).tolist()


def test_one_hot_infers_classes():
    assert pl.one_hot(pl.tensor([3, 1])).shape == (2, 4)


# -- views: no copies, in-place on the base is visible -------------------------------------

VIEWS = [
    ("squeeze", lambda x: x.reshape(1, 12).squeeze(0)),
    ("unsqueeze", lambda x: x.unsqueeze(1)),
    ("expand", lambda x: x[:1].expand(5, 4)),
    ("movedim", lambda x: x.movedim(0, 1)),
    ("narrow", lambda x: x.narrow(1, 1, 2)),
    ("diagonal", lambda x: x.diagonal(1)),
    ("unbind", lambda x: x.unbind(0)[2]),
    ("split", lambda x: x.split(2, 1)[1]),
    ("chunk", lambda x: x.chunk(2, 0)[1]),
    ("t", lambda x: x.t()),
    ("transpose", lambda x: x.transpose(0, 1)),
    ("permute", lambda x: x.permute(1, 0)),
    ("getitem-basic", lambda x: x[1:, ::2]),
    ("flatten", lambda x: x.flatten()),
    ("unflatten", lambda x: x.unflatten(1, (2, 2))),
    ("ravel", lambda x: x.ravel()),
    ("meshgrid", lambda x: pl.meshgrid(x[0], x[1])[0]),
    ("reshape", lambda x: x.reshape(2, 6)),
    ("view", lambda x: x.view(6, 2)),
    ("T", lambda x: x.T),
    ("mT", lambda x: x.mT),
    ("swapaxes", lambda x: x.swapaxes(0, 1)),
    ("broadcast_to", lambda x: pl.broadcast_to(x, (2, 3, 4))),
    ("expand_as", lambda x: x[:1].expand_as(x)),
]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_share_memory(name, fn):
    x = pl.arange(12.0).reshape(3, 4)
    v = fn(x)
    assert np.shares_memory(v._data, x._data), f"{name} copied"
    before = v.numpy().copy()
    x.add_(100.0)
    assert np.allclose(v.numpy(), before + 100.0), f"{name}: in-place on the base is not visible"


def test_diagonal_view_is_writable():
    x = pl.zeros(3, 3)
    x.diagonal().fill_(1.0)
    assert np.array_equal(x.numpy(), np.eye(3))


def test_flip_copies():
    x = pl.arange(4.0)
    y = x.flip(0)
    x.add_(1.0)
    assert y.tolist() == [3.0, 2.0, 1.0, 0.0]


# -- getitem: advanced-index placement vs NumPy (hypothesis) ---------------------------------

_SHAPE = (4, 5, 3)


@st.composite
def _index(draw):
    parts = []
    for n in _SHAPE:
        kind = draw(st.sampled_from(["int", "slice", "array", "full", "none"]))
        if kind == "int":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            a = draw(st.one_of(st.none(), st.integers(-n, n)))
            b = draw(st.one_of(st.none(), st.integers(-n, n)))
            s = draw(st.one_of(st.none(), st.integers(1, 3)))
            parts.append(slice(a, b, s))
        elif kind == "array":
            k = draw(st.integers(1, 3))
            parts.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k))))
        elif kind == "none":
            parts.extend([None, slice(None)])
        else:
            parts.append(slice(None))
    if draw(st.booleans()) and len(parts) > 1:
        cut = draw(st.integers(0, len(parts) - 1))
        parts = parts[:cut] + [Ellipsis]
    return tuple(parts)


def _as_pl_index(idx):
    return tuple(pl.tensor(i) if isinstance(i, np.ndarray) else i for i in idx)


def _broadcastable(idx):
    arrays = [i for i in idx if isinstance(i, np.ndarray)]
    try:
        np.broadcast_shapes(*(a.shape for a in arrays))
        return True
    except ValueError:
        return False


@settings(max_examples=80, deadline=None)
@given(_index())
def test_getitem_matches_numpy(idx):
    if not _broadcastable(idx):
        return
    base = np.arange(np.prod(_SHAPE), dtype=np.float64).reshape(_SHAPE)
    expected = base[idx]
    x = pl.tensor(base, requires_grad=True)
    out = x[_as_pl_index(idx)]
    assert tuple(out.shape) == expected.shape
    np.testing.assert_array_equal(out.detach().numpy(), expected)
    # gradient: ones scattered back with repeats accumulated (as np.add.at)
    out.sum().backward()
    g = np.zeros(_SHAPE)
    np.add.at(g, idx, 1.0)
    np.testing.assert_array_equal(x.grad.numpy(), g)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=5, max_size=5), st.integers(0, 3))
def test_bool_mask_mixed_with_int(mask, row):
    base = np.arange(15.0).reshape(5, 3)
    m = np.array(mask)
    np.testing.assert_array_equal(pl.tensor(base)[pl.tensor(m)].numpy(), base[m])
    np.testing.assert_array_equal(pl.tensor(base.T)[row % 3, pl.tensor(m)].numpy(), base.T[row % 3, m])


def test_advanced_index_placement_rules():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    i = np.array([0, 1])
    t = torch.from_numpy(x)
    p = pl.tensor(x)
    for idx in [(slice(None), i, i), (i, slice(None), i), (slice(None), i, slice(None), i), (Ellipsis, i),
                (i[:, None], slice(None), i[None, :])]:
        tidx = tuple(torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in idx)
        pidx = tuple(pl.tensor(a) if isinstance(a, np.ndarray) else a for a in idx)
        assert p[pidx].shape == tuple(t[tidx].shape)
        np.testing.assert_array_equal(p[pidx].numpy(), t[tidx].numpy())


# -- setitem gradients ----------------------------------------------------------------------

def test_setitem_gradient_to_value_and_untouched_part():
    for idx in [(slice(1, 3),), (pl.tensor([0, 2]),), (1,)]:
        base = pl.tensor(_rand(3, 4), requires_grad=True)
        val = pl.tensor(_rand(4, seed=1), requires_grad=True)
        y = base * 1.0
        y[idx] = val
        (y * pl.tensor(_rand(3, 4, seed=2))).sum().backward()

        tb = torch.tensor(_rand(3, 4), requires_grad=True)
        tv = torch.tensor(_rand(4, seed=1), requires_grad=True)
        ty = tb * 1.0
        tidx = tuple(torch.tensor(i.numpy()) if isinstance(i, pl.Tensor) else i for i in idx)
        ty[tidx] = tv
        (ty * torch.tensor(_rand(3, 4, seed=2))).sum().backward()
        np.testing.assert_allclose(base.grad.numpy(), tb.grad.numpy())
        np.testing.assert_allclose(val.grad.numpy(), tv.grad.numpy())


def test_setitem_broadcast_value_gradient_sums():
    base = pl.zeros(3, 4, requires_grad=True)
    v = pl.tensor(2.0, requires_grad=True)
    y = base + 0.0
    y[:, 1] = v
    y.sum().backward()
    assert v.grad.item() == 3.0
    assert base.grad.numpy()[:, 1].tolist() == [0.0, 0.0, 0.0]


# -- scatter / gather details -------------------------------------------------------------

def test_scatter_reduce_int_and_dtypes():
    x = pl.tensor([1, 2, 3])
    out = x.scatter_reduce(0, pl.tensor([0, 0, 2]), pl.tensor([5, 7, -1]), "amin", include_self=False)
    ref = torch.tensor([1, 2, 3]).scatter_reduce(0, torch.tensor([0, 0, 2]), torch.tensor([5, 7, -1]), "amin",
                                                 include_self=False)
    assert out.tolist() == ref.tolist()
    assert out.dtype is pl.int64


def test_scatter_with_reduce_arg():
    x = pl.ones(2, 3)
    out = x.scatter(1, pl.tensor([[0, 0], [2, 1]]), 2.0, reduce="multiply")
    ref = torch.ones(2, 3).scatter(1, torch.tensor([[0, 0], [2, 1]]), 2.0, reduce="multiply")
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_index_add_inplace_and_version():
    x = pl.zeros(3)
    v0 = x._version[0]
    x.index_add_(0, pl.tensor([1, 1]), pl.tensor([1.0, 2.0]))
    assert x.tolist() == [0.0, 3.0, 0.0] and x._version[0] == v0 + 1


def test_index_put_accumulate():
    x = pl.zeros(3)
    out = x.index_put((pl.tensor([0, 0, 2]),), pl.tensor([1.0, 2.0, 3.0]), accumulate=True)
    assert out.tolist() == [3.0, 0.0, 3.0]


def test_index_put_inplace_on_a_leaf_that_requires_grad_raises_like_torch():
    idx, v = (pl.tensor([0]),), pl.tensor(1.0)
    with pytest.raises(RuntimeError, match="index_put_: a leaf tensor that requires grad"):
        pl.zeros(3, requires_grad=True).index_put_(idx, v)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        torch.zeros(3, requires_grad=True).index_put_((torch.tensor([0]),), torch.tensor(1.0))
    x = pl.zeros(3, requires_grad=True) * 1.0  # not a leaf: written in place, differentiable in the rest
    x.index_put_(idx, v)
    x.sum().backward()
    assert x.tolist() == [1.0, 0.0, 0.0]


def test_tensor_where_and_triangles_in_place_match_torch():
    a = np.arange(-4.0, 5.0).reshape(3, 3)
    x, xt = pl.tensor(a), torch.tensor(a)
    np.testing.assert_array_equal(x.where(x > 0, -1.0).numpy(), xt.where(xt > 0, -1.0).numpy())
    v0 = x._version[0]
    assert x.tril_(-1) is x and x._version[0] == v0 + 1
    np.testing.assert_array_equal(x.numpy(), xt.tril_(-1).numpy())
    np.testing.assert_array_equal(pl.tensor(a).triu_(1).numpy(), torch.tensor(a).triu_(1).numpy())


def test_transposes_of_tensors_with_few_dims_match_torch():
    for shape in ((), (3,), (2, 3), (2, 3, 4)):
        a = np.arange(float(np.prod(shape))).reshape(shape)
        x, xt = pl.tensor(a), torch.tensor(a)
        if len(shape) != 3:
            np.testing.assert_array_equal(x.t().numpy(), xt.t().numpy())
        if len(shape) >= 2:
            np.testing.assert_array_equal(x.mT.numpy(), xt.mT.numpy())
            np.testing.assert_array_equal(pl.swapdims(x, 0, -1).numpy(), torch.swapdims(xt, 0, -1).numpy())
    with pytest.raises(ValueError, match="mT: expects a tensor with >= 2 dims"):
        pl.zeros(3).mT


def test_gather_gradient_is_scatter_add_with_repeats():
    x = pl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x.gather(0, pl.tensor([0, 0, 2, 0])).sum().backward()
    assert x.grad.tolist() == [3.0, 0.0, 1.0]


def test_pad_create_graph_second_order():
    x = pl.tensor(_rand(1, 1, 4), requires_grad=True)
    y = (pl.pad(x, (2, 2), mode="reflect") ** 2).sum()
    (g,) = pl.autograd.grad(y, x, create_graph=True)
    (gg,) = pl.autograd.grad(g.sum(), x)
    tx = torch.tensor(_rand(1, 1, 4), requires_grad=True)
    ty = (torch.nn.functional.pad(tx, (2, 2), mode="reflect") ** 2).sum()
    (tg,) = torch.autograd.grad(ty, tx, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy())


# -- error messages -------------------------------------------------------------------------

@pytest.mark.parametrize("fn,exc,match", [
    (lambda: pl.zeros(2, 3).split([1, 1], 1), ValueError, "split: sizes"),
    (lambda: pl.zeros(2, 3).narrow(1, 2, 2), IndexError, "narrow: start"),
    (lambda: pl.broadcast_shapes((2, 3), (4,)), ShapeMismatch, "broadcast_shapes"),
    (lambda: pl.zeros(2).repeat(2, 2)[0].repeat(1, 2, 3)[0].repeat(1), ValueError, "repeat: number"),
    (lambda: pl.zeros(3).repeat_interleave(pl.tensor([1, 2])), ShapeMismatch, "repeat_interleave"),
    (lambda: pl.movedim(pl.zeros(2, 3), (0, 1), (0,)), ValueError, "movedim"),
    (lambda: pl.meshgrid(pl.zeros(2), indexing="yx"), ValueError, "meshgrid"),
    (lambda: pl.zeros(3).masked_fill(pl.tensor([1, 0, 1]), 0.0), TypeError, "masked_fill: mask must be a bool"),
    (lambda: pl.zeros(3).masked_fill(pl.tensor([True, False]), 0.0), ShapeMismatch, "masked_fill: mask"),
    (lambda: pl.zeros(3).masked_scatter(pl.tensor([True, True, True]), pl.zeros(2)), ValueError, "masked_scatter"),
    (lambda: pl.zeros(3).take(pl.tensor([3])), IndexError, "take: index 3"),
    (lambda: pl.zeros(3).chunk(0), ValueError, "chunk"),
    (lambda: pl.rot90(pl.zeros(3)), ValueError, "rot90"),
    (lambda: pl.zeros(2, 2).diag_embed().trace(), ValueError, "trace"),
    (lambda: pl.narrow([1, 2], 0, 0, 1), TypeError, "narrow: input must be a Tensor, got list"),
    (lambda: pl.split(3, 1), TypeError, "split: tensor must be a Tensor, got int"),
    (lambda: pl.meshgrid(pl.zeros(2), [1]), TypeError, "meshgrid: every argument must be a Tensor, got list"),
    (lambda: pl.zeros(3).scatter_add(0, pl.tensor([0]), 1.0), TypeError, "scatter_add: src must be a Tensor"),
    (lambda: pl.zeros(3).masked_scatter(pl.tensor([True, False, True]), [1.0, 2.0]), TypeError,
     "masked_scatter: source must be a Tensor"),
])
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_index_put_function_takes_torch_argument_order():
    x = pl.zeros(3, 2)
    out = pl.index_put(x, (pl.tensor([2, 0]),), pl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    ref = torch.index_put(torch.zeros(3, 2), (torch.tensor([2, 0]),), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert out.tolist() == ref.tolist()
    acc = pl.index_put(x, (pl.tensor([1, 1]),), pl.tensor(1.5), accumulate=True)
    assert acc.tolist() == torch.index_put(torch.zeros(3, 2), (torch.tensor([1, 1]),), torch.tensor(1.5),
                                           accumulate=True).tolist()
    with pytest.raises(TypeError, match="index_put: indices must be a tuple"):
        pl.index_put(x, pl.tensor([0]), pl.tensor(1.0))


def test_unfold_windows_and_their_gradient_match_torch():
    x, tx = pl.arange(10.0).reshape(2, 5).requires_grad_(), torch.arange(10.0).reshape(2, 5).requires_grad_()
    out, tout = x.unfold(1, 3, 1), tx.unfold(1, 3, 1)
    assert out.tolist() == tout.tolist()
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()  # overlapping windows add up


# ------------------------------------------------------------------- bad arguments: PyTorch refuses, so does pylucid
@pytest.mark.parametrize("call, exc", [
    (lambda lib, x, i: lib.index_select(x, 1, [1.0, 2.0]), TypeError),  # a list is not an index tensor
    (lambda lib, x, i: lib.take(x, [1, 2]), TypeError),
    (lambda lib, x, i: lib.scatter_reduce(x, 1, i, x[:, :2].to(lib.complex64).real, "amax"), None),
    (lambda lib, x, i: lib.scatter_reduce(x.to(lib.complex64), 1, i, x[:, :2].to(lib.complex64), "amax"),
     (NotImplementedError, pl.errors.DtypeMismatch)),
    (lambda lib, x, i: lib.index_fill(x, 1, i[0], [1.0, 2.0]), TypeError),
    (lambda lib, x, i: lib.index_put(x, (i[0],), [1.0, 2.0]), TypeError),
    (lambda lib, x, i: lib.broadcast_shapes((2, 1), [1.0, 2.0]), (TypeError, RuntimeError)),
    (lambda lib, x, i: lib.hsplit(x, 3), (RuntimeError, ValueError)),
    (lambda lib, x, i: lib.repeat_interleave(x, 2.5), TypeError),
    (lambda lib, x, i: lib.nn.functional.pad(x, (1, 1), "constant", [1.0]), TypeError),
])
def test_arguments_pytorch_refuses_are_refused(call, exc):
    x = np.arange(8.0, dtype=np.float32).reshape(2, 4)
    i = np.array([[0, 1], [2, 3]])
    if exc is None:  # both compute: the same values
        np.testing.assert_allclose(call(pl, pl.tensor(x), pl.tensor(i)).numpy(),
                                   call(torch, torch.tensor(x), torch.tensor(i)).numpy())
        return
    with pytest.raises(exc):
        call(torch, torch.tensor(x), torch.tensor(i))
    with pytest.raises(exc):
        call(pl, pl.tensor(x), pl.tensor(i))


def test_split_of_an_empty_dim_is_one_empty_chunk():
    assert [tuple(p.shape) for p in pl.split(pl.ones(0), 2)] == [tuple(p.shape) for p in torch.split(torch.ones(0), 2)]


@pytest.mark.parametrize("value", [1.5, 0.0])
def test_nonzero_as_tuple_of_a_0d_tensor_indexes_it_as_1d(value):
    got = pl.nonzero(pl.tensor(value), as_tuple=True)
    want = torch.nonzero(torch.tensor(value), as_tuple=True)
    assert len(got) == len(want) == 1 and got[0].tolist() == want[0].tolist() and got[0].dtype == pl.int64


@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_pad_with_no_pairs_is_a_copy(shape):
    x = pl.ones(shape, requires_grad=True)
    y = pl.nn.functional.pad(x, ())
    assert y.shape == tuple(torch.nn.functional.pad(torch.ones(shape), ()).shape) and y is not x
    y.sum().backward()
    assert x.grad.tolist() == torch.ones(shape).tolist()


@pytest.mark.parametrize("dtypes", [(("float64", 0), ("float32", 1), ("float32", 2)), (("float64", 0), ("int32", 1)),
                                    (("float64", 0), ("float32", 0)), (("int64", 0), ("uint8", 2)),
                                    (("bool", 1), ("int32", 0)), (("complex64", 0), ("float64", 1))])
def test_block_diag_dtype_is_torch_result_type(dtypes):
    shapes = {0: (), 1: (2,), 2: (2, 2)}
    p = pl.block_diag(*[pl.ones(shapes[nd], dtype=getattr(pl, d)) for d, nd in dtypes])
    t = torch.block_diag(*[torch.ones(shapes[nd], dtype=getattr(torch, d)) for d, nd in dtypes])
    assert p.dtype.name == str(t.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(p.numpy(), t.numpy())


@pytest.mark.parametrize("with_replacement", [False, True])
def test_combinations_of_a_large_r(with_replacement):
    """A documented deviation: PyTorch builds the ``n ** r`` grid first and overflows for 2 ** 63; the answer is
    the combinations (itertools'), as PyTorch's for an r it can take."""
    import itertools

    x = [0.5, -1.0]
    with pytest.raises(RuntimeError, match="overflow"):
        torch.combinations(torch.tensor(x), 63, with_replacement=with_replacement)
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    for r in (3, 63):
        got = pl.combinations(pl.tensor(x), r, with_replacement=with_replacement)
        want = np.array(list(make(x, r)), dtype=np.float32).reshape(-1, r)
        np.testing.assert_array_equal(got.numpy(), want)
    want3 = torch.combinations(torch.tensor(x), 3, with_replacement=with_replacement)
    np.testing.assert_array_equal(pl.combinations(pl.tensor(x), 3, with_replacement=with_replacement).numpy(),
                                  want3.numpy())


@pytest.mark.parametrize("shape,pads", [((0, 4), (-1, 1, 2, -1)), ((1, 4), (-1, 1, -2, 2)), ((2, 2), (-3, 1)),
                                        ((2, 2), (-2, 1)), ((3, 4), (-1, 1, 2, -1)), ((2, 3), (-1, -2))])
def test_constant_pad_crops_first_as_torch(shape, pads):
    x = _rand(*shape)
    try:
        want = torch.nn.functional.pad(torch.tensor(x), pads)
    except RuntimeError:
        with pytest.raises(ValueError, match=r"^pad: padding .* crops"):
            pl.pad(pl.tensor(x), pads)
        return
    np.testing.assert_array_equal(pl.pad(pl.tensor(x), pads).numpy(), want.numpy())


def test_copy_variants_take_their_views_parameters():
    import inspect

    x = _rand(3, 1, 4)
    assert inspect.signature(pl.squeeze_copy) == inspect.signature(pl.squeeze)
    with pytest.raises(TypeError):
        torch.squeeze_copy(torch.tensor(x), None)
    # None is squeeze's default: the same call as leaving it out (torch.squeeze_copy(x))
    np.testing.assert_array_equal(pl.squeeze_copy(pl.tensor(x), None).numpy(), torch.squeeze_copy(torch.tensor(x)))
    np.testing.assert_array_equal(pl.squeeze_copy(pl.tensor(x), dim=1).numpy(), torch.squeeze_copy(torch.tensor(x), 1))
    np.testing.assert_array_equal(pl.alias_copy(input=pl.tensor(x)).numpy(), torch.alias_copy(torch.tensor(x)))
    with pytest.raises(TypeError, match="^squeeze_copy: dim must be an int"):
        pl.squeeze_copy(pl.tensor(x), 1.5)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("alpha", [2.5, 0.9, 3])
def test_index_add_truncates_a_float_alpha_for_integer_input_as_torch(dtype, alpha):
    x = np.array([[1, 2, 4, 4], [0, 4, 3, 4], [2, 1, 0, 1]], dtype=dtype)
    src = np.array([[0], [4], [3]], dtype=dtype)
    got = pl.index_add(pl.tensor(x), 1, pl.tensor([3]), pl.tensor(src), alpha=alpha)
    want = torch.index_add(torch.tensor(x), 1, torch.tensor([3]), torch.tensor(src), alpha=alpha)
    assert got.dtype.name == dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_index_reduce_of_complex_without_self():
    """PyTorch's CPU build has no complex kernel for include_self=False (an extension): prod is PyTorch's
    include_self=True product over an input holding 1 in the reduced slots, mean the mean of the parts."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    s = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    idx = [0, 2, 0, 1]
    got = pl.index_reduce(pl.tensor(x), 1, pl.tensor(idx), pl.tensor(s), "prod", include_self=False)
    ones = x.copy()
    ones[:, :3] = 1
    want = torch.index_reduce(torch.tensor(ones), 1, torch.tensor(idx), torch.tensor(s), "prod")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    got = pl.index_reduce(pl.tensor(x), 1, pl.tensor(idx), pl.tensor(s), "mean", include_self=False)
    parts = [torch.index_reduce(torch.tensor(f(x)), 1, torch.tensor(idx), torch.tensor(f(s)), "mean",
                                include_self=False) for f in (np.real, np.imag)]
    np.testing.assert_allclose(got.numpy(), (parts[0] + 1j * parts[1]).numpy(), rtol=1e-6)


@pytest.mark.parametrize("idx", [[], [0], [0, 0]])
def test_index_select_of_a_0d_tensor_takes_one_index_as_torch(idx):
    try:
        want = torch.index_select(torch.tensor(1.5), -1, torch.tensor(idx, dtype=torch.int64))
    except RuntimeError:
        with pytest.raises(ShapeMismatch, match=r"^index_select: the index into a 0-d tensor must hold exactly 1"):
            pl.index_select(pl.tensor(1.5), -1, pl.tensor(idx, dtype=pl.int64))
        return
    got = pl.index_select(pl.tensor(1.5), -1, pl.tensor(idx, dtype=pl.int64))
    assert tuple(got.shape) == tuple(want.shape) and got.item() == want.item()


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int64", "bool"])
@pytest.mark.parametrize("value", [-1, -1.0, 256, 255.5, 2.5, 128, float("nan"), float("inf"), 2**63])
@pytest.mark.parametrize("call", [lambda lib, x, v: x.masked_fill(lib.tensor([True, False]), v),
                                  lambda lib, x, v: x.index_fill(0, lib.tensor([0]), v)])
def test_integer_fill_values_convert_as_torch(dtype, value, call):
    try:
        want = call(torch, torch.zeros(2, dtype=getattr(torch, dtype)), value)
    except RuntimeError:
        with pytest.raises(ValueError, match=r"^(masked|index)_fill: value .* cannot be converted to"):
            call(pl, pl.zeros(2, dtype=getattr(pl, dtype)), value)
        return
    got = call(pl, pl.zeros(2, dtype=getattr(pl, dtype)), value)
    assert got.dtype.name == dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize("fill_value", [None, True, -1, 7])
@pytest.mark.parametrize("size", [1, 5])
def test_nonzero_static_fill_value_is_an_int_as_torch(fill_value, size):
    x = [[0.0, 1.0], [1.0, 1.0]]
    try:
        want = torch.nonzero_static(torch.tensor(x), size=size, fill_value=fill_value)
    except TypeError:
        with pytest.raises(TypeError, match=r"^nonzero_static: fill_value must be an int"):
            pl.nonzero_static(pl.tensor(x), size=size, fill_value=fill_value)
        return
    assert pl.nonzero_static(pl.tensor(x), size=size, fill_value=fill_value).tolist() == want.tolist()


@pytest.mark.parametrize("value", [[1.0, 2.0], (1.0, 2.0), np.ones(2), None, "ab"])
def test_setitem_takes_a_tensor_or_a_number_only_as_torch(value):
    with pytest.raises(TypeError):
        torch.zeros(3, 4)[:2, 0] = value
    x = pl.zeros(3, 4)
    with pytest.raises(TypeError, match=r"^setitem: can't assign a \w+ to a Tensor"):
        x[:2, 0] = value
    for ok in (np.float64(2.5), np.int64(2), 3, True, pl.tensor([1.0, 2.0])):
        x[:2, 0] = ok
        t = torch.zeros(3, 4)
        t[:2, 0] = torch.tensor(ok.numpy()) if isinstance(ok, pl.Tensor) else ok
        np.testing.assert_array_equal(x.numpy(), t.numpy())


@pytest.mark.parametrize("value", [300, -1, 255, -256, 2.5])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_where_with_an_int_out_of_the_tensors_range_as_torch(value, dtype):
    try:
        want = torch.where(torch.tensor([True, False]), torch.zeros(2, dtype=getattr(torch, dtype)), value)
    except RuntimeError:
        with pytest.raises(ValueError, match=r"^where: value .* cannot be converted"):
            pl.where(pl.tensor([True, False]), pl.zeros(2, dtype=getattr(pl, dtype)), value)
        return
    got = pl.where(pl.tensor([True, False]), pl.zeros(2, dtype=getattr(pl, dtype)), value)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.") and got.tolist() == want.tolist()


# ------------------------------------------------------------------------------ joined slice gradients
def test_joined_view_joins_slices_of_one_buffer_and_refuses_the_rest():
    be = pl.tensor([1.0]).device.backend
    buf = np.arange(2 * 5 * 3 * 4, dtype=np.float32).reshape(2, 5, 3, 4)
    parts = [buf[:, :, i] for i in range(3)]  # (2, 5, 4) slices at a step of 4 values
    joined = be.joined_view(parts, 0)
    assert joined is not None and joined.shape == (3, 2, 5, 4)
    np.testing.assert_array_equal(joined, np.stack(parts, 0))
    assert np.shares_memory(joined, buf)
    np.testing.assert_array_equal(be.joined_view(parts, 2), np.stack(parts, 2))
    assert be.joined_view(parts[::-1], 0) is None  # descending addresses
    assert be.joined_view([parts[0], parts[2]], 0) is None  # a gap: not dense, not one stack
    assert be.joined_view([parts[0], parts[0]], 0) is None  # the same memory twice
    assert be.joined_view([parts[0], np.ones_like(parts[1])], 0) is None  # another buffer
    assert be.joined_view([parts[0], parts[1][:, :4]], 0) is None  # shapes differ
    assert be.joined_view([buf[:, 0, 0], buf[:, 0, 1]], 0) is None  # step 4 over 1-value slices: gaps
    strided = buf[:, ::2]  # the base's every other row: the parts' joined array is not dense
    assert be.joined_view([strided[:, :, 0], strided[:, :, 1], strided[:, :, 2]], 0) is None


def test_unbind_backward_returns_the_joined_gradient_when_it_is_one_buffer(monkeypatch):
    """A fused qkv projection's gradient: when the slices' gradients arrive as one buffer's slices
    (cuDNN's attention backward writes them so), the unbind backward hands the buffer on as a view;
    otherwise it stacks. Either way the values are torch's."""
    from pylucid.ops.shape import Unbind

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    g = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    results = []
    orig = Unbind.backward_fast

    def spy(self, be, *grads):
        out = orig(self, be, *grads)
        results.append(out)
        return out

    monkeypatch.setattr(Unbind, "backward_fast", spy)
    grads = []
    for lib in (pl, torch):
        t = lib.tensor(x).requires_grad_()
        gt = lib.tensor(g).permute(2, 0, 1, 3)  # (3, 2, 5, 4) view over g's (2, 5, 3, 4) memory
        q, k, v = (t * 1.0).permute(2, 0, 1, 3).unbind(0)
        # each slice's output gradient is a slice of gt: the seeds arrive as one buffer's slices
        lib.autograd.backward([q, k, v], [gt[0], gt[1], gt[2]])
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert len(results) == 1 and results[0].base is not None  # joined, not a new stack
    results.clear()
    t = pl.tensor(x).requires_grad_()
    q, k, v = (t * 1.0).permute(2, 0, 1, 3).unbind(0)
    (q * 2 + k * 3 + v).sum().backward()  # three separate arrays: stacked
    assert len(results) == 1
    np.testing.assert_array_equal(t.grad.numpy(), np.broadcast_to(np.array([2, 3, 1], np.float32)[:, None],
                                                                  (3, 4))[None, None].repeat(2, 0).repeat(5, 1))


def test_dense_span_of_permuted_and_gapped_layouts():
    from pylucid.backend.base import dense_span

    a = np.empty((2, 5, 3, 4), np.float32)
    assert dense_span(a.shape, a.strides, 4) == a.nbytes
    t = a.transpose(2, 0, 3, 1)  # any order of the axes of a dense buffer
    assert dense_span(t.shape, t.strides, 4) == a.nbytes
    assert dense_span(a[:, ::2].shape, a[:, ::2].strides, 4) is None  # gaps
    assert dense_span((3, 4), (0, 4), 4) is None  # a broadcast axis repeats addresses
    assert dense_span((1, 4), (999, 4), 4) == 16  # extent-1 axes do not count
