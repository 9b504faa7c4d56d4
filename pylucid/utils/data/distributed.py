"""``DistributedSampler``: each rank of a data-parallel job reads its own share of a dataset.

The shuffled order is PyTorch's, index for index: the permutation is the one
``torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch))``
gives (PyTorch's CPU generator is MT19937 and its ``randperm`` a Fisher-Yates
shuffle drawing ``random() % (n - i)``; both are reproduced here on NumPy's
MT19937), so a job moved between PyTorch and pylucid sees the same batches.
"""

from __future__ import annotations

import math
from typing import Iterator, Sized

from pylucid._interop import np
from pylucid.utils.data.sampler import Sampler

__all__ = ["DistributedSampler"]

# PyTorch draws 32-bit numbers below this size and 64-bit ones from it on
_SMALL_N = (2**32 - 1) // 20


def _torch_randperm(n: int, seed: int) -> list:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()`` (CPU generator)."""
    if n <= 0:
        return []
    bits = np.random.MT19937(0)
    bits._legacy_seeding(int(seed) & 0xFFFFFFFF)  # PyTorch seeds its mt19937 with the seed's low 32 bits
    perm = list(range(n))
    if n == 1:
        return perm
    if n < _SMALL_N:
        draws = bits.random_raw(n - 1).astype(np.int64)
    else:
        pairs = bits.random_raw(2 * (n - 1)).astype(np.uint64).reshape(-1, 2)
        draws = (pairs[:, 0] << np.uint64(32)) | pairs[:, 1]
    steps = (draws % (n - np.arange(n - 1, dtype=draws.dtype))).astype(np.int64).tolist()
    for i, k in enumerate(steps):
        j = i + k
        perm[i], perm[j] = perm[j], perm[i]
    return perm


class DistributedSampler(Sampler[int]):
    """The indices of rank ``rank``'s share of ``dataset`` (PyTorch's ``DistributedSampler``).

    Every rank shuffles with the same seed (``seed + epoch``), pads the order to
    a multiple of ``num_replicas`` by repeating its start (or, with
    ``drop_last=True``, cuts the tail), and takes every ``num_replicas``-th index
    from position ``rank``. Call :meth:`set_epoch` at the start of each epoch,
    before iterating the DataLoader, or every epoch repeats the same order.

    Args:
        dataset: a sized dataset.
        num_replicas: number of ranks (default: the world size of the default process group).
        rank: this rank (default: its rank in the default process group).
        shuffle: shuffle the indices (default True).
        seed: shuffling seed, the same on every rank (default 0).
        drop_last: drop the tail instead of padding (default False).

    Example:
        >>> s = DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=False)
        >>> list(s), len(s)
        ([1, 4, 7, 0], 4)
        >>> s = DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=False, drop_last=True)
        >>> list(s)
        [1, 4, 7]
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            import pylucid.distributed as dist

            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: pass num_replicas and rank, or call "
                                   "pylucid.distributed.init_process_group() first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive integer, got {num_replicas!r}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        indices = _torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``seed + epoch`` for the next iteration's shuffle."""
        self.epoch = epoch
