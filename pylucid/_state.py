"""Thread-local switches read on every op call.

Each switch is one attribute of one object, so the cost of a switch that is
off is a single attribute read on the dispatch path (DESIGN.md §7).
"""

from __future__ import annotations

import threading


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.grad_enabled = True
        self.inference_mode = False
        # autocast: None when off, else {device_type: dtype}
        self.autocast = None
        # tests flip this to run the graph-mode backward formula even where a
        # first-order fast path exists, so the two can be compared
        self.force_graph_backward = False
        self.anomaly = False
        self.anomaly_check_nan = True
        self.profiler = None


state = _ThreadState()


class _GlobalFlags:
    deterministic = False
    deterministic_warn_only = False


flags = _GlobalFlags()
