"""pylucid: a readable deep-learning framework on NumPy (CPU) and CuPy (CUDA).

>>> import pylucid
>>> x = pylucid.tensor([1.0, 2.0], requires_grad=True)
>>> (g,) = pylucid.autograd.grad(pylucid.square(x).sum(), x, create_graph=True)
>>> g
tensor([2., 4.], grad_fn=<MulBackward>)
"""

from __future__ import annotations

import builtins as _builtins

from . import _fp_warnings  # noqa: F401 - installs the floating-point warning filter first

from . import dtypes as _dtypes
from ._state import flags as _flags
from ._tensor import Tensor
from .device import device
from .dtypes import (
    bfloat16, complex64, complex128, dtype, float16, float32, float64, get_default_dtype, int8, int16, int32,
    int64, promote_types, set_default_dtype, uint8,
)
from .errors import DeviceMismatch, DtypeMismatch, LucidError, ShapeMismatch, VersionMismatch

bool = _dtypes.bool_  # noqa: A001 - mirrors torch.bool
half = float16
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128

from . import ops  # noqa: E402
from .ops import *  # noqa: E402,F401,F403
from . import autograd  # noqa: E402
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402
from .creation import (  # noqa: E402
    arange, as_tensor, asarray, empty, empty_like, eye, from_dlpack, from_numpy, full, full_like, linspace, logspace,
    ones, ones_like, tensor, zeros, zeros_like,
    empty_permuted, empty_strided, scalar_tensor,
)
from .random import (  # noqa: E402
    Generator, default_generator, get_rng_state, initial_seed, manual_seed, rand, rand_like, randint, randint_like,
    randn, randn_like, randperm, seed, set_rng_state,
)
from . import amp  # noqa: E402
from ._memory_format import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format  # noqa: E402,F401,E501
from .amp import autocast  # noqa: E402 - torch.autocast
from . import cuda  # noqa: E402
from . import accelerator, backends, hub  # noqa: E402
from ._compile import compile  # noqa: E402,A001
from . import fft, linalg, nn, optim, special  # noqa: E402,F401
from . import datasets, profiler, utils  # noqa: E402,F401
from . import distributed  # noqa: E402,F401
from . import diffeq, einops, signal  # noqa: E402,F401
from .signal import bartlett_window, blackman_window, hamming_window, hann_window, kaiser_window  # noqa: E402,F401
from . import distributions  # noqa: E402,F401
from . import func  # noqa: E402,F401
from . import onnx  # noqa: E402,F401
from . import masked  # noqa: E402,F401
from ._threads import get_num_interop_threads, get_num_threads, set_num_interop_threads, set_num_threads  # noqa: E402,F401,E501
from .serialization import load, load_safetensors, save, save_safetensors  # noqa: E402

__version__ = "0.1.0"


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return input.numel()


def is_floating_point(input: Tensor) -> bool:
    return input.dtype.is_floating_point


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Make non-deterministic ops raise (``NonDeterministicError``, quoting the schema's note)."""
    _flags.deterministic = _builtins.bool(mode)
    _flags.deterministic_warn_only = _builtins.bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _flags.deterministic


def result_type(a, b) -> dtype:
    """The dtype ``a op b`` computes in (PyTorch's promotion with weak Python scalars)."""
    dims, zdims, scal = [], [], []
    for x in (a, b):
        if isinstance(x, Tensor):
            (dims if x.ndim else zdims).append(x.dtype)
        else:
            scal.append(_dtypes.scalar_category(x))
    return _dtypes.result_type(dims, zdims, scal)
