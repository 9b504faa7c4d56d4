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

from . import _core, _work
from ._core import *  # noqa: F401,F403  (the collectives, groups and process-group API)
from ._work import *  # noqa: F401,F403  (Work, Future and the errors)
from . import optim

__all__ = [*_core.__all__, *_work.__all__, "optim"]
