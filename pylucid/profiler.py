"""``pylucid.profiler``: where the time goes, op by op.

Dispatch reads one attribute (``state.profiler``) per call; while a
``profile()`` block is active it is set, and every op's forward runs through
:meth:`profile.run`, which times it. On CUDA the timer synchronises the device
around each op (``sync_cuda=True``), so times are the kernels' and not the
launch's.

>>> import pylucid
>>> with pylucid.profiler.profile() as prof:
...     y = (pylucid.ones(8, 8) @ pylucid.ones(8, 8)).sum()
>>> sorted(prof.key_averages())
['matmul', 'sum']
>>> prof.key_averages()["matmul"].count
1
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ._state import state

__all__ = ["profile", "OpStats"]


@dataclass
class OpStats:
    """Totals for one op name: calls, seconds, and output elements produced."""

    name: str
    count: int = 0
    total_s: float = 0.0
    elements: int = 0

    @property
    def mean_us(self) -> float:
        return self.total_s / max(self.count, 1) * 1e6


class profile:  # noqa: N801 - mirrors torch.profiler.profile
    """Context manager that records every op's forward time on this thread."""

    def __init__(self, sync_cuda: bool = True) -> None:
        self.sync_cuda = sync_cuda
        self._stats: dict[str, OpStats] = {}

    def __enter__(self):
        self._prev = state.profiler
        state.profiler = self
        return self

    def __exit__(self, *exc) -> None:
        state.profiler = self._prev

    def run(self, op, be, arrays, params, dev):
        """Called by dispatch instead of ``op.forward`` while profiling."""
        sync = self.sync_cuda and dev.type == "cuda"
        if sync:
            be.xp.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        out = op.forward(be, *arrays, **params)
        if sync:
            be.xp.cuda.get_current_stream().synchronize()
        dt = time.perf_counter() - t0
        name = op.schema.name
        st = self._stats.get(name)
        if st is None:
            st = self._stats[name] = OpStats(name)
        st.count += 1
        st.total_s += dt
        first = out[0] if isinstance(out, tuple) else out
        st.elements += int(getattr(first, "size", 1))
        return out

    def key_averages(self) -> dict[str, OpStats]:
        """Per-op totals, keyed by op name."""
        return dict(self._stats)

    def table(self, sort_by: str = "total", row_limit: int = 20) -> str:
        """A text table of the ops, most expensive first."""
        rows = sorted(self._stats.values(), key=lambda s: s.total_s if sort_by == "total" else s.count, reverse=True)
        total = sum(s.total_s for s in rows) or 1.0
        lines = [f"{'op':28s} {'calls':>7s} {'total ms':>10s} {'mean us':>9s} {'share':>6s}"]
        for s in rows[:row_limit]:
            lines.append(f"{s.name:28s} {s.count:7d} {s.total_s * 1e3:10.3f} {s.mean_us:9.1f} {s.total_s / total:6.1%}")
        return "\n".join(lines)
