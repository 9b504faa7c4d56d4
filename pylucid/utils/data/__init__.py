"""Data loading in the style of ``torch.utils.data``.

Example:
    >>> import pylucid
    >>> from pylucid.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(pylucid.tensor([[1.0], [2.0], [3.0]]), pylucid.tensor([0, 1, 1]))
    >>> g = pylucid.Generator().manual_seed(0)
    >>> batches = list(DataLoader(ds, batch_size=2, shuffle=True, generator=g))
    >>> [len(y.tolist()) for _, y in batches]
    [2, 1]
"""

from pylucid.utils.data._collate import default_collate, default_convert
from pylucid.utils.data.dataloader import DataLoader, WorkerInfo, get_worker_info
from pylucid.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from pylucid.utils.data.distributed import DistributedSampler
from pylucid.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "DistributedSampler",
    "BatchSampler",
    "DataLoader",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "WorkerInfo",
]
