"""The OpInfo samples tests/test_opinfo.py does not run, each with its reason.

A skip names an OpInfo (``name`` or ``name.variant``), a dtype (``float32``,
``float64``, ``int64``, ``bool`` or ``*``), a sample kind (``forward``,
``grad``, ``gradgrad`` or ``*``) and, optionally, a predicate choosing the
samples it covers. Its category says why:

- ``deviation``: pylucid deliberately does otherwise; the reason cites the
  semantics page (docs/semantics/) that documents it;
- ``not implemented``: the op or this form of it does not exist yet;
- ``known bug``: a mismatch with PyTorch that the op's owner has yet to fix
  (listed in the conformance report); these are skipped only so that the rest of
  the op's samples keep guarding it.

docs/semantics/opinfo.md summarises the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Skip:
    op: str
    dtype: str
    kind: str
    category: str
    reason: str
    when: Callable | None = None


def _kw(name, value=None):
    """Samples whose keyword ``name`` is given (and, with ``value``, equals it)."""
    def pred(s):
        return name in s.kwargs and (value is None or s.kwargs[name] == value)
    return pred


SKIPS: list[Skip] = [
]

_BY_OP: dict[str, list[Skip]] = {}
for _s in SKIPS:
    _BY_OP.setdefault(_s.op, []).append(_s)


def lookup(op: str, dtype: str, kind: str, sample) -> Skip | None:
    for s in _BY_OP.get(op, ()):
        if s.dtype in ("*", dtype) and s.kind in ("*", kind) and (s.when is None or s.when(sample)):
            return s
    return None
