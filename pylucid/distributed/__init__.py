"""Data-parallel training across processes and GPUs: ``torch.distributed`` on MPI and NCCL.

Start N ranks with the launcher, each running the same script::

    pylucid launch -n 2 train.py --epochs 3        # or: python -m pylucid.distributed.run -n 2 ...

and in the script::

    import pylucid.distributed as dist
    from pylucid.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group()                      # MPI for CPU tensors, NCCL for CUDA ones
    model = DDP(model)                             # same weights everywhere, gradients averaged
    sampler = DistributedSampler(dataset)          # each rank reads its share of the data

The engines are the ones HPC clusters trust: MPI (mpi4py) starts the ranks,
lets them meet and moves CPU tensors; NCCL (``cupy.cuda.nccl``) moves CUDA
tensors, its unique id broadcast over MPI. Importing this package loads
neither; ``init_process_group`` does. Collectives follow PyTorch's signatures
and semantics (in place, ``async_op=True`` returns a :class:`Work`, ``src``
and ``dst`` are global ranks) and time out with :class:`DistBackendError`
instead of hanging when a rank fails. See docs/distributed.md.
"""

from ._core import (
    Backend,
    GroupMember,
    ProcessGroup,
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    broadcast_object_list,
    destroy_process_group,
    gather,
    gather_object,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_node_local_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    irecv,
    is_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    isend,
    monitored_barrier,
    new_group,
    recv,
    reduce,
    reduce_op,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    scatter_object_list,
    send,
)
from ._work import DistBackendError, DistError, DistNetworkError, DistStoreError, Future, Work
from . import optim

__all__ = [
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "reduce_op", "group", "Work", "Future",
    "DistError", "DistBackendError", "DistNetworkError", "DistStoreError",
    "init_process_group", "destroy_process_group", "is_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "get_rank", "get_world_size", "get_backend", "get_global_rank", "get_group_rank",
    "get_process_group_ranks", "get_node_local_rank", "new_group", "barrier", "monitored_barrier",
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "gather", "scatter", "send", "recv", "isend", "irecv", "all_to_all",
    "all_to_all_single", "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
    "optim",
]
