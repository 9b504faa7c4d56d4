"""pylucid.distributed on 2 ranks (CPU, MPI), started through the launcher.

One job runs every check on both ranks (collectives against NumPy, DDP
against single-process training, ZeRO against DDP, ...) and writes what it
found per rank; the tests below read it. Two more jobs check that a failing
rank ends the job with its error, and that a rank that never joins makes the
others time out instead of hanging. Each job is bounded by a timeout.

Run as a script (``python -m pylucid.distributed.run -n 2 tests/test_distributed_mpi.py OUTDIR``)
it is the job itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB_TIMEOUT = 120


# ---------------------------------------------------------------------------------------------------------------------
# the job (each rank)
# ---------------------------------------------------------------------------------------------------------------------
DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8", "int16", "int32",
          "int64", "uint8", "bool"]


def _np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _values(rank, shape, name, salt=0):
    """Rank ``rank``'s input: small integers (exact in every dtype, sums and products included)."""
    rng = np.random.default_rng(1000 * salt + rank)
    if name == "bool":
        return rng.random(shape) < 0.5
    lo = 0 if name == "uint8" else -3
    v = rng.integers(lo, 4, size=shape).astype(np.float64)
    if name.startswith("complex"):
        v = v + 1j * rng.integers(-3, 4, size=shape)
    return v.astype(_np_dtype(name))


def _as_f(a):
    a = np.asarray(a)
    if a.dtype == _np_dtype("bfloat16") or a.dtype == np.float16:
        return a.astype(np.float64)
    return a


def _same(got, want, what):
    got, want = _as_f(got), _as_f(want)
    if got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(f"{what}: got {got.tolist()}, expected {want.tolist()}")


def _noncontig(pl, arr):
    """A non-contiguous pylucid view holding ``arr`` (every other element of the last axis of a wider tensor)."""
    base = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1],), dtype=arr.dtype)
    base[..., ::2] = arr
    view = pl.tensor(base)[..., ::2]
    assert not view.is_contiguous()
    return view


def _reference(op, arrays):
    xs = [_as_f(a) for a in arrays]
    if arrays[0].dtype == np.bool_:
        if op in ("SUM", "MAX", "BOR"):
            return np.logical_or.reduce(xs)
        if op in ("PRODUCT", "MIN", "BAND"):
            return np.logical_and.reduce(xs)
        return np.logical_xor.reduce(xs)
    f = {"SUM": np.add, "PRODUCT": np.multiply, "MIN": np.minimum, "MAX": np.maximum, "BAND": np.bitwise_and,
         "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}
    if op == "AVG":
        out = np.add.reduce(xs) / len(xs)
    else:
        out = f[op].reduce(xs)
    return out.astype(arrays[0].dtype)


def _ops_for(name):
    if name == "bool":
        return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
    if name.startswith("complex"):
        return ["SUM", "AVG", "PRODUCT"]
    if name.startswith(("float", "bfloat")):
        return ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]
    return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


def _job_collectives(pl, dist, check):
    r, n = dist.get_rank(), dist.get_world_size()
    shape = (3, 4)

    def overlapping():
        # several all-reduces in flight at once, completed in reverse order, while rank 0 has a receive
        # from any rank pending: each must get its own sum, the receive only the message sent to it
        sizes = (10, 300000, 7)
        arrays = [[_values(k, (m,), "float32", salt=m) for k in range(n)] for m in sizes]
        pending = None
        box = pl.zeros(5)
        if r == 0:
            pending = dist.irecv(box)
        ts = [pl.tensor(a[r]) for a in arrays]
        works = [dist.all_reduce(t, async_op=True) for t in ts]
        for w in reversed(works):
            w.wait()
        for t, a in zip(ts, arrays):
            _same(t.numpy(), _reference("SUM", a), f"overlapping all_reduce of {t.numel()}")
        if r == 1:
            dist.send(pl.arange(5.0), dst=0)
        if r == 0:
            pending.wait()
            _same(box.numpy(), np.arange(5.0, dtype=np.float32), "the pending receive")
        dist.barrier()
    check("all_reduce/overlapping", overlapping)

    for name in DTYPES:
        dt = getattr(pl, name) if name != "bool" else pl.bool
        for op in _ops_for(name):
            for layout in ("contiguous", "noncontiguous", "async"):
                def run(name=name, op=op, layout=layout, dt=dt):
                    arrays = [_values(k, shape, name, salt=len(op)) for k in range(n)]
                    t = _noncontig(pl, arrays[r]) if layout == "noncontiguous" else pl.tensor(arrays[r], dtype=dt)
                    v0 = t.version
                    w = dist.all_reduce(t, op=getattr(dist.ReduceOp, op), async_op=layout == "async")
                    if layout == "async":
                        assert w is not None and w.wait() and w.is_completed() and w.result()[0] is t
                    else:
                        assert w is None
                    _same(t.numpy(), _reference(op, arrays), f"all_reduce {op} {name} {layout}")
                    assert t.version > v0, "the in-place write must bump the version counter"
                check(f"all_reduce/{name}/{op}/{layout}", run)

        def bcast(name=name, dt=dt):
            for src in range(n):
                arrays = [_values(k, (2, 3), name, salt=7) for k in range(n)]
                t = pl.tensor(arrays[r], dtype=dt)
                dist.broadcast(t, src=src)
                _same(t.numpy(), arrays[src], f"broadcast from {src}")
                nc = _noncontig(pl, arrays[r])
                dist.broadcast(nc, src=src, async_op=True).wait()
                _same(nc.numpy(), arrays[src], f"broadcast non-contiguous from {src}")
        check(f"broadcast/{name}", bcast)

        def gathers(name=name, dt=dt):
            arrays = [_values(k, (2, 3), name, salt=11) for k in range(n)]
            want = np.concatenate(arrays)
            out = pl.zeros(2 * n, 3, dtype=dt)
            dist.all_gather_into_tensor(out, _noncontig(pl, arrays[r]))
            _same(out.numpy(), want, "all_gather_into_tensor (n*2, 3)")
            out = pl.zeros(n, 2, 3, dtype=dt)
            dist.all_gather_into_tensor(out, pl.tensor(arrays[r], dtype=dt), async_op=True).wait()
            _same(out.numpy(), np.stack(arrays), "all_gather_into_tensor (n, 2, 3)")
            outs = [pl.zeros(2, 3, dtype=dt) for _ in range(n)]
            dist.all_gather(outs, pl.tensor(arrays[r], dtype=dt))
            for k in range(n):
                _same(outs[k].numpy(), arrays[k], f"all_gather [{k}]")
            glist = [pl.zeros(2, 3, dtype=dt) for _ in range(n)] if r == 0 else None
            dist.gather(pl.tensor(arrays[r], dtype=dt), glist, dst=0)
            if r == 0:
                for k in range(n):
                    _same(glist[k].numpy(), arrays[k], f"gather [{k}]")
            pieces = [_values(k, (2, 3), name, salt=13) for k in range(n)]
            t = pl.zeros(2, 3, dtype=dt)
            dist.scatter(t, [pl.tensor(p, dtype=dt) for p in pieces] if r == n - 1 else None, src=n - 1)
            _same(t.numpy(), pieces[r], "scatter")
        check(f"gather_scatter/{name}", gathers)

        def p2p(name=name, dt=dt):
            arrays = [_values(k, (5,), name, salt=17) for k in range(n)]
            if r == 0:
                dist.send(pl.tensor(arrays[0], dtype=dt), dst=1, tag=3)
                w = dist.isend(pl.tensor(arrays[0], dtype=dt), dst=1)
                w.wait()
            elif r == 1:
                t = pl.zeros(5, dtype=dt)
                assert dist.recv(t, src=0, tag=3) == 0
                _same(t.numpy(), arrays[0], "recv")
                t2 = pl.zeros(5, dtype=dt)
                w = dist.irecv(t2)  # any source
                w.wait()
                assert w.source_rank() == 0
                _same(t2.numpy(), arrays[0], "irecv from any source")
        check(f"send_recv/{name}", p2p)

        if name in ("float32", "int64", "bfloat16", "complex64", "bool"):
            def a2a(name=name, dt=dt):
                # rank k sends k+1+j rows to rank j
                ins = [_values(k, (sum(k + 1 + j for j in range(n)), 2), name, salt=19) for k in range(n)]
                in_splits = [r + 1 + j for j in range(n)]
                out_splits = [k + 1 + r for k in range(n)]
                out = pl.zeros(sum(out_splits), 2, dtype=dt)
                dist.all_to_all_single(out, pl.tensor(ins[r], dtype=dt), out_splits, in_splits)
                want = []
                for k in range(n):
                    start = sum(k + 1 + j for j in range(r))
                    want.append(ins[k][start:start + k + 1 + r])
                _same(out.numpy(), np.concatenate(want), "all_to_all_single uneven")
                even = [_values(k, (2 * n,), name, salt=23) for k in range(n)]
                out = pl.zeros(2 * n, dtype=dt)
                dist.all_to_all_single(out, pl.tensor(even[r], dtype=dt), async_op=True).wait()
                _same(out.numpy(), np.concatenate([even[k][2 * r:2 * r + 2] for k in range(n)]), "all_to_all even")
                outs = [pl.zeros(3, dtype=dt) for _ in range(n)]
                lists = [[_values(10 * k + j, (3,), name, salt=29) for j in range(n)] for k in range(n)]
                dist.all_to_all(outs, [pl.tensor(x, dtype=dt) for x in lists[r]])
                for k in range(n):
                    _same(outs[k].numpy(), lists[k][r], f"all_to_all [{k}]")
            check(f"all_to_all/{name}", a2a)

        if name != "bool":
            ops = [o for o in _ops_for(name) if o not in ("BAND", "BOR", "BXOR")]

            def reductions(name=name, dt=dt, ops=ops):
                for op in ops:
                    arrays = [_values(k, (2 * n, 3), name, salt=31) for k in range(n)]
                    ref = _reference(op, arrays)
                    out = pl.zeros(2, 3, dtype=dt)
                    w = dist.reduce_scatter_tensor(out, _noncontig(pl, arrays[r]), op=getattr(dist.ReduceOp, op),
                                                   async_op=True)
                    w.wait()
                    _same(out.numpy(), ref[2 * r:2 * r + 2], f"reduce_scatter_tensor {op}")
                    out = pl.zeros(2, 3, dtype=dt)
                    dist.reduce_scatter(out, [pl.tensor(arrays[r][2 * k:2 * k + 2], dtype=dt) for k in range(n)],
                                        op=getattr(dist.ReduceOp, op))
                    _same(out.numpy(), ref[2 * r:2 * r + 2], f"reduce_scatter {op}")
                    t = pl.tensor(arrays[r], dtype=dt)
                    dist.reduce(t, dst=1, op=getattr(dist.ReduceOp, op))
                    _same(t.numpy(), ref if r == 1 else arrays[r], f"reduce {op} to 1")
            check(f"reduce/{name}", reductions)

    def objects():
        objs = [None] * n
        dist.all_gather_object(objs, {"rank": r, "payload": list(range(r + 3))})
        assert objs == [{"rank": k, "payload": list(range(k + 3))} for k in range(n)], objs
        lst = [("from", r), r * 1.5] if r == 1 else [None, None]
        dist.broadcast_object_list(lst, src=1)
        assert lst == [("from", 1), 1.5], lst
        got = [None] * n if r == 0 else None
        dist.gather_object("x" * (r + 1), got, dst=0)
        if r == 0:
            assert got == ["x" * (k + 1) for k in range(n)], got
        out = [None]
        dist.scatter_object_list(out, [{"for": k} for k in range(n)] if r == 0 else None, src=0)
        assert out == [{"for": r}], out
    check("objects", objects)

    def groups():
        assert dist.get_backend() == "mpi"
        solo = [dist.new_group([k]) for k in range(n)]
        mine = solo[r]
        assert dist.get_rank(mine) == 0 and dist.get_world_size(mine) == 1
        assert dist.get_process_group_ranks(mine) == [r]
        other = solo[1 - r]
        assert other is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(other) == -1
        t = pl.tensor([float(r + 1)])
        dist.all_reduce(t, group=mine)
        assert t.tolist() == [float(r + 1)]
        pair = dist.new_group([1, 0])
        t = pl.tensor([2.0 ** r])
        dist.all_reduce(t, group=pair)
        assert t.tolist() == [3.0]
        dist.broadcast(t := pl.tensor([float(r)]), src=1, group=pair)
        assert t.tolist() == [1.0]
        dist.barrier()
        w = dist.barrier(async_op=True)
        w.wait()
        dist.monitored_barrier(timeout=30)
        dist.destroy_process_group(mine)
    check("groups", groups)


def _train_pair(pl, dist, build, opt_fn, x_shape, out_dim, steps, rank_seed, loss_kind="mse"):
    """DDP on each rank's half of the batch vs one process on the whole batch; max parameter difference."""
    from pylucid.nn.parallel import DistributedDataParallel as DDP

    r, n = dist.get_rank(), dist.get_world_size()
    pl.manual_seed(rank_seed + r)  # different initial weights per rank: DDP's broadcast must fix them
    model = build()
    ddp = DDP(model)
    pl.manual_seed(12345)
    ref = build()
    ref.load_state_dict(model.state_dict())
    opt, ropt = opt_fn(ddp.parameters()), opt_fn(ref.parameters())
    rng = np.random.default_rng(5)
    per = x_shape[0]
    F = pl.nn.functional
    for _ in range(steps):
        xs = rng.standard_normal((n * per,) + x_shape[1:]).astype(np.float32)
        if loss_kind == "ce":
            ys = rng.integers(0, out_dim, n * per)
        else:
            ys = rng.standard_normal((n * per, out_dim)).astype(np.float32)
        X, Y = pl.tensor(xs), pl.tensor(ys)
        lossf = (lambda o, y: F.cross_entropy(o, y)) if loss_kind == "ce" else (lambda o, y: ((o - y) ** 2).mean())
        loss = lossf(ddp(X[r * per:(r + 1) * per]), Y[r * per:(r + 1) * per])
        opt.zero_grad()
        loss.backward()
        opt.step()
        rl = lossf(ref(X), Y)
        ropt.zero_grad()
        rl.backward()
        ropt.step()
    return max(float((a - b).abs().max()) for a, b in zip(model.parameters(), ref.parameters())), ddp


def _job_ddp(pl, dist, check, record):
    from pylucid import nn
    from pylucid.nn.parallel import DistributedDataParallel as DDP

    r, n = dist.get_rank(), dist.get_world_size()

    def mlp():
        return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 5))

    def cnn():
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3),
                             nn.ReLU(), nn.Flatten(), nn.Linear(8 * 2 * 2, 10))

    def train_mlp():
        d, ddp = _train_pair(pl, dist, mlp, lambda ps: pl.optim.SGD(ps, lr=0.05, momentum=0.9), (8, 20), 5, 20, 10)
        record("mlp_max_diff", d)
        assert d <= 1e-6, f"DDP MLP parameters differ from single-process training by {d}"
        keys = list(ddp.state_dict())
        assert keys[0] == "module.0.weight" and all(k.startswith("module.") for k in keys), keys
        assert ddp.module.state_dict().keys() == mlp().state_dict().keys()
    check("ddp_mlp", train_mlp)

    def train_cnn():
        d, _ = _train_pair(pl, dist, cnn, lambda ps: pl.optim.Adam(ps, lr=1e-3), (4, 1, 8, 8), 10, 20, 20, "ce")
        record("cnn_max_diff", d)
        assert d <= 1e-6, f"DDP CNN parameters differ from single-process training by {d}"
    check("ddp_cnn", train_cnn)

    def overlap():
        # five layers, one bucket each: the all-reduce of the last layers' buckets must start while
        # backward is still on its way to the first layer
        pl.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(32, 32) for _ in range(5)])
        events = []
        for k, layer in enumerate(model):  # registered before DDP's hooks, so they run first
            layer.weight.register_hook(lambda g, k=k: events.append(f"gradient of layer {k}"))
        ddp = DDP(model, bucket_cap_mb=32 * 33 * 4 / 2**20)

        def hook(state, bucket):
            events.append(f"launch {bucket.index()}")
            work = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.AVG, async_op=True)
            return work.get_future().then(lambda f: f.value()[0])
        ddp.register_comm_hook(None, hook)
        x = pl.randn(4, 32)
        for _ in range(2):  # the second iteration runs on the rebuilt buckets
            events.clear()
            ddp(x).sum().backward()
            events.append("backward returned")
        record("overlap_events", events)
        assert len(ddp.reducer.buckets) == 5, len(ddp.reducer.buckets)
        want = []
        for k in range(4, -1, -1):
            want += [f"gradient of layer {k}", f"launch {4 - k}"]
        assert events == want + ["backward returned"], events
    check("ddp_overlap", overlap)

    def no_sync():
        pl.manual_seed(3)
        model = mlp()
        ddp = DDP(model)
        pl.manual_seed(3)
        ref = mlp()
        ref.load_state_dict(model.state_dict())
        rng = np.random.default_rng(9)
        batches = [(rng.standard_normal((2 * n, 20)).astype(np.float32),
                    rng.standard_normal((2 * n, 5)).astype(np.float32)) for _ in range(3)]
        for k, (xs, ys) in enumerate(batches):
            X, Y = pl.tensor(xs), pl.tensor(ys)
            ctx = ddp.no_sync() if k < 2 else _nullcontext()
            with ctx:
                ((ddp(X[2 * r:2 * r + 2]) - Y[2 * r:2 * r + 2]) ** 2).mean().backward()
            if k == 0:
                g = model[0].weight.grad.clone()
                allg = [pl.zeros_like(g) for _ in range(n)]
                dist.all_gather(allg, g)
                assert not np.allclose(allg[0].numpy(), allg[1].numpy()), "gradients were synchronised in no_sync"
            ((ref(X) - Y) ** 2).mean().backward()
        d = max(float((p.grad - q.grad).abs().max()) for p, q in zip(model.parameters(), ref.parameters()))
        record("no_sync_max_diff", d)
        assert d <= 1e-6, f"accumulated DDP gradients differ from the single-process ones by {d}"
    check("ddp_no_sync", no_sync)

    def unused():
        class Branchy(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)
                self.never = nn.Linear(4, 4)

            def forward(self, x, use_b):
                y = self.a(x)
                return self.b(y) if use_b else y

        pl.manual_seed(0)
        m = Branchy()
        ddp = DDP(m, find_unused_parameters=True)
        x = pl.ones(2, 4) * (r + 1)
        for _ in range(2):
            ddp.zero_grad()
            ddp(x, use_b=(r == 0)).sum().backward()  # rank 1 does not use b
        assert m.never.weight.grad is None, "a parameter no rank used must keep .grad None"
        gb = m.b.weight.grad.clone()
        allg = [pl.zeros_like(gb) for _ in range(n)]
        dist.all_gather(allg, gb)
        assert np.array_equal(allg[0].numpy(), allg[1].numpy()), "b's gradient differs across ranks"
        # rank 0's gradient of b, halved (rank 1 contributes zeros)
        pl.manual_seed(0)
        solo = Branchy()
        solo.load_state_dict(m.state_dict())
        solo(pl.ones(2, 4), True).sum().backward()
        assert np.allclose(gb.numpy(), solo.b.weight.grad.numpy() / n, atol=1e-6)
        # without find_unused_parameters the missing gradients are an error at the next forward
        strict = DDP(Branchy())
        strict(x, use_b=False).sum().backward()
        try:
            strict(x, use_b=False)
        except RuntimeError as exc:
            assert "find_unused_parameters" in str(exc)
        else:
            raise AssertionError("a forward after an incomplete reduction must raise")
    check("ddp_unused", unused)

    def buffers_and_views():
        pl.manual_seed(r)
        m = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6))
        ddp = DDP(m, gradient_as_bucket_view=True)
        ddp(pl.randn(5, 6) + r).sum().backward()
        stats = m[1].running_mean.clone()
        allm = [pl.zeros_like(stats) for _ in range(n)]
        dist.all_gather(allm, stats)
        # buffers are broadcast from rank 0 before forward, then each rank updates them with its batch
        w = m[0].weight.grad
        allw = [pl.zeros_like(w) for _ in range(n)]
        dist.all_gather(allw, w)
        assert np.array_equal(allw[0].numpy(), allw[1].numpy())
        ddp(pl.randn(5, 6)).sum().backward()  # the second forward broadcasts rank 0's statistics first
        assert m[0].weight.grad is not None
    check("ddp_buffers_bucket_view", buffers_and_views)

    def dtypes():
        # float64 is divided by the world size on its way into the bucket, then summed; bfloat16 is
        # summed in float32 and divided once (ReduceOp.AVG): both must give the mean of the ranks'
        # gradients, rounded once to the parameter's dtype
        for dt in (pl.float64, pl.bfloat16):
            pl.manual_seed(1)
            m = nn.Linear(6, 3).to(dt)
            plain = nn.Linear(6, 3).to(dt)
            plain.load_state_dict(m.state_dict())
            x = pl.tensor(np.random.default_rng(r).standard_normal((4, 6)), dtype=dt)
            ddp = DDP(m)
            ddp(x).pow(2).sum().backward()
            plain(x).pow(2).sum().backward()
            for p, q in ((m.weight, plain.weight), (m.bias, plain.bias)):
                mine = q.grad.to(pl.float64)
                every = [pl.zeros_like(mine) for _ in range(n)]
                dist.all_gather(every, mine)
                want = (sum(e.numpy() for e in every) / n)
                want = pl.tensor(want.astype(np.float32)).to(dt).to(pl.float64).numpy() if dt is pl.bfloat16 else want
                got = p.grad.to(pl.float64).numpy()
                assert p.grad.dtype is dt and np.array_equal(got, want), (dt, np.abs(got - want).max())
    check("ddp_dtypes", dtypes)

    def shared_memory():
        # ranks of one machine average through shared memory by default; the gradients must be bit for bit
        # those of the MPI all-reduce (PYLUCID_DDP_SHM=0), on every rank, iteration after iteration (the two
        # slots alternate; the buckets are rebuilt after the first iteration)
        import glob

        from pylucid.distributed import _shm

        def make(shm):
            os.environ["PYLUCID_DDP_SHM"] = "1" if shm else "0"
            try:
                pl.manual_seed(4)
                model = nn.Sequential(nn.Linear(300, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(),
                                      nn.Linear(200, 200), nn.Tanh(), nn.Linear(200, 7))
                return model, DDP(model, bucket_cap_mb=0.15)
            finally:
                del os.environ["PYLUCID_DDP_SHM"]
        (m1, d1), (m2, d2) = make(True), make(False)
        assert d2.reducer.shared is None
        if not _shm.supported():
            return
        assert d1.reducer.shared is not None and all(b.shared for b in d1.reducer.buckets)
        pids = [None] * n
        dist.all_gather_object(pids, os.getpid())
        left = glob.glob(f"/dev/shm/pylucid-ddp-{pids[0]}-*")
        assert not left, f"shared-memory files left behind: {left}"
        rng = np.random.default_rng(20 + r)
        for it in range(4):
            x = pl.tensor(rng.standard_normal((6, 300)).astype(np.float32))
            for m, d in ((m1, d1), (m2, d2)):
                m.zero_grad()
                d(x).pow(2).sum().backward()
            for p, q in zip(m1.parameters(), m2.parameters()):
                assert np.array_equal(p.grad.numpy(), q.grad.numpy()), f"iteration {it}: shm and MPI differ"
                every = [pl.zeros_like(p.grad) for _ in range(n)]
                dist.all_gather(every, p.grad)
                assert all(np.array_equal(e.numpy(), every[0].numpy()) for e in every), f"ranks differ ({it})"
        assert len(d1.reducer.buckets) > 2, "the test wants several buckets"
    check("ddp_shared_memory", shared_memory)

    def shared_memory_timeout():
        # a rank that never runs its backward: the others' wait for its gradients ends with the timeout
        from pylucid.distributed import _shm

        if not _shm.supported():
            return
        g = dist.new_group(list(range(n)), timeout=1.0)
        pl.manual_seed(0)
        ddp = DDP(nn.Linear(4, 4), process_group=g)
        out = ddp(pl.ones(2, 4))
        if r == 0:
            t0 = time.monotonic()
            try:
                out.sum().backward()
            except dist.DistBackendError as exc:
                assert "rank(s) [1]" in str(exc) and "timeout" in str(exc), str(exc)
                assert time.monotonic() - t0 < 30
            else:
                raise AssertionError("the backward of rank 0 must time out waiting for rank 1")
        dist.barrier()
    check("ddp_shared_memory_timeout", shared_memory_timeout)


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _job_zero(pl, dist, check, record):
    from pylucid import nn
    from pylucid.distributed.optim import ZeroRedundancyOptimizer
    from pylucid.distributed.optim.zero_redundancy_optimizer import state_bytes
    from pylucid.nn.parallel import DistributedDataParallel as DDP

    r, n = dist.get_rank(), dist.get_world_size()

    def run(mode):
        pl.manual_seed(4)
        m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))
        model = DDP(m) if mode in ("ddp", "ddp+zero") else m
        if "zero" in mode:
            opt = ZeroRedundancyOptimizer(model.parameters(), pl.optim.AdamW, lr=1e-2, weight_decay=0.1,
                                          parameters_as_bucket_view=mode == "zero-view")
        else:
            opt = pl.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        rng = np.random.default_rng(2)
        for _ in range(20):
            X = pl.tensor(rng.standard_normal((4 * n, 16)).astype(np.float32))
            Y = pl.tensor(rng.standard_normal((4 * n, 3)).astype(np.float32))
            loss = ((model(X[4 * r:4 * r + 4]) - Y[4 * r:4 * r + 4]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().numpy().copy() for p in m.parameters()], opt

    def zero():
        base, plain = run("ddp")
        full_bytes = state_bytes(plain)
        for mode in ("ddp+zero", "zero", "zero-view"):
            got, opt = run(mode)
            d = max(float(np.abs(a - b).max()) for a, b in zip(got, base))
            record(f"zero_{mode}_max_diff", d)
            assert d <= 1e-6, f"ZeRO ({mode}) parameters differ from DDP's by {d}"
            mine = state_bytes(opt)
            record(f"zero_{mode}_state_bytes", [mine, full_bytes])
            assert mine < 0.75 * full_bytes, f"ZeRO keeps {mine} bytes of state, the plain optimizer {full_bytes}"
            totals = [None] * n
            dist.all_gather_object(totals, mine)
            assert sum(totals) == full_bytes, (totals, full_bytes)
            opt.consolidate_state_dict(to=0)
            if r == 0:
                sd, ref = opt.state_dict(), plain.state_dict()
                assert sorted(sd["state"]) == sorted(ref["state"])
                for k in ref["state"]:
                    for key, v in ref["state"][k].items():
                        w = sd["state"][k][key]
                        assert np.array_equal(np.asarray(w), np.asarray(v)), (k, key)
                assert sd["param_groups"][0]["params"] == ref["param_groups"][0]["params"]
                assert sd["param_groups"][0]["lr"] == ref["param_groups"][0]["lr"]
            else:
                try:
                    opt.state_dict()
                except RuntimeError:
                    pass
                else:
                    raise AssertionError("state_dict() must refuse on a rank without the consolidated state")
            # load_state_dict round trip on every rank: the plain optimizer's dict, shard by shard
            sd0 = [plain.state_dict() if r == 0 else None]
            dist.broadcast_object_list(sd0, src=0)
            before = state_bytes(opt)
            opt.load_state_dict(sd0[0])
            assert state_bytes(opt) == before
    check("zero", zero)


def _job(out_dir):
    import pylucid as pl
    import pylucid.distributed as dist

    dist.init_process_group("mpi")
    results, extra = {}, {}

    def check(name, fn):
        try:
            fn()
            results[name] = ""
        except Exception:
            results[name] = traceback.format_exc()

    def record(key, value):
        extra[key] = value

    t0 = time.perf_counter()
    _job_collectives(pl, dist, check)
    _job_ddp(pl, dist, check, record)
    _job_zero(pl, dist, check, record)
    extra["seconds"] = time.perf_counter() - t0
    with open(os.path.join(out_dir, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump({"results": results, "extra": extra}, f)
    dist.destroy_process_group()


def _failing_job(mode):
    import pylucid as pl
    import pylucid.distributed as dist

    dist.init_process_group()
    if dist.get_rank() == 1:
        if mode == "raise":
            raise ValueError("rank one cannot go on")
        time.sleep(120)  # never joins the collective
    dist.all_reduce(pl.ones(4))


if __name__ == "__main__":
    if sys.argv[1] in ("raise", "hang"):
        _failing_job(sys.argv[1])
    else:
        _job(sys.argv[1])
    sys.exit(0)


# ---------------------------------------------------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------------------------------------------------
import pytest  # noqa: E402


def _need_mpi():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (pip install 'pylucid[distributed]')")
    from pylucid.distributed.run import find_mpiexec

    try:
        find_mpiexec()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def _launch(args, timeout, extra=()):
    cmd = [sys.executable, "-m", "pylucid.distributed.run", "-n", "2", *extra, __file__, *args]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    return proc, time.monotonic() - t0


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    _need_mpi()
    out = tmp_path_factory.mktemp("dist")
    proc, _ = _launch([str(out)], JOB_TIMEOUT, ("--timeout", "60"))
    if proc.returncode != 0:
        pytest.fail(f"the 2-rank job failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    ranks = []
    for r in range(2):
        with open(out / f"rank{r}.json") as f:
            ranks.append(json.load(f))
    return ranks


def _failures(job, prefix):
    bad = []
    names = [k for k in job[0]["results"] if k == prefix or k.startswith(prefix + "/")]
    assert names, f"no check named {prefix}"
    for r, res in enumerate(job):
        for k in names:
            if res["results"].get(k, "missing") != "":
                bad.append(f"rank {r} {k}:\n{res['results'].get(k, 'missing')}")
    return bad


@pytest.mark.parametrize("family", ["all_reduce", "broadcast", "gather_scatter", "send_recv", "all_to_all", "reduce",
                                    "objects", "groups"])
def test_collectives_match_numpy_on_both_ranks(job, family):
    bad = _failures(job, family)
    assert not bad, "\n".join(bad[:5])


@pytest.mark.parametrize("check", ["ddp_mlp", "ddp_cnn", "ddp_no_sync", "ddp_unused", "ddp_buffers_bucket_view",
                                   "ddp_dtypes", "ddp_shared_memory", "ddp_shared_memory_timeout"])
def test_ddp(job, check):
    bad = _failures(job, check)
    assert not bad, "\n".join(bad)


def test_ddp_bucket_all_reduce_starts_before_backward_ends(job):
    bad = _failures(job, "ddp_overlap")
    assert not bad, "\n".join(bad)
    events = job[0]["extra"]["overlap_events"]
    assert events.index("launch 0") < events.index("gradient of layer 0") < events.index("backward returned")


def test_zero_equals_ddp_and_shards_the_state(job):
    bad = _failures(job, "zero")
    assert not bad, "\n".join(bad)
    for r in range(2):
        mine, full = job[r]["extra"]["zero_zero_state_bytes"]
        assert mine < full


def test_failing_rank_ends_the_job_with_its_error():
    _need_mpi()
    proc, elapsed = _launch(["raise"], 60, ("--timeout", "30"))
    assert proc.returncode != 0
    assert "[rank 1]" in proc.stderr and "ValueError: rank one cannot go on" in proc.stderr, proc.stderr[-3000:]
    assert elapsed < 30, f"the job took {elapsed:.1f} s to end after rank 1 failed (the collective timeout is 30 s)"


def test_rank_that_never_joins_times_out_instead_of_hanging():
    _need_mpi()
    proc, elapsed = _launch(["hang"], 60, ("--timeout", "2"))
    assert proc.returncode != 0
    assert "DistBackendError" in proc.stderr and "did not complete within the timeout" in proc.stderr, \
        proc.stderr[-3000:]
    assert "[rank 0]" in proc.stderr
    assert elapsed < 40, f"the job took {elapsed:.1f} s although the collective timeout is 2 s"
