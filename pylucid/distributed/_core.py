"""Process groups and collectives with ``torch.distributed``'s signatures.

The rendezvous is MPI's: ranks are started by ``mpiexec`` (``pylucid launch``)
and ``init_process_group`` reads rank and world size from ``MPI.COMM_WORLD``.
A process group owns a host engine (MPI, or a local one for a world of one
process without mpi4py) and, for the ``"nccl"`` backend, an NCCL engine for
CUDA tensors. CPU tensors always go through the host engine, CUDA tensors of
an ``"mpi"`` group through host copies (like PyTorch's ``"cpu:gloo,cuda:nccl"``
default, either backend takes both devices).

Collectives write their results into the given tensors in place; with
``async_op=True`` they return a :class:`Work`, else they return when done.
``src`` / ``dst`` are global ranks (``group_src`` / ``group_dst``: ranks within
``group``), as in PyTorch.
"""

from __future__ import annotations

import enum
import os
import pickle
import warnings

from pylucid._tensor import Tensor
from pylucid.errors import DeviceMismatch, DtypeMismatch, ShapeMismatch

from . import _arrays as A
from . import _mpi
from ._work import Work, _seconds, default_timeout, set_spin

__all__ = [
    "Backend", "ReduceOp", "reduce_op", "ProcessGroup", "GroupMember", "group", "init_process_group",
    "destroy_process_group", "is_initialized", "is_available", "is_mpi_available", "is_nccl_available",
    "get_rank", "get_world_size", "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks",
    "get_node_local_rank", "new_group", "barrier", "monitored_barrier", "all_reduce", "broadcast", "reduce",
    "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter",
    "send", "recv", "isend", "irecv", "all_to_all", "all_to_all_single", "broadcast_object_list",
    "all_gather_object", "gather_object", "scatter_object_list",
]


class Backend(str):
    """Backend names: ``Backend.MPI`` (``"mpi"``) and ``Backend.NCCL`` (``"nccl"``); ``"gloo"`` is accepted
    as a name for the CPU backend, which here is MPI."""

    UNDEFINED = "undefined"
    MPI = "mpi"
    NCCL = "nccl"
    GLOO = "gloo"

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, got {type(name).__name__}")
        value = name.lower()
        if value not in ("mpi", "nccl", "gloo", "undefined"):
            raise ValueError(f"Invalid backend {name!r}: accepted 'mpi', 'nccl' (and 'gloo', meaning MPI here)")
        return str.__new__(cls, value)


class ReduceOp(enum.Enum):
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter`` combine the ranks' values.

    ``AVG`` is the sum divided by the world size (floating point and complex
    tensors); on bool tensors ``SUM``/``MAX``/``BOR`` are OR, ``PRODUCT``/``MIN``/``BAND`` AND.
    """

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7


reduce_op = ReduceOp  # PyTorch's deprecated name


class _NonMember:
    def __repr__(self) -> str:
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    """``GroupMember.WORLD``: the default group once initialised; ``NON_GROUP_MEMBER``: what
    ``new_group`` returns on ranks outside the new group."""

    WORLD = None
    NON_GROUP_MEMBER = _NonMember()


class group:  # noqa: N801 - mirrors torch.distributed.group
    """``group.WORLD``: the default process group (None before ``init_process_group``)."""

    WORLD = None


_GROUP_NS = group  # the class, for functions whose ``group`` argument shadows it


class ProcessGroup:
    """A set of ranks that run collectives together (made by ``init_process_group`` / ``new_group``)."""

    def __init__(self, backend: str, host, ranks, timeout: float, name: str) -> None:
        self._backend = backend
        self._host = host
        self._ranks = list(ranks)
        self._timeout = timeout
        self.group_name = name
        self._nccl = None
        self._device_index = None
        host.group = self
        host.timeout = timeout

    def rank(self) -> int:
        return self._host.rank

    def size(self) -> int:
        return self._host.size

    def name(self) -> str:
        return self._backend

    @property
    def group_desc(self) -> str:
        return self.group_name

    def _engine(self, t: Tensor):
        if self._backend == "nccl" and A.is_cuda(t):
            if self._nccl is None:
                from ._nccl import NCCLEngine

                self._nccl = NCCLEngine(self._host, self)
            return self._nccl
        return self._host

    def _close(self) -> None:
        if self._nccl is not None:
            self._nccl.close()
        self._host.close()

    def __repr__(self) -> str:
        return f"<ProcessGroup {self.group_name!r} backend={self._backend} rank={self.rank()} size={self.size()}>"


_default = None  # the default (world) ProcessGroup
_groups: list = []
_group_count = 0
#: id(param) -> (weakref to the .grad that DistributedDataParallel wrote, its process group). The ZeRO
#: optimizer reads it to skip averaging gradients DDP already averaged; a .grad replaced since no longer matches.
_synced_grads: dict = {}


# ---------------------------------------------------------------------------------------------------------------------
# availability and initialisation
# ---------------------------------------------------------------------------------------------------------------------
def is_available() -> bool:
    """True: ``pylucid.distributed`` is always importable (its engines are loaded at ``init_process_group``)."""
    return True


def is_mpi_available() -> bool:
    """Whether mpi4py is installed (``pip install 'pylucid[distributed]'``)."""
    return _mpi.available()


def is_nccl_available() -> bool:
    """Whether CuPy with NCCL (``cupy.cuda.nccl``) can be imported."""
    from ._nccl import available

    return available()


def is_initialized() -> bool:
    return _default is not None


_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "RANK")
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "WORLD_SIZE")
_LOCAL_RANK_VARS = ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK")


def _env_int(names):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                continue
    return None


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's rank among the ranks of its machine (``LOCAL_RANK``, or what the MPI launcher sets):
    the GPU a rank should use is usually ``cuda:<local rank>``."""
    r = _env_int(_LOCAL_RANK_VARS)
    if r is not None:
        return r
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("get_node_local_rank: no LOCAL_RANK (or MPI local rank) in the environment; "
                       "start the ranks with pylucid launch, or pass fallback_rank=")


def _host_world():
    """The world's host engine: MPI.COMM_WORLD (duplicated), or the local engine for a one-process world."""
    env_size = _env_int(_SIZE_VARS)
    try:
        MPI = _mpi.load()
    except Exception as exc:  # not installed, or no MPI library behind it
        if env_size in (None, 1):
            return _mpi.SelfEngine([0])
        raise RuntimeError(
            f"init_process_group: the environment says the world has {env_size} processes, but MPI cannot be "
            f"used ({type(exc).__name__}: {exc}). pylucid's rendezvous and CPU collectives run on MPI: "
            "pip install 'pylucid[distributed]' (mpi4py and mpich) and start the ranks with pylucid launch -n N."
        ) from exc
    world = MPI.COMM_WORLD
    declared = _env_int(("WORLD_SIZE",))
    if declared is not None and declared != world.Get_size():
        raise RuntimeError(
            f"init_process_group: WORLD_SIZE={declared} but MPI sees {world.Get_size()} process(es): these ranks "
            "were not started by an MPI launcher. Start them with pylucid launch -n N (or mpiexec -n N)."
        )
    comm = world.Dup()  # collectives of our own, apart from any the program runs on COMM_WORLD
    return _mpi.MPIEngine(comm, range(comm.Get_size()))


def _parse_backend(backend) -> str:
    if backend is None:
        from pylucid import cuda

        return "nccl" if cuda.is_available() and is_nccl_available() else "mpi"
    name = str(backend).lower()
    if "," in name or ":" in name:  # PyTorch's "cpu:gloo,cuda:nccl"
        parts = dict(p.split(":", 1) for p in name.split(",") if ":" in p)
        return "nccl" if parts.get("cuda") == "nccl" else "mpi"
    name = Backend(name)
    if name == "gloo":
        return "mpi"
    if name == "undefined":
        raise ValueError("init_process_group: backend 'undefined' is not a backend; use 'mpi', 'nccl' or None")
    if name == "nccl" and not is_nccl_available():
        raise RuntimeError("init_process_group: the NCCL backend needs CuPy with NCCL (pip install 'pylucid[cuda]' "
                           "and the nvidia-nccl wheel of your CUDA version) on a machine with NVIDIA GPUs")
    return str(name)


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout=None,
                       world_size: int = -1, rank: int = -1, store=None, group_name: str = "", pg_options=None,
                       device_id=None) -> None:
    """Join the default process group of the job (PyTorch's ``init_process_group``).

    Args:
        backend: ``"mpi"`` (CPU; CUDA tensors through host copies), ``"nccl"``
            (CUDA tensors through NCCL, CPU tensors through MPI), or None:
            NCCL when CuPy sees a GPU and has NCCL, MPI otherwise. ``"gloo"``
            is accepted as a name of the CPU backend.
        init_method: None or ``"env://"``; rank and world size come from the MPI
            launcher (``pylucid launch -n N``, ``mpiexec``). A one-process run
            needs no launcher.
        timeout: how long a collective may wait (``timedelta`` or seconds;
            default 30 minutes or ``PYLUCID_DIST_TIMEOUT``), after which it raises
            :class:`DistBackendError` instead of hanging.
        world_size, rank: optional checks against what MPI reports.
        store, pg_options: not supported (the rendezvous is MPI's).
        device_id: the CUDA device this rank's NCCL communicator uses.
    """
    global _default
    if _default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if store is not None:
        raise ValueError("init_process_group: store= is not supported: pylucid's rendezvous is MPI's (start the "
                         "ranks with pylucid launch -n N)")
    if init_method not in (None, "env://", "mpi://"):
        raise ValueError(f"init_process_group: init_method={init_method!r} is not supported: ranks meet through the "
                         "MPI launcher (pylucid launch -n N); use init_method=None")
    name = _parse_backend(backend)
    t = default_timeout() if timeout is None else _seconds(timeout)
    if t <= 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    host = _host_world()
    if world_size not in (-1, None) and int(world_size) != host.size:
        raise ValueError(f"init_process_group: world_size={world_size} but the launcher started {host.size} "
                         "process(es)")
    if rank not in (-1, None) and int(rank) != host.rank:
        raise ValueError(f"init_process_group: rank={rank} but MPI gives this process rank {host.rank}")
    set_spin(host.ranks_on_this_node(), os.cpu_count() or 1)
    pg = ProcessGroup(name, host, range(host.size), t, group_name or "default_pg")
    if device_id is not None:
        from pylucid.device import device as _dev

        pg._device_index = _dev(device_id).index if not isinstance(device_id, int) else int(device_id)
    _default = pg
    _groups.append(pg)
    group.WORLD = GroupMember.WORLD = pg


def destroy_process_group(group=None) -> None:
    """Free ``group``'s communicators; with None, every group and the default one (then
    ``init_process_group`` may be called again)."""
    global _default
    if group is None or group is _default:
        for pg in reversed(_groups):
            pg._close()
        _groups.clear()
        _default = None
        _GROUP_NS.WORLD = GroupMember.WORLD = None
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if group in _groups:
        _groups.remove(group)
        group._close()


def _world() -> ProcessGroup:
    if _default is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return _default


def _resolve(grp) -> ProcessGroup:
    if grp is None or grp is group.WORLD:
        return _world()
    if not isinstance(grp, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup from new_group() or None, got {type(grp).__name__}")
    if grp not in _groups:
        raise ValueError("this process group was destroyed (destroy_process_group)")
    return grp


def _not_member(grp, op: str) -> bool:
    if grp is GroupMember.NON_GROUP_MEMBER:
        warnings.warn(f"Running {op} on global rank {get_rank()} which does not belong to the given group.",
                      stacklevel=3)
        return True
    return False


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (default: the world); -1 if it is not a member."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _resolve(group).rank()


def get_world_size(group=None) -> int:
    """The number of processes in ``group`` (default: the world); -1 if this process is not a member."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _resolve(group).size()


def get_backend(group=None) -> Backend:
    """``"mpi"`` or ``"nccl"``."""
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("get_backend: this process is not a member of the group")
    return Backend(_resolve(group)._backend)


def get_process_group_ranks(group) -> list:
    """The global ranks of ``group``'s members, in group-rank order."""
    return list(_resolve(group)._ranks)


def get_global_rank(group, group_rank: int) -> int:
    pg = _resolve(group)
    if not 0 <= group_rank < pg.size():
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in [0, {pg.size()})")
    return pg._ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    pg = _resolve(group)
    try:
        return pg._ranks.index(global_rank)
    except ValueError:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg.group_name!r} "
                         f"(ranks {pg._ranks})") from None


def _group_rank(pg: ProcessGroup, global_rank, group_rank, op: str, default0: bool = False) -> int:
    if group_rank is not None:
        if global_rank is not None:
            raise ValueError(f"{op}: can't specify both a global rank and a group rank")
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{op}: group rank {group_rank} is not in [0, {pg.size()})")
        return int(group_rank)
    if global_rank is None:
        if default0:
            return 0
        raise ValueError(f"{op}: must specify the global rank (src/dst) or the group rank (group_src/group_dst)")
    return get_group_rank(pg, int(global_rank))


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization: bool = False,
              group_desc=None, device_id=None, sort_ranks: bool = True):
    """A process group of the global ``ranks`` (all ranks when None).

    Every process of the default group must call it (with the same ``ranks``),
    unless ``use_local_synchronization=True``, when only the members do.
    Non-members get ``GroupMember.NON_GROUP_MEMBER``.
    """
    global _group_count
    world = _world()
    n = world.size()
    ranks = list(range(n)) if ranks is None else [int(r) for r in ranks]
    if sort_ranks:
        ranks = sorted(ranks)
    if len(set(ranks)) != len(ranks) or any(not 0 <= r < n for r in ranks):
        raise ValueError(f"new_group: ranks must be distinct global ranks in [0, {n}), got {ranks}")
    name = _parse_backend(backend) if backend is not None else world._backend
    t = world._timeout if timeout is None else _seconds(timeout)
    _group_count += 1
    host = world._host.split(ranks, bool(use_local_synchronization))
    if host is None:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(name, host, ranks, t, group_desc or f"group_{_group_count}")
    _groups.append(pg)
    return pg


# ---------------------------------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------------------------------
def _check(t, op: str, name: str = "tensor") -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")


def _member_group(t, group, op: str, name: str = "tensor"):
    """The process group of a collective on ``t``, or None when this rank is not a member of ``group``."""
    _check(t, op, name)
    if _not_member(group, op):
        return None
    return _resolve(group)


def _check_list(ts, op: str, name: str, n: int | None = None) -> list:
    if not isinstance(ts, (list, tuple)):
        raise TypeError(f"{op}: {name} must be a list of Tensors, got {type(ts).__name__}")
    for i, t in enumerate(ts):
        _check(t, op, f"{name}[{i}]")
    if n is not None and len(ts) != n:
        raise ValueError(f"{op}: {name} must hold one tensor per rank of the group ({n}), got {len(ts)}")
    return list(ts)


def _same(a, b, op: str, what: str, numel: bool = True) -> None:
    if a.dtype is not b.dtype:
        raise DtypeMismatch(f"{op}: {what} have different dtypes ({a.dtype} and {b.dtype}); they must match")
    if a.device is not b.device:
        raise DeviceMismatch(f"{op}: {what} are on different devices ({a.device} and {b.device})")
    if numel and a.numel() != b.numel():
        raise ShapeMismatch(f"{op}: {what} have {a.numel()} and {b.numel()} elements; they must match")


def _per_rank_list(ts, like, op: str, name: str, like_name: str, n: int) -> list:
    """``ts`` checked as a list of one tensor per rank, each of ``like``'s dtype, device and size."""
    out = _check_list(ts if ts is not None else [], op, name, n)
    for t in out:
        _same(t, like, op, f"{name} entries and {like_name}")
    return out


def _offsets(counts):
    off = 0
    for c in counts:
        yield off, off + c
        off += c


def _staged(ins, like, counts):
    """One flat staging buffer holding the tensors ``ins`` (``counts[r]`` elements each) one after another."""
    stage = _stage_like(like, sum(counts))
    for t, (a, b) in zip(ins, _offsets(counts)):
        _copy_into(_flat_view(stage, a, b), t)
    return stage


def _unstage_when_done(work: Work, stage, outs: list, counts) -> Work:
    """Copy the flat ``stage`` back into ``outs`` (``counts[r]`` elements each) once ``work`` completes."""

    def scatter_back():
        for o, (a, b) in zip(outs, _offsets(counts)):
            _copy_into(o, _flat_view(stage, a, b))
    work.add_finisher(scatter_back)
    work._outputs = outs
    return work


def _op_name(op, t, opname: str) -> str:
    if isinstance(op, ReduceOp):
        name = op.name
    elif isinstance(op, str) and op.upper() in ReduceOp.__members__:
        name = op.upper()
    else:
        raise TypeError(f"{opname}: op must be a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR), got {op!r}")
    dt = t.dtype
    if name == "AVG" and not (dt.is_floating_point or dt.is_complex):
        raise TypeError(f"{opname}: ReduceOp.AVG needs a floating point or complex tensor, got {dt}")
    if name in ("MIN", "MAX") and dt.is_complex:
        raise TypeError(f"{opname}: ReduceOp.{name} is not defined for complex tensors ({dt})")
    if name in ("BAND", "BOR", "BXOR") and (dt.is_floating_point or dt.is_complex):
        raise TypeError(f"{opname}: ReduceOp.{name} needs an integer or bool tensor, got {dt}")
    return name


def _finish(work: Work, async_op: bool):
    if async_op:
        return work
    work.wait()
    return None


def _stage_like(t, numel: int):
    """A fresh flat tensor of ``numel`` elements with ``t``'s dtype and device."""
    return A.wrap(A.empty_like(t, shape=(numel,)), A.device_of(t))


def _flat_view(t, start: int, stop: int):
    return A.wrap(A.array(t).reshape(-1)[start:stop], A.device_of(t))


def _copy_into(dst, src) -> None:
    A.write(dst, A.contiguous(src))


# ---------------------------------------------------------------------------------------------------------------------
# collectives
# ---------------------------------------------------------------------------------------------------------------------
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` over the ranks of ``group``; every rank gets the result in ``tensor``.

    >>> import pylucid, pylucid.distributed as dist
    >>> dist.init_process_group("mpi")  # doctest: +SKIP
    >>> t = pylucid.tensor([1.0, 2.0]) * (dist.get_rank() + 1)  # doctest: +SKIP
    >>> dist.all_reduce(t)  # with 2 ranks: tensor([3., 6.]) everywhere  # doctest: +SKIP
    """
    pg = _member_group(tensor, group, "all_reduce")
    if pg is None:
        return None
    name = _op_name(op, tensor, "all_reduce")
    return _finish(pg._engine(tensor).all_reduce(tensor, name), async_op)


def broadcast(tensor, src: int | None = None, group=None, async_op: bool = False, group_src: int | None = None):
    """Copy ``tensor`` of rank ``src`` into ``tensor`` of every rank."""
    pg = _member_group(tensor, group, "broadcast")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src, "broadcast")
    return _finish(pg._engine(tensor).broadcast(tensor, root), async_op)


def reduce(tensor, dst: int | None = None, op=ReduceOp.SUM, group=None, async_op: bool = False,
           group_dst: int | None = None):
    """Reduce ``tensor`` over the ranks into ``tensor`` of rank ``dst`` (the others' are left unchanged)."""
    pg = _member_group(tensor, group, "reduce")
    if pg is None:
        return None
    root = _group_rank(pg, dst, group_dst, "reduce")
    name = _op_name(op, tensor, "reduce")
    return _finish(pg._engine(tensor).reduce(tensor, root, name), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Concatenate every rank's ``input_tensor`` (in rank order) into ``output_tensor``, of shape
    ``(world_size * n, ...)`` or ``(world_size, n, ...)`` for an input of shape ``(n, ...)``."""
    _check(output_tensor, "all_gather_into_tensor", "output_tensor")
    pg = _member_group(input_tensor, group, "all_gather_into_tensor", "input_tensor")
    if pg is None:
        return None
    _same(output_tensor, input_tensor, "all_gather_into_tensor", "output and input", numel=False)
    if output_tensor.numel() != pg.size() * input_tensor.numel():
        raise ShapeMismatch(f"all_gather_into_tensor: output_tensor must have world_size ({pg.size()}) times the "
                            f"elements of input_tensor ({input_tensor.numel()}), got {output_tensor.numel()}")
    return _finish(pg._engine(input_tensor).all_gather_into(output_tensor, input_tensor), async_op)


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """Gather every rank's ``tensor`` into ``tensor_list`` (one tensor per rank, in rank order)."""
    pg = _member_group(tensor, group, "all_gather")
    if pg is None:
        return None
    outs = _per_rank_list(tensor_list, tensor, "all_gather", "tensor_list", "tensor", pg.size())
    n = tensor.numel()
    stage = _stage_like(tensor, n * pg.size())
    work = pg._engine(tensor).all_gather_into(stage, tensor)
    return _finish(_unstage_when_done(work, stage, outs, [n] * len(outs)), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``input`` (``world_size`` blocks of ``output``'s size) over the ranks; rank r gets block r."""
    _check(output, "reduce_scatter_tensor", "output")
    pg = _member_group(input, group, "reduce_scatter_tensor", "input")
    if pg is None:
        return None
    _same(output, input, "reduce_scatter_tensor", "output and input", numel=False)
    if input.numel() != pg.size() * output.numel():
        raise ShapeMismatch(f"reduce_scatter_tensor: input must have world_size ({pg.size()}) times the elements "
                            f"of output ({output.numel()}), got {input.numel()}")
    name = _op_name(op, input, "reduce_scatter_tensor")
    return _finish(pg._engine(input).reduce_scatter_into(output, input, name), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``input_list[r]`` over the ranks into ``output`` of rank r."""
    pg = _member_group(output, group, "reduce_scatter", "output")
    if pg is None:
        return None
    ins = _per_rank_list(input_list, output, "reduce_scatter", "input_list", "output", pg.size())
    name = _op_name(op, output, "reduce_scatter")
    stage = _staged(ins, output, [output.numel()] * len(ins))
    return _finish(pg._engine(output).reduce_scatter_into(output, stage, name), async_op)


def gather(tensor, gather_list=None, dst: int | None = None, group=None, async_op: bool = False,
           group_dst: int | None = None):
    """Collect every rank's ``tensor`` into ``gather_list`` of rank ``dst`` (default 0)."""
    pg = _member_group(tensor, group, "gather")
    if pg is None:
        return None
    root = _group_rank(pg, dst, group_dst, "gather", default0=True)
    n = tensor.numel()
    if pg.rank() == root:
        outs = _per_rank_list(gather_list, tensor, "gather", "gather_list", "tensor", pg.size())
        stage = _stage_like(tensor, n * pg.size())
        work = pg._engine(tensor).gather_into(stage, tensor, root)
        return _finish(_unstage_when_done(work, stage, outs, [n] * len(outs)), async_op)
    if gather_list:
        raise ValueError("gather: Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    return _finish(pg._engine(tensor).gather_into(None, tensor, root), async_op)


def scatter(tensor, scatter_list=None, src: int | None = None, group=None, async_op: bool = False,
            group_src: int | None = None):
    """Rank ``src`` (default 0) sends ``scatter_list[r]`` into ``tensor`` of rank r."""
    pg = _member_group(tensor, group, "scatter")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src, "scatter", default0=True)
    stage = None
    if pg.rank() == root:
        ins = _per_rank_list(scatter_list, tensor, "scatter", "scatter_list", "tensor", pg.size())
        stage = _staged(ins, tensor, [tensor.numel()] * len(ins))
    elif scatter_list:
        raise ValueError("scatter: Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    return _finish(pg._engine(tensor).scatter_from(tensor, stage, root), async_op)


def _splits(t, sizes, n: int, op: str, name: str) -> list:
    if t.ndim == 0:
        raise ShapeMismatch(f"{op}: {name} must have at least one dimension")
    rows = t.shape[0]
    row = t.numel() // rows if rows else 0
    if sizes is None or len(sizes) == 0:
        if rows % n:
            raise ShapeMismatch(f"{op}: {name}'s first dimension ({rows}) must divide by the world size ({n}) "
                                "when no split sizes are given")
        sizes = [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or sum(sizes) != rows or any(s < 0 for s in sizes):
        raise ShapeMismatch(f"{op}: {name} split sizes {sizes} must be {n} non-negative numbers adding up to "
                            f"its first dimension ({rows})")
    return [s * row for s in sizes]


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op: bool = False):
    """Rank r sends the r-th block of rows of ``input`` to every rank and receives theirs into ``output``
    (blocks in rank order; sizes along dim 0 given by the split sizes, equal blocks by default)."""
    _check(output, "all_to_all_single", "output")
    pg = _member_group(input, group, "all_to_all_single", "input")
    if pg is None:
        return None
    _same(output, input, "all_to_all_single", "output and input", numel=False)
    out_counts = _splits(output, output_split_sizes, pg.size(), "all_to_all_single", "output")
    in_counts = _splits(input, input_split_sizes, pg.size(), "all_to_all_single", "input")
    return _finish(pg._engine(input).all_to_all_single(output, input, out_counts, in_counts), async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op: bool = False):
    """Rank r sends ``input_tensor_list[k]`` to rank k and receives rank k's into ``output_tensor_list[k]``."""
    if _not_member(group, "all_to_all"):
        return None
    pg = _resolve(group)
    n = pg.size()
    outs = _check_list(output_tensor_list, "all_to_all", "output_tensor_list", n)
    ins = _check_list(input_tensor_list, "all_to_all", "input_tensor_list", n)
    for t in outs[1:] + ins:
        _same(t, outs[0], "all_to_all", "the tensors", numel=False)
    in_counts = [t.numel() for t in ins]
    out_counts = [t.numel() for t in outs]
    src = _staged(ins, ins[0], in_counts)
    dst = _stage_like(outs[0], sum(out_counts))
    work = pg._engine(outs[0]).all_to_all_single(dst, src, out_counts, in_counts)
    return _finish(_unstage_when_done(work, dst, outs, out_counts), async_op)


def _peer(pg, rank, group_rank, op: str, what: str) -> int:
    peer = _group_rank(pg, rank, group_rank, op)
    if peer == pg.rank():
        raise ValueError(f"Invalid {what} rank: {what} rank should not be the same as the rank of the current "
                         "process.")
    return peer


def isend(tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None):
    """Start sending ``tensor`` to rank ``dst``; returns a Work."""
    pg = _member_group(tensor, group, "isend")
    if pg is None:
        return None
    return pg._engine(tensor).send(tensor, _peer(pg, dst, group_dst, "isend", "destination"), int(tag))


def irecv(tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None):
    """Start receiving into ``tensor`` from rank ``src`` (any rank when None, MPI only); returns a Work."""
    pg = _member_group(tensor, group, "irecv")
    if pg is None:
        return None
    peer = None if src is None and group_src is None else _peer(pg, src, group_src, "irecv", "source")
    return pg._engine(tensor).recv(tensor, peer, int(tag))


def send(tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None) -> None:
    """Send ``tensor`` to rank ``dst`` (returns once the buffer may be reused)."""
    w = isend(tensor, dst, group, tag, group_dst)
    if w is not None:
        w.wait()


def recv(tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None) -> int:
    """Receive into ``tensor`` from rank ``src`` (any rank when None); returns the sender's global rank."""
    w = irecv(tensor, src, group, tag, group_src)
    if w is None:
        return -1
    w.wait()
    return w.source_rank()


def barrier(group=None, async_op: bool = False, device_ids=None, timeout=None):
    """Wait until every rank of ``group`` reached the barrier."""
    if _not_member(group, "barrier"):
        return None
    pg = _resolve(group)
    if pg._backend == "nccl" and (device_ids or pg._device_index is not None):
        idx = device_ids[0] if device_ids else pg._device_index
        from pylucid.device import device as _dev

        probe = A.wrap(A.empty((1,), A.np.float32, _dev("cuda", idx)), _dev("cuda", idx))
        work = pg._engine(probe).barrier(idx)
    else:
        work = pg._host.barrier()
    if async_op:
        return work
    work.wait(timeout)
    return None


def monitored_barrier(group=None, timeout=None, wait_all_ranks: bool = False) -> None:
    """A barrier on the host engine that raises :class:`DistBackendError` after ``timeout``."""
    if _not_member(group, "monitored_barrier"):
        return None
    pg = _resolve(group)
    pg._host.barrier().wait(pg._timeout if timeout is None else timeout)


# ---------------------------------------------------------------------------------------------------------------------
# object collectives (pickle, through uint8 tensors on the host engine)
# ---------------------------------------------------------------------------------------------------------------------
def _bytes_tensor(data: bytes):
    from pylucid.device import cpu

    return A.wrap(A.np.frombuffer(data, dtype=A.np.uint8).copy(), cpu)


def _ints_tensor(values):
    from pylucid.device import cpu

    return A.wrap(A.np.asarray(values, dtype=A.np.int64), cpu)


def _host_values(t):
    return A.host_copy(t)


def _padded(data: bytes, size: int):
    from pylucid.device import cpu

    buf = A.np.zeros(size, dtype=A.np.uint8)
    buf[:len(data)] = A.np.frombuffer(data, dtype=A.np.uint8)
    return A.wrap(buf, cpu)


def _all_gather_bytes(pg, data: bytes) -> list:
    sizes = _ints_tensor([0] * pg.size())
    pg._host.all_gather_into(sizes, _ints_tensor([len(data)])).wait()
    lens = [int(v) for v in _host_values(sizes)]
    width = max(lens) if lens else 0
    out = _bytes_tensor(bytes(width * pg.size()))
    pg._host.all_gather_into(out, _padded(data, width)).wait()
    raw = _host_values(out).tobytes()
    return [raw[r * width: r * width + lens[r]] for r in range(pg.size())]


def all_gather_object(object_list: list, obj, group=None) -> None:
    """Fill ``object_list`` (``world_size`` entries) with every rank's picklable ``obj``."""
    if _not_member(group, "all_gather_object"):
        return None
    pg = _resolve(group)
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list must have world_size ({pg.size()}) entries, got "
                         f"{len(object_list)}")
    for r, raw in enumerate(_all_gather_bytes(pg, pickle.dumps(obj))):
        object_list[r] = pickle.loads(raw)


def gather_object(obj, object_gather_list=None, dst: int | None = None, group=None,
                  group_dst: int | None = None) -> None:
    """Collect every rank's picklable ``obj`` into ``object_gather_list`` of rank ``dst`` (default 0)."""
    if _not_member(group, "gather_object"):
        return None
    pg = _resolve(group)
    root = _group_rank(pg, dst, group_dst, "gather_object", default0=True)
    if pg.rank() == root and (object_gather_list is None or len(object_gather_list) != pg.size()):
        raise ValueError("gather_object: on the destination rank object_gather_list must have world_size entries")
    data = pickle.dumps(obj)
    sizes = _ints_tensor([0] * pg.size())
    pg._host.all_gather_into(sizes, _ints_tensor([len(data)])).wait()
    lens = [int(v) for v in _host_values(sizes)]
    width = max(lens)
    out = _bytes_tensor(bytes(width * pg.size())) if pg.rank() == root else None
    pg._host.gather_into(out, _padded(data, width), root).wait()
    if pg.rank() == root:
        raw = _host_values(out).tobytes()
        for r in range(pg.size()):
            object_gather_list[r] = pickle.loads(raw[r * width: r * width + lens[r]])


def broadcast_object_list(object_list: list, src: int | None = None, group=None, device=None,
                          group_src: int | None = None) -> None:
    """Replace ``object_list``'s entries on every rank by those of rank ``src`` (default 0); the list
    must have the same length on every rank."""
    if _not_member(group, "broadcast_object_list"):
        return None
    pg = _resolve(group)
    root = _group_rank(pg, src, group_src, "broadcast_object_list", default0=True)
    mine = pg.rank() == root
    blobs = [pickle.dumps(o) for o in object_list] if mine else []
    sizes = _ints_tensor([len(b) for b in blobs] if mine else [0] * len(object_list))
    pg._host.broadcast(sizes, root).wait()
    lens = [int(v) for v in _host_values(sizes)]
    payload = _bytes_tensor(b"".join(blobs) if mine else bytes(sum(lens)))
    pg._host.broadcast(payload, root).wait()
    if not mine:
        raw = _host_values(payload).tobytes()
        off = 0
        for i, n in enumerate(lens):
            object_list[i] = pickle.loads(raw[off:off + n])
            off += n


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list=None, src: int | None = None,
                        group=None, group_src: int | None = None) -> None:
    """Rank ``src`` (default 0) sends ``scatter_object_input_list[r]`` to rank r, which finds it in
    ``scatter_object_output_list[0]``."""
    if _not_member(group, "scatter_object_list"):
        return None
    pg = _resolve(group)
    root = _group_rank(pg, src, group_src, "scatter_object_list", default0=True)
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a list of at least one element")
    mine = pg.rank() == root
    if mine and (scatter_object_input_list is None or len(scatter_object_input_list) != pg.size()):
        raise ValueError("scatter_object_list: on the source rank scatter_object_input_list must have world_size "
                         "entries")
    blobs = [pickle.dumps(o) for o in scatter_object_input_list] if mine else []
    sizes = _ints_tensor([len(b) for b in blobs] if mine else [0] * pg.size())
    pg._host.broadcast(sizes, root).wait()
    lens = [int(v) for v in _host_values(sizes)]
    width = max(lens)
    src_t = _bytes_tensor(b"".join(b.ljust(width, b"\0") for b in blobs)) if mine else None
    out = _bytes_tensor(bytes(width))
    pg._host.scatter_from(out, src_t, root).wait()
    scatter_object_output_list[0] = pickle.loads(_host_values(out).tobytes()[:lens[pg.rank()]])
