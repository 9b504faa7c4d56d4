"""``ZeroRedundancyOptimizer``: the optimizer state sharded over the ranks (ZeRO stages 1 and 2).

Each parameter is owned by one rank (whole parameters, balanced by size as
PyTorch does: largest first, to the least-loaded rank), and each rank keeps an
instance of the wrapped optimizer for its own parameters only, so the
optimizer state (Adam's two moments: twice the model) is split ``world_size``
ways. A step:

1. gradients: if ``DistributedDataParallel`` already averaged them this
   iteration, each rank just reads its own; otherwise (a plain model per
   rank) they are packed per dtype and device into one flat buffer laid out
   rank by rank and averaged with a single ``reduce_scatter_tensor``, which
   hands every rank the averages of its own parameters only (half the
   traffic of an all-reduce; ZeRO stage 2). The ranks agree on which case
   holds with a one-element all-reduce.
2. each rank steps its optimizer on its parameters;
3. ``all_gather_into_tensor`` of the updated parameters, one per dtype and
   device, gives every rank the whole model again.

With ``parameters_as_bucket_view=True`` the parameters live in the
all-gather's buffer (``param.data`` is a view of it), so step 3 writes them
in place with no unpacking copy.

The state dict is the wrapped optimizer's format over all parameters:
``consolidate_state_dict(to=0)`` on every rank, then ``state_dict()`` on rank
0; ``load_state_dict`` takes such a dict (or a plain optimizer's) on every rank.
"""

from __future__ import annotations

import copy

import pylucid
from pylucid._tensor import Tensor
from pylucid.optim.optimizer import Optimizer

from .. import _core as dist

__all__ = ["ZeroRedundancyOptimizer"]


class _Bucket:
    """The parameters of one (dtype, device), laid out rank by rank for the reduce-scatter and all-gather.

    Rank r's segment is ``[flags (one per parameter it owns, padded to the
    largest count) | its parameters, flattened, padded]``; every segment has
    the same length ``seg``. The flags carry "this rank has a gradient" through
    the gradient average, so a parameter no rank has a gradient for keeps
    ``.grad = None``.
    """

    def __init__(self, params: list, owner: dict, world: int) -> None:
        self.params = params
        per_rank = [[p for p in params if owner[id(p)] == r] for r in range(world)]
        self.per_rank = per_rank
        self.n_flags = max(len(ps) for ps in per_rank)
        sizes = [sum(p.numel() for p in ps) for ps in per_rank]
        self.seg = self.n_flags + max(sizes)
        self.pos = {}  # id(param) -> (owner, flag index, start in the full buffer)
        for r, ps in enumerate(per_rank):
            off = r * self.seg + self.n_flags
            for k, p in enumerate(ps):
                self.pos[id(p)] = (r, k, off)
                off += p.numel()
        p0 = params[0]
        self.dtype, self.device = p0.dtype, p0.device
        self.full = None  # the persistent all-gather buffer (parameters_as_bucket_view)


class ZeroRedundancyOptimizer(Optimizer):
    """Shard ``optimizer_class``'s state over the ranks of ``process_group`` (PyTorch's ZeroRedundancyOptimizer).

    Args:
        params: parameters or parameter groups, as for any optimizer (the same on every rank).
        optimizer_class: the optimizer to shard, e.g. ``pylucid.optim.Adam``.
        process_group: the ranks sharing the state (default: the world).
        parameters_as_bucket_view: keep the parameters in the all-gather buffers (no copy).
        overlap_with_ddp: not supported.
        **defaults: the optimizer's arguments (``lr=...``).

    Attributes:
        optim: this rank's ``optimizer_class`` instance (its parameters only).
    """

    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view: bool = False,
                 overlap_with_ddp: bool = False, **defaults) -> None:
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer: overlap_with_ddp is not supported; wrap the model "
                                      "in DistributedDataParallel and call step() after backward")
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(f"ZeroRedundancyOptimizer: optimizer_class must be a pylucid.optim.Optimizer subclass, "
                            f"got {optimizer_class!r}")
        if not dist.is_initialized():
            raise RuntimeError("ZeroRedundancyOptimizer: call pylucid.distributed.init_process_group() first")
        self._pg = dist.group.WORLD if process_group is None else process_group
        self._world = dist.get_world_size(self._pg)
        self._rank = dist.get_rank(self._pg)
        self._optim_cls = optimizer_class
        self._as_view = parameters_as_bucket_view
        self._owner: dict = {}
        self._load = [0] * self._world
        self._consolidated = None
        self.optim = None
        super().__init__(params, defaults)
        self._make_local_optimizer()
        self._build_buckets()

    # -- partition --------------------------------------------------------------------------
    def _assign(self, params: list) -> None:
        """Give each new parameter to the least-loaded rank, largest first (ties: lower rank)."""
        order = sorted(range(len(params)), key=lambda i: -params[i].numel())
        for i in order:
            p = params[i]
            if id(p) in self._owner:
                continue
            r = min(range(self._world), key=lambda k: (self._load[k], k))
            self._owner[id(p)] = r
            self._load[r] += p.numel()

    def _local_group(self, group: dict) -> dict:
        local = {k: v for k, v in group.items() if k not in ("params", "param_names")}
        local["params"] = [p for p in group["params"] if self._owner[id(p)] == self._rank]
        return local

    def _make_local_optimizer(self) -> None:
        for g in self.param_groups:
            self._assign(g["params"])
        groups = [self._local_group(g) for g in self.param_groups]
        self.optim = self._optim_cls(groups, **self.defaults)
        self.state = self.optim.state

    def add_param_group(self, param_group: dict) -> None:
        """Add a group: its parameters are shared out among the ranks; existing state stays where it is."""
        super().add_param_group(param_group)
        if self.optim is not None:
            group = self.param_groups[-1]
            self._assign(group["params"])
            self.optim.add_param_group(self._local_group(group))
            self._build_buckets()

    def _build_buckets(self) -> None:
        by_key: dict = {}
        for g in self.param_groups:
            for p in g["params"]:
                by_key.setdefault((p.dtype, p.device), []).append(p)
        self._buckets = [_Bucket(ps, self._owner, self._world) for ps in by_key.values()]
        if self._as_view:
            with pylucid.no_grad():
                for b in self._buckets:
                    b.full = pylucid.zeros(self._world * b.seg, dtype=b.dtype, device=b.device)
                    for p in b.params:
                        _, _, start = b.pos[id(p)]
                        view = b.full[start:start + p.numel()].view(p.shape)
                        view[...] = p.detach()
                        p.data = view

    def partition(self, rank: int | None = None) -> list:
        """The parameters owned by ``rank`` (default: this rank), in parameter-group order."""
        r = self._rank if rank is None else rank
        return [p for g in self.param_groups for p in g["params"] if self._owner[id(p)] == r]

    # -- step ---------------------------------------------------------------------------------
    def _grads_averaged_by_ddp(self) -> bool:
        synced = dist._synced_grads
        mine = True
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                entry = synced.get(id(p))
                if entry is None or entry[0]() is not p.grad or entry[1] is not self._pg:
                    mine = False
                    break
            if not mine:
                break
        flag = pylucid.tensor([1 if mine else 0], dtype=pylucid.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self._pg)
        return bool(flag.item())

    def _average_gradients(self, b: _Bucket) -> None:
        full = pylucid.zeros(self._world * b.seg, dtype=b.dtype, device=b.device)
        for p in b.params:
            if p.grad is not None:
                r, k, start = b.pos[id(p)]
                full[start:start + p.numel()] = p.grad.reshape(-1)
                full[r * b.seg + k] = 1
        mine = pylucid.empty(b.seg, dtype=b.dtype, device=b.device)
        dist.reduce_scatter_tensor(mine, full, op=dist.ReduceOp.AVG, group=self._pg)
        flags = mine[:b.n_flags].tolist()
        off = b.n_flags
        for k, p in enumerate(b.per_rank[self._rank]):
            n = p.numel()
            p.grad = mine[off:off + n].view(p.shape) if flags[k] != 0 else None
            off += n

    def _gather_parameters(self, b: _Bucket) -> None:
        mine_params = b.per_rank[self._rank]
        if b.full is not None:
            start = self._rank * b.seg
            mine = b.full[start:start + b.seg].clone()
            dist.all_gather_into_tensor(b.full, mine, group=self._pg)
            return
        mine = pylucid.zeros(b.seg, dtype=b.dtype, device=b.device)
        off = b.n_flags
        for p in mine_params:
            n = p.numel()
            mine[off:off + n] = p.detach().reshape(-1)
            off += n
        full = pylucid.empty(self._world * b.seg, dtype=b.dtype, device=b.device)
        dist.all_gather_into_tensor(full, mine, group=self._pg)
        for p in b.params:
            r, _, start = b.pos[id(p)]
            if r != self._rank:
                p[...] = full[start:start + p.numel()].view(p.shape)

    def _sync_options(self) -> None:
        """Copy the groups' options (``lr`` set by a scheduler, ...) to this rank's optimizer."""
        for outer, local in zip(self.param_groups, self.optim.param_groups):
            for k, v in outer.items():
                if k not in ("params", "param_names"):
                    local[k] = v

    def step(self, closure=None):
        """Average the gradients (unless DDP did), step this rank's parameters, all-gather the parameters.
        Returns ``closure()``'s loss when a closure is given (evaluated once, before the step)."""
        loss = self._eval_closure(closure)
        with pylucid.no_grad():
            self._sync_options()
            if not self._grads_averaged_by_ddp():
                for b in self._buckets:
                    self._average_gradients(b)
            self.optim.step()
            for b in self._buckets:
                self._gather_parameters(b)
        return loss

    # -- state dict ---------------------------------------------------------------------------
    def _global_index(self) -> dict:
        index, k = {}, 0
        for g in self.param_groups:
            for p in g["params"]:
                index.setdefault(id(p), k)
                k += 1
        return index

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather the whole optimizer state on global rank ``to`` (call it on every rank), for
        :meth:`state_dict`."""
        index = self._global_index()
        local_params = [p for g in self.optim.param_groups for p in g["params"]]
        local = self.optim.state_dict()["state"]
        mine = {index[id(local_params[i])]: st for i, st in local.items()}
        dst_group_rank = dist.get_group_rank(self._pg, to)
        gathered = [None] * self._world if self._rank == dst_group_rank else None
        dist.gather_object(mine, gathered, dst=to, group=self._pg)
        if gathered is None:
            self._consolidated = None
            return
        state = {}
        for part in gathered:
            state.update(part)
        self._consolidated = dict(sorted(state.items()))

    def state_dict(self) -> dict:
        """The whole state in the wrapped optimizer's format (on the rank that consolidated it)."""
        if self._consolidated is None:
            raise RuntimeError("ZeroRedundancyOptimizer.state_dict: optimizer state has not been consolidated on "
                               "this rank; call consolidate_state_dict(to=rank) on every rank first")
        groups = []
        index = self._global_index()
        local = {k: v for k, v in self.optim.param_groups[0].items()} if self.optim.param_groups else {}
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k not in ("params", "param_names")}
            for k, v in local.items():
                if k not in ("params", "param_names"):
                    packed.setdefault(k, v)  # the wrapped optimizer's own defaults (betas, ...)
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        return {"state": self._consolidated, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a consolidated (or plain optimizer's) state dict: every rank keeps its own parameters' part."""
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError(f"ZeroRedundancyOptimizer.load_state_dict: the state dict has {len(saved)} parameter "
                             f"groups, the optimizer {len(self.param_groups)}")
        local_groups, local_state, k = [], {}, 0
        for outer, s in zip(self.param_groups, saved):
            if len(s["params"]) != len(outer["params"]):
                raise ValueError("ZeroRedundancyOptimizer.load_state_dict: a parameter group differs in size")
            for key, v in s.items():
                if key not in ("params", "param_names") and key in outer:
                    outer[key] = copy.deepcopy(v)
            lg = {key: copy.deepcopy(v) for key, v in s.items() if key not in ("params", "param_names")}
            lg["params"] = []
            for p, saved_index in zip(outer["params"], s["params"]):
                if self._owner[id(p)] == self._rank:
                    if saved_index in state_dict["state"]:
                        local_state[k] = state_dict["state"][saved_index]
                    lg["params"].append(k)
                    k += 1
            local_groups.append(lg)
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})
        self.state = self.optim.state

    def __repr__(self) -> str:
        return f"ZeroRedundancyOptimizer({self._optim_cls.__name__}, rank {self._rank} of {self._world})"


def _tensor_bytes(obj) -> int:
    if isinstance(obj, Tensor):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def state_bytes(optimizer: Optimizer) -> int:
    """Bytes of the tensors in ``optimizer``'s state on this rank (a ZeroRedundancyOptimizer: its shard)."""
    return _tensor_bytes(dict(optimizer.state))
