"""Tensor API, creation, dtypes and promotion, devices, AMP and determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pylucid as pl
from pylucid.errors import DeviceUnavailable, LucidError, NonDeterministicError, ShapeMismatch


# ------------------------------------------------------------------ creation
def test_dtype_inference_like_torch():
    assert pl.tensor([1.0, 2.0]).dtype == pl.float32
    assert pl.tensor([1, 2]).dtype == pl.int64
    assert pl.tensor(True).dtype == pl.bool
    assert pl.tensor(np.zeros(2)).dtype == pl.float64  # a float64 array stays float64
    assert pl.tensor(np.zeros(2, np.int32)).dtype == pl.int32
    assert pl.tensor([1 + 2j]).dtype == pl.complex64
    assert pl.tensor([[1, 2.5]]).dtype == pl.float32
    assert pl.tensor([], dtype=pl.float16).shape == (0,)
    with pytest.raises(TypeError, match="tensor"):
        pl.tensor(["a"])


def test_creation_functions_match_torch():
    pairs = [
        (pl.zeros(2, 3), torch.zeros(2, 3)), (pl.ones((2,)), torch.ones((2,))),
        (pl.full((2, 2), 7), torch.full((2, 2), 7)),
        (pl.full((2,), 1.5), torch.full((2,), 1.5)), (pl.eye(3, 2), torch.eye(3, 2)), (pl.arange(5), torch.arange(5)),
        (pl.arange(1, 2, 0.25), torch.arange(1, 2, 0.25)), (pl.arange(0, 10, 3), torch.arange(0, 10, 3)),
        (pl.linspace(0, 1, 5), torch.linspace(0, 1, 5)), (pl.zeros_like(pl.ones(2, dtype=pl.int32)),
                                                            torch.zeros_like(torch.ones(2, dtype=torch.int32))),
        (pl.ones_like(pl.zeros(3)), torch.ones_like(torch.zeros(3))), (pl.full_like(pl.zeros(2), 3.0),
                                                                       torch.full_like(torch.zeros(2), 3.0)),
    ]
    for p, t in pairs:
        assert p.dtype.name == str(t.dtype).removeprefix("torch."), (p, t)
        np.testing.assert_allclose(p.numpy(), t.numpy(), rtol=1e-6)
    assert pl.empty(2, 3).shape == (2, 3) and pl.empty_like(pl.ones(4)).shape == (4,)
    with pytest.raises(ValueError, match="zeros: negative dimension"):
        pl.zeros(-1)
    with pytest.raises(ValueError, match="arange"):
        pl.arange(0, 5, -1)


def test_random_reproducible_with_seed_and_generator():
    pl.manual_seed(123)
    a, b, c = pl.rand(3), pl.randn(2, 2), pl.randint(0, 10, (5,))
    pl.manual_seed(123)
    assert pl.rand(3).tolist() == a.tolist() and pl.randn(2, 2).tolist() == b.tolist()
    assert pl.randint(0, 10, (5,)).tolist() == c.tolist() and c.dtype == pl.int64
    g = pl.Generator().manual_seed(7)
    x = pl.rand(4, generator=g)
    g.manual_seed(7)
    assert pl.rand(4, generator=g).tolist() == x.tolist()
    assert 0 <= x.min().item() and x.max().item() < 1


# ------------------------------------------------------------------ conversion
def test_numpy_item_tolist_array_dlpack():
    x = pl.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.numpy().shape == (2, 2) and x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert x[1, 0].item() == 3.0 and isinstance(pl.tensor(2).item(), int)
    assert np.asarray(x).sum() == 10.0
    with pytest.raises(RuntimeError, match="only one element|1 elements|cannot be converted"):
        x.item()
    shared = np.arange(3.0)
    t = pl.from_numpy(shared)
    shared[0] = 9
    assert t[0].item() == 9.0
    t2 = pl.from_dlpack(torch.arange(3.0))
    assert t2.tolist() == [0.0, 1.0, 2.0]
    back = torch.from_dlpack(pl.tensor([1.0, 2.0]))
    assert back.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="detach"):
        pl.ones(2, requires_grad=True).numpy()
    assert pl.tensor([1.5], dtype=pl.bfloat16).tolist() == [1.5]


def test_metadata_and_repr():
    x = pl.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.size() == (2, 3, 4) and x.size(-1) == 4
    assert x.numel() == 24 and x.dim() == 3 and x.T.shape == (4, 3, 2) and str(x.device) == "cpu"
    assert x.device == pl.device("cpu") and x.dtype == pl.float32
    assert repr(pl.tensor([1.5, 2.0])) == "tensor([1.5000, 2.0000])"
    assert repr(pl.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(pl.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    assert "grad_fn=<MulBackward>" in repr(pl.tensor([1.0], requires_grad=True) * 2)
    assert "dtype=pylucid.float16" in repr(pl.tensor([1.0], dtype=pl.float16))
    with pytest.raises(IndexError, match="size: dimension out of range"):
        x.size(3)


def test_to_and_dtype_conversions():
    x = pl.tensor([1.7, -2.2])
    assert x.long().tolist() == [1, -2] and x.int().dtype == pl.int32 and x.half().dtype == pl.float16
    assert x.bfloat16().dtype == pl.bfloat16 and x.double().dtype == pl.float64 and x.bool().dtype == pl.bool
    assert x.to(pl.float64).dtype == pl.float64 and x.to("cpu") is x and x.cpu() is x
    assert x.to(pl.ones(1, dtype=pl.float16)).dtype == pl.float16
    y = x.detach()
    assert y._data is x._data and not y.requires_grad
    c = x.clone()
    assert c._data is not x._data and c.tolist() == x.tolist()
    nc = pl.zeros(3, 4).T
    assert not nc.is_contiguous() and nc.contiguous().is_contiguous()


def test_cuda_unavailable_is_a_clear_error():
    if pl.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(DeviceUnavailable, match="CUDA is not available"):
        pl.zeros(2, device="cuda")
    with pytest.raises(DeviceUnavailable, match="cuda:0"):
        pl.ones(2).to("cuda")
    with pytest.raises(ValueError, match="unknown device type"):
        pl.device("tpu")


def test_ops_never_import_numpy():
    import pathlib

    ops_dir = pathlib.Path(pl.__file__).parent / "ops"
    for f in ops_dir.glob("*.py"):
        text = f.read_text()
        assert "import numpy" not in text and "import cupy" not in text, f"{f.name} imports an array library"


# ------------------------------------------------------------------ promotion
@pytest.mark.parametrize("a,b", [
    ("float16", 1.0), ("int32", 2.5), ("int64", 2), ("bool", 1), ("bool", True), ("uint8", 3), ("bfloat16", 2.0),
    ("float16", "float32"), ("float16", "bfloat16"), ("int8", "uint8"), ("int64", "float16"), ("int32", "float64"),
    ("bool", "int8"), ("float32", "complex64"), ("float64", "complex64"), ("bfloat16", "int64"),
])
def test_type_promotion_matches_torch(a, b):
    def make(m, spec, dims):
        if isinstance(spec, str):
            return m.ones(dims, dtype=getattr(m, spec if spec != "bool" else "bool"))
        return spec

    for da, db in (((2,), (2,)), ((2,), ()), ((), (2,))):
        p = make(pl, a, da) + make(pl, b, db) if not (a == "bool" and b in ("bool", True)) else \
            make(pl, a, da) | make(pl, b, db)
        t = make(torch, a, da) + make(torch, b, db) if not (a == "bool" and b in ("bool", True)) else \
            make(torch, a, da) | make(torch, b, db)
        assert p.dtype.name == str(t.dtype).removeprefix("torch."), (a, b, da, db)


def test_weak_scalars_never_widen():
    assert (pl.ones(2, dtype=pl.float16) + 1.0).dtype == pl.float16
    assert (pl.ones(2, dtype=pl.int32) * 2.5).dtype == pl.float32
    assert (2.5 * pl.ones(2, dtype=pl.bfloat16)).dtype == pl.bfloat16
    assert (pl.ones(2, dtype=pl.int16) + 1).dtype == pl.int16
    assert pl.result_type(pl.ones(2, dtype=pl.float16), 1.0) == pl.float16


def test_errors_are_typed_and_name_the_op():
    with pytest.raises(ShapeMismatch, match=r"add: shapes \(2, 3\) and \(4,\)"):
        pl.ones(2, 3) + pl.ones(4)
    with pytest.raises(TypeError, match="mul: expected a Tensor or a Python number"):
        pl.ones(2) * "x"
    with pytest.raises(IndexError, match="sum: dimension out of range"):
        pl.ones(2).sum(dim=3)
    with pytest.raises(ValueError, match="more than once"):
        pl.ones(2, 2).sum(dim=(0, 0))
    with pytest.raises(TypeError, match="sqrt: expected at least one Tensor"):
        pl.sqrt(4.0)


# ------------------------------------------------------------------ autocast
def test_autocast_applies_policies_and_restores():
    a = pl.ones(2, 2, requires_grad=True)
    with pl.amp.autocast("cpu", dtype=pl.float16):
        assert pl.amp.is_autocast_enabled("cpu")
        y = a @ a  # Promote
        assert y.dtype == pl.float16
        assert pl.exp(a).dtype == pl.float32  # ForceFP32
        assert pl.max(a).dtype == pl.float32  # KeepInput
        assert pl.mean(a).dtype == pl.float16 and pl.square(a).dtype == pl.float16
        with pl.amp.autocast("cpu", dtype=pl.bfloat16):
            assert (a @ a).dtype == pl.bfloat16
        assert (a @ a).dtype == pl.float16
        with pl.amp.autocast("cpu", enabled=False):
            assert (a @ a).dtype == pl.float32
        assert (pl.ones(2, dtype=pl.int64) + 1).dtype == pl.int64  # integers untouched
    assert not pl.amp.is_autocast_enabled("cpu")
    assert (a @ a).dtype == pl.float32
    # casts are differentiable: the float32 leaf gets a float32 gradient
    with pl.amp.autocast("cpu", dtype=pl.float16):
        loss = (a @ a).sum()
    loss.backward()
    assert a.grad.dtype == pl.float32 and a.grad.tolist() == [[4.0, 4.0], [4.0, 4.0]]


def test_autocast_decorator_and_thread_local():
    import threading

    @pl.amp.autocast("cpu", dtype=pl.bfloat16)
    def f(x):
        return x @ x

    assert f(pl.ones(2, 2)).dtype == pl.bfloat16
    seen = {}
    with pl.amp.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.setdefault("x", (pl.ones(2, 2) @ pl.ones(2, 2)).dtype))
        t.start()
        t.join()
    assert seen["x"] == pl.float32


def test_deterministic_algorithms_gate():
    from pylucid.ops import Op, OpSchema, apply, registry

    class _Noisy(Op):
        schema = OpSchema("_test_noisy", deterministic=False, deterministic_note="draws random numbers")

        @staticmethod
        def forward(be, x):
            return x + 0

    try:
        x = pl.ones(2)
        apply(_Noisy, (x,))
        pl.use_deterministic_algorithms(True)
        assert pl.are_deterministic_algorithms_enabled()
        with pytest.raises(NonDeterministicError, match="_test_noisy.*draws random numbers"):
            apply(_Noisy, (x,))
    finally:
        pl.use_deterministic_algorithms(False)
        registry._REGISTRY.pop("_test_noisy", None)


def test_inplace_bumps_version_and_views_share_it():
    x = pl.zeros(4)
    v = x[1:3]
    assert v._base is x
    v.add_(1)
    assert x.tolist() == [0.0, 1.0, 1.0, 0.0] and x.version == 1 == v.version
    x[0] = 5
    assert v.version == 2
    y = pl.ones(3)
    y += 2
    y *= 2
    y -= 1
    y /= 5
    assert y.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(pl.DtypeMismatch, match="can't be cast"):
        pl.ones(2, dtype=pl.int64).add_(1.5)
    with pytest.raises(LucidError, match="expanded"):
        pl.ones(1).expand(3).add_(1)


# ------------------------------------------------------------------ properties vs NumPy
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)


@settings(max_examples=60, deadline=None)
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4),
       st.sampled_from(["add", "sub", "mul", "div", "maximum_like"]))
def test_broadcasting_matches_numpy(shapes_, op):
    sa, sb = shapes_.input_shapes
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.5, 2, sa), rng.uniform(0.5, 2, sb)
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "maximum_like": lambda x, y: np.where(x > y, x, y)}[op]
    pfn = {"add": pl.add, "sub": pl.sub, "mul": pl.mul, "div": pl.div,
           "maximum_like": lambda x, y: pl.where(x > y, x, y)}[op]
    xp, yp = pl.tensor(a, requires_grad=True), pl.tensor(b, requires_grad=True)
    out = pfn(xp, yp)
    np.testing.assert_allclose(out.detach().numpy(), fn(a, b))
    out.sum().backward()
    assert xp.grad.shape == sa and yp.grad.shape == sb


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, shapes, elements=st.floats(-10, 10)), st.data())
def test_multi_axis_reductions_match_numpy(arr, data):
    nd = arr.ndim
    axes = data.draw(st.lists(st.integers(0, max(nd - 1, 0)), unique=True, max_size=nd)) if nd else []
    keep = data.draw(st.booleans())
    dim = tuple(axes) if axes else None
    x = pl.tensor(arr)
    np.testing.assert_allclose(pl.sum(x, dim=dim, keepdim=keep).numpy(), np.sum(arr, axis=dim, keepdims=keep))
    if arr.size:
        np.testing.assert_allclose(pl.mean(x, dim=dim, keepdim=keep).numpy(), np.mean(arr, axis=dim, keepdims=keep))
        if dim is None or all(arr.shape[a] for a in dim):
            np.testing.assert_allclose(pl.max(x, dim=dim, keepdim=keep).numpy(), np.max(arr, axis=dim,
                                                                                      keepdims=keep))
            np.testing.assert_allclose(pl.min(x, dim=dim, keepdim=keep).numpy(), np.min(arr, axis=dim,
                                                                                      keepdims=keep))


# ------------------------------------------------------------------ new_* and to() as PyTorch reads them
def _same(a: pl.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype.name == str(b.dtype).removeprefix("torch.") and tuple(a.shape) == tuple(b.shape)
            and a.requires_grad == b.requires_grad and str(a.device) == str(b.device))


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_new_factories_follow_the_source_tensor_like_torch(dtype):
    src, ref = pl.ones(2, dtype=getattr(pl, dtype)), torch.ones(2, dtype=getattr(torch, dtype))
    for name, args in [("new_zeros", (2, 3)), ("new_zeros", ((2, 3),)), ("new_ones", ([4],)), ("new_empty", (0,)),
                       ("new_full", ((2,), 1)), ("new_tensor", ([[1, 0]],))]:
        got, want = getattr(src, name)(*args), getattr(ref, name)(*args)
        assert _same(got, want), (name, args)
        if name != "new_empty":
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    kw = {"dtype": pl.float16, "requires_grad": True}
    tkw = {"dtype": torch.float16, "requires_grad": True}
    for name, args in [("new_zeros", (3,)), ("new_ones", (1, 2)), ("new_empty", (2,)), ("new_full", ((2,), 0.5)),
                       ("new_tensor", ([1.5],))]:
        got, want = getattr(src, name)(*args, **kw), getattr(ref, name)(*args, **tkw)
        assert _same(got, want) and got.is_leaf, name


def test_new_tensor_copies_and_warns_on_a_tensor():
    x = pl.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match=r"detach\(\)\.clone\(\)"):
        y = pl.zeros(1, dtype=pl.float64).new_tensor(x)
    assert y.dtype == pl.float64 and not y.requires_grad and y.tolist() == [1.0, 2.0]
    data = [3.0]
    z = x.new_tensor(data)
    data[0] = 4.0
    assert z.tolist() == [3.0]


def test_to_reads_positional_non_blocking_and_copy():
    x, tx = pl.tensor([1, 2]), torch.tensor([1, 2])
    cases = [
        (("cpu", pl.float64, False, True), ("cpu", torch.float64, False, True)),
        (("cpu", pl.int64, False, True), ("cpu", torch.int64, False, True)),
        (("cpu", pl.int64, True, False), ("cpu", torch.int64, True, False)),
        ((pl.int64, False, True), (torch.int64, False, True)),
        ((pl.float32, True), (torch.float32, True)),
        (("cpu",), ("cpu",)),
        ((pl.zeros(1, dtype=pl.float16), False, True), (torch.zeros(1, dtype=torch.float16), False, True)),
    ]
    for args, targs in cases:
        got, want = x.to(*args), tx.to(*targs)
        assert _same(got, want) and (got is x) == (want is tx), args
    assert x.to(device="cpu", dtype=pl.int64, copy=True) is not x
    assert x.to(non_blocking=True) is x
    assert x.to("float64").dtype == pl.float64
    with pytest.raises(TypeError, match="non_blocking must be a bool"):
        x.to("cpu", pl.float64, 1)
    with pytest.raises(TypeError, match="too many"):
        x.to(pl.float64, False, False, False)
    with pytest.raises(TypeError, match="expected a device, a dtype or a Tensor"):
        x.to(True)
    with pytest.raises(TypeError, match="expected a dtype after the device"):
        x.to("cpu", "cpu")
    y = pl.tensor([1.0], requires_grad=True)
    y.to("cpu", pl.float64, False, True).sum().backward()  # still differentiable
    assert y.grad.tolist() == [1.0]


def test_device_and_layout_flags_match_torch_on_the_cpu():
    x, tx = pl.zeros(2), torch.zeros(2)
    for flag in ["is_cpu", "is_cuda", "is_xpu", "is_mps", "is_meta", "is_ipu", "is_mtia", "is_maia",
                 "is_xla", "is_vulkan", "is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn", "is_nested"]:
        assert getattr(x, flag) is getattr(tx, flag), flag
    for method in ["is_signed", "is_neg", "is_pinned", "is_shared", "get_device"]:
        assert getattr(x, method)() == getattr(tx, method)(), method
    for dtype in ["uint8", "bool", "int8", "float16", "complex64"]:
        ours, theirs = pl.zeros(1, dtype=getattr(pl, dtype)), torch.zeros(1, dtype=getattr(torch, dtype))
        assert ours.is_signed() == theirs.is_signed(), dtype
    assert pl.tensor([2.0]).is_nonzero() and not pl.tensor([0]).is_nonzero()
    with pytest.raises(RuntimeError):
        pl.zeros(2).is_nonzero()
    assert x.is_same_size(pl.ones(2)) and not x.is_same_size(pl.ones(3))
    assert x.is_set_to(x) and not x.is_set_to(x.clone()) and not x.is_set_to(x[:1])


def test_python_types_as_dtypes_match_torch():
    for py in (float, int, bool, complex):
        assert pl.tensor(1, dtype=py).dtype.name == str(torch.tensor(1, dtype=py).dtype).split(".")[1], py


def test_to_and_casts_accept_memory_format():
    x = pl.zeros(2, 3)
    y = x.to("cpu", pl.float64, False, True, memory_format=None)
    assert y.dtype is pl.float64 and y is not x
    assert x.float(memory_format=None) is x and x.double(memory_format=None).dtype is pl.float64


@pytest.mark.parametrize("write", ["zero_", "fill_", "copy_"])
def test_in_place_write_on_a_tensor_in_the_graph_rebases_its_history(write):
    """``x.clone().zero_()`` (and fill_/copy_) inside a graph: backward gives PyTorch's gradients, no version
    error (the old values get a zero gradient)."""
    grads = []
    for lib in (pl, torch):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        src = lib.tensor([0.5, 1.5, 2.5], requires_grad=True)
        y = (x * x).clone()
        {"zero_": lambda t: t.zero_(), "fill_": lambda t: t.fill_(2.0), "copy_": lambda t: t.copy_(src * 2)}[write](y)
        ((y * x).sum() + (x * 3).sum()).backward()
        grads.append((x.grad.tolist(), None if src.grad is None else src.grad.tolist()))
    assert grads[0] == grads[1]


def test_deepcopy_and_pickle_keep_zero_dim_shapes():
    import copy
    import pickle

    for t in (pl.tensor(2.0), pl.tensor([[1, 2]]), pl.ones(0, 3)):
        for got in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
            assert got.shape == t.shape and got.dtype == t.dtype
            assert got.tolist() == t.tolist()


def test_c_contiguous_reads_the_c_level_flag_where_there_is_one():
    """``pylucid._interop.c_contiguous``: NumPy arrays by their flags; an array with CuPy's ``_c_contiguous``
    attribute by that attribute alone (its ``.flags`` builds an object per read, on the per-step hot paths)."""
    import numpy as np

    from pylucid._interop import c_contiguous

    a = np.zeros((3, 4), np.float32)
    assert c_contiguous(a) is True and c_contiguous(a.T) is False and c_contiguous(a[:, ::2]) is False

    class CupyLike:
        def __init__(self, flag):
            self._c_contiguous = flag

        @property
        def flags(self):
            raise AssertionError("read .flags")

    assert c_contiguous(CupyLike(True)) is True and c_contiguous(CupyLike(False)) is False
