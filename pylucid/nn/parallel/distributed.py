"""``DistributedDataParallel``: one model replica per rank, gradients averaged as backward produces them.

How it works (PyTorch's reducer, built on pylucid's tensor hooks):

- At construction every rank checks that all ranks hold the same parameter
  shapes, then parameters and buffers are broadcast from rank 0, so the
  replicas start equal.
- Parameters are grouped into buckets (reverse registration order, about the
  order in which backward produces their gradients; the first bucket is
  capped at 1 MiB so communication starts early, the others at
  ``bucket_cap_mb``, 25 MB by default). After the first iteration the buckets
  are rebuilt in the order the gradients actually arrived (rank 0's order,
  broadcast, so every rank has the same buckets).
- A hook on each parameter copies its gradient, divided by the world size,
  into its bucket as soon as the engine has it. Ranks of one machine with CPU
  parameters keep the buckets in shared memory (:class:`_SharedBuckets`): a
  full bucket raises this rank's flag, and at the end of backward every rank
  adds all ranks' copies into ``.grad``. Otherwise a full bucket's all-reduce
  is started asynchronously, while backward goes on with the layers below;
  later hooks drive MPI's progress. Buckets are started in bucket order on
  every rank, so the collectives match across ranks.
- When the last gradient arrives, the reducer waits for the other ranks'
  buckets (or the outstanding all-reduces) and writes the averaged gradients
  into ``.grad`` (a new ``.grad`` tensor per synchronised backward; the
  previous ``.grad`` value, accumulated under ``no_sync()``, is included in
  what is averaged).

``no_sync()`` skips the communication for the backward passes of the forward
passes run inside it (gradients accumulate locally; the next synchronised
backward averages the sum). ``find_unused_parameters=True`` walks the graph
after each forward and counts parameters it cannot reach as ready, so a
model whose forward skips some parameters does not wait for them forever; a
parameter no rank used keeps its ``.grad`` untouched.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref

import pylucid
import pylucid.distributed as dist
from pylucid._tensor import Tensor
from pylucid.autograd.graph import AccumulateGrad
from pylucid.distributed import _arrays as A
from pylucid.distributed import _shm
from pylucid.distributed._mpi import MPIEngine
from pylucid.distributed._work import DistBackendError, spin_until

from ..module import Module

__all__ = ["DistributedDataParallel", "GradBucket"]

_FIRST_BUCKET_BYTES = 1024 * 1024
_DEFAULT_BUCKET_MB = 25
_BROADCAST_BUCKET_BYTES = 250 * 1024 * 1024
#: the most ranks that average through shared memory (each rank reads every rank's slot: beyond a few
#: ranks MPI's algorithms move less)
_SHARED_MAX_RANKS = 8


class GradBucket:
    """What a communication hook receives: one bucket's flat gradient buffer and its parameters."""

    def __init__(self, bucket, last: bool) -> None:
        self._bucket = bucket
        self._last = last

    def index(self) -> int:
        return self._bucket.index

    def buffer(self) -> Tensor:
        """The flat 1-D buffer holding the bucket's gradients (the hook may reduce it in place)."""
        return self._bucket.buffer

    def gradients(self) -> list:
        """Views of :meth:`buffer`, one per parameter, shaped like it."""
        return list(self._bucket.views)

    def parameters(self) -> list:
        return list(self._bucket.params)

    def is_last(self) -> bool:
        return self._last

    def set_buffer(self, tensor: Tensor) -> None:
        with pylucid.no_grad():
            self._bucket.buffer[...] = tensor


def _allreduce_avg(process_group, bucket: GradBucket):
    work = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.AVG, group=process_group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


class _Bucket:
    __slots__ = ("index", "members", "params", "buffer", "views", "offsets", "pending", "future", "work",
                 "prescaled", "shared")

    def __init__(self, index: int, members: list, params: list) -> None:
        self.index = index
        self.members = members  # parameter indices
        self.params = [params[i] for i in members]
        p0 = self.params[0]
        total = sum(p.numel() for p in self.params)
        self.buffer = pylucid.zeros(total, dtype=p0.dtype, device=p0.device)
        self.offsets = []
        self.views = []
        off = 0
        for p in self.params:
            n = p.numel()
            self.offsets.append(off)
            self.views.append(self.buffer[off:off + n].view(p.shape))
            off += n
        self.pending = len(members)
        self.future = None  # a communication hook's Future
        self.work = None  # the default all-reduce's Work
        # the default reduction divides by the world size while copying the gradients in (PyTorch's
        # reducer does too: one pass over the gradients less) and then sums; float16/bfloat16 sum in
        # float32 and divide once at the end instead (ReduceOp.AVG), so they round only once
        self.prescaled = p0.dtype not in (pylucid.float16, pylucid.bfloat16)
        self.shared = False  # reduced through memory the ranks share (see _SharedBuckets)


def _assign_buckets(params: list, order: list, cap_bytes: int) -> list:
    """Indices of ``params`` grouped into buckets: walk ``order``, one open bucket per (dtype, device),
    closed when it reaches its size limit (1 MiB for each key's first bucket, then ``cap_bytes``);
    buckets sorted by their first member's position in ``order``."""
    open_: dict = {}
    limit_no: dict = {}
    done = []
    for i in order:
        p = params[i]
        key = (p.dtype, p.device)
        b = open_.setdefault(key, [[], 0])
        b[0].append(i)
        b[1] += p.numel() * p.element_size()
        limit = min(_FIRST_BUCKET_BYTES, cap_bytes) if limit_no.get(key, 0) == 0 else cap_bytes
        if b[1] >= limit:
            done.append(b[0])
            del open_[key]
            limit_no[key] = limit_no.get(key, 0) + 1
    done.extend(b[0] for b in open_.values())
    pos = {i: k for k, i in enumerate(order)}
    done.sort(key=lambda members: pos[members[0]])
    return done


class _SharedBuckets:
    """The buckets of ranks that share one machine, reduced through shared memory instead of MPI.

    Each rank has, per bucket, two slots (used in alternate iterations) in a segment every rank
    maps (:mod:`pylucid.distributed._shm`). The hooks copy the prescaled gradients into this
    rank's slot; a full bucket raises this rank's flag for the bucket to the iteration number.
    At the end of backward each rank waits for every rank's flag and adds the slots in rank
    order straight into ``.grad`` (so every rank gets the same bits, and the sum is also the
    copy out of the bucket). No message goes back and forth: the rank that finishes backward
    last finds the others' gradients there and goes on, without waiting for a late peer to be
    scheduled again, which on a machine whose cores are shared is most of an MPI all-reduce's
    time. Two slots, because a rank may start the next backward while a peer still reads this
    one; it cannot get two ahead, since finishing one needs every peer's gradients of it.
    """

    def __init__(self, seg, buckets: list, world: int, dev) -> None:
        self.seg = seg
        self.gen = 0
        # srcs[parity][i]: parameter i's gradient slot of every rank (rank order); mine[parity][i]: this rank's
        self.srcs = ({}, {})
        self.mine = ({}, {})
        off = 0
        for b in buckets:
            if not b.shared:
                continue
            dt = A.array(b.buffer).dtype
            for parity in (0, 1):
                for j, i in enumerate(b.members):
                    p = b.params[j]
                    start = off + b.offsets[j] * dt.itemsize
                    views = [A.wrap(seg.array(k, start, tuple(p.shape), dt), dev) for k in range(world)]
                    self.srcs[parity][i] = views
                    self.mine[parity][i] = views[seg.rank]
                off += _shm.aligned(A.array(b.buffer).nbytes)

    @staticmethod
    def layout(buckets: list) -> int:
        """Data bytes per rank: two aligned slots per shared bucket."""
        return 2 * sum(_shm.aligned(A.array(b.buffer).nbytes) for b in buckets if b.shared)

    @classmethod
    def make(cls, buckets: list, pg):
        """Collective over ``pg``: the shared buckets of ``buckets`` (marking them ``shared``), or None when
        the ranks are not all on this machine or shared memory is not available; then nothing is marked."""
        candidates = [b for b in buckets if b.prescaled]
        world, rank = pg.size(), pg.rank()
        if not candidates:
            return None
        for b in candidates:
            b.shared = True
        data = cls.layout(buckets)
        total = _shm.Segment.part_bytes(len(buckets), data) * world
        name = mm = None
        if rank == 0 and _shm.supported():
            name, mm = _shm.create(total)
        box = [name]
        dist.broadcast_object_list(box, src=dist.get_global_rank(pg, 0), group=pg)
        name = box[0]
        if name is not None and rank != 0:
            mm = _shm.attach(name, total)
        ok = pylucid.tensor([0 if mm is None else 1], dtype=pylucid.int32)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=pg)
        if rank == 0 and name is not None:
            _shm.remove(name)  # every rank has mapped it (or given up): the name is no longer needed
        if not int(ok.item()):
            for b in candidates:
                b.shared = False
            return None
        seg = _shm.Segment(mm, world, rank, len(buckets), data)
        return cls(seg, buckets, world, candidates[0].buffer.device)


class _Reducer:
    """Bucketed, hook-driven gradient averaging for one DDP instance."""

    def __init__(self, params: list, process_group, cap_bytes: int, find_unused: bool, as_view: bool) -> None:
        self.params = params
        self.pg = process_group
        self.world = dist.get_world_size(process_group)
        self.cap_bytes = cap_bytes
        self.find_unused = find_unused
        self.as_view = as_view
        self.comm_state = process_group
        self.comm_hook = _allreduce_avg
        self.custom_hook = False
        # what the default reduction multiplies gradients by as they are copied into their bucket
        self.scale = 1.0 / self.world if self.world > 1 else None
        self.order_recorded = False
        self.rebuild_order = None
        # ranks of one machine average CPU gradients through shared memory (PYLUCID_DDP_SHM=0: through MPI)
        self.share = (1 < self.world <= _SHARED_MAX_RANKS and not as_view and params[0].device.type == "cpu"
                      and isinstance(process_group._engine(params[0]), MPIEngine)
                      and os.environ.get("PYLUCID_DDP_SHM", "1") != "0")
        self.shared = None
        self._build(list(range(len(params)))[::-1])
        self.armed = False
        self.started = False
        self.ready = [False] * len(params)
        self.remaining = len(params)
        self.next_bucket = 0
        self.unused: list = []
        self.local_used = None
        self.used_work = None
        self.arrival: list = []
        self.num_iterations = 0

    def _build(self, order: list) -> None:
        groups = _assign_buckets(self.params, order, self.cap_bytes)
        self.buckets = [_Bucket(k, members, self.params) for k, members in enumerate(groups)]
        self.bucket_of = [None] * len(self.params)
        self.private_views = [None] * len(self.params)
        for b in self.buckets:
            for j, i in enumerate(b.members):
                self.bucket_of[i] = b
                self.private_views[i] = b.views[j]
        self.shared = _SharedBuckets.make(self.buckets, self.pg) if self.share else None
        # where the hooks put each gradient: its bucket's buffer, or this rank's slot of this iteration
        self.view_of = self.private_views
        if self.shared is not None:
            self.slot_views = tuple([self.shared.mine[parity].get(i, v) for i, v in enumerate(self.private_views)]
                                    for parity in (0, 1))

    def drop_shared(self) -> None:
        """Reduce every bucket through MPI from now on (a communication hook takes the buffers)."""
        self.share = False
        self.shared = None
        for b in self.buckets:
            b.shared = False
        self.view_of = self.private_views

    # -- iteration life cycle ------------------------------------------------------------
    def prepare_forward(self) -> None:
        if self.armed and self.started and self.remaining:
            missing = [i for i, r in enumerate(self.ready) if not r]
            raise RuntimeError(
                "DistributedDataParallel: expected to have finished reduction in the prior iteration before "
                f"starting a new one. Parameters with indices {missing[:20]} received no gradient in the last "
                "backward: either your forward does not use them for the loss (pass find_unused_parameters=True), "
                "or not every forward output took part in computing the loss."
            )
        if self.rebuild_order is not None:
            self._rebuild()

    def arm(self, outputs) -> None:
        self.armed = True
        self.started = False
        self.ready = [False] * len(self.params)
        self.remaining = len(self.params)
        self.next_bucket = 0
        for b in self.buckets:
            b.pending = len(b.members)
            b.future = b.work = None
        self.unused = []
        if self.find_unused:
            reached = _reachable_leaves(outputs)
            self.unused = [i for i, p in enumerate(self.params) if id(p) not in reached]
            self.local_used = pylucid.zeros(len(self.params), dtype=pylucid.int32, device=self.params[0].device)
            self.used_work = None

    def disarm(self) -> None:
        self.armed = False
        self.started = False

    def _mark_unused(self) -> None:
        for i in self.unused:
            p = self.params[i]
            view = self.view_of[i]
            if p.grad is None:
                with pylucid.no_grad():
                    view.zero_()
            else:
                A.copy_scaled(view, p.grad, self._scale_of(i))
            self._mark_ready(i)

    def _scale_of(self, i: int):
        return None if self.custom_hook or not self.bucket_of[i].prescaled else self.scale

    def _mark_ready(self, i: int) -> None:
        self.ready[i] = True
        self.remaining -= 1
        if not self.order_recorded:
            self.arrival.append(i)
        b = self.bucket_of[i]
        b.pending -= 1
        if b.pending == 0:
            self._launch_ready()

    def _launch_ready(self) -> None:
        buckets = self.buckets
        n = len(buckets)
        while self.next_bucket < n and buckets[self.next_bucket].pending == 0:
            b = buckets[self.next_bucket]
            if b.shared:
                self.shared.seg.publish(b.index, self.shared.gen)
            elif self.custom_hook:
                b.future = self.comm_hook(self.comm_state, GradBucket(b, self.next_bucket == n - 1))
            else:
                op = dist.ReduceOp.SUM if self.scale is not None and b.prescaled else dist.ReduceOp.AVG
                b.work = dist.all_reduce(b.buffer, op=op, group=self.pg, async_op=True)
            self.next_bucket += 1
        if self.next_bucket == n and self.find_unused and self.used_work is None:
            self.used_work = dist.all_reduce(self.local_used, group=self.pg, async_op=True)

    def _poke(self) -> None:
        for b in self.buckets[:self.next_bucket]:
            if b.shared:
                continue
            if not (b.future.done() if b.work is None else b.work.is_completed()):
                return  # testing the oldest request drives MPI's progress for the others too

    def hook(self, i: int, grad: Tensor):
        if not self.armed:
            return None
        if self.ready[i]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {i} received a gradient twice in one synchronised backward "
                "(a second backward through the same forward, or reentrant backward); run the extra backward "
                "passes inside no_sync() or sum the losses first"
            )
        if not self.started:
            self.started = True
            if self.shared is not None:
                self.shared.gen += 1
                self.view_of = self.slot_views[self.shared.gen & 1]
            if self.unused:
                self._mark_unused()
        p = self.params[i]
        A.copy_scaled(self.view_of[i], grad, self._scale_of(i), p.grad)
        if self.find_unused:
            self.local_used[i] = 1
        p.grad = None  # the engine stores this backward's gradient; the averaged one replaces it
        self._mark_ready(i)
        if self.remaining:
            self._poke()
            return None
        return self._finalize(i)

    def _finalize(self, last: int):
        """Wait for every bucket, write the averages into ``.grad``; returns what the engine adds to
        parameter ``last`` (whose ``.grad`` it sets after this hook): a zero of its shape."""
        used = None
        shared = self.shared
        for b in self.buckets:
            if b.shared:
                self._wait_shared(b)
                continue
            if b.work is not None:
                b.work.wait()
                b.work = None
                continue
            value = b.future.wait()
            if value is not b.buffer:
                with pylucid.no_grad():
                    b.buffer[...] = value.reshape(-1)
            b.future = None
        if self.find_unused:
            self.used_work.wait()
            used = self.local_used.tolist()
            self.used_work = None
        synced = dist._core._synced_grads
        locally_unused = set(self.unused)
        srcs = None if shared is None else shared.srcs[shared.gen & 1]
        for i, p in enumerate(self.params):
            if used is not None and not used[i]:
                continue  # no rank used it: its .grad stays as it was
            if srcs is not None and i in srcs:
                if i == last or i in locally_unused or p.grad is None:
                    p.grad = A.sum_of(srcs[i])
                else:
                    A.sum_of(srcs[i], p.grad)
                synced[id(p)] = (weakref.ref(p.grad), self.pg)
                continue
            view = self.view_of[i]
            if self.as_view:
                p.grad = view
            elif i == last or i in locally_unused or p.grad is None:
                p.grad = view.clone()
            else:
                A.copy_scaled(p.grad, view)
            synced[id(p)] = (weakref.ref(p.grad), self.pg)
        self.armed = False
        self.num_iterations += 1
        if not self.order_recorded:
            self.order_recorded = True
            self.rebuild_order = list(self.arrival)
            self.arrival = []
        return pylucid.zeros((), dtype=self.params[last].dtype, device=self.params[last].device).expand(
            self.params[last].shape)

    def _wait_shared(self, b) -> None:
        seg, gen = self.shared.seg, self.shared.gen
        if seg.reached(b.index, gen):
            return
        timeout = self.pg._timeout

        def timed_out(waited):
            late = [dist.get_global_rank(self.pg, k) for k in seg.behind(b.index, gen)]
            raise DistBackendError(
                f"DistributedDataParallel: the gradients of bucket {b.index} from rank(s) {late} did not arrive "
                f"within the timeout ({timeout:g} s; waited {waited:.1f} s): another rank has failed, is stuck, or "
                "runs a different number of synchronised backward passes. Set the timeout with "
                "init_process_group(timeout=...) or pylucid launch --timeout SECONDS.")
        spin_until(lambda: seg.reached(b.index, gen), time.monotonic() + timeout, timed_out)

    def _rebuild(self) -> None:
        """Rebuild the buckets in the order gradients arrived in the first iteration (rank 0's order)."""
        order = self.rebuild_order
        self.rebuild_order = None
        n = len(self.params)
        seen = set(order)
        order = order + [i for i in range(n)[::-1] if i not in seen]
        t = pylucid.tensor(order, dtype=pylucid.int64)
        dist.broadcast(t, src=dist.get_global_rank(self.pg, 0), group=self.pg)
        order = t.tolist()
        if order != [i for b in self.buckets for i in b.members]:
            self._build(order)


def _reachable_leaves(outputs) -> set:
    """ids of the leaf tensors the autograd graph of ``outputs`` reaches."""
    found: set = set()
    stack = []
    seen: set = set()

    def visit(obj):
        if isinstance(obj, Tensor):
            if obj.grad_fn is not None:
                stack.append(obj.grad_fn)
            elif obj.requires_grad:
                found.add(id(obj))
        elif isinstance(obj, (list, tuple)):
            for o in obj:
                visit(o)
        elif isinstance(obj, dict):
            for o in obj.values():
                visit(o)
    visit(outputs)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.__class__ is AccumulateGrad:
            found.add(id(node.variable))
            continue
        for e in node.next_edges:
            if e is not None and e[0] not in seen:
                stack.append(e[0])
    return found


def _to_device(obj, dev):
    if isinstance(obj, Tensor):
        return obj if obj.device is dev else obj.to(dev)
    if isinstance(obj, tuple):
        return tuple(_to_device(o, dev) for o in obj)
    if isinstance(obj, list):
        return [_to_device(o, dev) for o in obj]
    if isinstance(obj, dict):
        return {k: _to_device(v, dev) for k, v in obj.items()}
    return obj


def _broadcast_coalesced(tensors: list, src: int, group) -> None:
    """Broadcast ``tensors`` from global rank ``src``: packed into flat buffers per dtype and device
    (up to 250 MB each), one broadcast per buffer."""
    by_key: dict = {}
    for t in tensors:
        by_key.setdefault((t.dtype, t.device), []).append(t)
    with pylucid.no_grad():
        for ts in by_key.values():
            chunk, size = [], 0
            for t in ts + [None]:
                if t is not None:
                    chunk.append(t)
                    size += t.numel() * t.element_size()
                if chunk and (t is None or size >= _BROADCAST_BUCKET_BYTES):
                    flat = pylucid.cat([c.detach().reshape(-1) for c in chunk])
                    dist.broadcast(flat, src=src, group=group)
                    off = 0
                    for c in chunk:
                        n = c.numel()
                        c[...] = flat[off:off + n].view(c.shape)
                        off += n
                    chunk, size = [], 0


class DistributedDataParallel(Module):
    """Data parallelism over the ranks of a process group (PyTorch's ``DistributedDataParallel``).

    Args:
        module: the model (on one device). Every rank wraps the same architecture.
        device_ids: ``[i]`` for a model on ``cuda:i`` (inputs are moved there), or None.
        output_device: accepted for compatibility (outputs stay on the model's device).
        broadcast_buffers: copy rank 0's buffers (BatchNorm statistics) to every rank before
            each forward.
        process_group: the group to average over (default: the world).
        bucket_cap_mb: bucket size in MiB (default 25); the first bucket is capped at 1 MiB.
        find_unused_parameters: find, after each forward, the parameters the output does not
            depend on and treat them as ready (needed when some parameters get no gradient).
        gradient_as_bucket_view: make ``.grad`` views of the bucket buffers (saves a copy
            and the memory of one set of gradients).
        static_graph, check_reduction, delay_all_reduce_named_params, param_to_hook_all_reduce,
            mixed_precision, device_mesh, dim: accepted for compatibility.
        init_sync: broadcast rank 0's parameters and buffers at construction (default True).

    The wrapped model is ``.module``; ``state_dict()`` keys carry the ``module.`` prefix, as in
    PyTorch. Save ``model.module.state_dict()`` for a checkpoint without the prefix.
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None, mixed_precision=None,
                 device_mesh=None, init_sync: bool = True) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be a pylucid.nn.Module, got {type(module).__name__}")
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group is not initialized; call "
                               "pylucid.distributed.init_process_group() first (and start the ranks with pylucid "
                               "launch -n N)")
        if mixed_precision is not None or device_mesh is not None:
            raise NotImplementedError("DistributedDataParallel: mixed_precision and device_mesh are not supported; "
                                      "use pylucid.amp.autocast inside forward")
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        devices = {p.device for p in params}
        if len(devices) > 1:
            raise ValueError(f"DistributedDataParallel: the module's parameters are on several devices "
                             f"({sorted(str(d) for d in devices)}); put the whole module on one device")
        self.device = next(iter(devices))
        if device_ids is not None:
            if len(device_ids) != 1:
                raise ValueError(f"DistributedDataParallel: device_ids must name one device, got {device_ids}")
            want = pylucid.device(device_ids[0])
            if self.device.type == "cpu" or want is not self.device:
                raise ValueError(f"DistributedDataParallel: device_ids={device_ids} but the module is on "
                                 f"{self.device}; for a CPU module pass device_ids=None")
        self.module = module
        self.device_ids = None if device_ids is None else [self.device.index]
        self.output_device = output_device
        self.dim = dim
        self.process_group = dist.group.WORLD if process_group is None else process_group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((_DEFAULT_BUCKET_MB if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self._src = dist.get_global_rank(self.process_group, 0)
        self._verify_shapes(params)
        if init_sync:
            states = list(module.parameters()) + [b for b in module.buffers() if b is not None]
            _broadcast_coalesced(states, self._src, self.process_group)
        self.reducer = _Reducer(params, self.process_group, self.bucket_bytes_cap, find_unused_parameters,
                                gradient_as_bucket_view)
        ref = weakref.ref(self.reducer)
        handles = []
        for i, p in enumerate(params):
            def hook(grad, i=i):
                r = ref()
                return None if r is None else r.hook(i, grad)
            handles.append(p.register_hook(hook))
        weakref.finalize(self.reducer, _remove_all, handles)

    def _verify_shapes(self, params) -> None:
        mine = [(tuple(p.shape), str(p.dtype)) for p in params]
        everyone = [None] * dist.get_world_size(self.process_group)
        dist.all_gather_object(everyone, mine, group=self.process_group)
        for r, theirs in enumerate(everyone):
            if theirs != mine:
                k = next((k for k, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
                raise ValueError(
                    f"DistributedDataParallel: rank {dist.get_global_rank(self.process_group, r)} has different "
                    f"parameters than this rank (rank {dist.get_rank()}): {len(theirs)} vs {len(mine)} parameters, "
                    f"first difference at parameter {k}. Every rank must wrap the same model."
                )

    def forward(self, *inputs, **kwargs):
        r = self.reducer
        r.prepare_forward()
        if self.require_forward_param_sync and self.broadcast_buffers:
            bufs = [b for b in self.module.buffers() if b is not None]
            if bufs and dist.get_world_size(self.process_group) > 1:
                _broadcast_coalesced(bufs, self._src, self.process_group)
        if self.device_ids is not None:
            inputs = _to_device(inputs, self.device)
            kwargs = _to_device(kwargs, self.device)
        out = self.module(*inputs, **kwargs)
        if pylucid.is_grad_enabled() and self.require_backward_grad_sync:
            r.arm(out)
        else:
            r.disarm()
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, forward/backward pairs accumulate gradients locally without communication; the first
        synchronised backward after it averages the accumulated sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def register_comm_hook(self, state, hook) -> None:
        """Replace the bucket all-reduce: ``hook(state, bucket: GradBucket) -> Future`` of a flat tensor
        holding the bucket's reduced gradients (the buffer holds the local, unaveraged ones). Call once,
        before the first backward."""
        r = self.reducer
        if r.custom_hook:
            raise RuntimeError("register_comm_hook: a communication hook can only be registered once")
        if r.num_iterations or r.started:
            raise RuntimeError("register_comm_hook: register the hook before the first backward")
        if not callable(hook):
            raise TypeError("register_comm_hook: hook must be callable as hook(state, bucket)")
        r.comm_state, r.comm_hook, r.custom_hook = state, hook, True
        r.drop_shared()

    def extra_repr(self) -> str:
        return f"process_group={self.process_group.group_name!r}, buckets={len(self.reducer.buckets)}"


def _remove_all(handles) -> None:
    for h in handles:
        h.remove()
