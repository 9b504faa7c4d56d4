"""pylucid.set_num_threads / get_num_threads / *_interop_threads against PyTorch's behaviour."""

import numpy as np
import pytest
import torch

import pylucid as pl
from pylucid import _threads


def test_set_get_round_trip_reaches_blas():
    before = pl.get_num_threads()
    try:
        pl.set_num_threads(1)
        assert pl.get_num_threads() == 1
        libs = _threads._blas_libs()
        assert libs, "NumPy's BLAS was not found among the loaded libraries"
        assert all(g() == 1 for _, g in libs if g is not None)
        np.ones((64, 64)) @ np.ones((64, 64))
    finally:
        pl.set_num_threads(before)
    assert pl.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -2])
def test_non_positive_raises_like_torch(bad):
    with pytest.raises(RuntimeError):
        torch.set_num_threads(bad)
    with pytest.raises(RuntimeError, match="set_num_threads: number of threads must be positive"):
        pl.set_num_threads(bad)
    with pytest.raises(RuntimeError, match="set_num_interop_threads"):
        pl.set_num_interop_threads(bad)


def test_type_errors():
    with pytest.raises(TypeError):
        pl.set_num_threads(1.5)
    with pytest.raises(TypeError):
        pl.set_num_threads(True)


def test_interop_recorded():
    assert pl.get_num_interop_threads() >= 1
    pl.set_num_interop_threads(3)
    assert pl.get_num_interop_threads() == 3
