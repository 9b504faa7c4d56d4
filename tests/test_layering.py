"""Layering: outside ``pylucid/backend/`` only a few host-side I/O modules import NumPy or CuPy.

Everything else reaches NumPy through ``pylucid._interop`` (``from pylucid._interop import np`` or
its helpers) and computes through the backend (DESIGN.md §1), so the array libraries stay behind one
visible door.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pylucid"

#: files (or folders, ending in "/") outside pylucid/backend/ that may import NumPy or CuPy, relative to pylucid/
ALLOWED = {
    "_interop.py": "the host-side door itself: data to tensors and back, dtypes, CPU random streams",
    "serialization.py": "checkpoint files: tensors are written and read as NumPy arrays",
    "utils/data/_collate.py": "DataLoader collation: a batch is stacked with NumPy, then wrapped",
    "datasets/": "dataset file formats (IDX, CIFAR batches), decoded into arrays",
}

# a real import statement (not a doctest line or prose): ``import numpy``, ``from cupy import ...``, ``import cupyx``
_ARRAY_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+(numpy|cupy|cupyx)\b", re.MULTILINE)


def _allowed(rel: str) -> bool:
    return rel in ALLOWED or any(entry.endswith("/") and rel.startswith(entry) for entry in ALLOWED)


def _array_imports():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("backend/"):
            continue
        text = path.read_text(encoding="utf-8")
        for m in _ARRAY_IMPORT.finditer(text):
            yield rel, text.count("\n", 0, m.start()) + 1, m.group(0).strip()


def test_only_allow_listed_modules_import_numpy_or_cupy_above_the_backend():
    offenders = [f"pylucid/{rel}:{line}: {stmt}" for rel, line, stmt in _array_imports() if not _allowed(rel)]
    assert not offenders, ("these modules import an array library directly; go through pylucid._interop or the "
                           "backend, or (host-side I/O only) add them to ALLOWED:\n" + "\n".join(offenders))


@pytest.mark.parametrize("entry", sorted(ALLOWED))
def test_allow_list_names_existing_paths(entry):
    assert (PACKAGE / entry).exists(), f"ALLOWED names pylucid/{entry}, which does not exist: remove the entry"


def test_the_pattern_sees_imports_and_ignores_doctests():
    src = "import numpy as np\n    from cupy import cuda\n>>> import numpy\nx = 1  # import numpy\nimport cupyx\n"
    assert [m.group(1) for m in _ARRAY_IMPORT.finditer(src)] == ["numpy", "cupy", "cupyx"]
