"""pylucid.nn.parallel: ``DistributedDataParallel`` (data parallelism over processes, see pylucid.distributed)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
