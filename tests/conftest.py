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


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU")
    config.addinivalue_line("markers", "slow: longer tests")
