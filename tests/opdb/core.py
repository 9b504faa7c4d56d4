"""Compatibility re-export for tests/test_linalg.py, which imports ``U`` from here; the sample builders live in
``tests.opdb``. Delete this module once that import reads ``from tests.opdb import U``."""

from tests.opdb import U

__all__ = ["U"]
