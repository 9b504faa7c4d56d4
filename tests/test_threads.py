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


_WAIT_PROBE = """
import ctypes, os, numpy as np
import pylucid as pl
from pylucid import _threads
libs = [p for p in _threads._loaded_paths() if "openblas" in os.path.basename(p).lower()]
lib = ctypes.CDLL(libs[0])
lib.openblas_thread_timeout.restype = ctypes.c_int
pl.set_num_threads(2)
a = np.arange(200 * 200, dtype=np.float64).reshape(200, 200) / 1e4
want = a @ a
before = lib.openblas_thread_timeout()
changed = _threads.short_blas_wait()
print(before, lib.openblas_thread_timeout(), changed, "OPENBLAS_THREAD_TIMEOUT" in os.environ,
      bool(np.array_equal(a @ a, want)), pl.get_num_threads())
"""


def _wait_probe(env):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _WAIT_PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_short_blas_wait_changes_openblas_and_leaves_the_environment():
    import os

    try:
        import ctypes

        lib = ctypes.CDLL([p for p in _threads._loaded_paths() if "openblas" in p.lower()][0])
        lib.openblas_thread_timeout
    except (IndexError, OSError, AttributeError):
        pytest.skip("NumPy's BLAS here is not an OpenBLAS with openblas_thread_timeout")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")}
    before, after, changed, leaked, same, threads = _wait_probe(env)
    assert after == str(_threads._SHORT_BLAS_WAIT) and changed == "True" and before != after
    assert leaked == "False" and same == "True" and threads == "2"  # results and thread count as before
    # a wait the user chose is kept
    before, after, changed, leaked, same, _ = _wait_probe(dict(env, OPENBLAS_THREAD_TIMEOUT="20"))
    assert before == after == "20" and changed == "False" and leaked == "True" and same == "True"
