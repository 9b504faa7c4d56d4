"""Shape and layout ops. Views (reshape when possible, view, expand, transpose,
permute, squeeze, unsqueeze) share storage with their input and never copy."""

from __future__ import annotations

from .._tensor import Tensor
from ..errors import LucidError, ShapeMismatch
from ._op import Op, apply
from ._utils import norm_dim, norm_shape
from .schema import KEEP_INPUT, OpSchema


def _infer_shape(shape, numel, op):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ValueError(f"{op}: only one dimension can be inferred (-1), got shape {tuple(shape)}")
    if any(s < -1 for s in shape):
        raise ValueError(f"{op}: invalid size in shape {tuple(shape)}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise ShapeMismatch(f"{op}: shape {tuple(shape)} is invalid for an input of {numel} elements")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise ShapeMismatch(f"{op}: shape {tuple(shape)} is invalid for an input of {numel} elements")
    return tuple(shape)


class Reshape(Op):
    """``y`` = ``x`` with a new shape (a view when the strides allow); ``dx = reshape(g, x.shape)``."""

    schema = OpSchema("reshape", amp_policy=KEEP_INPUT, family="shape")
    is_view = True

    @staticmethod
    def forward(be, x, shape):
        return x.reshape(shape)

    def backward(self, g):
        return reshape(g, self.shapes[0])

    def backward_fast(self, be, g):
        return g.reshape(self.shapes[0])


def reshape(input: Tensor, *shape) -> Tensor:
    """``input`` with shape ``shape`` (one entry may be -1); a view when possible, else a copy.

    >>> import pylucid
    >>> pylucid.arange(6).reshape(2, -1)
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    shape = _infer_shape(norm_shape(shape, "reshape"), input._data.size, "reshape")
    if shape == input._data.shape:
        return apply(Reshape, (input,), {"shape": shape}) if input._requires_grad else _alias(input)
    return apply(Reshape, (input,), {"shape": shape})


def _alias(x):
    return x.detach() if not x._requires_grad else x.view_as(x)


class View(Op):
    """Like ``reshape`` but never copies: raises when the strides do not allow a view."""

    schema = OpSchema("view", amp_policy=KEEP_INPUT, family="shape")
    is_view = True

    @staticmethod
    def forward(be, x, shape):
        v = x.view()
        try:
            v.shape = shape
        except AttributeError:
            raise LucidError(
                f"view: size {shape} is not compatible with the input's size {x.shape} and strides "
                f"(the tensor is not contiguous in the needed way); use .reshape(...) instead"
            ) from None
        return v

    def backward(self, g):
        return reshape(g, self.shapes[0])

    def backward_fast(self, be, g):
        return g.reshape(self.shapes[0])


def view(input: Tensor, *shape) -> Tensor:
    """A view of ``input`` with a new shape (shares storage; raises rather than copy).

    ``view(dtype)`` is not supported (use ``.to(dtype)``).
    """
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)) and not hasattr(shape[0], "__index__"):
        raise TypeError(f"view: expected sizes, got {shape[0]!r}; to convert dtypes use .to(dtype)")
    shape = _infer_shape(norm_shape(shape, "view"), input._data.size, "view")
    return apply(View, (input,), {"shape": shape})


def view_as(input: Tensor, other: Tensor) -> Tensor:
    return view(input, other.shape)


def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    return reshape(input, other.shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Flatten dims ``start_dim..end_dim`` into one.

    >>> import pylucid
    >>> pylucid.zeros(2, 3, 4).flatten(1).shape
    (2, 12)
    """
    nd = input.ndim
    if nd == 0:
        return reshape(input, (1,))
    s = norm_dim(start_dim, nd, "flatten")
    e = norm_dim(end_dim, nd, "flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} must not come after end_dim {end_dim}")
    shp = input.shape
    n = 1
    for d in shp[s:e + 1]:
        n *= d
    return reshape(input, shp[:s] + (n,) + shp[e + 1:])


class Expand(Op):
    """Broadcast ``x`` to a larger shape as a view (stride 0); ``dx = sum_to_size(g, x.shape)``."""

    schema = OpSchema("broadcast_to", amp_policy=KEEP_INPUT, family="shape")
    is_view = True

    @staticmethod
    def forward(be, x, shape):
        return be.broadcast_to(x, shape)

    def backward(self, g):
        from .elementwise import sum_to_size

        return sum_to_size(g, self.shapes[0])

    def backward_fast(self, be, g):
        return be.sum_to_shape(g, self.shapes[0])


def broadcast_to(input: Tensor, shape) -> Tensor:
    """``input`` broadcast to ``shape`` (a view; -1 keeps a size).

    >>> import pylucid
    >>> pylucid.broadcast_to(pylucid.tensor([1, 2]), (2, 2))
    tensor([[1, 2],
            [1, 2]])
    """
    shape = norm_shape((shape,), "broadcast_to")
    xs = input.shape
    if len(shape) < len(xs):
        raise ShapeMismatch(f"broadcast_to: cannot broadcast shape {xs} to fewer dims {shape}")
    lead = len(shape) - len(xs)
    out = []
    for i, s in enumerate(shape):
        if i < lead:
            if s < 0:
                raise ShapeMismatch(f"broadcast_to: -1 is not allowed for a new leading dim, got {shape}")
            out.append(s)
            continue
        src = xs[i - lead]
        if s == -1:
            s = src
        if src != s and src != 1:
            raise ShapeMismatch(f"broadcast_to: cannot broadcast shape {xs} to {shape} (dim {i}: {src} vs {s})")
        out.append(s)
    out = tuple(out)
    if out == xs:
        return _alias(input)
    return apply(Expand, (input,), {"shape": out})


def expand(input: Tensor, *sizes) -> Tensor:
    """``input`` expanded to ``sizes`` (a view; -1 keeps a size), as ``Tensor.expand``."""
    return broadcast_to(input, norm_shape(sizes, "expand"))


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return broadcast_to(input, other.shape)


class Permute(Op):
    """Reorder dims (a view); ``dx = permute(g, inverse(dims))``."""

    schema = OpSchema("permute", amp_policy=KEEP_INPUT, family="shape")
    is_view = True

    @staticmethod
    def forward(be, x, dims):
        return x.transpose(dims)

    def _inverse(self):
        dims = self.params["dims"]
        inv = [0] * len(dims)
        for i, d in enumerate(dims):
            inv[d] = i
        return tuple(inv)

    def backward(self, g):
        return apply(Permute, (g,), {"dims": self._inverse()})

    def backward_fast(self, be, g):
        return g.transpose(self._inverse())


def permute(input: Tensor, *dims) -> Tensor:
    """Reorder the dims of ``input`` (a view).

    >>> import pylucid
    >>> pylucid.zeros(2, 3, 4).permute(2, 0, 1).shape
    (4, 2, 3)
    """
    dims = norm_shape(dims, "permute")
    nd = input.ndim
    if len(dims) != nd:
        raise ValueError(f"permute: expected {nd} dims for a {nd}-d tensor, got {dims}")
    dims = tuple(norm_dim(d, nd, "permute") for d in dims)
    if len(set(dims)) != nd:
        raise ValueError(f"permute: dims {dims} repeat a dimension")
    if dims == tuple(range(nd)):
        return _alias(input)
    return apply(Permute, (input,), {"dims": dims})


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims (a view)."""
    nd = input.ndim
    if nd == 0:
        return _alias(input)
    a = norm_dim(dim0, nd, "transpose")
    b = norm_dim(dim1, nd, "transpose")
    dims = list(range(nd))
    dims[a], dims[b] = dims[b], dims[a]
    return permute(input, tuple(dims))


swapaxes = swapdims = transpose


def t(input: Tensor) -> Tensor:
    """Transpose a tensor of at most 2 dims."""
    if input.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dims, got {input.ndim}; use transpose(dim0, dim1)")
    return transpose(input, 0, 1) if input.ndim == 2 else input


def _T(self):  # noqa: N802
    return permute(self, tuple(range(self.ndim - 1, -1, -1))) if self.ndim > 1 else self


def _mT(self):  # noqa: N802
    if self.ndim < 2:
        raise ValueError(f"mT: expects a tensor with >= 2 dims, got {self.ndim}")
    return transpose(self, -2, -1)


def squeeze(input: Tensor, dim=None) -> Tensor:
    """Remove size-1 dims (all, one, or a tuple); a view.

    >>> import pylucid
    >>> pylucid.zeros(1, 3, 1).squeeze().shape, pylucid.zeros(1, 3, 1).squeeze(0).shape
    ((3,), (3, 1))
    """
    shp = input.shape
    if dim is None:
        new = tuple(s for s in shp if s != 1)
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = {norm_dim(d, input.ndim, "squeeze") for d in dims}
        new = tuple(s for i, s in enumerate(shp) if not (i in dims and s == 1))
    if new == shp:
        return _alias(input)
    return apply(Reshape, (input,), {"shape": new})


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim`` (a view)."""
    d = norm_dim(dim, input.ndim + 1, "unsqueeze")
    shp = input.shape
    return apply(Reshape, (input,), {"shape": shp[:d] + (1,) + shp[d:]})


class Cat(Op):
    """Concatenate along ``dim``; ``dx_i`` is the matching slice of ``g``."""

    schema = OpSchema("concatenate", amp_policy=KEEP_INPUT, family="shape")

    @staticmethod
    def forward(be, *xs, dim):
        return be.concatenate(xs, axis=dim)

    def _slices(self):
        dim = self.params["dim"]
        start = 0
        out = []
        for s in self.shapes:
            n = s[dim]
            out.append((dim, start, start + n))
            start += n
        return out

    def backward(self, g):
        from .indexing import getitem

        res = []
        for (dim, a, b), e in zip(self._slices(), self.next_edges):
            res.append(getitem(g, (slice(None),) * dim + (slice(a, b),)) if e is not None else None)
        return tuple(res)

    def backward_fast(self, be, g):
        res = []
        for (dim, a, b), e in zip(self._slices(), self.next_edges):
            res.append(g[(slice(None),) * dim + (slice(a, b),)] if e is not None else None)
        return tuple(res)


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate tensors along an existing dim (dtypes promote).

    >>> import pylucid
    >>> pylucid.cat([pylucid.zeros(1, 2), pylucid.ones(2, 2)]).shape
    (3, 2)
    """
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of Tensors")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"cat: expected Tensors, got {type(x).__name__} at position {i}")
    # PyTorch skips legacy empty 1-d tensors of shape (0,)
    live = [x for x in tensors if not (x.ndim == 1 and x.shape[0] == 0)] or tensors[:1]
    nd = live[0].ndim
    if nd == 0:
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated; use stack")
    d = norm_dim(dim, nd, "cat")
    ref = live[0].shape
    for i, x in enumerate(live):
        if x.ndim != nd or any(a != b for k, (a, b) in enumerate(zip(x.shape, ref)) if k != d):
            raise ShapeMismatch(
                f"cat: sizes of tensors must match except in dim {d}: got {ref} and {tuple(x.shape)} (tensor {i})"
            )
    return apply(Cat, tuple(live), {"dim": d})


concatenate = concat = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Stack equally shaped tensors along a new dim.

    >>> import pylucid
    >>> pylucid.stack([pylucid.tensor([1, 2]), pylucid.tensor([3, 4])], dim=1)
    tensor([[1, 3],
            [2, 4]])
    """
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of Tensors")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"stack: expected Tensors, got {type(x).__name__} at position {i}")
        if x.shape != tensors[0].shape:
            raise ShapeMismatch(
                f"stack: expects each tensor to be equal size, but got {tuple(tensors[0].shape)} at entry 0 "
                f"and {tuple(x.shape)} at entry {i}"
            )
    d = norm_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([unsqueeze(x, d) for x in tensors], d)


def _install():
    T = Tensor
    T.reshape = reshape
    T.view = view
    T.view_as = view_as
    T.reshape_as = reshape_as
    T.flatten = flatten
    T.expand = expand
    T.expand_as = expand_as
    T.broadcast_to = broadcast_to
    T.permute = permute
    T.transpose = transpose
    T.swapaxes = transpose
    T.swapdims = transpose
    T.t = t
    T.T = property(_T)
    T.mT = property(_mT)
    T.squeeze = squeeze
    T.unsqueeze = unsqueeze


_install()
