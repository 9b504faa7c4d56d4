"""pylucid.distributed in one process: the sampler against PyTorch's, a world of one rank on every
engine (MPI singleton, no MPI at all, and NCCL where a GPU is), the launcher's command line, errors.

The 2-rank behaviour (collectives against NumPy on both ranks, DDP against single-process
training, ZeRO, failing ranks) is in tests/test_distributed_mpi.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch.utils.data as tud

import pylucid
import pylucid.distributed as dist
from pylucid import nn
from pylucid.distributed import _mpi, _shm
from pylucid.distributed._work import DistBackendError, Future, Work
from pylucid.nn.parallel import DistributedDataParallel as DDP
from pylucid.utils.data import DataLoader, DistributedSampler, TensorDataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------------------------------------
# DistributedSampler
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,replicas", [(10, 3), (17, 4), (8, 2), (3, 5), (1, 2), (1000, 7)])
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [True, False])
def test_distributed_sampler_partitions_like_pytorch(n, replicas, shuffle, drop_last):
    data = list(range(n))
    for seed in (0, 7, 2**33 + 5):
        for rank in range(replicas):
            mine = DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                                      drop_last=drop_last)
            theirs = tud.DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                                            drop_last=drop_last)
            assert len(mine) == len(theirs)
            for epoch in (0, 1, 5):
                mine.set_epoch(epoch)
                theirs.set_epoch(epoch)
                assert list(mine) == list(theirs), (seed, rank, epoch)


def test_distributed_sampler_covers_the_dataset_and_feeds_a_dataloader():
    ds = TensorDataset(pylucid.arange(11).float())
    seen = []
    for rank in range(3):
        s = DistributedSampler(ds, num_replicas=3, rank=rank, seed=1)
        s.set_epoch(2)
        seen += [int(v) for (x,) in DataLoader(ds, batch_size=2, sampler=s) for v in x.tolist()]
    assert sorted(set(seen)) == list(range(11)) and len(seen) == 12  # one index repeated as padding


def test_distributed_sampler_errors():
    with pytest.raises(ValueError, match="Invalid rank 3"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))


# ---------------------------------------------------------------------------------------------------------------------
# import and errors without a process group
# ---------------------------------------------------------------------------------------------------------------------
def test_import_needs_neither_mpi4py_nor_cupy():
    code = ("import sys, pylucid, pylucid.distributed, pylucid.nn.parallel, pylucid.distributed.optim, "
            "pylucid.distributed.run; print(sorted(m for m in ('mpi4py', 'cupy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=ROOT), check=True)
    assert out.stdout.strip() == "[]"


def test_calls_before_init_process_group_raise():
    assert not dist.is_initialized() and dist.is_available()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="init_process_group"):
        dist.all_reduce(pylucid.ones(2))
    with pytest.raises(RuntimeError, match="init_process_group"):
        DDP(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="init_method"):
        dist.init_process_group("mpi", init_method="tcp://127.0.0.1:23456")
    with pytest.raises(ValueError, match="Invalid backend"):
        dist.init_process_group("smoke-signals")


# ---------------------------------------------------------------------------------------------------------------------
# a world of one process
# ---------------------------------------------------------------------------------------------------------------------
ENGINES = [
    pytest.param(("self", "cpu"), id="no-mpi-cpu"),
    pytest.param(("mpi", "cpu"), id="mpi-cpu", marks=pytest.mark.skipif(not _mpi.available(),
                                                                          reason="mpi4py is not installed")),
    pytest.param(("nccl", "cuda"), id="nccl-cuda", marks=pytest.mark.skipif(
        not (pylucid.cuda.is_available() and dist.is_nccl_available()), reason="no CUDA GPU with NCCL here")),
]


@pytest.fixture(params=ENGINES)
def world1(request, monkeypatch):
    engine, device = request.param
    for var in ("WORLD_SIZE", "RANK", "PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    if engine == "self":
        def no_mpi():
            raise ImportError("mpi4py hidden by the test")
        monkeypatch.setattr(_mpi, "load", no_mpi)
    dist.init_process_group("nccl" if engine == "nccl" else "mpi", timeout=60)
    try:
        yield engine, device
    finally:
        dist.destroy_process_group()


def _t(values, device, dtype=None):
    return pylucid.tensor(values, dtype=dtype, device=device)


def test_world_of_one_runs_every_collective(world1):
    engine, device = world1
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == ("nccl" if engine == "nccl" else "mpi")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for dt in (pylucid.float32, pylucid.float64, pylucid.float16, pylucid.bfloat16, pylucid.int32, pylucid.int64,
               pylucid.uint8, pylucid.int8, pylucid.bool):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
            t = _t(x, device, dt)
            v = t.version
            dist.all_reduce(t, op=op)
            assert t.cpu().tolist() == _t(x, "cpu", dt).tolist() and t.version > v
    t = _t(x, device)[:, ::2]
    w = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    assert w.wait() and w.is_completed() and w.result() == [t]
    assert t.cpu().tolist() == x[:, ::2].tolist()
    z = _t(x + 1j, device, pylucid.complex64)
    dist.all_reduce(z)
    assert np.array_equal(z.cpu().numpy(), (x + 1j).astype(np.complex64))
    dist.broadcast(t, src=0)
    dist.reduce(t, dst=0)
    out = pylucid.zeros(1, 3, 2, device=device)
    dist.all_gather_into_tensor(out, t)
    assert out.cpu().tolist() == [x[:, ::2].tolist()]
    outs = [pylucid.zeros(3, 2, device=device)]
    dist.all_gather(outs, t)
    assert outs[0].cpu().tolist() == x[:, ::2].tolist()
    rs = pylucid.zeros(3, 2, device=device)
    dist.reduce_scatter_tensor(rs, t)
    assert rs.cpu().tolist() == x[:, ::2].tolist()
    g = [pylucid.zeros(3, 2, device=device)]
    dist.gather(t, g, dst=0)
    assert g[0].cpu().tolist() == x[:, ::2].tolist()
    s = pylucid.zeros(3, 2, device=device)
    dist.scatter(s, [t], src=0)
    assert s.cpu().tolist() == x[:, ::2].tolist()
    a = pylucid.zeros(3, 4, device=device)
    dist.all_to_all_single(a, _t(x, device))
    assert a.cpu().tolist() == x.tolist()
    dist.barrier()
    objs = [None]
    dist.all_gather_object(objs, {"k": 1})
    assert objs == [{"k": 1}]
    with pytest.raises(ValueError, match="destination rank"):
        dist.send(t, dst=0)


def test_world_of_one_ddp_and_zero_steps_match_plain_training(world1):
    engine, device = world1
    from pylucid.distributed.optim import ZeroRedundancyOptimizer

    def build():
        pylucid.manual_seed(1)
        return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)

    x, y = pylucid.randn(5, 6).to(device), pylucid.randn(5, 2).to(device)
    ref = build()
    ropt = pylucid.optim.Adam(ref.parameters(), lr=0.01)
    m = build()
    ddp = DDP(m, device_ids=[m[0].weight.device.index] if device == "cuda" else None)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), pylucid.optim.Adam, lr=0.01)
    for _ in range(3):
        for model, o in ((ddp, opt), (ref, ropt)):
            o.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            o.step()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert np.allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), atol=1e-6)


def test_argument_errors(world1):
    _, device = world1
    with pytest.raises(TypeError, match="all_reduce: tensor must be a Tensor"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(TypeError, match="AVG needs a floating point"):
        dist.all_reduce(pylucid.ones(2, dtype=pylucid.int64, device=device), op=dist.ReduceOp.AVG)
    with pytest.raises(TypeError, match="not defined for complex"):
        dist.all_reduce(pylucid.ones(2, dtype=pylucid.complex64, device=device), op=dist.ReduceOp.MAX)
    with pytest.raises(pylucid.ShapeMismatch, match="world_size"):
        dist.all_gather_into_tensor(pylucid.zeros(3, device=device), pylucid.zeros(2, device=device))
    with pytest.raises(ValueError, match="one tensor per rank"):
        dist.all_gather([pylucid.zeros(2, device=device)] * 2, pylucid.zeros(2, device=device))
    with pytest.raises(ValueError, match="must specify the global rank"):
        dist.broadcast(pylucid.zeros(2, device=device))
    with pytest.raises(ValueError, match="not part of group"):
        dist.broadcast(pylucid.zeros(2, device=device), src=3)
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group("mpi")


# ---------------------------------------------------------------------------------------------------------------------
# work handles and futures
# ---------------------------------------------------------------------------------------------------------------------
class _Never(Work):
    def _test(self):
        return False


def test_work_wait_times_out_with_a_clear_error():
    w = _Never("all_reduce", None, 0.05)
    t0 = time.monotonic()
    with pytest.raises(DistBackendError, match="all_reduce did not complete within the timeout"):
        w.wait()
    assert time.monotonic() - t0 < 5
    assert not w.is_success() and isinstance(w.exception(), DistBackendError)
    with pytest.raises(DistBackendError):
        _Never("barrier", None, 3600).wait(timeout=0.05)


def test_waits_yield_the_core_only_when_ranks_or_programs_outnumber_the_cores(monkeypatch):
    from pylucid.distributed import _work

    yields = []
    monkeypatch.setattr(_work.os, "sched_yield", lambda: yields.append(1))
    monkeypatch.setattr(_work, "_busy", [-1e9, True])
    monkeypatch.setattr(_work, "_spin_s", _work._spin_s)
    monkeypatch.setattr(_work, "_cores", _work._cores)

    class Clock:  # a fake clock: 10 us pass per poll, so the test does not depend on the machine's load
        now = 0.0

        @classmethod
        def monotonic(cls):
            return cls.now

        @classmethod
        def sleep(cls, s):
            cls.now += s

    monkeypatch.setattr(_work, "time", Clock)

    def wait_5ms():
        yields.clear()
        _work._busy[0] = -1e9  # read the load average again
        end = Clock.now + 5e-3

        def test():
            Clock.now += 1e-5
            return Clock.now > end
        _work.spin_until(test, Clock.now + 60, None)
        return len(yields)

    load = [2.2]
    monkeypatch.setattr(_work.os, "getloadavg", lambda: (load[0], load[0], load[0]))
    _work.set_spin(2, 2)  # a core per rank, nobody else running: poll through a 5 ms wait
    assert wait_5ms() == 0
    load[0] = 3.5  # other programs want the cores too: yield after 0.2 ms
    assert wait_5ms() > 0
    load[0] = 0.0
    _work.set_spin(4, 2)  # more ranks than cores: the awaited rank may need this core
    assert wait_5ms() > 0


def test_future_then_and_errors():
    f = Future()
    chained = f.then(lambda fut: fut.value() + 1).then(lambda fut: fut.value() * 10)
    assert not chained.done()
    f.set_result(4)
    assert chained.wait() == 50 and chained.done()
    bad = Future()
    broken = bad.then(lambda fut: 1 / 0)
    bad.set_result(0)
    with pytest.raises(ZeroDivisionError):
        broken.wait()
    with pytest.raises(RuntimeError, match="not completed"):
        Future().value()


# ---------------------------------------------------------------------------------------------------------------------
# the launcher's command line
# ---------------------------------------------------------------------------------------------------------------------
def test_launcher_command_lines():
    from pylucid.distributed import run

    args = run._parser("pylucid launch").parse_args(["-n", "4", "--hostfile", "hosts", "train.py", "--lr", "0.1"])
    hydra = run.build_command(args, "/x/mpiexec", "hydra")
    assert hydra[:5] == ["/x/mpiexec", "-n", "4", "-f", "hosts"]
    assert hydra[-3:] == ["train.py", "--lr", "0.1"] and "--pylucid-worker" in hydra
    ompi = run.build_command(args, "/x/mpirun", "openmpi")
    assert ompi[:5] == ["/x/mpirun", "-n", "4", "--hostfile", "hosts"] and "-x" in ompi
    mod = run._parser("p").parse_args(["-n", "2", "-m", "pylucid", "train", "--epochs", "1"])
    assert run.build_command(mod, "mpiexec", "hydra")[-5:] == ["-m", "pylucid", "train", "--epochs", "1"]
    with pytest.raises(SystemExit):
        run.main(["-n", "0", "train.py"])
    assert run.main(["--mpiexec", "no-such-mpiexec-here", "train.py"]) == 127


@pytest.mark.skipif(not _shm.supported(), reason="shared-memory segments need x86-64 and a writable /dev/shm")
def test_shared_segment_maps_one_memory_and_leaves_no_file():
    nflags, data = 3, 1000
    total = _shm.Segment.part_bytes(nflags, data) * 2
    name, mm = _shm.create(total)
    assert name is not None and os.path.exists(name)
    other = _shm.attach(name, total)  # another rank's mapping
    assert _shm.attach(name, total + 64) is None, "a size that does not match must not be mapped"
    _shm.remove(name)
    assert not os.path.exists(name)
    a, b = _shm.Segment(mm, 2, 0, nflags, data), _shm.Segment(other, 2, 1, nflags, data)
    x = a.array(0, 64, (3, 4), np.float32)
    x[...] = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(b.array(0, 64, (3, 4), np.float32), x), "the ranks must see the same memory"
    assert b.array(1, 64, (3, 4), np.float32).sum() == 0, "each rank has its own part"
    a.publish(2, 5)
    assert not a.reached(2, 5) and b.behind(2, 5) == [1]
    b.publish(2, 6)
    assert a.reached(2, 5) and b.reached(2, 5) and not a.reached(2, 6) and a.behind(1, 1) == [0, 1]
    assert _shm.create(_shm.MAX_BYTES + 1) == (None, None), "oversized segments are refused"
