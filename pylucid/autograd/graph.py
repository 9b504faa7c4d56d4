"""Graph nodes: the base ``Node`` and ``AccumulateGrad`` for leaves.

A node holds ``next_edges``: one entry per forward input, either ``None`` (no
gradient flows there) or ``(node, output_nr)``. Ops (``pylucid.ops.Op``) are
nodes; their instances are created by dispatch only when a graph is recorded.
"""

from __future__ import annotations

import weakref


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` takes the hook out again."""

    __slots__ = ("_container", "_key")

    def __init__(self, container, key) -> None:
        self._container = container
        self._key = key

    def remove(self) -> None:
        self._container.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


_hook_ids = iter(range(1 << 62))


class Node:
    """A backward function in the autograd graph."""

    __slots__ = ("next_edges", "_pre_hooks", "_hooks", "_trace", "_freed", "__weakref__")
    n_outputs = 1

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self):
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self.next_edges)

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` runs after this node; a non-None result replaces grad_inputs."""
        hooks = getattr(self, "_hooks", None)
        if hooks is None:
            hooks = self._hooks = {}
        key = next(_hook_ids)
        hooks[key] = fn
        return RemovableHandle(hooks, key)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before this node; a non-None result replaces grad_outputs."""
        return self._add_pre_hook(None, fn)

    def _add_pre_hook(self, output_nr, fn):
        hooks = getattr(self, "_pre_hooks", None)
        if hooks is None:
            hooks = self._pre_hooks = {}
        key = next(_hook_ids)
        hooks[key] = (output_nr, fn)
        return RemovableHandle(hooks, key)

    def __repr__(self) -> str:
        return f"<{self.name()} object>"


class AccumulateGrad(Node):
    """Sink node of a leaf tensor: adds the incoming gradient into ``.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable) -> None:
        self.variable = variable
        self.next_edges = ()

    def name(self) -> str:
        return "AccumulateGrad"


def grad_accumulator(t) -> AccumulateGrad:
    """The (cached) AccumulateGrad node of leaf ``t``; the leaf holds it weakly, as PyTorch does."""
    ref = t._grad_acc
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._grad_acc = weakref.ref(acc)
    return acc
