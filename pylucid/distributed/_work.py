"""Work handles, futures, the collective timeout and the distributed errors.

A collective started with ``async_op=True`` returns a :class:`Work`; ``wait()``
blocks until it finished (MPI) or makes the current CUDA stream wait for it
(NCCL), and raises :class:`DistBackendError` when it did not finish within the
process group's timeout: a rank that died or never reached the collective
then ends the job with a clear message instead of a hang.
"""

from __future__ import annotations

import os
import time

from pylucid.errors import LucidError

__all__ = ["DistError", "DistBackendError", "DistNetworkError", "DistStoreError", "Work", "Future",
           "DEFAULT_TIMEOUT_S", "spin_until"]

#: PyTorch's default process-group timeout (30 minutes); ``PYLUCID_DIST_TIMEOUT`` (seconds) overrides it
DEFAULT_TIMEOUT_S = 1800.0


class DistError(LucidError):
    """Base class of the errors of ``pylucid.distributed``."""


class DistBackendError(DistError):
    """A communication backend (MPI, NCCL) failed or timed out."""


class DistNetworkError(DistError):
    """The network between the ranks failed."""


class DistStoreError(DistError):
    """A rendezvous store failed (pylucid rendezvous through MPI: raised for unsupported stores)."""


for _cls in (DistError, DistBackendError, DistNetworkError, DistStoreError):
    _cls.__module__ = "pylucid.distributed"


#: seconds a wait polls without giving up its core, when the machine has a core per runnable process
#: (set by ``init_process_group`` through :func:`set_spin`)
_spin_s = 2e-4
_cores = os.cpu_count() or 1
_busy = [0.0, True]  # when the load average was read, whether the machine was oversubscribed then


def set_spin(ranks_here: int, cores: int) -> None:
    """Choose how long waits poll before yielding: ``ranks_here`` ranks of the job share ``cores`` cores.

    A wait that is not over within 0.2 ms yields the core between polls. A ``sched_yield``
    hands the core to another runnable process for a whole time slice (milliseconds), which
    is what a rank should do when the peer it waits for needs this very core, and which costs
    mid-sized collectives (1 MB moves in a fraction of a millisecond) most of their speed when
    nobody does. So with a core per rank, a wait polls without yielding for up to 20 ms (MPI's
    own blocking waits busy-poll as well) while the machine is not oversubscribed: its load average (read at most
    once a second) is below its cores + 1.
    """
    global _spin_s, _cores
    _cores = max(1, cores)
    _spin_s = 2e-2 if ranks_here <= _cores else 2e-4


def _spin_window(now: float) -> float:
    if _spin_s <= 2e-4:
        return _spin_s
    if now - _busy[0] > 1.0:
        _busy[0] = now
        _busy[1] = os.getloadavg()[0] >= _cores + 1
    return 2e-4 if _busy[1] else _spin_s


def spin_until(test, deadline: float, on_timeout) -> None:
    """Call ``test()`` until it returns True; ``on_timeout(waited_s)`` (which raises) past ``deadline``.

    MPI without an asynchronous progress thread moves data only inside MPI calls,
    so the wait keeps calling ``test`` (each call drives the progress engine). It
    polls without pause for the spin window of :func:`set_spin`, then yields the
    core between calls, and after a second of waiting (a late rank, not data in
    flight) it also sleeps 0.2 ms per call, so idle ranks do not starve the ones
    still computing on a shared machine.
    """
    if test():
        return
    start = time.monotonic()
    spin = None
    n = 0
    yield_ = os.sched_yield
    while not test():
        n += 1
        if n & 15 == 0:
            now = time.monotonic()
            waited = now - start
            if now > deadline:
                on_timeout(waited)
            if waited > 1.0:
                time.sleep(2e-4)
            elif waited > 2e-4:
                if spin is None:
                    spin = _spin_window(now)
                if waited > spin:
                    yield_()


class Future:
    """The result of an asynchronous operation (PyTorch's ``torch.futures.Future``, single-threaded).

    ``wait()`` completes it and returns its value; ``then(fn)`` gives a future of
    ``fn(this_future)``, run when this one completes.

    >>> f = Future()
    >>> g = f.then(lambda fut: fut.value() * 2)
    >>> f.set_result(21); g.wait()
    42
    """

    __slots__ = ("_done", "_value", "_exc", "_callbacks", "_wait_fn", "_poll_fn")

    def __init__(self) -> None:
        self._done = False
        self._value = None
        self._exc = None
        self._callbacks: list = []
        self._wait_fn = None  # completes the future (blocking)
        self._poll_fn = None  # completes it if that is possible without blocking; returns done

    def done(self) -> bool:
        if not self._done and self._poll_fn is not None:
            self._poll_fn()
        return self._done

    def wait(self):
        if not self._done:
            if self._wait_fn is None:
                raise RuntimeError("Future.wait: this future has no result yet and nothing can produce one")
            self._wait_fn()
        if self._exc is not None:
            raise self._exc
        return self._value

    def value(self):
        if not self._done:
            raise RuntimeError("Future.value: the future is not completed yet; call wait()")
        if self._exc is not None:
            raise self._exc
        return self._value

    def set_result(self, result) -> None:
        if self._done:
            raise RuntimeError("Future.set_result: the future is already completed")
        self._value = result
        self._done = True
        self._run_callbacks()

    def set_exception(self, exc: BaseException) -> None:
        if self._done:
            raise RuntimeError("Future.set_exception: the future is already completed")
        self._exc = exc
        self._done = True
        self._run_callbacks()

    def _run_callbacks(self) -> None:
        cbs, self._callbacks = self._callbacks, []
        for cb in cbs:
            cb(self)

    def add_done_callback(self, callback) -> None:
        """Run ``callback(self)`` when the future completes (now, if it already has)."""
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def then(self, callback) -> "Future":
        """A future of ``callback(self)``; an exception of ``callback`` becomes that future's exception."""
        child = Future()

        def resolve(parent):
            try:
                child.set_result(callback(parent))
            except BaseException as exc:  # handed to whoever waits on the child
                child.set_exception(exc)

        child._wait_fn = self.wait
        child._poll_fn = self.done
        self.add_done_callback(resolve)
        return child


class Work:
    """Handle of a started collective (PyTorch's ``Work``).

    Subclasses implement ``_test()`` (complete if possible, without blocking;
    returns done) and ``_block(deadline)``. ``finishers`` run once, in order,
    when the communication is complete (copy-back of staged buffers, scaling).
    """

    def __init__(self, op: str, group, timeout: float, outputs=(), finishers=None) -> None:
        self._op = op
        self._group = group
        self._timeout = timeout
        self._outputs = list(outputs)
        self._finishers = [] if finishers is None else list(finishers)
        self._done = False
        self._exc = None
        self._started = time.monotonic()
        self._future = None
        self._source = -1

    # -- subclass hooks ------------------------------------------------------------
    def _test(self) -> bool:
        return True

    def _block(self, deadline: float) -> None:
        spin_until(self._test, deadline, self._timed_out)

    # -- shared logic --------------------------------------------------------------
    def _finish(self) -> None:
        fins, self._finishers = self._finishers, []
        for fn in fins:
            fn()
        self._done = True
        if self._future is not None and not self._future._done:
            self._future.set_result(self._outputs)

    def add_finisher(self, fn) -> None:
        """Run ``fn()`` after the communication completes (at once if it already has)."""
        if self._done:
            fn()
        else:
            self._finishers.append(fn)

    def _timed_out(self, waited: float) -> None:
        g = self._group
        where = f"process group {g.group_name!r} (rank {g.rank()} of {g.size()})" if g is not None else "process"
        exc = DistBackendError(
            f"{self._op} did not complete within the timeout ({self._timeout:g} s; waited {waited:.1f} s) on {where}: "
            "another rank has failed, is stuck, or did not call the same collective in the same order. "
            "Set the timeout with init_process_group(timeout=...) or pylucid launch --timeout SECONDS."
        )
        self._exc = exc
        raise exc

    def is_completed(self) -> bool:
        """Whether the collective finished (drives MPI progress; never blocks)."""
        if not self._done and self._exc is None and self._test():
            self._finish()
        return self._done

    def wait(self, timeout=None) -> bool:
        """Block until the collective finished; raises :class:`DistBackendError` past the timeout
        (``timeout`` in seconds or a ``timedelta``; default: the process group's)."""
        if self._exc is not None:
            raise self._exc
        if not self._done:
            t = self._timeout if timeout is None else _seconds(timeout)
            self._block(self._started + t if timeout is None else time.monotonic() + t)
            self._finish()
        return True

    synchronize = wait

    def is_success(self) -> bool:
        return self._done and self._exc is None

    def exception(self):
        return self._exc

    def result(self) -> list:
        """The output tensors of the collective (after ``wait()``)."""
        return self._outputs

    def source_rank(self) -> int:
        """The global rank a ``recv`` / ``irecv`` with ``src=None`` received from."""
        return self._source

    def get_future(self) -> Future:
        """A :class:`Future` completed with ``result()`` when the collective finishes."""
        if self._future is None:
            fut = Future()
            fut._wait_fn = self.wait
            fut._poll_fn = self.is_completed
            self._future = fut
            if self._done:
                fut.set_result(self._outputs)
        return self._future

    def __repr__(self) -> str:
        state = "completed" if self._done else ("failed" if self._exc is not None else "pending")
        return f"<{type(self).__name__} {self._op} {state}>"


class CompletedWork(Work):
    """A Work that was complete when made (world size 1, empty operations)."""

    def __init__(self, op: str, group, outputs=(), finishers=None) -> None:
        super().__init__(op, group, 0.0, outputs, finishers)
        self._finish()


def _seconds(timeout) -> float:
    if hasattr(timeout, "total_seconds"):
        return float(timeout.total_seconds())
    return float(timeout)


def default_timeout() -> float:
    env = os.environ.get("PYLUCID_DIST_TIMEOUT")
    if env:
        try:
            return float(env)
        except ValueError:
            raise ValueError(f"PYLUCID_DIST_TIMEOUT must be a number of seconds, got {env!r}") from None
    return DEFAULT_TIMEOUT_S
