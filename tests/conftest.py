"""Shared fixtures: the ``device`` fixture runs a test on the CPU and, where CuPy
sees a GPU, on CUDA; the oracle (PyTorch 2.13 CPU) must import, never skip."""

from __future__ import annotations

import numpy as np
import pytest

import pylucid

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - CI must fail loudly, not skip
    raise RuntimeError("the test oracle torch==2.13.0 is not installed: pip install -e '.[test]'") from exc

CUDA = pylucid.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no CUDA GPU/CuPy here"))]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    pylucid.manual_seed(0)
    np.random.seed(0)
    yield


@pytest.fixture
def general_dispatch_calls(monkeypatch):
    """A one-element list counting the calls that reach ``apply``'s general path (``ops/_op.py``:
    ``_apply_general``) from now on; set ``[0] = 0`` to start a count again."""
    from pylucid.ops import _op

    calls = [0]
    real = _op._apply_general

    def counted(*a):
        calls[0] += 1
        return real(*a)

    monkeypatch.setattr(_op, "_apply_general", counted)
    return calls


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU")
    config.addinivalue_line("markers", "slow: longer tests")
