"""Random numbers: ``Generator``, ``manual_seed`` and the sampling functions.

Each ``Generator`` wraps a NumPy PCG64 bit generator (CPU) or a CuPy one
(CUDA). Sequences are reproducible across runs for a given seed, but are not
the same numbers PyTorch draws (documented in docs/semantics.md).
"""

from __future__ import annotations

from pylucid._interop import np

from . import dtypes as _dt
from ._tensor import Tensor, _new_tensor
from .device import cpu
from .device import device as _device
from .errors import DtypeMismatch
from .ops._utils import check_tensor, norm_size
from .ops.registry import declare

_DEFAULT_SEED = 67280421310721


class Generator:
    """A seeded random source for one device.

    >>> import pylucid
    >>> g = pylucid.Generator().manual_seed(0)
    >>> a = pylucid.rand(2, generator=g); g.manual_seed(0)  # doctest: +ELLIPSIS
    <pylucid.random.Generator object at ...>
    >>> a.tolist() == pylucid.rand(2, generator=g).tolist()
    True
    """

    def __init__(self, device="cpu") -> None:
        self.device = _device(device)
        self._seed = _DEFAULT_SEED
        self._np = np.random.Generator(np.random.PCG64(self._seed))
        self._cp = None

    def manual_seed(self, seed: int) -> "Generator":
        seed = int(seed)
        self._seed = seed
        self._np = np.random.Generator(np.random.PCG64(seed & ((1 << 64) - 1)))
        self._cp = None
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy) & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        import json

        st = json.dumps(self._np.bit_generator.state).encode()
        return _new_tensor(np.frombuffer(st, dtype=np.uint8).copy(), cpu)

    def set_state(self, state: Tensor) -> "Generator":
        import json

        self._np.bit_generator.state = json.loads(bytes(np.asarray(state._data, dtype=np.uint8)).decode())
        return self

    def _source(self):
        """The array-module generator that draws on this generator's device."""
        if self.device.type == "cpu":
            return self._np
        if self._cp is None:
            xp = self.device.backend.xp
            with self.device.backend.cuda_device:
                self._cp = xp.random.Generator(xp.random.XORWOW(self._seed & ((1 << 63) - 1)))
        be = self.device.backend
        return _OnDevice(self._cp, be.cuda_device) if be._multi else self._cp


default_generator = Generator("cpu")
_cuda_generators: dict = {}


def _gen_for(dev, generator):
    if generator is not None:
        if generator.device.type != dev.type:
            raise ValueError(f"random: generator is on {generator.device} but the tensor is requested on {dev}")
        return generator
    if dev.type == "cpu":
        return default_generator
    g = _cuda_generators.get(dev.index)
    if g is None:
        g = _cuda_generators[dev.index] = Generator(dev).manual_seed(default_generator.initial_seed())
    return g


def manual_seed(seed: int) -> Generator:
    """Seed every default generator (CPU and CUDA)."""
    default_generator.manual_seed(seed)
    for g in _cuda_generators.values():
        g.manual_seed(seed)
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(state: Tensor) -> None:
    default_generator.set_state(state)


class _OnDevice:
    """A CuPy generator whose draws run with its own GPU current (several GPUs visible)."""

    def __init__(self, gen, ctx) -> None:
        self._gen, self._ctx = gen, ctx

    def __getattr__(self, name: str):
        fn = getattr(self._gen, name)

        def call(*args, **kwargs):
            with self._ctx:
                return fn(*args, **kwargs)

        return call


def _finish(arr, dev, dtype, requires_grad):
    with dev.backend.device_ctx():
        arr = arr.astype(dtype.numpy_dtype, copy=False)
    t = _new_tensor(arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _float_dtype(dtype, op):
    """The dtype to draw in: ``dtype`` or the default one, which must be a floating or complex dtype."""
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if not (dt.is_floating_point or dt.is_complex):
        raise DtypeMismatch(f"{op}: expected a floating or complex dtype, got {dt}; accepted: float16, bfloat16, "
                            "float32, float64, complex64, complex128")
    return dt


def _draw(src, kind, shape, dt, scale=1.0, shift=0.0):
    """``src``'s ``kind`` draws (``"random"``: uniform on [0, 1); ``"standard_normal"``), times ``scale`` plus
    ``shift``, for a tensor of dtype ``dt``: in float64 for float64, float32 for the other real dtypes (the
    streams seeded code depends on). A complex tensor is its real and imaginary parts interleaved (PyTorch draws
    into ``view_as_real``): one draw of ``shape + (2,)`` in the component precision, the affine map applied to
    each part, viewed as complex. A backend array either way."""
    shape = tuple(shape)
    if dt.is_complex:
        pairs = getattr(src, kind)(shape + (2,), dtype=np.float64 if dt is _dt.complex128 else np.float32)
        if scale != 1.0 or shift != 0.0:
            pairs = pairs * scale + shift
        return pairs.view(dt.numpy_dtype).reshape(shape)
    x = getattr(src, kind)(shape, dtype=np.float64 if dt is _dt.float64 else np.float32)
    return x * scale + shift if scale != 1.0 or shift != 0.0 else x


#: the scale of each component of a standard complex normal: real and imaginary parts of variance 1/2 each, so
#: that ``E|z|^2 = 1`` (as PyTorch's ``randn`` and ``normal_`` of complex tensors)
_HALF_VAR = 0.7071067811865476


def _uniform(op, size, generator, dtype, device, requires_grad):
    dt = _float_dtype(dtype, op)
    dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    return _finish(_draw(src, "random", norm_size(size, op), dt), dev, dt, requires_grad)


def _normal(op, size, generator, dtype, device, requires_grad):
    dt = _float_dtype(dtype, op)
    dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    z = _draw(src, "standard_normal", norm_size(size, op), dt, _HALF_VAR if dt.is_complex else 1.0)
    return _finish(z, dev, dt, requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in ``[0, 1)``; for a complex ``dtype`` the real and imaginary parts are each uniform in
    ``[0, 1)`` (independent draws).

    >>> import pylucid
    >>> pylucid.rand(2, 3, dtype=pylucid.complex64).dtype
    pylucid.complex64
    """
    return _uniform("rand", size, generator, dtype, device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples; for a complex ``dtype`` a standard complex normal: real and imaginary parts
    independent normals of variance 1/2 each (``E|z|^2 = 1``).

    >>> import pylucid
    >>> pylucid.randn(4, dtype=pylucid.complex128).shape
    (4,)
    """
    return _normal("randn", size, generator, dtype, device, requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """Integers uniform in ``[low, high)``; ``randint(high, size)`` also works."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint: size must be given, e.g. randint(0, 10, (3,))")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"randint: {name} must be an int, got {type(v).__name__} {v!r}")
    low, high = low.__index__(), high.__index__()
    if high <= low:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    if dt.is_complex:
        raise DtypeMismatch(f"randint: dtype {dt} is not supported; accepted: integral, floating and bool dtypes "
                            "(as in PyTorch)")
    dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    shape = norm_size((size,) if isinstance(size, (tuple, list)) else (size,), "randint")
    arr = src.integers(low, high, size=shape, dtype=np.int64)
    return _finish(arr, dev, dt, requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0..n-1``."""
    (n,) = norm_size((n,), "randperm")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    if dt.is_complex or dt is _dt.bool_:
        raise DtypeMismatch(f"randperm: dtype {dt} is not supported; accepted: integer and floating dtypes (as in "
                            "PyTorch)")
    dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    if hasattr(src, "permutation"):
        perm = src.permutation(n)
    else:  # CuPy's Generator has no permutation: argsort of uniform draws is one
        perm = dev.backend.argsort(src.random(n))
    return _finish(perm, dev, dt, requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    """Uniform samples in ``[0, 1)`` of ``input``'s shape (and dtype and device unless given)."""
    check_tensor(input, "rand_like")
    return _uniform("rand_like", tuple(input.shape), generator, dtype or input.dtype, device or input.device,
                    requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    """Standard normal samples of ``input``'s shape (and dtype and device unless given)."""
    check_tensor(input, "randn_like")
    return _normal("randn_like", tuple(input.shape), generator, dtype or input.dtype, device or input.device,
                   requires_grad)


def randint_like(input, low, high=None, *, dtype=None, device=None, generator=None) -> Tensor:
    """Integers uniform in ``[low, high)`` of ``input``'s shape (and dtype and device unless given)."""
    check_tensor(input, "randint_like")
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dtype or input.dtype,
                   device=device or input.device)


# ---------------------------------------------------------------------------
# Sampling functions and in-place fillers (PyTorch's torch.normal, bernoulli,
# multinomial, poisson and Tensor.uniform_ / normal_ / ...). Random draws are
# not differentiable; where PyTorch nevertheless returns a tensor that requires
# grad (normal with a tensor mean, bernoulli with a tensor p) the result is tied
# to the parameter with an exact zero gradient, as in PyTorch.
# ---------------------------------------------------------------------------

def _sample_dtype(dt):
    """Draw in float64 for float64 tensors, float32 otherwise (half types are rounded once)."""
    return np.float64 if dt is _dt.float64 else np.float32


def _as_float_tensor(x, op):
    check_tensor(x, op)
    if not x.dtype.is_floating_point:
        raise DtypeMismatch(f"{op}: expected a floating tensor, got {x.dtype}; accepted: float16, bfloat16, "
                            "float32, float64")
    return x


def _zero_grad_link(out: Tensor, *params) -> Tensor:
    """Tie ``out`` to the parameters that require grad with a zero gradient (PyTorch's convention)."""
    from .autograd.grad_mode import is_grad_enabled

    live = [p for p in params if isinstance(p, Tensor) and p.requires_grad]
    if not live or not is_grad_enabled():
        return out
    import pylucid

    for p in live:
        out = pylucid.add(out, pylucid.mul(pylucid.sum(p), 0.0))
    return out


@declare(method=False)
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Normal samples with ``mean`` and ``std`` (tensors broadcast together, or numbers with ``size``).

    The result takes ``mean``'s dtype (``std``'s when ``mean`` is a number; ``dtype`` or the default dtype for two
    numbers), which must be floating or complex. Complex samples are as PyTorch draws them: ``std`` is real, each
    of the real and imaginary parts has standard deviation ``std / sqrt(2)`` (``E|z - mean|^2 = std^2``); a
    complex ``mean`` tensor is added as it is, a number ``mean`` with a complex ``dtype`` is added to both parts
    (``normal(1.0, 1.0, (n,), dtype=complex64)`` centres on ``1+1j``, as ``Tensor.normal_``).

    >>> import pylucid
    >>> _ = pylucid.manual_seed(0)
    >>> pylucid.normal(pylucid.zeros(3), 1.0).shape
    (3,)
    >>> pylucid.normal(2.0, 0.5, size=(2, 2)).shape
    (2, 2)
    >>> pylucid.normal(pylucid.zeros(2, dtype=pylucid.complex64), 1.0).dtype
    pylucid.complex64
    """
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if (st and std.dtype.is_complex) or isinstance(std, complex):
        raise DtypeMismatch(f"normal: std must be real (non-complex), got {std.dtype if st else 'complex'}")
    if isinstance(mean, complex):
        raise DtypeMismatch("normal: a number mean must be real, got complex; pass a complex tensor mean instead")
    if mt or st:
        ref = mean if mt else std
        shape = tuple(np.broadcast_shapes(tuple(mean.shape) if mt else (), tuple(std.shape) if st else ()))
        if size is not None and tuple(norm_size((size,), "normal")) != shape:
            raise ValueError(f"normal: size {size} does not match the broadcast shape {shape} of mean and std")
        dt = ref.dtype
        if not (dt.is_floating_point or dt.is_complex):
            raise DtypeMismatch(f"normal: the result takes the dtype of {'mean' if mt else 'std'} ({dt}), which must "
                                "be floating or complex (as in PyTorch); convert it with .float() first")
        dev = ref.device
        if st and bool((std._data < 0).any()):
            raise ValueError("normal: std must be >= 0")
    else:
        if size is None:
            raise TypeError("normal: with number mean and std, size must be given")
        if std < 0:
            raise ValueError(f"normal: std must be >= 0, got {std}")
        shape = norm_size((size,), "normal")
        dt = _float_dtype(dtype, "normal")
        dev = cpu if device is None else _device(device)
    src = _gen_for(dev, generator)._source()
    be = dev.backend
    if dt.is_complex:
        if mt or st:
            z = _draw(src, "standard_normal", shape, dt, _HALF_VAR)
            out = z * (std._data.astype(z.real.dtype) if st else std) + (mean._data if mt else mean)
        else:
            out = _draw(src, "standard_normal", shape, dt, std * _HALF_VAR, mean)
        out = _finish(be.asarray(out), dev, dt, requires_grad)
        return _zero_grad_link(out, mean, std)
    z = src.standard_normal(shape, dtype=_sample_dtype(dt))
    m = mean._data.astype(z.dtype) if mt else mean
    s = std._data.astype(z.dtype) if st else std
    out = _finish(be.asarray(z * s + m), dev, dt, requires_grad)
    return _zero_grad_link(out, mean, std)


@declare()
def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """0/1 samples with probabilities ``input`` (or the number ``p``), in ``input``'s dtype.

    >>> import pylucid
    >>> pylucid.bernoulli(pylucid.tensor([0.0, 1.0]))
    tensor([0., 1.])
    """
    check_tensor(input, "bernoulli")
    if input.dtype.is_complex or (p is None and not input.dtype.is_floating_point):
        raise DtypeMismatch(f"bernoulli: input must be a floating tensor of probabilities, got {input.dtype}")
    probs = input._data if p is None else p
    if isinstance(probs, Tensor):
        probs = probs._data
    lo, hi = (float(probs.min()), float(probs.max())) if getattr(probs, "size", 1) else (0.0, 1.0)
    if not (0.0 <= lo and hi <= 1.0):
        raise ValueError(f"bernoulli: probabilities must be in [0, 1], got values in [{lo}, {hi}]")
    dev = input.device
    src = _gen_for(dev, generator)._source()
    u = src.random(tuple(input.shape), dtype=np.float64)
    be = dev.backend
    out = _new_tensor(be.asarray(u < probs).astype(input._data.dtype), dev)
    return _zero_grad_link(out, input if p is None else None)


@declare()
def poisson(input: Tensor, generator=None) -> Tensor:
    """Poisson samples with rates ``input`` (same shape and dtype).

    >>> import pylucid
    >>> pylucid.poisson(pylucid.zeros(2))
    tensor([0., 0.])
    """
    _as_float_tensor(input, "poisson")
    if input.numel() and float(input._data.min()) < 0:
        raise ValueError("poisson: rates must be non-negative")
    dev = input.device
    src = _gen_for(dev, generator)._source()
    lam = input._data.astype(np.float64)
    return _new_tensor(dev.backend.asarray(src.poisson(lam)).astype(input._data.dtype), dev)


@declare()
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Category indices drawn with weights ``input`` (1-D, or 2-D: one distribution per row), int64.

    Without replacement the draws are distinct (the Gumbel-top-k / exponential-race
    method: the ``k`` smallest of ``E_i / w_i``); with replacement, inverse-CDF sampling.

    >>> import pylucid
    >>> pylucid.multinomial(pylucid.tensor([0., 1., 0.]), 2, replacement=True)
    tensor([1, 1])
    """
    _as_float_tensor(input, "multinomial")
    if not isinstance(replacement, (bool, np.bool_)):
        raise TypeError(f"multinomial: replacement must be a bool, got {type(replacement).__name__}")
    if input.ndim not in (1, 2):
        raise ValueError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.ndim}")
    num_samples = int(num_samples)
    if num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be positive, got {num_samples}")
    w = input._data.astype(np.float64)
    w2 = w.reshape(1, -1) if input.ndim == 1 else w
    n_cat = w2.shape[1]
    if n_cat == 0:
        raise ValueError("multinomial: needs at least one category")
    if bool((w2 < 0).any()) or not bool(input._device.backend.isfinite(w2).all()):
        raise ValueError("multinomial: probabilities must be finite and non-negative")
    totals = w2.sum(axis=1)
    if bool((totals <= 0).any()):
        raise ValueError("multinomial: each distribution must have a positive total weight")
    if not replacement:
        if num_samples > n_cat:
            raise ValueError(f"multinomial: cannot sample {num_samples} > {n_cat} categories without replacement")
        if bool(((w2 > 0).sum(axis=1) < num_samples).any()):
            raise ValueError("multinomial: not enough categories with non-zero probability to sample "
                             f"{num_samples} without replacement")
    dev = input.device
    be = dev.backend
    xp = be.xp
    src = _gen_for(dev, generator)._source()
    if replacement:
        cdf = xp.cumsum(w2, axis=1) / totals[:, None]
        u = src.random((w2.shape[0], num_samples), dtype=np.float64)
        # count of cdf entries <= u: the first category whose cumulative weight passes u
        idx = (cdf[:, None, :] <= u[:, :, None]).sum(axis=2)
        idx = xp.minimum(idx, n_cat - 1)
        # a category of weight 0 at the end can not be hit: step back to the last positive one
        last = n_cat - 1 - xp.argmax((w2 > 0)[:, ::-1], axis=1)
        idx = xp.minimum(idx, last[:, None])
    else:
        e = src.standard_exponential(w2.shape, dtype=np.float64)
        with be.errstate():
            keys = xp.where(w2 > 0, e / xp.where(w2 > 0, w2, 1.0), xp.inf)
        idx = xp.argsort(keys, axis=1, kind="stable")[:, :num_samples]
    idx = idx.astype(np.int64)
    return _new_tensor(idx.reshape(-1) if input.ndim == 1 else idx, dev)


# -- in-place fillers ------------------------------------------------------------------

def _fill_(self: Tensor, values, name: str) -> Tensor:
    """Write sampled ``values`` into ``self`` (version bump; a non-leaf keeps a zero-gradient history)."""
    from .ops._op import check_inplace_leaf, commit_inplace

    check_inplace_leaf(self, name)
    be = self._device.backend
    arr = be.asarray(values).astype(self._data.dtype)
    from ._state import state

    if self._requires_grad and state.grad_enabled:
        import pylucid

        return commit_inplace(self, pylucid.add(pylucid.mul(self, 0), _new_tensor(arr, self._device)), name)
    self._data[...] = arr
    self._version[0] += 1
    return self


def _refuse_kinds(self, name, kinds, why):
    """A ``DtypeMismatch`` when ``self``'s NumPy dtype kind (``b``, ``i``/``u``, ``c``) is one PyTorch
    refuses for this filler."""
    if self._data.dtype.kind in kinds:
        raise DtypeMismatch(f"{name}: not supported for {self.dtype.name} tensors ({why}, as in PyTorch)")


def _src(self, generator):
    return _gen_for(self._device, generator)._source()


@declare(namespaces=())
def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator=None, **kw) -> Tensor:
    """Fill with samples uniform in ``[from, to)``; a complex tensor gets independent real and imaginary parts,
    each uniform in ``[from, to)`` (as PyTorch). Integer and bool tensors are refused (as in PyTorch)."""
    from_ = kw.pop("from", from_)
    if kw:
        raise TypeError(f"uniform_: unexpected arguments {sorted(kw)}")
    _refuse_kinds(self, "uniform_", "biu", "a continuous distribution needs a floating or complex dtype")
    if from_ > to:
        raise ValueError(f"uniform_: expects from <= to, got from={from_}, to={to}")
    if self.dtype.is_complex:
        return _fill_(self, _draw(_src(self, generator), "random", self.shape, self.dtype, to - from_, from_),
                      "uniform_")
    u = _src(self, generator).random(tuple(self.shape), dtype=_sample_dtype(self.dtype))
    return _fill_(self, u * (to - from_) + from_, "uniform_")


@declare(namespaces=())
def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with normal samples; a complex tensor gets real and imaginary parts each normal with mean ``mean``
    and standard deviation ``std / sqrt(2)`` (as PyTorch). Integer and bool tensors are refused (as in
    PyTorch)."""
    _refuse_kinds(self, "normal_", "biu", "a continuous distribution needs a floating or complex dtype")
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0, got {std}")
    if self.dtype.is_complex:
        z = _draw(_src(self, generator), "standard_normal", self.shape, self.dtype, std * _HALF_VAR, mean)
        return _fill_(self, z, "normal_")
    z = _src(self, generator).standard_normal(tuple(self.shape), dtype=_sample_dtype(self.dtype))
    return _fill_(self, z * std + mean, "normal_")


@declare(namespaces=())
def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with exponential samples of rate ``lambd`` (density ``lambd * exp(-lambd * x)``)."""
    _refuse_kinds(self, "exponential_", "biuc", "a continuous distribution needs a floating dtype")
    if lambd <= 0:
        raise ValueError(f"exponential_: expects lambd > 0, got {lambd}")
    e = _src(self, generator).standard_exponential(tuple(self.shape), dtype=_sample_dtype(self.dtype))
    return _fill_(self, e / lambd, "exponential_")


@declare(namespaces=())
def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill with 0/1 samples, 1 with probability ``p`` (a number or a tensor broadcast to ``self``)."""
    _refuse_kinds(self, "bernoulli_", "c", "no complex kernel")
    probs = p._data if isinstance(p, Tensor) else p
    if isinstance(p, Tensor):
        if p._device is not self._device:
            raise ValueError(f"bernoulli_: p on {p.device} for a tensor on {self.device}")
        lo, hi = (float(probs.min()), float(probs.max())) if probs.size else (0.0, 1.0)
    else:
        lo = hi = float(p)
    if not (0.0 <= lo and hi <= 1.0):
        raise ValueError(f"bernoulli_: p must be in [0, 1], got values in [{lo}, {hi}]")
    u = _src(self, generator).random(tuple(self.shape), dtype=np.float64)
    return _fill_(self, u < probs, "bernoulli_")


_FLOAT_RANDOM_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


@declare(namespaces=())
def random_(self: Tensor, from_: int = 0, to: int | None = None, *, generator=None, **kw) -> Tensor:
    """Fill with integers uniform in ``[from, to)``; ``random_(to)`` means ``[0, to)``; without bounds
    ``[0, 2**mantissa_bits]`` for floats and ``[0, max]`` for integer dtypes (as PyTorch)."""
    from_ = kw.pop("from", from_)
    if kw:
        raise TypeError(f"random_: unexpected arguments {sorted(kw)}")
    _refuse_kinds(self, "random_", "c", "integral, floating and bool types only")
    if to is None and from_ != 0:
        from_, to = 0, from_
    if self.dtype.name == "bool" and to is not None and (from_ < 0 or to > 2):
        raise ValueError(f"random_: [{from_}, {to}) is out of bounds for bool")
    src = _src(self, generator)
    name = self.dtype.name
    if to is None:
        if name == "bool":
            hi = 1
        elif name in _FLOAT_RANDOM_BITS:
            hi = 2 ** _FLOAT_RANDOM_BITS[name]
        else:
            hi = int(np.iinfo(self._data.dtype).max)
        vals = src.integers(0, hi, size=tuple(self.shape), dtype=np.int64, endpoint=True)
    else:
        if to <= from_:
            raise ValueError(f"random_: expects from < to, got from={from_}, to={to}")
        vals = src.integers(int(from_), int(to), size=tuple(self.shape), dtype=np.int64)
    return _fill_(self, vals, "random_")


@declare(namespaces=())
def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(``p``) trials up to the first success (values 1, 2, ...)."""
    _refuse_kinds(self, "geometric_", "bc", "no bool or complex kernel")
    if not 0 < p <= 1:
        raise ValueError(f"geometric_: expects 0 < p <= 1, got {p}")
    u = _src(self, generator).random(tuple(self.shape), dtype=np.float64)
    be = self._device.backend
    with be.errstate():
        k = be.floor(be.log1p(-u) / np.log1p(-p)) + 1 if p < 1 else u * 0 + 1
    return _fill_(self, k, "geometric_")


@declare(namespaces=())
def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill with Cauchy samples ``median + sigma * tan(pi * (u - 1/2))``."""
    _refuse_kinds(self, "cauchy_", "biuc", "a continuous distribution needs a floating dtype")
    u = _src(self, generator).random(tuple(self.shape), dtype=np.float64)
    return _fill_(self, median + sigma * self._device.backend.tan(np.pi * (u - 0.5)), "cauchy_")


@declare(namespaces=())
def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill with ``exp(N(mean, std))`` samples."""
    _refuse_kinds(self, "log_normal_", "biuc", "floating dtypes only")
    if std <= 0:
        raise ValueError(f"log_normal_: expects std > 0, got {std}")
    z = _src(self, generator).standard_normal(tuple(self.shape), dtype=np.float64)
    return _fill_(self, self._device.backend.exp(z * std + mean), "log_normal_")

