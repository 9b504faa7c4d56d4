"""Tests for pylucid.utils.data and pylucid.datasets.

PyTorch (torch==2.13, CPU) is the oracle where behaviour is comparable:
default_collate, random_split lengths, loader lengths. Random streams are
NumPy's, so orders are compared for determinism, not against torch.
"""

from __future__ import annotations

import collections
import gzip
import os
import pickle
import random
import time
from pathlib import Path

import numpy as np
import pytest

import pylucid
from pylucid.datasets import (
    CIFAR10,
    CIFAR100,
    MNIST,
    DatasetFormatError,
    Digits,
    FashionMNIST,
    load_digits,
    read_idx,
    safe_load_pickle,
)
from pylucid.errors import LucidError
from pylucid.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)

torch = pytest.importorskip("torch")
import torch.utils.data as tud  # noqa: E402


def gen(seed: int) -> pylucid.Generator:
    return pylucid.Generator().manual_seed(seed)


def to_plain(x):
    """pylucid or torch batch -> nested Python/NumPy values with dtype names, to compare."""
    if isinstance(x, pylucid.Tensor):
        return ("tensor", x.dtype.name, x.numpy().astype(np.float64).tolist())
    if isinstance(x, torch.Tensor):
        name = str(x.dtype).replace("torch.", "")
        return ("tensor", name, x.to(torch.float64).numpy().tolist())
    if isinstance(x, dict):
        return {k: to_plain(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__,) + tuple(to_plain(v) for v in x)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [to_plain(v) for v in x])
    return x


Point = collections.namedtuple("Point", "x y")


# ------------------------------------------------------------------ collate

COLLATE_CASES = {
    "ints": [1, 2, 3],
    "floats": [0.5, 1.5],
    "bools": [True, False],
    "np_f32_scalars": [np.float32(1), np.float32(2)],
    "np_int_arrays": [np.arange(3, dtype=np.int32), np.arange(3, 6, dtype=np.int32)],
    "np_f64_0d": [np.array(1.5), np.array(2.0)],
    "np_uint8": [np.zeros((2, 2), np.uint8), np.ones((2, 2), np.uint8)],
    "tuple_mixed": [(1, 0.5, "a"), (2, 1.5, "b")],
    "dict_nested": [{"a": 1, "b": [1, 2], "s": "x"}, {"a": 2, "b": [3, 4], "s": "y"}],
    "namedtuple": [Point(1, 2.0), Point(3, 4.0)],
    "strings": ["a", "bc"],
    "bytes": [b"a", b"b"],
    "list_of_lists": [[1, 2], [3, 4]],
}


@pytest.mark.parametrize("name", sorted(COLLATE_CASES))
def test_default_collate_matches_torch(name):
    batch = COLLATE_CASES[name]
    assert to_plain(default_collate(batch)) == to_plain(tud.default_collate(batch))


def test_default_collate_tensors_keep_dtype_and_stack():
    a = pylucid.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = pylucid.from_numpy(np.ones((2, 3), dtype=np.float32))
    out = default_collate([a, b])
    assert out.shape == (2, 2, 3) and out.dtype.name == "float32"
    np.testing.assert_array_equal(out.numpy(), np.stack([a.numpy(), b.numpy()]))
    bf = [pylucid.tensor([1.0, 2.0], dtype=pylucid.bfloat16)] * 2
    assert default_collate(bf).dtype.name == "bfloat16"
    i64 = default_collate([(pylucid.tensor([1]), 0), (pylucid.tensor([2]), 1)])
    assert i64[0].dtype.name == "int64" and i64[1].numpy().tolist() == [0, 1]


def test_default_collate_tensors_requiring_grad_go_through_stack():
    a = pylucid.tensor([1.0, 2.0], requires_grad=True)
    b = pylucid.tensor([3.0, 4.0], requires_grad=True)
    out = default_collate([a, b])
    assert out.requires_grad and out.shape == (2, 2)


def _cuda_available() -> bool:
    cuda = getattr(pylucid, "cuda", None)
    return bool(cuda is not None and cuda.is_available())


@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA device")
def test_default_collate_cuda_tensors_stay_on_device():
    batch = [pylucid.tensor([1.0, 2.0], device="cuda"), pylucid.tensor([3.0, 4.0], device="cuda")]
    out = default_collate(batch)
    assert str(out.device) == "cuda:0" and out.shape == (2, 2)
    assert out.to("cpu").numpy().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    ds = TensorDataset(pylucid.tensor([[1.0], [2.0], [3.0]], device="cuda"))
    (xb,) = next(iter(DataLoader(ds, batch_size=2, pin_memory=True)))
    assert str(xb.device) == "cuda:0"


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([pylucid.tensor([1.0, 2.0]), pylucid.tensor([1.0])])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_default_convert():
    out = default_convert({"x": np.zeros(2, np.float32), "n": 3, "t": (np.ones(1), "s")})
    assert isinstance(out["x"], pylucid.Tensor) and out["n"] == 3
    assert isinstance(out["t"], list) and isinstance(out["t"][0], pylucid.Tensor) and out["t"][1] == "s"


# ----------------------------------------------------------------- samplers


def test_sequential_and_batch_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert list(BatchSampler(range(5), 2, drop_last=False)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(range(5), 2, drop_last=True)) == [[0, 1], [2, 3]]
    assert len(BatchSampler(range(5), 2, False)) == 3 and len(BatchSampler(range(5), 2, True)) == 2
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="BatchSampler: batch_size"):
            BatchSampler(range(5), bad, False)
    with pytest.raises(ValueError, match="drop_last"):
        BatchSampler(range(5), 2, "yes")


def test_random_sampler():
    a = list(RandomSampler(range(20), generator=gen(1)))
    assert sorted(a) == list(range(20))
    assert a == list(RandomSampler(range(20), generator=gen(1)))
    assert a != list(RandomSampler(range(20), generator=gen(2)))
    sampler = RandomSampler(range(20), generator=gen(1))
    assert list(sampler) != list(sampler)  # a fresh permutation per epoch
    long = list(RandomSampler(range(5), num_samples=12, generator=gen(0)))
    assert len(long) == 12 and sorted(long[:5]) == sorted(long[5:10]) == list(range(5))
    rep = list(RandomSampler(range(3), replacement=True, num_samples=100, generator=gen(0)))
    assert len(rep) == 100 and set(rep) == {0, 1, 2}
    pylucid.manual_seed(7)
    first = list(RandomSampler(range(10)))
    pylucid.manual_seed(7)
    assert list(RandomSampler(range(10))) == first  # None uses the default generator
    with pytest.raises(ValueError, match="RandomSampler: num_samples"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="RandomSampler: replacement"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(TypeError, match="RandomSampler: generator"):
        list(RandomSampler(range(3), generator=np.random.default_rng(0)))


def test_subset_random_sampler():
    s = SubsetRandomSampler([10, 20, 30, 40], generator=gen(0))
    out = list(s)
    assert sorted(out) == [10, 20, 30, 40] and len(s) == 4
    assert out == list(SubsetRandomSampler([10, 20, 30, 40], generator=gen(0)))


def test_weighted_random_sampler():
    draws = list(WeightedRandomSampler([0.0, 1.0, 3.0], 4000, generator=gen(0)))
    counts = np.bincount(draws, minlength=3)
    assert counts[0] == 0 and 0.7 < counts[2] / 4000 < 0.8
    no_rep = list(WeightedRandomSampler(pylucid.tensor([1.0, 1.0, 0.0, 5.0]), 3, replacement=False, generator=gen(0)))
    assert sorted(no_rep) == [0, 1, 3]
    assert no_rep == list(WeightedRandomSampler([1.0, 1.0, 0.0, 5.0], 3, replacement=False, generator=gen(0)))
    for weights, n, kw, match in [
        ([-1.0, 1.0], 2, {}, "non-negative"),
        ([0.0, 0.0], 2, {}, "not all zero"),
        ([[1.0]], 1, {}, "1-D"),
        ([1.0, 0.0], 2, {"replacement": False}, "without"),
        ([1.0], 0, {}, "num_samples"),
    ]:
        with pytest.raises(ValueError, match=match):
            WeightedRandomSampler(weights, n, **kw)


# ----------------------------------------------------------------- datasets


def test_tensor_concat_subset_chain():
    x = pylucid.from_numpy(np.arange(10, dtype=np.float32).reshape(5, 2))
    y = pylucid.from_numpy(np.arange(5, dtype=np.int64))
    ds = TensorDataset(x, y)
    assert len(ds) == 5 and ds[3][0].numpy().tolist() == [6.0, 7.0] and int(ds[3][1].numpy()) == 3
    with pytest.raises(ValueError, match="TensorDataset: size mismatch"):
        TensorDataset(x, pylucid.from_numpy(np.arange(4)))
    with pytest.raises(TypeError, match="TensorDataset: argument 0"):
        TensorDataset([1, 2])
    cat = ConcatDataset([[0, 1], [2, 3, 4]])
    assert [cat[i] for i in range(5)] == [0, 1, 2, 3, 4] and cat[-1] == 4 and len(cat) == 5
    with pytest.raises(IndexError):
        cat[5]
    assert len(ds + ds) == 10
    sub = Subset(["a", "b", "c"], [2, 0])
    assert [sub[0], sub[1]] == ["c", "a"] and len(sub) == 2
    assert list(ChainDataset([range(2), range(2)])) == [0, 1, 0, 1]


@pytest.mark.parametrize("n,lengths", [(10, [0.33, 0.33, 0.34]), (7, [0.5, 0.5]), (10, [3, 7]), (11, [0.1] * 10)])
def test_random_split_lengths_match_torch(n, lengths):
    ours = [len(s) for s in random_split(range(n), lengths, generator=gen(0))]
    theirs = [len(s) for s in tud.random_split(range(n), lengths, generator=torch.Generator().manual_seed(0))]
    assert ours == theirs


def test_random_split_deterministic_and_disjoint():
    a = [list(s) for s in random_split(range(50), [0.6, 0.4], generator=gen(3))]
    b = [list(s) for s in random_split(range(50), [0.6, 0.4], generator=gen(3))]
    c = [list(s) for s in random_split(range(50), [0.6, 0.4], generator=gen(4))]
    assert a == b and a != c
    assert sorted(a[0] + a[1]) == list(range(50))
    with pytest.raises(ValueError, match="random_split: sum of input lengths"):
        random_split(range(5), [2, 2])
    with pytest.raises(ValueError, match="random_split"):
        random_split(range(5), [0.5, 0.2])


# --------------------------------------------------------------- DataLoader


def test_loader_basic_batches_and_len():
    x = pylucid.from_numpy(np.arange(14, dtype=np.float32).reshape(7, 2))
    y = pylucid.from_numpy(np.arange(7))
    loader = DataLoader(TensorDataset(x, y), batch_size=3)
    batches = list(loader)
    assert len(loader) == 3 == len(batches)
    assert [b[1].numpy().tolist() for b in batches] == [[0, 1, 2], [3, 4, 5], [6]]
    assert batches[0][0].shape == (3, 2) and batches[0][0].dtype.name == "float32"
    dropped = DataLoader(TensorDataset(x, y), batch_size=3, drop_last=True)
    assert len(dropped) == 2 and [b[1].numpy().tolist() for b in dropped] == [[0, 1, 2], [3, 4, 5]]
    assert len(DataLoader(range(7), batch_size=3)) == len(tud.DataLoader(range(7), batch_size=3))


def test_loader_no_batching_custom_collate_and_batch_sampler():
    assert list(DataLoader([1, 2, 3], batch_size=None)) == [1, 2, 3]
    assert list(DataLoader(range(5), batch_size=2, collate_fn=list)) == [[0, 1], [2, 3], [4]]
    bs = [[4, 0], [1]]
    assert [b.numpy().tolist() for b in DataLoader(list(range(5)), batch_sampler=bs)] == [[4, 0], [1]]


def test_loader_shuffle_deterministic_and_same_for_any_num_workers():
    data = list(range(23))
    runs = {}
    for workers in (0, 2):
        loader = DataLoader(data, batch_size=4, shuffle=True, generator=gen(5), num_workers=workers)
        runs[workers] = [[b.numpy().tolist() for b in loader] for _ in range(2)]  # two epochs
    assert runs[0] == runs[2]
    epoch1, epoch2 = runs[0]
    assert epoch1 != epoch2 and sorted(sum(epoch1, [])) == data


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"batch_size": 0}, ValueError, "DataLoader: batch_size"),
        ({"batch_size": -2}, ValueError, "DataLoader: batch_size"),
        ({"batch_size": 1.5}, TypeError, "DataLoader: batch_size"),
        ({"shuffle": True, "sampler": [0, 1]}, ValueError, "mutually exclusive with shuffle"),
        ({"batch_sampler": [[0]], "batch_size": 2}, ValueError, "batch_sampler option is mutually exclusive"),
        ({"batch_sampler": [[0]], "drop_last": True}, ValueError, "batch_sampler option is mutually exclusive"),
        ({"batch_size": None, "drop_last": True}, ValueError, "batch_size=None"),
        ({"num_workers": -1}, ValueError, "DataLoader: num_workers"),
        ({"num_workers": 1.0}, TypeError, "DataLoader: num_workers"),
        ({"timeout": -1}, ValueError, "DataLoader: timeout"),
        ({"persistent_workers": True}, ValueError, "persistent_workers"),
        ({"prefetch_factor": 2}, ValueError, "prefetch_factor"),
        ({"num_workers": 1, "prefetch_factor": 0}, ValueError, "prefetch_factor"),
        ({"collate_fn": 3}, TypeError, "DataLoader: collate_fn"),
        ({"generator": 3}, TypeError, "DataLoader: generator"),
        ({"shuffle": "yes"}, TypeError, "DataLoader: shuffle"),
        ({"num_workers": 1, "multiprocessing_context": "nope"}, ValueError, "multiprocessing_context"),
    ],
)
def test_loader_argument_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        DataLoader(list(range(10)), **kwargs)


class Stream(IterableDataset):
    """0..n-1, split between workers by get_worker_info()."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self) -> int:
        return self.n


def test_iterable_dataset_errors_and_batches():
    for kwargs in ({"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError, match="IterableDataset"):
            DataLoader(Stream(4), **kwargs)
    assert [b.numpy().tolist() for b in DataLoader(Stream(5), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert len(DataLoader(Stream(5), batch_size=2)) == 3
    ours = [b.numpy().tolist() for b in DataLoader(Stream(10), batch_size=2, num_workers=2)]

    class TorchStream(tud.IterableDataset):
        def __iter__(self):
            info = tud.get_worker_info()
            return iter(range(info.id, 10, info.num_workers))

    theirs = [b.tolist() for b in tud.DataLoader(TorchStream(), batch_size=2, num_workers=2)]
    assert ours == theirs
    dropped = [b.numpy().tolist() for b in DataLoader(Stream(10), batch_size=3, num_workers=2, drop_last=True)]
    assert all(len(b) == 3 for b in dropped) and len(dropped) == 2


class Probe(Dataset):
    """Reports which worker served each index and what its RNGs produce."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int):
        info = get_worker_info()
        return {
            "index": i,
            "worker": info.id,
            "seed": info.seed,
            "pid": os.getpid(),
            "py": random.random(),
            "np": float(np.random.rand()),
            "lucid": float(pylucid.default_generator._np.random()),
        }


def _collect(loader, epochs=1):
    out = []
    for _ in range(epochs):
        for batch in loader:
            rows = batch["index"].numpy().tolist()
            out.append({k: (v.numpy().tolist() if isinstance(v, pylucid.Tensor) else v) for k, v in batch.items()})
            assert rows == sorted(rows)
    return out


def test_workers_identical_across_runs_and_seeded_per_worker():
    def run(seed):
        loader = DataLoader(Probe(), batch_size=2, shuffle=False, num_workers=2, generator=gen(seed))
        return _collect(loader)

    a, b, c = run(11), run(11), run(12)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "pid"} for r in rows]  # noqa: E731
    assert strip(a) == strip(b)
    assert strip(a) != strip(c)
    assert [r["index"] for r in a] == [[2 * i, 2 * i + 1] for i in range(8)]  # order preserved
    seeds = {r["worker"][0]: r["seed"][0] for r in a}
    assert set(seeds) == {0, 1} and seeds[1] == seeds[0] + 1
    # Different workers draw different numbers from every RNG.
    w0 = next(r for r in a if r["worker"][0] == 0)
    w1 = next(r for r in a if r["worker"][0] == 1)
    for key in ("py", "np", "lucid"):
        assert w0[key] != w1[key]
    # Worker 0's first draws are what base_seed + 0 gives.
    random.seed(seeds[0])
    assert w0["py"][0] == random.random()
    assert w0["lucid"][0] == pylucid.Generator().manual_seed(seeds[0])._np.random()
    assert get_worker_info() is None


def test_worker_order_preserved_under_uneven_delays():
    class Slow(Dataset):
        def __len__(self):
            return 12

        def __getitem__(self, i):
            time.sleep(0.03 if i % 4 < 2 else 0.0)  # worker 0 is slow
            return i

    out = [b.numpy().tolist() for b in DataLoader(Slow(), batch_size=2, num_workers=2, prefetch_factor=3)]
    assert out == [[i, i + 1] for i in range(0, 12, 2)]


def test_worker_init_fn_and_errors():
    def init(worker_id):
        np.random.seed(1000 + worker_id)

    class NumpyDraw(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return get_worker_info().id, float(np.random.rand())

    rows = list(DataLoader(NumpyDraw(), batch_size=None, num_workers=2, worker_init_fn=init))
    assert rows[0][1] == np.random.RandomState(1000).rand()
    assert rows[1][1] == np.random.RandomState(1001).rand()

    class Failing(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                raise KeyError("bad sample 2")
            return i

    it = iter(DataLoader(Failing(), batch_size=1, num_workers=2))
    assert next(it).numpy().tolist() == [0] and next(it).numpy().tolist() == [1]
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0"):
        next(it)


def test_worker_crash_and_timeout():
    class Crash(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            os._exit(3)

    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(DataLoader(Crash(), num_workers=1))

    class Sleepy(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            time.sleep(3)
            return i

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.3 seconds"):
        list(DataLoader(Sleepy(), num_workers=1, timeout=0.3))
    assert time.monotonic() - start < 2.5


def test_persistent_workers_keep_processes():
    persistent = DataLoader(Probe(), batch_size=4, num_workers=2, persistent_workers=True, generator=gen(0))
    pids = [set(sum((r["pid"] for r in _collect(persistent)), [])) for _ in range(3)]
    assert pids[0] == pids[1] == pids[2] and len(pids[0]) == 2
    # Abandon an epoch half way: the next one still starts at index 0 and is complete.
    it = iter(persistent)
    next(it)
    rows = _collect(persistent)
    assert sum((r["index"] for r in rows), []) == list(range(16))
    fresh = DataLoader(Probe(), batch_size=4, num_workers=2, generator=gen(0))
    pids_a = set(sum((r["pid"] for r in _collect(fresh)), []))
    pids_b = set(sum((r["pid"] for r in _collect(fresh)), []))
    assert pids_a.isdisjoint(pids_b)
    # An IterableDataset restarts its stream each epoch with persistent workers.
    stream = DataLoader(Stream(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert [sorted(sum((b.numpy().tolist() for b in stream), [])) for _ in range(2)] == [list(range(6))] * 2


def test_spawn_context_matches_in_process():
    ds = TensorDataset(pylucid.from_numpy(np.arange(12, dtype=np.float32).reshape(6, 2)))
    expected = [b[0].numpy().tolist() for b in DataLoader(ds, batch_size=2, shuffle=True, generator=gen(1))]
    spawned = DataLoader(
        ds, batch_size=2, shuffle=True, generator=gen(1), num_workers=2, multiprocessing_context="spawn"
    )
    assert [b[0].numpy().tolist() for b in spawned] == expected


def test_loader_attributes_frozen():
    loader = DataLoader(range(4), batch_size=2)
    with pytest.raises(ValueError, match="batch_size attribute should not be set"):
        loader.batch_size = 3


# ------------------------------------------------------------------ digits


def test_digits_bundled():
    x, y = load_digits()
    assert x.shape == (1797, 1, 8, 8) and x.dtype.name == "float32"
    assert y.shape == (1797,) and y.dtype.name == "int64"
    xs = x.numpy()
    assert xs.min() == 0.0 and xs.max() == 1.0
    assert np.allclose(xs * 16, np.round(xs * 16))
    assert np.bincount(y.numpy()).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    train, test = Digits("train"), Digits("test")
    assert len(train) == 1442 and len(test) == 355 and len(Digits("all")) == 1797
    # Stratified: each class is about 20% test.
    test_counts = np.bincount(test.targets.numpy(), minlength=10)
    assert (test_counts == np.bincount(y.numpy()) // 5).all()
    # Deterministic and disjoint: the two splits partition the whole set.
    rows = lambda ds: {ds.data.numpy()[i].tobytes() + bytes([int(ds.targets.numpy()[i])]) for i in range(len(ds))}  # noqa: E731
    tr, te = rows(train), rows(test)
    assert len(tr | te) == len(rows(Digits("all")))
    image, label = train[0]
    assert image.shape == (1, 8, 8) and image.dtype.name == "float32" and isinstance(label, int)
    tx, ty = load_digits("test")
    np.testing.assert_array_equal(tx.numpy()[0], test[0][0].numpy())
    with pytest.raises(ValueError, match="Digits: split must be one of"):
        Digits("val")


def test_digits_transforms_and_loader():
    ds = Digits("test", transform=lambda t: t.numpy().sum(), target_transform=lambda y: y * 10)
    s, y = ds[0]
    assert y == 50 and s > 0
    loader = DataLoader(Digits("train"), batch_size=64, shuffle=True, generator=gen(0))
    xb, yb = next(iter(loader))
    assert xb.shape == (64, 1, 8, 8) and xb.dtype.name == "float32" and yb.dtype.name == "int64"
    assert len(loader) == 23


# -------------------------------------------------------------------- IDX


def write_idx(path: Path, array: np.ndarray, compress: bool = False) -> Path:
    codes = {
        np.dtype("u1"): 0x08,
        np.dtype("i1"): 0x09,
        np.dtype(">i2"): 0x0B,
        np.dtype(">i4"): 0x0C,
        np.dtype(">f4"): 0x0D,
    }
    dtype = array.dtype.newbyteorder(">") if array.dtype.itemsize > 1 else array.dtype
    raw = bytes([0, 0, codes[np.dtype(dtype)], array.ndim]) + np.array(array.shape, ">u4").tobytes()
    raw += array.astype(dtype).tobytes()
    if compress:
        raw = gzip.compress(raw)
        path = path.with_name(path.name + ".gz")
    path.write_bytes(raw)
    return path


def make_mnist(folder: Path, prefix: str, n: int, compress: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    write_idx(folder / f"{prefix}-images-idx3-ubyte", images, compress)
    write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels, compress)
    return images, labels


def test_read_idx_dtypes_and_validation(tmp_path):
    for arr in (
        np.arange(6, dtype=np.int16).reshape(2, 3),
        np.linspace(0, 1, 4, dtype=np.float32),
        np.arange(5, dtype=np.int32),
    ):
        p = write_idx(tmp_path / "a-idx", arr)
        out = read_idx(p)
        np.testing.assert_array_equal(out, arr)
        assert out.dtype.isnative
    good = write_idx(tmp_path / "g-idx", np.arange(10, dtype=np.uint8)).read_bytes()
    cases = {
        "magic": b"\x01" + good[1:],
        "type": good[:2] + b"\x07" + good[3:],
        "trunc": good[:-1],
        "long": good + b"\x00",
        "header": good[:6],
    }
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(raw)
        with pytest.raises(DatasetFormatError, match=name if name != "trunc" else "truncated"):
            read_idx(tmp_path / name)
    with pytest.raises(DatasetFormatError, match="3 dimensions|1 dimensions"):
        read_idx(write_idx(tmp_path / "lab", np.arange(3, dtype=np.uint8)), expected_ndim=3)
    (tmp_path / "badgz").write_bytes(gzip.compress(good)[:-8])
    with pytest.raises(DatasetFormatError, match="gzip"):
        read_idx(tmp_path / "badgz")
    assert issubclass(DatasetFormatError, LucidError) and issubclass(DatasetFormatError, ValueError)


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_and_fashion(tmp_path, compress):
    images, labels = make_mnist(tmp_path / "MNIST" / "raw", "train", 5, compress)
    ds = MNIST(tmp_path, train=True)
    assert len(ds) == 5
    x, y = ds[3]
    assert x.shape == (1, 28, 28) and x.dtype.name == "float32" and y == int(labels[3])
    np.testing.assert_allclose(x.numpy()[0], images[3] / 255.0, rtol=1e-6)
    assert ds.data.numpy().dtype == np.uint8 and ds.targets.numpy().tolist() == labels.tolist()
    make_mnist(tmp_path, "t10k", 3, compress, seed=1)  # flat layout, test split
    assert len(MNIST(tmp_path, train=False)) == 3
    fashion_images, _ = make_mnist(tmp_path / "FashionMNIST" / "raw", "t10k", 4, compress, seed=2)
    f = FashionMNIST(tmp_path, train=False, transform=lambda t: t.numpy().mean(), target_transform=str)
    assert len(f) == 4 and isinstance(f[0][1], str)
    assert f[0][0] == pytest.approx(fashion_images[0].mean() / 255.0, rel=1e-5)


def test_mnist_missing_and_mismatched_files(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        MNIST(tmp_path / "data", train=True)
    msg = str(info.value)
    assert str(tmp_path / "data" / "MNIST" / "raw" / "train-images-idx3-ubyte.gz") in msg
    assert "https://" in msg and "train-images-idx3-ubyte" in msg
    with pytest.raises(FileNotFoundError, match="fashion-mnist"):
        FashionMNIST(tmp_path)
    images, _ = make_mnist(tmp_path, "train", 4, False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(3, np.uint8))
    with pytest.raises(DatasetFormatError, match="4 images but .* 3 labels"):
        MNIST(tmp_path)


# ------------------------------------------------------------------- CIFAR


def make_cifar(folder: Path, names, n: int, protocol: int, label_key: str = "labels", n_classes: int = 10):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    out = {}
    for name in names:
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = rng.integers(0, n_classes, size=n).tolist()
        batch = {
            b"batch_label": b"testing",
            label_key.encode(): labels,
            b"data": data,
            b"filenames": [f"img{i}.png".encode() for i in range(n)],
        }
        (folder / name).write_bytes(pickle.dumps(batch, protocol=protocol))
        out[name] = (data, labels)
    return out


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar10(tmp_path, protocol):
    batches = make_cifar(
        tmp_path / "cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"], 3, protocol
    )
    train = CIFAR10(tmp_path, train=True)
    assert len(train) == 15
    x, y = train[4]  # second image of data_batch_2
    data, labels = batches["data_batch_2"]
    assert x.shape == (3, 32, 32) and x.dtype.name == "float32" and y == labels[1]
    np.testing.assert_allclose(x.numpy(), data[1].reshape(3, 32, 32) / 255.0, rtol=1e-6)
    test = CIFAR10(tmp_path / "cifar-10-batches-py", train=False)  # the batch folder itself also works
    assert len(test) == 3 and test.targets.numpy().tolist() == batches["test_batch"][1]


def test_cifar100(tmp_path):
    make_cifar(tmp_path / "cifar-100-python", ["train", "test"], 4, 2, label_key="fine_labels", n_classes=100)
    assert len(CIFAR100(tmp_path)) == 4 and len(CIFAR100(tmp_path, train=False)) == 4


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_malicious_pickle_is_refused_without_running_code(tmp_path):
    marker = tmp_path / "pwned"
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    payload = {b"data": np.zeros((1, 3072), np.uint8), b"labels": [_Evil(str(marker))]}
    (folder / "test_batch").write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(DatasetFormatError, match=r"refusing to load global (builtins|_?io)\.open"):
        CIFAR10(tmp_path, train=False)
    assert not marker.exists()
    # os.system via a protocol-0 GLOBAL, and an object-dtype array, are refused too.
    with pytest.raises(DatasetFormatError, match="posix.system|os.system"):
        safe_load_pickle(b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    assert not marker.exists()
    with pytest.raises(DatasetFormatError, match="non-numeric dtype"):
        safe_load_pickle(pickle.dumps(np.array([1, None], dtype=object), protocol=2))
    with pytest.raises(DatasetFormatError, match="not a valid pickle"):
        safe_load_pickle(pickle.dumps({"a": 1})[:-3])


def test_cifar_bad_contents(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(DatasetFormatError, match=r"uint8 \(N, 3072\)"):
        CIFAR10(tmp_path, train=False)
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}))
    with pytest.raises(DatasetFormatError, match="labels outside"):
        CIFAR10(tmp_path, train=False)
    with pytest.raises(FileNotFoundError, match="cifar-10-python.tar.gz"):
        CIFAR10(tmp_path / "nowhere")
