"""Samplers: which indices a ``DataLoader`` reads, and in which order.

All follow ``torch.utils.data``. Random samplers draw from a
``pylucid.Generator`` (its NumPy stream); with ``generator=None`` they draw
from ``pylucid.default_generator`` at the start of every epoch, so
``pylucid.manual_seed`` fixes the order. The random streams are NumPy's, not
PyTorch's: same seed, different (but equally valid) permutations.
"""

from __future__ import annotations

from typing import Any, Generic, Iterable, Iterator, Sequence, Sized, TypeVar

import pylucid
from pylucid._interop import BOOL_TYPES, INTEGER_TYPES, numpy_rng

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
]

T_co = TypeVar("T_co", covariant=True)


def _check_positive_int(value: Any, name: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, INTEGER_TYPES) or value <= 0:
        raise ValueError(f"{where}: {name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


def _check_bool(value: Any, name: str, where: str) -> bool:
    if not isinstance(value, BOOL_TYPES):
        raise ValueError(f"{where}: {name} should be a boolean value, but got {name}={value!r}")
    return bool(value)


class Sampler(Generic[T_co]):
    """Base class: iterating a sampler yields indices (or lists of indices).

    Example:
        >>> class Evens(Sampler):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         return iter(range(0, self.n, 2))
        ...     def __len__(self):
        ...         return (self.n + 1) // 2
        >>> list(Evens(5))
        [0, 2, 4]
    """

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``.

    Example:
        >>> list(SequentialSampler("abc"))
        [0, 1, 2]
    """

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices: a fresh permutation each epoch, or draws with replacement.

    Args:
        data_source: the dataset (only its length is used).
        replacement: draw ``num_samples`` indices independently (with
            repetition) instead of permuting.
        num_samples: how many indices per epoch; default ``len(data_source)``.
            Without replacement and larger than the dataset, whole
            permutations are chained (PyTorch's behaviour).
        generator: a ``pylucid.Generator``; ``None`` uses the default one.

    Example:
        >>> g = pylucid.Generator().manual_seed(0)
        >>> sorted(RandomSampler(range(5), generator=g))
        [0, 1, 2, 3, 4]
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Any = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = _check_bool(replacement, "replacement", "RandomSampler")
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None:
            _check_positive_int(num_samples, "num_samples", "RandomSampler")

    @property
    def num_samples(self) -> int:
        # Read lazily: the dataset may change size between construction and use.
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = numpy_rng(self.generator, "RandomSampler")
        if n == 0:
            return
        if self.replacement:
            # Chunks of 32 as in PyTorch: bounded memory for huge num_samples.
            remaining = self.num_samples
            while remaining > 0:
                chunk = min(32, remaining)
                yield from rng.integers(0, n, size=chunk).tolist()
                remaining -= chunk
        else:
            for _ in range(self.num_samples // n):
                yield from rng.permutation(n).tolist()
            yield from rng.permutation(n)[: self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices, in a fresh random order each epoch.

    Example:
        >>> g = pylucid.Generator().manual_seed(0)
        >>> sorted(SubsetRandomSampler([10, 20, 30], generator=g))
        [10, 20, 30]
    """

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = numpy_rng(self.generator, "SubsetRandomSampler")
        for i in rng.permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """Indices ``0..len(weights)-1`` drawn with probability proportional to ``weights``.

    Args:
        weights: non-negative, finite, not all zero (a sequence, NumPy array or
            1-D tensor); they need not sum to one.
        num_samples: how many indices per epoch.
        replacement: with replacement (the default) an index can repeat;
            without, ``num_samples`` may not exceed the number of non-zero weights.
        generator: a ``pylucid.Generator``; ``None`` uses the default one.

    Example:
        >>> g = pylucid.Generator().manual_seed(0)
        >>> list(WeightedRandomSampler([0.0, 1.0, 0.0], 3, generator=g))
        [1, 1, 1]
    """

    def __init__(
        self,
        weights: Sequence[float] | Any,
        num_samples: int,
        replacement: bool = True,
        generator: Any = None,
    ) -> None:
        self.num_samples = _check_positive_int(num_samples, "num_samples", "WeightedRandomSampler")
        self.replacement = _check_bool(replacement, "replacement", "WeightedRandomSampler")
        # a float64 CPU tensor, as PyTorch's torch.as_tensor(weights, dtype=torch.double)
        if isinstance(weights, pylucid.Tensor):
            w = weights.detach().to(device="cpu", dtype=pylucid.float64)
        else:
            w = pylucid.tensor(weights, dtype=pylucid.float64)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1-D sequence, got shape {tuple(w.shape)}")
        if w.numel() == 0 or not bool(pylucid.isfinite(w).all()) or bool((w < 0).any()) or w.sum().item() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, non-negative and not all zero")
        nonzero = int(pylucid.count_nonzero(w))
        if not self.replacement and self.num_samples > nonzero:
            raise ValueError(
                f"WeightedRandomSampler: cannot draw num_samples={self.num_samples} without "
                f"replacement from {nonzero} non-zero weights"
            )
        self.weights = w
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = numpy_rng(self.generator, "WeightedRandomSampler")
        p = (self.weights / self.weights.sum()).numpy()
        yield from rng.choice(len(p), size=self.num_samples, replace=self.replacement, p=p).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Group the indices of ``sampler`` into lists of ``batch_size``.

    Args:
        sampler: any iterable of indices.
        batch_size: positive int.
        drop_last: drop the last, short batch.

    Example:
        >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
        [[0, 1], [2, 3], [4]]
        >>> list(BatchSampler(range(5), batch_size=2, drop_last=True))
        [[0, 1], [2, 3]]
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        self.batch_size = _check_positive_int(batch_size, "batch_size", "BatchSampler")
        self.drop_last = _check_bool(drop_last, "drop_last", "BatchSampler")
        self.sampler = sampler

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size
