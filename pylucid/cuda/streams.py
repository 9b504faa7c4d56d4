"""CUDA streams and events as PyTorch spells them (``pylucid.cuda.Stream``, ``Event``, ``stream(...)``).

A :class:`Stream` wraps a CuPy stream; ``with pylucid.cuda.stream(s):`` (or ``with s:``) makes it the
current stream, and every pylucid CUDA op launches on the current stream (kernels, cuBLAS, cuDNN), so
work queued under it runs in the order it was queued there. Streams are what CUDA-graph capture needs:
a capture records the work of one non-default stream (``pylucid.cuda.graph`` makes one for you).
"""

from __future__ import annotations

__all__ = ["Stream", "Event", "current_stream", "default_stream", "stream", "set_stream"]


def _cp(fn: str):
    from . import _require

    return _require(fn)


class Stream:
    """A CUDA stream on the current device (non-blocking: it does not wait for the legacy default stream).

    ``priority`` is accepted as PyTorch's (lower is higher priority) and passed to CUDA.
    """

    def __init__(self, device=None, priority: int = 0, *, _wrap=None) -> None:
        cp = _cp("Stream")
        if _wrap is not None:
            self._s = _wrap
        elif device is None:
            self._s = cp.cuda.Stream(non_blocking=True, priority=priority)
        else:
            from . import _index

            with cp.cuda.Device(_index(device, "Stream")):
                self._s = cp.cuda.Stream(non_blocking=True, priority=priority)
        self._prev: list = []

    @property
    def cuda_stream(self) -> int:
        """The raw ``cudaStream_t`` handle."""
        return int(self._s.ptr)

    def synchronize(self) -> None:
        """Wait until the work queued on this stream has run."""
        self._s.synchronize()

    def query(self) -> bool:
        """True when all work queued on this stream has run."""
        return bool(self._s.done)

    def wait_stream(self, other: "Stream") -> None:
        """Make work queued on this stream from now on wait for the work queued on ``other`` so far."""
        self._s.wait_event(other._s.record())

    def wait_event(self, event: "Event") -> None:
        """Make work queued on this stream from now on wait for ``event``."""
        self._s.wait_event(event._e)

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Record ``event`` (a new one if None) on this stream and return it."""
        event = event if event is not None else Event()
        event.record(self)
        return event

    def __enter__(self) -> "Stream":
        self._prev.append(self._s.__enter__())
        return self

    def __exit__(self, *exc) -> None:
        self._prev.pop()
        self._s.__exit__(*exc)

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other._s.ptr == self._s.ptr

    def __hash__(self) -> int:
        return hash(self._s.ptr)

    def __repr__(self) -> str:
        return f"<pylucid.cuda.Stream cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event (``enable_timing=True`` for :meth:`elapsed_time`)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        cp = _cp("Event")
        self._e = cp.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (the current stream if None)."""
        self._e.record(None if stream is None else stream._s)

    def synchronize(self) -> None:
        self._e.synchronize()

    def query(self) -> bool:
        return bool(self._e.done)

    def wait(self, stream: Stream | None = None) -> None:
        """Make ``stream`` (the current one if None) wait for this event."""
        (stream or current_stream()).wait_event(self)

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds between this event and ``end`` (both recorded, timing enabled)."""
        cp = _cp("Event.elapsed_time")
        return float(cp.cuda.get_elapsed_time(self._e, end._e))


def current_stream(device=None) -> Stream:
    """The stream pylucid's CUDA ops launch on now."""
    return Stream(_wrap=_cp("current_stream").cuda.get_current_stream())


def default_stream(device=None) -> Stream:
    """The device's default (null) stream."""
    return Stream(_wrap=_cp("default_stream").cuda.Stream.null)


def set_stream(s: Stream) -> None:
    """Make ``s`` the current stream (prefer the ``stream(s)`` context manager)."""
    s._s.use()


class stream:  # noqa: N801 - PyTorch's spelling
    """Context manager that makes ``s`` the current stream (None: a no-op), as ``torch.cuda.stream``."""

    def __init__(self, s: Stream | None) -> None:
        self.s = s

    def __enter__(self):
        if self.s is not None:
            self.s.__enter__()
        return self.s

    def __exit__(self, *exc) -> None:
        if self.s is not None:
            self.s.__exit__(*exc)
