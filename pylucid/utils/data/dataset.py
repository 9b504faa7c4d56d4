"""Datasets: the map-style and iterable protocols and the usual combinators.

Everything follows ``torch.utils.data``: a map-style ``Dataset`` implements
``__getitem__`` and ``__len__``; an ``IterableDataset`` implements
``__iter__``. ``TensorDataset``, ``ConcatDataset``, ``ChainDataset``,
``Subset`` and ``random_split`` combine them.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Generic, Iterable, Iterator, Sequence, TypeVar

import pylucid
from pylucid._interop import INTEGER_TYPES, numpy_rng

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)


def _permutation(n: int, generator: Any, where: str) -> list[int]:
    # the generator's NumPy stream, as Python ints (they index any dataset)
    return numpy_rng(generator, where).permutation(n).tolist()


class Dataset(Generic[T_co]):
    """A map-style dataset: ``dataset[i]`` for ``0 <= i < len(dataset)``.

    Subclasses implement ``__getitem__`` (and ``__len__``, which the default
    samplers need). ``a + b`` concatenates two datasets.

    Example:
        >>> class Squares(Dataset):
        ...     def __len__(self):
        ...         return 4
        ...     def __getitem__(self, i):
        ...         return i * i
        >>> [Squares()[i] for i in range(4)]
        [0, 1, 4, 9]
    """

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A dataset that is a stream: implement ``__iter__``.

    With ``num_workers > 0`` every worker iterates its own copy; use
    ``pylucid.utils.data.get_worker_info()`` inside ``__iter__`` to give each
    worker its share, or every sample is produced once per worker.

    Example:
        >>> class Count(IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(3))
        >>> list(Count())
        [0, 1, 2]
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other: Dataset[T_co]) -> ChainDataset[T_co]:  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Samples are the i-th rows of tensors that share their first dimension.

    Example:
        >>> x = pylucid.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        >>> y = pylucid.tensor([0, 1, 0])
        >>> ds = TensorDataset(x, y)
        >>> len(ds), ds[1][0].tolist(), ds[1][1].item()
        (3, [3.0, 4.0], 1)
    """

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor, got none")
        sizes = []
        for i, t in enumerate(tensors):
            if not isinstance(t, pylucid.Tensor):
                raise TypeError(f"TensorDataset: argument {i} must be a pylucid.Tensor, got {type(t).__name__}")
            if len(t.shape) == 0:
                raise ValueError(f"TensorDataset: argument {i} is 0-d; tensors need a first dimension")
            sizes.append(t.shape[0])
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"TensorDataset: size mismatch between tensors; first dimensions are {sizes}")
        self.tensors = tuple(tensors)

    def __getitem__(self, index: int) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset[T_co]):
    """Several map-style datasets one after the other.

    Example:
        >>> ds = ConcatDataset([[1, 2], [3, 4, 5]])
        >>> len(ds), ds[2], ds[-1]
        (5, 3, 5)
    """

    def __init__(self, datasets: Iterable[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset: does not support IterableDataset; use ChainDataset")
        self.cumulative_sizes: list[int] = []
        total = 0
        for d in self.datasets:
            total += len(d)  # type: ignore[arg-type]
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> T_co:
        n = len(self)
        if index < 0:
            if -index > n:
                raise ValueError(f"ConcatDataset: absolute value of index {index} should not exceed dataset length {n}")
            index += n
        if index >= n:
            raise IndexError(f"ConcatDataset: index {index} out of range for length {n}")
        which = bisect.bisect_right(self.cumulative_sizes, index)
        offset = index if which == 0 else index - self.cumulative_sizes[which - 1]
        return self.datasets[which][offset]


class ChainDataset(IterableDataset[T_co]):
    """Several iterable datasets one after the other (lazily).

    Example:
        >>> list(ChainDataset([range(2), range(3)]))
        [0, 1, 0, 1, 2]
    """

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[T_co]:
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order.

    Example:
        >>> s = Subset(["a", "b", "c", "d"], [3, 0])
        >>> len(s), s[0], s[1]
        (2, 'd', 'a')
    """

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> T_co:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        # Lets a dataset with a batched __getitems__ serve a whole batch at once.
        inner = getattr(self.dataset, "__getitems__", None)
        if callable(inner):
            return inner([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def _resolve_lengths(n: int, lengths: Sequence[int | float]) -> list[int]:
    """Turn fractions into counts the way PyTorch does.

    ``floor(n * f)`` each, then the remainder goes one by one to the splits in
    order (round robin), so counts differ by at most one from the exact share.
    """
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split: lengths must be a non-empty sequence")
    all_int = all(isinstance(x, INTEGER_TYPES) and not isinstance(x, bool) for x in lengths)
    if not all_int and math.isclose(sum(lengths), 1.0) and sum(lengths) <= 1.0 + 1e-9:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction at index {i} is {frac}, expected 0 <= f <= 1")
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        return counts
    if not all_int:
        raise ValueError(
            "random_split: lengths must be all ints summing to the dataset length, "
            f"or fractions summing to 1; got {lengths}"
        )
    counts = [int(x) for x in lengths]
    if any(c < 0 for c in counts):
        raise ValueError(f"random_split: lengths must be non-negative, got {counts}")
    if sum(counts) != n:
        raise ValueError(
            f"random_split: sum of input lengths ({sum(counts)}) does not equal the length of the input dataset ({n})"
        )
    return counts


def random_split(dataset: Any, lengths: Sequence[int | float], generator: Any = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets.

    Args:
        dataset: a map-style dataset (anything with ``__len__`` and ``__getitem__``).
        lengths: the sizes (ints summing to ``len(dataset)``) or fractions
            summing to 1 (the leftover from flooring goes round robin to the
            first splits, as in PyTorch).
        generator: a ``pylucid.Generator``; ``None`` uses the default generator.

    Example:
        >>> g = pylucid.Generator().manual_seed(0)
        >>> train, val = random_split(range(10), [0.8, 0.2], generator=g)
        >>> len(train), len(val), sorted(list(train) + list(val)) == list(range(10))
        (8, 2, True)
    """
    counts = _resolve_lengths(len(dataset), lengths)
    order = _permutation(sum(counts), generator, "random_split")
    splits = []
    start = 0
    for c in counts:
        splits.append(Subset(dataset, order[start : start + c]))
        start += c
    return splits
