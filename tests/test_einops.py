"""pylucid.einops against the einops package run on torch tensors (same inputs), values and gradients."""

import numpy as np
import pytest

einops = pytest.importorskip("einops")  # the reference (a test dependency)
import torch

import pylucid as pl
from pylucid.einops import EinopsError, einsum, pack, parse_shape, rearrange, reduce, repeat, unpack
from pylucid.einops.layers import Rearrange, Reduce


def _pair(shape, dtype="float64", seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype) if dtype.startswith("float") else \
        np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    return pl.tensor(a), torch.tensor(a)


def _same(got, want, **tol):
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **(tol or dict(rtol=1e-12, atol=1e-12)))


def _grad_check(fn_pl, fn_t, shape, seed=1):
    """Backward of sum(w * f(x)) against torch, and a second derivative through it."""
    a = np.random.default_rng(seed).standard_normal(shape)
    x = pl.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    y, yt = fn_pl(x), fn_t(xt)
    w = np.random.default_rng(seed + 1).standard_normal(tuple(yt.shape))
    (g,) = pl.autograd.grad((y * pl.tensor(w)).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad((yt * torch.tensor(w)).sum(), xt, create_graph=True)
    _same(g, gt)
    if gt.requires_grad:  # double backward through the pattern (e.g. the square of the gradient)
        (h,) = pl.autograd.grad((g * g).sum(), x)
        (ht,) = torch.autograd.grad((gt * gt).sum(), xt)
        _same(h, ht)


IDENTITY = ["...->...", "a b c d e-> a b c d e", "a b c d e ...-> ... a b c d e", "a b c d e ...-> a ... b c d e",
            "... a b c d e -> ... a b c d e", "a ... e-> a ... e", "a ... -> a ... ", "a ... c d e -> a (...) c d e"]

REARRANGE = [
    ("a b c d e -> (a b) c d e", {}), ("a b ... -> (a b) ... ", {}), ("a b c d e -> a b (c d) e", {}),
    ("... c d e -> ... (c d) e", {}), ("a b c d e -> (a b c d e)", {}), ("... ->  (...)", {}),
    ("a b c d e -> b (c d e) a", {}), ("a b ... -> b (...) a", {}), ("a b c d e -> b (a c d) e", {}),
    ("a b ... e -> b (a ...) e", {}), ("a b c d e -> e d c b a", {}), ("a b c d e -> a (b) (c d e) ()", {}),
    ("(a1 a2) b c d e -> a2 b c d e a1", dict(a1=2)), ("a (b1 b2) c d e -> (b2 a) c d (e b1)", dict(b2=3)),
    ("a b (c1 c2) d e -> a b c1 c2 d e 1", dict(c1=2, c2=2)), ("a b c d e -> a 1 b c d e ()", {}),
    ("a b c d e -> (e a) () (b c d)", {}), ("a b c ... -> c (a ...) b", {}),
]

REDUCE = [
    ("a b c d e -> ", {}), ("a ... -> ", {}), ("(a1 a2) ... (e1 e2) -> ", dict(a1=1, e2=2)),
    ("a b c d e -> (e c) a", {}), ("a ... c d e -> (e c) a", {}), ("a b c d e ... -> (e c) a", {}),
    ("a b c d e -> (e c a)", {}), ("(a a2) ... -> (a2 a) ...", dict(a2=1)), ("a b (c 2) (d 5) e -> a b c d e", {}),
    ("a b c d e -> a () c 1 e", {}), ("a b c d (e e2) -> a (b c) d e", dict(e2=3)), ("a ... e -> a e", {}),
]

REPEAT = [
    ("a b c -> c a b", {}), ("a b c -> (c copy a b)", dict(copy=2, a=2, b=3, c=5)),
    ("a b c -> (a copy) b c ", dict(copy=1)),
    ("a b c -> (c a) (copy1 b copy2)", dict(a=2, copy1=1, copy2=2)), ("a ...  -> a ... copy", dict(copy=4)),
    ("... c -> ... (copy1 c copy2)", dict(copy1=1, copy2=2)), ("...  -> ... ", {}),
    (" ...  -> copy1 ... copy2 ", dict(copy1=2, copy2=3)), ("a b c  -> copy1 a copy2 b c () ", dict(copy1=2, copy2=1)),
    ("a b c -> a b c 3", {}), ("a b c -> (a 2) (b 3) c", {}), ("a b c -> a (2 b c) 1", {}),
]


@pytest.mark.parametrize("pattern", IDENTITY)
def test_identity_patterns(pattern):
    x, xt = _pair((2, 3, 4, 5, 6))
    _same(rearrange(x, pattern), xt)


@pytest.mark.parametrize("pattern,sizes", REARRANGE)
def test_rearrange_matches_einops(pattern, sizes):
    x, xt = _pair((2, 3, 4, 5, 6))
    _same(rearrange(x, pattern, **sizes), einops.rearrange(xt, pattern, **sizes))
    _grad_check(lambda v: rearrange(v, pattern, **sizes), lambda v: einops.rearrange(v, pattern, **sizes),
                (2, 3, 4, 5, 6))


@pytest.mark.parametrize("reduction", ["min", "max", "sum", "mean", "prod"])
@pytest.mark.parametrize("pattern,sizes", REDUCE)
def test_reduce_matches_einops(pattern, sizes, reduction):
    x, xt = _pair((2, 3, 4, 5, 6))
    if reduction == "prod":
        x, xt = x * 0.2 + 1.0, xt * 0.2 + 1.0
    _same(reduce(x, pattern, reduction, **sizes), einops.reduce(xt, pattern, reduction, **sizes),
          rtol=1e-10, atol=1e-12)
    if reduction in ("sum", "mean", "max"):
        _grad_check(lambda v: reduce(v, pattern, reduction, **sizes),
                    lambda v: einops.reduce(v, pattern, reduction, **sizes), (2, 3, 4, 5, 6))


@pytest.mark.parametrize("reduction", ["any", "all", "sum", "max", "min"])
def test_reduce_bool_and_int(reduction):
    a = np.random.default_rng(0).integers(0, 3, (4, 6, 2))
    dtype = "bool" if reduction in ("any", "all") else "int64"
    x, xt = pl.tensor(a.astype(dtype)), torch.tensor(a.astype(dtype))
    for pattern in ("a (b 2) c -> c a b", "a b c -> ", "a b c -> b"):
        _same(reduce(x, pattern, reduction), einops.reduce(xt, pattern, reduction))


def test_reduce_callable_and_mean_of_int():
    x, xt = _pair((4, 6), dtype="float64")
    got = reduce(x, "a (b 2) -> a b", lambda t, axes: t.sum(dim=axes) * 2)
    want = einops.reduce(xt, "a (b 2) -> a b", lambda t, axes: t.sum(dim=axes) * 2)
    _same(got, want)
    with pytest.raises(EinopsError, match="floating"):
        reduce(pl.arange(6).reshape(2, 3), "a b -> a", "mean")


@pytest.mark.parametrize("pattern,sizes", REPEAT)
def test_repeat_matches_einops(pattern, sizes):
    x, xt = _pair((2, 3, 5))
    _same(repeat(x, pattern, **sizes), einops.repeat(xt, pattern, **sizes))
    _grad_check(lambda v: repeat(v, pattern, **sizes), lambda v: einops.repeat(v, pattern, **sizes), (2, 3, 5))
    # reversing a repeat with min / max reductions gives the input back (einops' own check)
    if (pattern, sizes) not in REPEAT[:9]:  # the reversal needs every size, as in einops' own cases
        return
    left, right = pattern.split("->")
    for red in ("min", "max"):
        _same(reduce(repeat(x, pattern, **sizes), right + "->" + left, red, **sizes), x)


def test_rearrange_permutations():
    rng = np.random.default_rng(3)
    for n in range(1, 9):
        perm = rng.permutation(n)
        pattern = " ".join(f"i{i}" for i in range(n)) + " -> " + " ".join(f"i{i}" for i in perm)
        a = np.arange(2 ** n).reshape([2] * n)
        _same(rearrange(pl.tensor(a), pattern), torch.tensor(a).permute(*perm.tolist()))


def test_list_input_and_round_trips():
    xs = [np.random.default_rng(i).standard_normal((3, 4)) for i in range(5)]
    got = rearrange([pl.tensor(a) for a in xs], "b h w -> h (b w)")
    _same(got, einops.rearrange([torch.tensor(a) for a in xs], "b h w -> h (b w)"))
    x, xt = _pair((10, 20, 30, 40))
    sizes = dict(b=2, d=5)
    back = rearrange(rearrange(x, "a (b c) (d e) f -> (f d) c (e b) a", **sizes),
                     "(f d) c (e b) a -> a (b c) (d e) f", **sizes)
    _same(back, xt)
    y, yt = _pair((2, 1, 3, 1))
    for pattern in ("a 1 c () -> a c", "a () c 1 -> (a c)", "a b c d -> a (b c d)"):
        _same(rearrange(y, pattern), einops.rearrange(yt, pattern))


def test_image_examples():
    """The einops tutorial's image manipulations: space-to-depth, pooling, tiling, upsampling."""
    x, xt = _pair((6, 4, 8, 3))  # b h w c
    cases = [("b h w c -> (b h) w c", {}), ("b h w c -> h (b w) c", {}), ("b h w c -> b c h w", {}),
             ("(b1 b2) h w c -> (b1 h) (b2 w) c", dict(b1=2)),
             ("b (h h2) (w w2) c -> b h w (c h2 w2)", dict(h2=2, w2=2)),
             ("b h (w w2) c -> (h w2) (b w) c", dict(w2=2)), ("b h w c -> w h (c b)", {})]
    for pattern, sizes in cases:
        _same(rearrange(x, pattern, **sizes), einops.rearrange(xt, pattern, **sizes))
    for pattern, red in [("b (h 2) (w 2) c -> b h w c", "max"), ("b h w c -> h w c", "mean"),
                         ("b (h h2) (w w2) c -> h (b w) c", "min")]:
        sizes = dict(h2=2, w2=2) if "h2" in pattern else {}
        _same(reduce(x, pattern, red, **sizes), einops.reduce(xt, pattern, red, **sizes))
    _same(repeat(x, "b h w c -> b (h 2) (w 2) c"), einops.repeat(xt, "b h w c -> b (h 2) (w 2) c"))


@pytest.mark.parametrize("pattern,shapes", [
    ("i j, j k -> i k", [(2, 3), (3, 4)]), ("batch i, batch i -> batch", [(3, 4), (3, 4)]),
    ("b h q d, b h k d -> b h q k", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("i i -> i", [(3, 3)]), ("i j -> ", [(3, 4)]),
    ("... i, ... i -> ...", [(2, 3, 4), (2, 3, 4)]), ("a b c, c -> b a", [(2, 3, 4), (4,)]),
    ("i, j, k -> i j k", [(2,), (3,), (4,)]),
])
def test_einsum_matches_einops(pattern, shapes):
    pairs = [_pair(s, seed=i) for i, s in enumerate(shapes)]
    _same(einsum(*[p for p, _ in pairs], pattern), einops.einsum(*[t for _, t in pairs], pattern), rtol=1e-12)
    a = [np.random.default_rng(i).standard_normal(s) for i, s in enumerate(shapes)]
    xs = [pl.tensor(v, requires_grad=True) for v in a]
    ts = [torch.tensor(v, requires_grad=True) for v in a]
    gs = pl.autograd.grad(einsum(*xs, pattern).square().sum(), xs)
    gts = torch.autograd.grad(einops.einsum(*ts, pattern).square().sum(), ts)
    for g, gt in zip(gs, gts):
        _same(g, gt, rtol=1e-10, atol=1e-12)


def test_pack_unpack_matches_einops():
    shapes = [(2, 3, 5), (2, 3, 7, 5), (2, 3, 7, 9, 5)]
    pairs = [_pair(s, seed=i) for i, s in enumerate(shapes)]
    packed, ps = pack([p for p, _ in pairs], "i j * k")
    packed_t, ps_t = einops.pack([t for _, t in pairs], "i j * k")
    _same(packed, packed_t)
    assert [tuple(s) for s in ps] == [tuple(s) for s in ps_t]
    for got, want in zip(unpack(packed, ps, "i j * k"), einops.unpack(packed_t, ps_t, "i j * k")):
        _same(got, want)
    # one -1 to infer, and "*" at the ends
    x, xt = _pair((4, 12))
    for got, want in zip(unpack(x, [(2,), (2, -1)], "b *"), einops.unpack(xt, [(2,), (2, -1)], "b *")):
        _same(got, want)
    p2, _ = pack([x, x[:, :3]], "b *")
    _same(p2, einops.pack([xt, xt[:, :3]], "b *")[0])
    p3, _ = pack([x, x], "* b")
    _same(p3, einops.pack([xt, xt], "* b")[0])
    # gradients through pack / unpack
    xs = [pl.tensor(np.ones(s), requires_grad=True) for s in shapes]
    out = unpack(pack(xs, "i j * k")[0], ps, "i j * k")
    gs = pl.autograd.grad(sum((o * (k + 1)).sum() for k, o in enumerate(out)), xs)
    for k, g in enumerate(gs):
        np.testing.assert_array_equal(g.numpy(), np.full(shapes[k], k + 1.0))


def test_parse_shape():
    x = pl.zeros(2, 3, 5, 7)
    xt = torch.zeros(2, 3, 5, 7)
    for pattern in ("a b c d", "a _ c _", "_ _ _ d", "a ...", "... d", "a ... d", "a b c d ..."):
        assert parse_shape(x, pattern) == einops.parse_shape(xt, pattern)
    assert parse_shape(pl.zeros(1, 4), "() n") == {"n": 4}
    with pytest.raises(RuntimeError):
        parse_shape(x, "a b c")
    with pytest.raises(RuntimeError):
        parse_shape(x, "a (b c) d")


def test_layers_match_einops_layers():
    from einops.layers.torch import Rearrange as TR
    from einops.layers.torch import Reduce as TRd

    x, xt = _pair((3, 2, 4, 6))
    for pl_layer, t_layer in [(Rearrange("b c h w -> b (c h w)"), TR("b c h w -> b (c h w)")),
                              (Rearrange("b c (h h2) w -> b (c h2) h w", h2=2),
                               TR("b c (h h2) w -> b (c h2) h w", h2=2)),
                              (Reduce("b c (h 2) (w 2) -> b c h w", "max"), TRd("b c (h 2) (w 2) -> b c h w", "max")),
                              (Reduce("b c ... -> b c", "mean"), TRd("b c ... -> b c", "mean"))]:
        assert isinstance(pl_layer, pl.nn.Module)
        _same(pl_layer(x), t_layer(xt))
    net = pl.nn.Sequential(Rearrange("b c h w -> b (c h w)"), pl.nn.Linear(48, 2))
    net(x.float()).sum().backward()
    assert net[1].weight.grad is not None
    assert "b c h w -> b (c h w)" in repr(net)
    with pytest.raises(EinopsError):
        Rearrange("a b -> a c")


@pytest.mark.parametrize("call,match", [
    (lambda x: rearrange(x, "a b c d -> a b c"), "one side"),
    (lambda x: rearrange(x, "a b c -> a c b"), "expects 3 dims"),
    (lambda x: rearrange(x, "a b c d e -> a b c d e"), "expects 5 dims"),
    (lambda x: rearrange(x, "a b c d -> a b (c d"), "parenthes"),
    (lambda x: rearrange(x, "a b c d -> a b ((c d))"), "one-level"),
    (lambda x: rearrange(x, "a b c d -> a b c d)"), "balanced"),
    (lambda x: rearrange(x, "a b c d -> a b c ..."), "ellipsis found in the right side"),
    (lambda x: rearrange(x, "a b (...) -> a b ..."), "inside parenthesis"),
    (lambda x: rearrange(x, "a a c d -> a c d"), "duplicate dimension"),
    (lambda x: rearrange(x, "a b c d -> a b c d", e=3), "not used"),
    (lambda x: rearrange(x, "a b c (d1 d2) -> a b c d1 d2"), "could not infer"),
    (lambda x: rearrange(x, "a b c (d1 d2) -> a b c d1 d2", d1=7), "divide"),
    (lambda x: rearrange(x, "a b c (d 2) -> a b c d"), "anonymous"),
    (lambda x: rearrange(x, "a b c _d -> a b c _d"), "underscore"),
    (lambda x: rearrange(x, "a b c d -> a b c d -> a"), "exactly once"),
    (lambda x: rearrange(x, "a b c d -> a b c d.."), "dots"),
    (lambda x: rearrange(x, "a b c d -> a b c d!"), "unknown character"),
    (lambda x: rearrange(x, "a b c d", ), "exactly once"),
    (lambda x: reduce(x, "a b c d -> a e", "sum"), "right side of reduce"),
    (lambda x: reduce(x, "a b c d -> a", "median"), "unknown reduction"),
    (lambda x: repeat(x, "a b c d -> a b c d e"), "specify sizes"),
    (lambda x: repeat(x, "a b c d -> a b c"), "left side of repeat"),
    (lambda x: rearrange(x, "a b c d -> a b c (d)", a=3), "mismatch"),
])
def test_bad_patterns_raise_like_einops(call, match):
    x = pl.zeros(2, 3, 4, 6)
    with pytest.raises(EinopsError, match=match):
        call(x)
    with pytest.raises((einops.EinopsError, ValueError)):  # the reference rejects it too
        _einops_call(call)


def _einops_call(call):
    """Run the same lambda with the einops functions on a torch tensor."""
    g = dict(rearrange=einops.rearrange, reduce=einops.reduce, repeat=einops.repeat)
    fn = type(call)(call.__code__, {**call.__globals__, **g})
    fn(torch.zeros(2, 3, 4, 6))


def test_einsum_errors():
    x = pl.zeros(2, 3)
    with pytest.raises(ValueError, match="->"):
        einsum(x, "a b")
    with pytest.raises(EinopsError, match="unknown axis"):
        einsum(x, "a b -> c")
    with pytest.raises(NotImplementedError):
        einsum(x, "(a b) -> a")
    with pytest.raises(ValueError, match="last"):
        einsum("a b -> a", x)


def test_patterns_are_cached():
    from pylucid.einops._core import _recipe

    x = pl.zeros(2, 3)
    rearrange(x, "a b -> b a")
    before = _recipe.cache_info().hits
    rearrange(x, "a b -> b a")
    assert _recipe.cache_info().hits == before + 1
