"""Compatibility re-export for tests/test_linalg.py, which imports ``spd``/``sym``/``well`` from here; they live
in ``tests.opdb.linalg``. Delete this module once that import reads ``from tests.opdb.linalg import ...``."""

from tests.opdb.linalg import spd, sym, well

__all__ = ["spd", "sym", "well"]
