"""``DataLoader``: batches from a dataset, in the main process or in worker processes.

The semantics are ``torch.utils.data.DataLoader``'s. How the workers run:

* ``num_workers=0``: samples are fetched and collated in the calling process.
* ``num_workers>0``: that many processes (``fork`` on Linux, ``spawn``
  elsewhere; ``multiprocessing_context`` chooses) each take index batches from
  their own queue, in round robin, and send collated batches back on one
  result queue. The main process keeps ``prefetch_factor * num_workers``
  batches in flight and hands them out in sampler order, whatever order the
  workers finish in, so the batches do not depend on ``num_workers``.
* Seeding: every epoch starts by drawing a base seed from the loader's
  ``generator`` (or ``pylucid.default_generator``), also with
  ``num_workers=0``, so the shuffle order is the same with or without workers.
  Worker ``i`` seeds Python's ``random``, NumPy's legacy global RNG and
  ``pylucid.default_generator`` with ``base_seed + i``. PyTorch does not seed
  NumPy; we do, because forked workers otherwise share one NumPy state and
  draw identical "random" augmentations.
* ``persistent_workers=True`` keeps the processes (and their RNG state) from
  one epoch to the next, as PyTorch does; the base seed is drawn once, when
  they start.
* Tensors travel between processes as NumPy arrays through pickling (we
  register a reducer for ``pylucid.Tensor`` with ``ForkingPickler``); a
  tensor that a worker put on an accelerator arrives on the CPU.
* ``pin_memory`` is accepted and ignored: NumPy arrays have no pinned memory,
  and CuPy copies are asynchronous only from buffers it allocated itself.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import pickle
import queue
import random
import signal
import sys
import time
import traceback
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable, Iterator, Sequence

import pylucid
from pylucid._interop import BOOL_TYPES, INTEGER_TYPES, numpy_rng, seed_numpy_global
from pylucid.utils.data._collate import default_collate, default_convert
from pylucid.utils.data.dataset import IterableDataset
from pylucid.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "WorkerInfo"]

# How often a waiting process wakes up to check that its peer is still alive.
_POLL_INTERVAL_S = 0.5
# Base seeds stay below 2**62 so base_seed + worker_id fits any 64-bit seed API.
_SEED_BOUND = 2**62


# --------------------------------------------------------------------- workers


class WorkerInfo:
    """What a worker process knows about itself; see ``get_worker_info``.

    Attributes: ``id`` (0-based worker index), ``num_workers``, ``seed``
    (``base_seed + id``) and ``dataset`` (this worker's copy).
    """

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id: int, num_workers: int, seed: int, dataset: Any) -> None:
        for name, value in zip(self.__slots__, (id, num_workers, seed, dataset)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"WorkerInfo: cannot set attribute {name!r}; it is read-only")

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a ``DataLoader`` worker, its ``WorkerInfo``; in the main process, ``None``.

    Use it in ``IterableDataset.__iter__`` to split the stream between
    workers, or in ``worker_init_fn`` to seed other libraries.

    Example:
        >>> get_worker_info() is None  # not in a worker
        True
    """
    return _worker_info


def _rebuild_tensor(array: Any, requires_grad: bool) -> Any:
    tensor = pylucid.from_numpy(array)
    if requires_grad:
        setter = getattr(tensor, "requires_grad_", None)
        if callable(setter):
            setter(True)
        else:
            tensor.requires_grad = True
    return tensor


def _reduce_tensor(tensor: Any) -> tuple:
    detached = tensor.detach()
    if str(detached.device) != "cpu":
        detached = detached.to("cpu")
    return _rebuild_tensor, (detached.numpy(), bool(tensor.requires_grad))


_tensor_reducer_registered = False


def _register_tensor_reducer() -> None:
    # Lazily, because pylucid.Tensor may not exist yet when this module is
    # imported during pylucid's own import.
    global _tensor_reducer_registered
    if not _tensor_reducer_registered:
        ForkingPickler.register(pylucid.Tensor, _reduce_tensor)
        _tensor_reducer_registered = True


class _ExceptionWrapper:
    """An exception raised in a worker, carried to the main process and re-raised there."""

    def __init__(self, where: str) -> None:
        exc_type, exc, _ = sys.exc_info()
        self.where = where
        self.message = "".join(traceback.format_exception(exc_type, exc, exc.__traceback__))
        try:  # a class defined inside a function cannot be pickled by reference
            pickle.dumps(exc_type)
            self.exc_type: type = exc_type  # type: ignore[assignment]
        except Exception:
            self.exc_type = RuntimeError

    def reraise(self) -> None:
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.message}"
        try:
            exc = self.exc_type(msg)
        except Exception:  # constructor needs other arguments
            raise RuntimeError(msg) from None
        try:
            raise exc
        finally:
            # Break the exception -> traceback -> this frame -> exception cycle,
            # which would keep the iterator (and its worker processes) alive
            # until the cyclic garbage collector runs.
            del exc


class _IterableEnd:
    """Sent by a worker whose ``IterableDataset`` iterator is exhausted."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


class _InfiniteConstantSampler(Sampler[None]):
    # IterableDataset has no indices: each task just says "give me the next one".
    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class _MapFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, index: Any) -> Any:
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class _IterableFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self.iterator))
                except StopIteration:
                    self.ended = True
                    break
            if not data or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.iterator)
        return self.collate_fn(data)


def _make_fetcher(is_iterable: bool, *args: Any) -> _MapFetcher | _IterableFetcher:
    return _IterableFetcher(*args) if is_iterable else _MapFetcher(*args)


def _seed_worker(seed: int) -> None:
    random.seed(seed)
    seed_numpy_global(seed)
    # The default (CPU) generator only: touching an accelerator's RNG in a
    # forked child would initialise the GPU runtime there, which is unsafe.
    pylucid.default_generator.manual_seed(seed)


def _worker_loop(
    is_iterable: bool,
    dataset: Any,
    index_queue: Any,
    result_queue: Any,
    done_event: Any,
    auto_collation: bool,
    collate_fn: Callable,
    drop_last: bool,
    base_seed: int,
    worker_init_fn: Callable[[int], None] | None,
    worker_id: int,
    num_workers: int,
    parent_pid: int,
) -> None:
    """Body of a worker process (module level so that ``spawn`` can import it)."""
    global _worker_info
    # Ctrl-C goes to the main process, which then shuts the workers down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _register_tensor_reducer()
    seed = base_seed + worker_id
    _seed_worker(seed)
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    where = f"in DataLoader worker process {worker_id}"

    init_error: _ExceptionWrapper | None = None
    fetcher = None
    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
        fetcher = _make_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last)
    except Exception:
        init_error = _ExceptionWrapper(where)

    iteration_end = False
    try:
        while True:
            try:
                message = index_queue.get(timeout=_POLL_INTERVAL_S)
            except queue.Empty:
                # Orphaned (the main process died), or shut down without the None
                # arriving (the main process's queue was finalised first).
                if os.getppid() != parent_pid or done_event.is_set():
                    break
                continue
            if message is None:  # shutdown
                break
            if message[0] == "reset":  # a new epoch with persistent workers
                iteration_end = False
                if is_iterable and init_error is None:
                    try:
                        fetcher = _make_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last)
                    except Exception:
                        init_error = _ExceptionWrapper(where)
                continue
            _, epoch, task_idx, index = message
            if done_event.is_set() or iteration_end:
                continue
            if init_error is not None:
                data: Any = init_error
                init_error = None
            else:
                try:
                    data = fetcher.fetch(index)  # type: ignore[union-attr]
                except StopIteration:
                    if not is_iterable:
                        data = _ExceptionWrapper(where)
                    else:
                        data = _IterableEnd(worker_id)
                        iteration_end = True
                except Exception:
                    data = _ExceptionWrapper(where)
            # Pickle here, not in the queue's feeder thread: an unpicklable
            # batch then becomes an error the main process sees, not a hang.
            try:
                payload = bytes(ForkingPickler.dumps((epoch, task_idx, data)))
            except Exception:
                payload = bytes(ForkingPickler.dumps((epoch, task_idx, _ExceptionWrapper(where))))
            result_queue.put(payload)
            del data
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        # Do not block exit on flushing results nobody will read.
        result_queue.cancel_join_thread()
        result_queue.close()


# ------------------------------------------------------------------ iterators


class _BaseIter:
    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._is_iterable = isinstance(loader.dataset, IterableDataset)
        self._auto_collation = loader._auto_collation
        self._collate_fn = loader.collate_fn
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._length = loader._length_or_none()
        # Draw the epoch's base seed before the sampler draws its permutation,
        # in the same order for every num_workers, as PyTorch does.
        self._base_seed = loader._draw_base_seed()
        self._sampler_iter = iter(self._index_sampler)

    def __iter__(self) -> _BaseIter:
        return self

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("DataLoader: the dataset has no __len__, so the loader has none")
        return self._length


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._fetcher = _make_fetcher(
            self._is_iterable, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def __next__(self) -> Any:
        index = next(self._sampler_iter)
        return self._fetcher.fetch(index)


class _MultiProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        self._shutdown = True  # nothing to shut down until the workers exist
        super().__init__(loader)
        _register_tensor_reducer()
        ctx = loader._context()
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor * loader.num_workers  # type: ignore[operator]
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._epoch = 0
        self._done_event = ctx.Event()
        self._result_queue = ctx.Queue()
        self._index_queues: list[Any] = []
        self._workers: list[Any] = []
        self._shutdown = False
        for worker_id in range(self._num_workers):
            index_queue = ctx.Queue()
            # The main process must not block at exit flushing indices to dead workers.
            index_queue.cancel_join_thread()
            worker = ctx.Process(
                target=_worker_loop,
                args=(
                    self._is_iterable,
                    self._dataset,
                    index_queue,
                    self._result_queue,
                    self._done_event,
                    self._auto_collation,
                    self._collate_fn,
                    self._drop_last,
                    self._base_seed,
                    loader.worker_init_fn,
                    worker_id,
                    self._num_workers,
                    os.getpid(),
                ),
                daemon=True,
            )
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)
        self._reset(loader, first_iter=True)

    def _reset(self, loader: DataLoader, first_iter: bool = False) -> None:
        if not first_iter:
            self._sampler_iter = iter(self._index_sampler)
            self._epoch += 1
            for index_queue in self._index_queues:
                index_queue.put(("reset", self._epoch))
        self._send_idx = 0
        self._rcvd_idx = 0
        # send_idx -> (worker_id,) while pending, (worker_id, data) once arrived early.
        self._task_info: dict[int, tuple] = {}
        self._tasks_outstanding = 0
        self._worker_active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch):
            self._try_put_index()

    def _try_put_index(self) -> None:
        if self._tasks_outstanding >= self._prefetch:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._worker_active[worker_id]:
                break
        else:
            return  # every worker has finished its stream
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        self._index_queues[worker_id].put(("task", self._epoch, self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _get_result(self) -> tuple[int, Any]:
        deadline = None if self._timeout == 0 else time.monotonic() + self._timeout
        while True:
            wait = _POLL_INTERVAL_S
            if deadline is not None:
                wait = min(wait, max(deadline - time.monotonic(), 0.0))
            try:
                payload = self._result_queue.get(timeout=wait)
            except queue.Empty:
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown_workers(force=True)
                    details = ", ".join(f"pid {w.pid} exit code {w.exitcode}" for w in dead)
                    raise RuntimeError(f"DataLoader worker(s) exited unexpectedly ({details})") from None
                if deadline is not None and time.monotonic() >= deadline:
                    self._shutdown_workers(force=True)
                    raise RuntimeError(
                        f"DataLoader timed out after {self._timeout} seconds waiting for a batch"
                    ) from None
                continue
            epoch, task_idx, data = pickle.loads(payload)
            if epoch != self._epoch:
                continue  # a leftover from an epoch that was abandoned early
            return task_idx, data

    def __next__(self) -> Any:
        while True:
            # Skip tasks owned by workers whose stream ended: they never answer.
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._worker_active[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                return self._deliver(info[1])
            task_idx, data = self._get_result()
            self._tasks_outstanding -= 1
            if isinstance(data, _IterableEnd):
                self._worker_active[data.worker_id] = False
                self._try_put_index()
                continue
            if task_idx != self._rcvd_idx:
                self._task_info[task_idx] += (data,)
                continue
            del self._task_info[task_idx]
            return self._deliver(data)

    def _deliver(self, data: Any) -> Any:
        self._rcvd_idx += 1
        self._try_put_index()
        if isinstance(data, _ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self, force: bool = False) -> None:
        """Stop the workers: politely (finish, then exit), or with ``force`` at once (after an error)."""
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for index_queue in self._index_queues:
                try:
                    index_queue.put(None)
                except Exception:
                    pass
            for worker in self._workers:
                worker.join(timeout=0.0 if force else 5.0)
                if worker.is_alive():
                    worker.terminate()
                    worker.join(timeout=1.0)
            for index_queue in self._index_queues:
                index_queue.close()
            self._result_queue.cancel_join_thread()
            self._result_queue.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __del__(self) -> None:
        self._shutdown_workers()


# ----------------------------------------------------------------- DataLoader


def _default_context_name() -> str:
    # fork starts workers fast and shares the dataset copy-on-write; it is only
    # safe on Linux (macOS system frameworks break after fork).
    methods = multiprocessing.get_all_start_methods()
    return "fork" if sys.platform.startswith("linux") and "fork" in methods else "spawn"


class DataLoader:
    """Iterate over ``dataset`` in (optionally shuffled) collated batches.

    Args:
        dataset: a map-style dataset (``__getitem__`` + ``__len__``, e.g. a
            list or ``TensorDataset``) or an ``IterableDataset``.
        batch_size: samples per batch; ``None`` turns batching off (each
            sample goes through ``default_convert`` only).
        shuffle: a new random order every epoch (a ``RandomSampler`` drawing
            from ``generator``).
        sampler: indices to read (exclusive with ``shuffle``).
        batch_sampler: lists of indices, one per batch (exclusive with
            ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last``).
        num_workers: worker processes; 0 loads in this process.
        collate_fn: turns a list of samples into a batch; default ``default_collate``.
        pin_memory: accepted for compatibility; no effect (see the module docs).
        drop_last: drop the last batch if it is short.
        timeout: seconds to wait for a batch from the workers; 0 waits forever.
        worker_init_fn: called as ``worker_init_fn(worker_id)`` in each worker,
            after seeding.
        generator: a ``pylucid.Generator`` for the shuffle order and the
            workers' base seed; default ``pylucid.default_generator``.
        persistent_workers: keep the workers alive between epochs.
        prefetch_factor: batches in flight per worker (default 2 with workers).
        multiprocessing_context: ``"fork"``, ``"spawn"``, ``"forkserver"`` or a
            context object; default fork on Linux, spawn elsewhere. With
            spawn, the dataset and functions must be picklable.

    Raises:
        TypeError: an argument of the wrong type (``batch_size=1.5``).
        ValueError: a bad value or a forbidden combination of arguments.

    Example:
        >>> x = pylucid.tensor([[0.0], [1.0], [2.0], [3.0], [4.0]])
        >>> y = pylucid.tensor([0, 1, 0, 1, 0])
        >>> from pylucid.utils.data import TensorDataset
        >>> loader = DataLoader(TensorDataset(x, y), batch_size=2)
        >>> [(xb.shape, yb.tolist()) for xb, yb in loader]
        [((2, 1), [0, 1]), ((2, 1), [0, 1]), ((1, 1), [0])]
    """

    _frozen_attributes = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = False,
        sampler: Sampler | Sequence | None = None,
        batch_sampler: Sampler | Sequence | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        generator: Any = None,
        persistent_workers: bool = False,
        prefetch_factor: int | None = None,
        multiprocessing_context: str | Any = None,
    ) -> None:
        def bad_type(name: str, value: Any, accepted: str) -> TypeError:
            return TypeError(f"DataLoader: {name} must be {accepted}, got {type(value).__name__} ({value!r})")

        if batch_size is not None:
            if isinstance(batch_size, bool) or not isinstance(batch_size, INTEGER_TYPES):
                raise bad_type("batch_size", batch_size, "a positive int or None")
            if batch_size <= 0:
                raise ValueError(
                    f"DataLoader: batch_size should be a positive integer value, got batch_size={batch_size}"
                )
            batch_size = int(batch_size)
        if isinstance(num_workers, bool) or not isinstance(num_workers, INTEGER_TYPES):
            raise bad_type("num_workers", num_workers, "a non-negative int")
        if num_workers < 0:
            raise ValueError(
                f"DataLoader: num_workers should be non-negative, got {num_workers}; "
                "use num_workers=0 to load in the main process"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise bad_type("timeout", timeout, "a non-negative number of seconds")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout should be non-negative, got {timeout}")
        for name, value in (
            ("shuffle", shuffle),
            ("drop_last", drop_last),
            ("pin_memory", pin_memory),
            ("persistent_workers", persistent_workers),
        ):
            if value is not None and not isinstance(value, BOOL_TYPES):
                raise bad_type(name, value, "a bool")
        for name, value in (("collate_fn", collate_fn), ("worker_init_fn", worker_init_fn)):
            if value is not None and not callable(value):
                raise bad_type(name, value, "callable or None")
        if generator is not None:
            try:
                numpy_rng(generator, "DataLoader")
            except TypeError:
                raise bad_type("generator", generator, "a pylucid.Generator or None") from None
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "DataLoader: prefetch_factor only applies with num_workers > 0; "
                f"got prefetch_factor={prefetch_factor} with num_workers=0 (set it to None)"
            )
        if prefetch_factor is not None and (
            isinstance(prefetch_factor, bool)
            or not isinstance(prefetch_factor, INTEGER_TYPES)
            or prefetch_factor <= 0
        ):
            raise ValueError(f"DataLoader: prefetch_factor should be a positive int, got {prefetch_factor!r}")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers=True needs num_workers > 0")

        if isinstance(dataset, IterableDataset):
            # A stream has no indices: ordering arguments make no sense.
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value is not None and value is not False:
                    raise ValueError(
                        f"DataLoader with IterableDataset: expected unspecified {name} option, but got {name}={value!r}"
                    )
        elif (
            not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__"))
            and sampler is None
            and batch_sampler is None
        ):
            raise TypeError(
                "DataLoader: dataset must be a map-style dataset (with __getitem__ and __len__) "
                f"or an IterableDataset, got {type(dataset).__name__}"
            )
        if shuffle and sampler is not None:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                    "shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "DataLoader: batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
            )

        if sampler is None:
            if isinstance(dataset, IterableDataset):
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))

        if multiprocessing_context is None:
            multiprocessing_context = _default_context_name() if num_workers > 0 else None
        if isinstance(multiprocessing_context, str):
            methods = multiprocessing.get_all_start_methods()
            if multiprocessing_context not in methods:
                raise ValueError(
                    f"DataLoader: multiprocessing_context={multiprocessing_context!r} is not available "
                    f"here; accepted: {methods}"
                )

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self._auto_collation = batch_sampler is not None
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.pin_memory = bool(pin_memory)
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.persistent_workers = bool(persistent_workers)
        self.prefetch_factor = None if prefetch_factor is None else int(prefetch_factor)
        self.multiprocessing_context = multiprocessing_context
        self._iterator: _MultiProcessIter | None = None
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        # As in PyTorch: changing these after construction would silently
        # desynchronise the samplers built from them.
        if getattr(self, "_initialized", False) and name in self._frozen_attributes:
            raise ValueError(f"DataLoader: {name} attribute should not be set after DataLoader is initialized")
        super().__setattr__(name, value)

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def _context(self) -> Any:
        ctx = self.multiprocessing_context
        return multiprocessing.get_context(ctx) if isinstance(ctx, str) else ctx

    def _draw_base_seed(self) -> int:
        return int(numpy_rng(self.generator, "DataLoader").integers(0, _SEED_BOUND))

    def _length_or_none(self) -> int | None:
        try:
            return len(self)
        except TypeError:
            return None

    def __iter__(self) -> Iterator[Any]:
        """A fresh iterator per epoch; with persistent workers, the same workers."""
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None or self._iterator._shutdown:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        return _MultiProcessIter(self)

    def __len__(self) -> int:
        """Batches per epoch (for an ``IterableDataset``: from ``len(dataset)``, if it has one)."""
        if isinstance(self.dataset, IterableDataset):
            if not hasattr(self.dataset, "__len__"):
                raise TypeError(f"DataLoader: {type(self.dataset).__name__} has no __len__")
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
            return n
        return len(self._index_sampler)
