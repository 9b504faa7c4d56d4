"""Shape and layout ops. Views (reshape when possible, view, expand, transpose,
permute, squeeze, unsqueeze) share storage with their input and never copy."""

from __future__ import annotations

import inspect
import math

from .._tensor import Tensor
from ..errors import LucidError, ShapeMismatch
from ._op import Op, apply
from ._utils import check_tensor, norm_dim, norm_shape
from .registry import declare
from .schema import KEEP_INPUT, OpSchema


def _infer_shape(shape, numel, op):
    # the common call first: every size given, none negative, and the right element count
    if -1 not in shape and (not shape or min(shape) >= 0) and math.prod(shape) == numel:
        return tuple(shape)
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
        return be.reshape(x, shape)

    def backward(self, g):
        return reshape(g, self.shapes[0])

    def backward_fast(self, be, g):
        return be.reshape(g, self.shapes[0])


@declare(Reshape)
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


@declare(View)
def view(input: Tensor, *shape) -> Tensor:
    """A view of ``input`` with a new shape (shares storage; raises rather than copy).

    ``view(dtype)`` is not supported (use ``.to(dtype)``).
    """
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)) and not hasattr(shape[0], "__index__"):
        raise TypeError(f"view: expected sizes, got {shape[0]!r}; to convert dtypes use .to(dtype)")
    shape = _infer_shape(norm_shape(shape, "view"), input._data.size, "view")
    return apply(View, (input,), {"shape": shape})


@declare(namespaces=())
def view_as(input: Tensor, other: Tensor) -> Tensor:
    return view(input, other.shape)


@declare(namespaces=())
def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    return reshape(input, other.shape)


@declare()
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


@declare(Expand)
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


@declare()
def expand(input: Tensor, *sizes) -> Tensor:
    """``input`` expanded to ``sizes`` (a view; -1 keeps a size), as ``Tensor.expand``."""
    return broadcast_to(input, norm_shape(sizes, "expand"))


@declare()
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


#: permutations already checked: (dims as given, ndim) -> (the normalised dims, whether they are the identity);
#: only for plain-int dims (1.0 and True hash as 1 and must still meet their own checks). A model permutes
#: with the same few arguments every step, and the checks cost more than the view.
_PERMS: dict = {}


def _plain_ints(t) -> bool:
    for v in t:
        if v.__class__ is not int:
            return False
    return True


def _permuted(input, dims, identity):
    return _alias(input) if identity else apply(Permute, (input,), {"dims": dims})


@declare(Permute)
def permute(input: Tensor, *dims) -> Tensor:
    """Reorder the dims of ``input`` (a view).

    >>> import pylucid
    >>> pylucid.zeros(2, 3, 4).permute(2, 0, 1).shape
    (4, 2, 3)
    """
    given = dims[0] if len(dims) == 1 and dims[0].__class__ is tuple else dims
    nd = input.ndim
    key = (given, nd) if _plain_ints(given) else None
    if key is not None:
        hit = _PERMS.get(key)
        if hit is not None:
            return _permuted(input, *hit)
    dims = norm_shape(dims, "permute")
    if len(dims) != nd:
        raise ValueError(f"permute: expected {nd} dims for a {nd}-d tensor, got {dims}")
    dims = tuple(norm_dim(d, nd, "permute") for d in dims)
    if len(set(dims)) != nd:
        raise ValueError(f"permute: dims {dims} repeat a dimension")
    hit = (dims, dims == tuple(range(nd)))
    if key is not None:
        if len(_PERMS) > 4096:  # arguments that change every call: start again
            _PERMS.clear()
        _PERMS[key] = hit
    return _permuted(input, *hit)


@declare(aliases=("swapaxes", "swapdims"))
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims (a view)."""
    nd = input.ndim
    if nd == 0:
        return _alias(input)
    if dim0.__class__ is int and dim1.__class__ is int:
        hit = _PERMS.get((dim0, dim1, nd))  # (a 3-tuple: never a permute key, whose second item is an int ndim
        if hit is not None:                 # and first a tuple)
            return _permuted(input, *hit)
    a = norm_dim(dim0, nd, "transpose")
    b = norm_dim(dim1, nd, "transpose")
    dims = list(range(nd))
    dims[a], dims[b] = dims[b], dims[a]
    dims = tuple(dims)
    hit = (dims, a == b)
    if dim0.__class__ is int and dim1.__class__ is int:
        if len(_PERMS) > 4096:
            _PERMS.clear()
        _PERMS[(dim0, dim1, nd)] = hit
    return _permuted(input, *hit)


@declare()
def t(input: Tensor) -> Tensor:
    """Transpose a tensor of at most 2 dims."""
    if input.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dims, got {input.ndim}; use transpose(dim0, dim1)")
    return transpose(input, 0, 1) if input.ndim == 2 else input


@declare(namespaces=(), name="T", as_property=True)
def _T(self):  # noqa: N802
    """All dims reversed (a view); 0-d and 1-d tensors are returned as they are.

    >>> import pylucid
    >>> pylucid.zeros(2, 3, 4).T.shape
    (4, 3, 2)
    """
    return permute(self, tuple(range(self.ndim - 1, -1, -1))) if self.ndim > 1 else self


@declare(namespaces=(), name="mT", as_property=True)
def _mT(self):  # noqa: N802
    """The last two dims swapped (a view of a batch of transposed matrices)."""
    if self.ndim < 2:
        raise ValueError(f"mT: expects a tensor with >= 2 dims, got {self.ndim}")
    return transpose(self, -2, -1)


@declare(Reshape)
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


@declare(Reshape)
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


@declare(Cat, aliases=("concatenate", "concat"), method=False)
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



@declare(method=False)
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




# ---------------------------------------------------------------------------
# Layout helpers built on the primitives above (composites: no backward needed)
# ---------------------------------------------------------------------------

def _slice_dim(x: Tensor, dim: int, start: int, stop: int) -> Tensor:
    """``x`` narrowed to ``start:stop`` along ``dim`` (a view, through ``getitem``)."""
    from .indexing import getitem

    return getitem(x, (slice(None),) * dim + (slice(start, stop),))


@declare()
def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one entry may be -1); the inverse of ``flatten``.

    >>> import pylucid
    >>> pylucid.zeros(2, 12).unflatten(1, (3, -1)).shape
    (2, 3, 4)
    """
    check_tensor(input, "unflatten")
    d = norm_dim(dim, input.ndim, "unflatten")
    sizes = norm_shape((sizes,), "unflatten")
    if not sizes:
        raise ValueError("unflatten: sizes must be non-empty")
    sizes = _infer_shape(sizes, input.shape[d], "unflatten")
    return reshape(input, input.shape[:d] + sizes + input.shape[d + 1:])


@declare()
def ravel(input: Tensor) -> Tensor:
    """``input`` flattened to 1-D (a view when contiguous)."""
    check_tensor(input, "ravel")
    return reshape(input, (-1,))


@declare(aliases=("moveaxis",))
def movedim(input: Tensor, source, destination) -> Tensor:
    """Move dims ``source`` to positions ``destination`` (a view; the other dims keep their order).

    >>> import pylucid
    >>> pylucid.zeros(2, 3, 4).movedim(0, -1).shape
    (3, 4, 2)
    """
    check_tensor(input, "movedim")
    nd = input.ndim
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {tuple(src)} and destination {tuple(dst)} must have the same length")
    src = [norm_dim(d, nd, "movedim") for d in src]
    dst = [norm_dim(d, nd, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dim in source {tuple(src)} or destination {tuple(dst)}")
    order = [d for d in range(nd) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, tuple(order))



@declare(method=False)
def broadcast_shapes(*shapes) -> tuple:
    """The shape that ``shapes`` broadcast to (NumPy/PyTorch rules).

    >>> import pylucid
    >>> pylucid.broadcast_shapes((2, 1), (3,), ())
    (2, 3)
    """
    out: list = []
    for shp in shapes:
        if not isinstance(shp, (int, tuple, list)) or not all(hasattr(n, "__index__") for n in
                                                              ((shp,) if isinstance(shp, int) else shp)):
            raise TypeError(f"broadcast_shapes: each shape must be an int or a tuple of ints, got {shp!r}")
        shp = (shp,) if isinstance(shp, int) else tuple(shp)
        for i, n in enumerate(reversed(shp)):
            if n < 0:
                raise ValueError(f"broadcast_shapes: negative size in {shp}")
            if i >= len(out):
                out.append(n)
            elif out[i] == 1:
                out[i] = n
            elif n != 1 and n != out[i]:
                raise ShapeMismatch(
                    f"broadcast_shapes: shapes {[tuple(s) if not isinstance(s, int) else (s,) for s in shapes]} "
                    f"cannot be broadcast together (size {n} vs {out[i]} at dim -{i + 1})"
                )
    return tuple(reversed(out))


@declare(method=False)
def broadcast_tensors(*tensors) -> tuple:
    """Broadcast all ``tensors`` to their common shape (views).

    >>> import pylucid
    >>> a, b = pylucid.broadcast_tensors(pylucid.zeros(2, 1), pylucid.zeros(3))
    >>> a.shape, b.shape
    ((2, 3), (2, 3))
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for x in tensors:
        check_tensor(x, "broadcast_tensors", "every argument")
    shape = broadcast_shapes(*(x.shape for x in tensors))
    return tuple(broadcast_to(x, shape) for x in tensors)


@declare(method=False)
def atleast_1d(*tensors):
    """``input`` with at least one dim (0-d becomes shape ``(1,)``); several tensors give a tuple."""
    return _atleast(tensors, 1)


@declare(method=False)
def atleast_2d(*tensors):
    """``input`` with at least two dims: 0-d -> ``(1, 1)``, ``(n,)`` -> ``(1, n)``."""
    return _atleast(tensors, 2)


@declare(method=False)
def atleast_3d(*tensors):
    """``input`` with at least three dims: ``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` -> ``(m, n, 1)``."""
    return _atleast(tensors, 3)


def _atleast(tensors, n):
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    out = []
    for x in tensors:
        check_tensor(x, f"atleast_{n}d", "every argument")
        s = x.shape
        if len(s) >= n:
            out.append(x)
            continue
        if n == 1:
            new = (1,)
        elif n == 2:
            new = (1,) + s if s else (1, 1)
        else:
            new = {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)]
        out.append(reshape(x, new))
    return out[0] if one else tuple(out)


@declare(method=False)
def hstack(tensors) -> Tensor:
    """Concatenate along dim 0 for 1-D inputs, else dim 1.

    >>> import pylucid
    >>> pylucid.hstack([pylucid.tensor([1, 2]), pylucid.tensor([3])])
    tensor([1, 2, 3])
    """
    ts = atleast_1d(tuple(tensors))
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


@declare(aliases=("row_stack",), method=False)
def vstack(tensors) -> Tensor:
    """Stack rows: inputs made at least 2-D, then concatenated along dim 0."""
    return cat(atleast_2d(tuple(tensors)), 0)



@declare(method=False)
def dstack(tensors) -> Tensor:
    """Stack depth-wise: inputs made at least 3-D, then concatenated along dim 2."""
    return cat(atleast_3d(tuple(tensors)), 2)


@declare(method=False)
def column_stack(tensors) -> Tensor:
    """0-d and 1-D inputs become columns ``(n, 1)``; then concatenated along dim 1."""
    ts = []
    for x in tensors:
        check_tensor(x, "column_stack", "every entry of tensors")
        ts.append(reshape(x, (x.numel(), 1)) if x.ndim <= 1 else x)
    return cat(ts, 1)


@declare()
def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """The view ``input[..., start:start+length, ...]`` along ``dim`` (``start`` may be negative).

    >>> import pylucid
    >>> pylucid.arange(6).narrow(0, 2, 3)
    tensor([2, 3, 4])
    """
    check_tensor(input, "narrow")
    if input.ndim == 0:
        raise ValueError("narrow: cannot be applied to a 0-d tensor")
    d = norm_dim(dim, input.ndim, "narrow")
    n = input.shape[d]
    start = int(start)
    if start < 0:
        start += n
    if not 0 <= start <= n or length < 0 or start + length > n:
        raise IndexError(f"narrow: start {start} and length {length} are out of range for dim {d} of size {n}")
    return _slice_dim(input, d, start, start + length)


@declare()
def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """Like ``narrow`` but returns a copy."""
    from .conversion import clone

    return clone(narrow(input, dim, start, length))


@declare()
def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Split into views: chunks of ``split_size`` (the last may be smaller) or the given list of sizes.

    >>> import pylucid
    >>> [p.tolist() for p in pylucid.arange(5).split(2)]
    [[0, 1], [2, 3], [4]]
    """
    check_tensor(tensor, "split", "tensor")
    d = norm_dim(dim, tensor.ndim, "split")
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(f"split: sizes {sizes} must be non-negative and sum to the size {n} of dim {d}")
    else:
        size = int(split_size_or_sections)
        if size < 0 or (size == 0 and n != 0):
            raise ValueError(f"split: split_size must be positive, got {size}")
        # an empty dim is one empty chunk (PyTorch)
        sizes = ([size] * (n // size) + ([n % size] if n % size else []) or [0]) if size else [0]
    out, start = [], 0
    for s in sizes:
        out.append(_slice_dim(tensor, d, start, start + s))
        start += s
    return tuple(out)


@declare()
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into ``chunks`` views of ``ceil(n / chunks)`` elements (possibly fewer chunks, as PyTorch)."""
    check_tensor(input, "chunk")
    if int(chunks) <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    d = norm_dim(dim, input.ndim, "chunk")
    n = input.shape[d]
    size = -(-n // int(chunks))
    if size == 0:
        return tuple(_slice_dim(input, d, 0, 0) for _ in range(int(chunks)))
    return split(input, size, d)


@declare()
def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    """Split into ``sections`` nearly equal views (the first ``n % sections`` one longer) or at ``indices``.

    >>> import pylucid
    >>> [p.tolist() for p in pylucid.arange(7).tensor_split(3)]
    [[0, 1, 2], [3, 4], [5, 6]]
    """
    check_tensor(input, "tensor_split")
    d = norm_dim(dim, input.ndim, "tensor_split")
    n = input.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        ios = ios.item() if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, (list, tuple)):
        bounds = [0] + [min(max(int(i) + (n if int(i) < 0 else 0), 0), n) for i in ios] + [n]
    else:
        k = int(ios)
        if k <= 0:
            raise ValueError(f"tensor_split: number of sections must be positive, got {k}")
        q, r = divmod(n, k)
        bounds = [0]
        for i in range(k):
            bounds.append(bounds[-1] + q + (1 if i < r else 0))
    return tuple(_slice_dim(input, d, a, max(a, b)) for a, b in zip(bounds[:-1], bounds[1:]))


def _split_even(op, input, sections, d):
    """``tensor_split`` for hsplit/vsplit/dsplit: an int number of sections must divide the dim (PyTorch)."""
    check_tensor(input, op)
    if not isinstance(sections, (list, tuple, Tensor)) and d < input.ndim:
        k = int(sections)
        if k <= 0 or input.shape[d] % k:
            raise ValueError(f"{op}: cannot split dim {d} of size {input.shape[d]} into {k} equal sections")
    return tensor_split(input, sections, d)


@declare()
def hsplit(input: Tensor, sections) -> tuple:
    return _split_even("hsplit", input, sections, 0 if input.ndim == 1 else 1)


@declare()
def vsplit(input: Tensor, sections) -> tuple:
    return _split_even("vsplit", input, sections, 0)


@declare()
def dsplit(input: Tensor, sections) -> tuple:
    return _split_even("dsplit", input, sections, 2)


class Unbind(Op):
    """The ``n`` slices along ``dim`` as views, one op with ``n`` outputs; ``dx = stack(grads, dim)``.

    One node instead of ``n`` indexing nodes: the backward writes every slice's gradient once (one
    stack), where ``n`` getitem backwards would each fill a zero tensor of the input's size and the
    engine would add them up. Slices without a gradient contribute zeros (the engine fills them).
    ``n_outputs`` differs per call, so each arity is a subclass (``_unbind_op``) of this registered op.
    """

    schema = OpSchema("unbind", amp_policy=KEEP_INPUT, family="shape")
    promote_args = ()
    is_view = True

    @staticmethod
    def forward(be, x, dim):
        lead = (slice(None),) * dim
        return tuple(x[lead + (i,)] for i in range(x.shape[dim]))

    def backward(self, *grads):
        return stack(list(grads), self.params["dim"])

    def save_extra(self, arrays, out):
        self.extra = arrays[0].strides

    def backward_fast(self, be, *grads):
        # write the slices straight into an array laid out like the input (a permuted view of a
        # contiguous buffer, say): the gradient then flows back through permute/reshape as views
        d = self.params["dim"]
        shape = self.shapes[0]
        # the slices' gradients may already be one array's (cuDNN's attention backward writes dq, dk
        # and dv into one buffer laid out like a fused qkv projection's output): joined as a view
        joined = be.joined_view(grads, d)
        if joined is not None and joined.shape == shape:
            return joined
        order = sorted(range(len(shape)), key=lambda i: -abs(self.extra[i]))
        buf = be.empty(tuple(shape[i] for i in order), dtype=grads[0].dtype)
        out = be.transpose(buf, tuple(order.index(i) for i in range(len(shape))))
        lead = (slice(None),) * d
        for i, g in enumerate(grads):
            if g.ndim and g.shape == out.shape[:d] + out.shape[d + 1:] and g.dtype == out.dtype:
                be.copy_into(out[lead + (i,)], g)
            else:
                out[lead + (i,)] = g  # (0-d slices, broadcasting or casting assignment)
        return out


_UNBIND_ARITY: dict = {}


def _unbind_op(n: int):
    cls = _UNBIND_ARITY.get(n)
    if cls is None:
        # same schema and rules (the subclass has no ``schema`` of its own, so it is not registered again)
        cls = _UNBIND_ARITY[n] = type("Unbind", (Unbind,), {"__slots__": (), "n_outputs": n})
    return cls


@declare(Unbind)
def unbind(input: Tensor, dim: int = 0) -> tuple:
    """The slices along ``dim`` (views), as a tuple.

    >>> import pylucid
    >>> pylucid.tensor([[1, 2], [3, 4]]).unbind(1)
    (tensor([1, 3]), tensor([2, 4]))
    """
    from .indexing import getitem

    check_tensor(input, "unbind")
    d = norm_dim(dim, input.ndim, "unbind")
    n = input.shape[d]
    if n < 2:  # no slice, or one (a single-output op takes the plain indexing path)
        return tuple(getitem(input, (slice(None),) * d + (i,)) for i in range(n))
    return apply(_unbind_op(n), (input,), {"dim": d})


# ---------------------------------------------------------------------------
# flip / roll / rot90
# ---------------------------------------------------------------------------

class Flip(Op):
    """Reverse the order along ``dims`` (a copy, as PyTorch); ``dx = flip(g, dims)``."""

    schema = OpSchema("flip", amp_policy=KEEP_INPUT, family="shape")

    @staticmethod
    def forward(be, x, dims):
        return be.flip(x, axis=dims).copy()

    def backward(self, g):
        return apply(Flip, (g,), self.params)


@declare(Flip)
def flip(input: Tensor, dims) -> Tensor:
    """Reverse ``input`` along ``dims`` (int or tuple).

    >>> import pylucid
    >>> pylucid.tensor([[1, 2], [3, 4]]).flip(1)
    tensor([[2, 1],
            [4, 3]])
    """
    check_tensor(input, "flip")
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    nd = max(input.ndim, 1)
    d = tuple(norm_dim(x, nd, "flip") for x in dims)
    if len(set(d)) != len(d):
        raise ValueError(f"flip: dims {tuple(dims)} repeat a dimension")
    if input.ndim == 0 or not d:
        from .conversion import clone

        return clone(input)
    return apply(Flip, (input,), {"dims": d})


@declare()
def fliplr(input: Tensor) -> Tensor:
    """Flip along dim 1 (needs >= 2 dims)."""
    if input.ndim < 2:
        raise ValueError(f"fliplr: input must be >= 2-d, got {input.ndim}-d")
    return flip(input, (1,))


@declare()
def flipud(input: Tensor) -> Tensor:
    """Flip along dim 0 (needs >= 1 dim)."""
    if input.ndim < 1:
        raise ValueError("fliplr: input must be >= 1-d, got 0-d")
    return flip(input, (0,))


class Roll(Op):
    """Circular shift along ``dims`` (all elements, flattened, when ``dims`` is None); ``dx = roll(g, -shifts)``."""

    schema = OpSchema("roll", amp_policy=KEEP_INPUT, family="shape")

    @staticmethod
    def forward(be, x, shifts, dims):
        return be.roll(x, shifts, axis=dims)

    def backward(self, g):
        shifts = self.params["shifts"]
        shifts = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
        return apply(Roll, (g,), {"shifts": shifts, "dims": self.params["dims"]})


@declare(Roll)
def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Shift elements circularly by ``shifts`` along ``dims`` (flattened when ``dims`` is None).

    >>> import pylucid
    >>> pylucid.arange(5).roll(2)
    tensor([3, 4, 0, 1, 2])
    """
    check_tensor(input, "roll")
    if dims is None:
        if isinstance(shifts, (tuple, list)):
            if len(shifts) != 1:
                raise ValueError(f"roll: with dims=None, shifts must be one int, got {tuple(shifts)}")
            shifts = shifts[0]
        return apply(Roll, (input,), {"shifts": int(shifts), "dims": None})
    shifts = tuple(int(s) for s in shifts) if isinstance(shifts, (tuple, list)) else (int(shifts),)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    dims = tuple(norm_dim(d, max(input.ndim, 1), "roll") for d in dims)
    return apply(Roll, (input,), {"shifts": shifts, "dims": dims})


@declare()
def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by ``k * 90`` degrees in the plane ``dims`` (from the first towards the second axis)."""
    check_tensor(input, "rot90")
    if len(dims) != 2:
        raise ValueError(f"rot90: expected 2 dims, got {tuple(dims)}")
    if input.ndim < 2:
        raise ValueError(f"rot90: expected a tensor with >= 2 dims, got {input.ndim}")
    a, b = (norm_dim(d, input.ndim, "rot90") for d in dims)
    if a == b:
        raise ValueError(f"rot90: dims must differ, got {tuple(dims)}")
    k = int(k) % 4
    if k == 0:
        from .conversion import clone

        return clone(input)
    if k == 1:
        return transpose(flip(input, (b,)), a, b)
    if k == 2:
        return flip(input, (a, b))
    return flip(transpose(input, a, b), (b,))


# ---------------------------------------------------------------------------
# repeat / tile / repeat_interleave (composites of reshape + expand)
# ---------------------------------------------------------------------------

@declare()
def repeat(input: Tensor, *sizes) -> Tensor:
    """Tile ``input`` ``sizes[i]`` times along each dim (``len(sizes) >= ndim``; new dims lead).

    A composite: each dim becomes ``(r, n)`` by a stride-0 expand and is merged
    by one reshape (one copy), so the backward is expand's sum.

    >>> import pylucid
    >>> pylucid.tensor([1, 2]).repeat(2, 2)
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    check_tensor(input, "repeat")
    sizes = norm_shape(sizes, "repeat")
    if len(sizes) < input.ndim:
        raise ValueError(f"repeat: number of repeat dims {len(sizes)} can not be smaller than the tensor's "
                         f"{input.ndim} dims")
    if any(s < 0 for s in sizes):
        raise ValueError(f"repeat: repeats must be non-negative, got {sizes}")
    shp = (1,) * (len(sizes) - input.ndim) + input.shape
    x = reshape(input, tuple(v for n in shp for v in (1, n)))
    x = broadcast_to(x, tuple(v for r, n in zip(sizes, shp) for v in (r, n)))
    return reshape(x, tuple(r * n for r, n in zip(sizes, shp)))


@declare()
def tile(input: Tensor, dims) -> Tensor:
    """Like ``repeat`` but ``dims`` may be shorter than ``ndim`` (ones are prepended)."""
    check_tensor(input, "tile")
    dims = norm_shape((dims,), "tile")
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


@declare()
def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *, output_size: int | None = None):
    """Repeat each element ``repeats`` times along ``dim`` (flattened input when ``dim`` is None).

    ``repeats`` is an int or a 1-D integer tensor with one count per element
    (or one count for all). ``repeat_interleave(counts)`` alone gives
    ``0`` repeated ``counts[0]`` times, ``1`` ``counts[1]`` times, ...

    >>> import pylucid
    >>> pylucid.tensor([1, 2]).repeat_interleave(2)
    tensor([1, 1, 2, 2])
    >>> pylucid.tensor([[1, 2], [3, 4]]).repeat_interleave(pylucid.tensor([1, 2]), dim=0)
    tensor([[1, 2],
            [3, 4],
            [3, 4]])
    """
    from .._tensor import _new_tensor
    from .indexing import index_select

    if repeats is not None and not isinstance(repeats, Tensor) and (
            isinstance(repeats, (float, complex, str)) or not hasattr(repeats, "__index__")):
        raise TypeError(f"repeat_interleave: repeats must be an int or an integer Tensor, got "
                        f"{type(repeats).__name__} {repeats!r}")

    check_tensor(input, "repeat_interleave")
    if repeats is None:
        counts = input
        if counts.ndim != 1 or counts._data.dtype.kind not in "iu":
            raise ValueError("repeat_interleave: repeats must be a 1-D integer tensor")
        be = counts._device.backend
        return _new_tensor(be.repeat(be.arange(counts.shape[0], dtype="int64"), counts._data), counts._device)
    if dim is None:
        input = reshape(input, (-1,))
        d = 0
    else:
        d = norm_dim(dim, input.ndim, "repeat_interleave")
    n = input.shape[d]
    if isinstance(repeats, Tensor):
        if repeats._data.dtype.kind not in "iu" or repeats.ndim > 1:
            raise ValueError("repeat_interleave: repeats must be an int or a 0-d/1-D integer tensor")
        if repeats.ndim == 0 or repeats.shape[0] == 1:
            repeats = int(repeats.reshape(-1)[0].item())
        else:
            if repeats.shape[0] != n:
                raise ShapeMismatch(f"repeat_interleave: repeats must have {n} elements (size of dim {d}), got "
                                    f"{repeats.shape[0]}")
            be = input._device.backend
            r = repeats._data
            if r.size and int(r.min()) < 0:
                raise ValueError("repeat_interleave: repeats can not be negative")
            idx = _new_tensor(be.repeat(be.arange(n, dtype="int64"), be.asarray(r)), input._device)
            return index_select(input, d, idx)
    repeats = int(repeats)
    if repeats < 0:
        raise ValueError(f"repeat_interleave: repeats can not be negative, got {repeats}")
    shp = input.shape
    x = unsqueeze(input, d + 1)
    x = broadcast_to(x, shp[:d + 1] + (repeats,) + shp[d + 1:])
    return reshape(x, shp[:d] + (n * repeats,) + shp[d + 1:])


# ---------------------------------------------------------------------------
# triangles and diagonals
# ---------------------------------------------------------------------------

class _Triangle(Op):
    """Keep the lower (``tril``) or upper (``triu``) triangle of the last two dims; ``dx = same(g)``."""

    fn_name = ""

    @classmethod
    def forward(cls, be, x, diagonal):
        return getattr(be, cls.fn_name)(x, diagonal)

    def backward(self, g):
        return apply(type(self), (g,), self.params)


class Tril(_Triangle):
    schema = OpSchema("tril", amp_policy=KEEP_INPUT, family="shape")
    fn_name = "tril"


class Triu(_Triangle):
    schema = OpSchema("triu", amp_policy=KEEP_INPUT, family="shape")
    fn_name = "triu"


def _triangle(cls, input, diagonal, name):
    check_tensor(input, name)
    if input.ndim < 2:
        raise ValueError(f"{name}: input tensor must have at least 2 dimensions, got {input.ndim}")
    return apply(cls, (input,), {"diagonal": int(diagonal)})


@declare(Tril, inplace=True)
def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """Zero the elements above the ``diagonal``-th diagonal of the last two dims (batched).

    >>> import pylucid
    >>> pylucid.ones(2, 3).tril()
    tensor([[1., 0., 0.],
            [1., 1., 0.]])
    """
    return _triangle(Tril, input, diagonal, "tril")


@declare(Triu, inplace=True)
def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """Zero the elements below the ``diagonal``-th diagonal of the last two dims (batched).

    >>> import pylucid
    >>> pylucid.ones(2, 3).triu(1)
    tensor([[0., 1., 1.],
            [0., 0., 1.]])
    """
    return _triangle(Triu, input, diagonal, "triu")


def _writable_diagonal(be, x, offset, dim1, dim2):
    d = be.diagonal(x, offset, dim1, dim2)
    flags = getattr(d, "flags", None)
    if flags is not None and hasattr(flags, "writeable") and not flags.writeable and x.flags.writeable:
        # NumPy hands out diagonals read-only for backward compatibility only; the
        # view is sound, and PyTorch's diagonal is a writable view
        d.flags.writeable = True
    return d


class Diagonal(Op):
    """The ``offset`` diagonal of dims ``dim1, dim2``, moved to the last dim (a view); ``dx = diag_embed(g)``."""

    schema = OpSchema("diagonal", amp_policy=KEEP_INPUT, family="shape")
    is_view = True

    @staticmethod
    def forward(be, x, offset, dim1, dim2):
        return _writable_diagonal(be, x, offset, dim1, dim2)

    def backward(self, g):
        return apply(DiagEmbed, (g,), dict(self.params, shape=self.shapes[0]))


class DiagEmbed(Op):
    """Zeros of ``shape`` with the last dim of ``x`` written on the ``offset`` diagonal of ``dim1, dim2``;
    the adjoint of ``diagonal`` (``dx = diagonal(g)``)."""

    schema = OpSchema("diag_embed", amp_policy=KEEP_INPUT, family="shape")

    @staticmethod
    def forward(be, x, shape, offset, dim1, dim2):
        z = be.zeros(shape, dtype=x.dtype)
        _writable_diagonal(be, z, offset, dim1, dim2)[...] = x
        return z

    def backward(self, g):
        p = self.params
        return apply(Diagonal, (g,), {"offset": p["offset"], "dim1": p["dim1"], "dim2": p["dim2"]})


@declare(Diagonal)
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The ``offset``-th diagonal of the planes ``(dim1, dim2)``, appended as the last dim (a writable view).

    >>> import pylucid
    >>> pylucid.arange(9).reshape(3, 3).diagonal(1)
    tensor([1, 5])
    """
    check_tensor(input, "diagonal")
    if input.ndim < 2:
        raise ValueError(f"diagonal: expected a tensor with >= 2 dims, got {input.ndim}")
    a = norm_dim(dim1, input.ndim, "diagonal")
    b = norm_dim(dim2, input.ndim, "diagonal")
    if a == b:
        raise ValueError(f"diagonal: dim1 and dim2 cannot be identical, got {dim1} and {dim2}")
    return apply(Diagonal, (input,), {"offset": int(offset), "dim1": a, "dim2": b})


@declare(DiagEmbed)
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices whose ``offset`` diagonal (in dims ``dim1, dim2`` of the output) is the last dim of ``input``.

    >>> import pylucid
    >>> pylucid.diag_embed(pylucid.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    check_tensor(input, "diag_embed")
    nd = input.ndim + 1
    a = norm_dim(dim1, nd, "diag_embed")
    b = norm_dim(dim2, nd, "diag_embed")
    if a == b:
        raise ValueError(f"diag_embed: dim1 and dim2 cannot be identical, got {dim1} and {dim2}")
    if input.ndim == 0:
        raise ValueError("diag_embed: expected a tensor with >= 1 dim")
    m = input.shape[-1] + abs(int(offset))
    rest = iter(input.shape[:-1])
    shape = tuple(m if i in (a, b) else next(rest) for i in range(nd))
    # DiagEmbed writes x's last dim on diagonal(a, b); diagonal() orders the
    # remaining dims as in the output, which is input.shape[:-1]: they match
    return apply(DiagEmbed, (input,), {"shape": shape, "offset": int(offset), "dim1": a, "dim2": b})


@declare()
def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """1-D input: a square matrix with ``input`` on its ``diagonal``; 2-D input: that diagonal (a copy).

    >>> import pylucid
    >>> pylucid.diag(pylucid.tensor([[1, 2], [3, 4]]))
    tensor([1, 4])
    """
    check_tensor(input, "diag")
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        from .conversion import clone

        return clone(globals()["diagonal"](input, diagonal, 0, 1))
    raise ValueError(f"diag: expected a 1-D or 2-D tensor, got {input.ndim}-D")


@declare()
def trace(input: Tensor) -> Tensor:
    """Sum of the main diagonal of a 2-D tensor (integers sum to int64).

    >>> import pylucid
    >>> pylucid.tensor([[1., 2.], [3., 4.]]).trace()
    tensor(5.)
    """
    from .reduction import sum as _sum

    check_tensor(input, "trace")
    if input.ndim != 2:
        raise ValueError(f"trace: expected a 2-D tensor, got {input.ndim}-D")
    return _sum(diagonal(input))


# ---------------------------------------------------------------------------
# pad
# ---------------------------------------------------------------------------

def _pad_source_index(be, n, left, right, mode):
    """For each output position along one dim, the input position it copies (non-constant modes)."""
    p = be.arange(-left, n + right)
    if mode == "reflect":
        p = be.abs(p)
        return be.where(p >= n, 2 * (n - 1) - p, p)
    if mode == "replicate":
        return be.clip(p, 0, n - 1)
    return p % n  # circular


class Pad(Op):
    """Pad the trailing dims: ``constant`` by ``be.pad`` (negative pads crop), the other modes by gathering
    the source index of each output position; the backward of those is their adjoint, ``pad_backward``
    (a scatter-add, so reflected/replicated positions accumulate)."""

    schema = OpSchema("pad", amp_policy=KEEP_INPUT, family="shape")

    @staticmethod
    def forward(be, x, pads, mode, value):
        if mode == "constant":
            crop = tuple(slice(max(-l, 0), x.shape[d] - max(-r, 0)) for d, (l, r) in enumerate(pads))
            width = tuple((max(l, 0), max(r, 0)) for l, r in pads)
            return be.pad(x[crop], width, mode="constant", constant_values=value)
        for d, (l, r) in enumerate(pads):
            if l or r:
                x = be.take(x, _pad_source_index(be, x.shape[d], l, r, mode), axis=d)
        return x

    def backward(self, g):
        p = self.params
        if p["mode"] == "constant":
            # the adjoint of constant padding is cropping, which is the same op with negated pads
            return apply(Pad, (g,), {"pads": tuple((-l, -r) for l, r in p["pads"]), "mode": "constant",
                                     "value": 0})
        return apply(PadBackward, (g,), {"pads": p["pads"], "mode": p["mode"], "shape": self.shapes[0]})


class PadBackward(Op):
    """Adjoint of a non-constant ``pad``: every output position's gradient added to its source position."""

    schema = OpSchema("pad_backward", amp_policy=KEEP_INPUT, family="shape")

    @staticmethod
    def forward(be, g, pads, mode, shape):
        for d in range(len(pads) - 1, -1, -1):
            l, r = pads[d]
            if l or r:
                n = shape[d]
                z = be.zeros(g.shape[:d] + (n,) + g.shape[d + 1:], dtype=g.dtype)
                be.scatter_add(z, (slice(None),) * d + (_pad_source_index(be, n, l, r, mode),), g)
                g = z
        return g

    def backward(self, gg):
        p = self.params
        return apply(Pad, (gg,), {"pads": p["pads"], "mode": p["mode"], "value": 0})


@declare(Pad, method=False)
def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad ``input``; ``pad = (left_last, right_last, left_2nd_last, right_2nd_last, ...)`` as in PyTorch.

    Modes: ``constant`` (fill ``value``, default 0), ``reflect`` (mirror without repeating the edge;
    pads < size), ``replicate`` (repeat the edge), ``circular`` (wrap around; pads <= size). Negative pads
    crop, in every mode (``replicate`` crops after padding, ``reflect``/``circular`` before, as PyTorch).

    >>> import pylucid
    >>> pylucid.pad(pylucid.tensor([1, 2, 3]), (2, 1), mode="reflect")
    tensor([3, 2, 1, 2, 3, 2])
    >>> pylucid.pad(pylucid.tensor([[1, 2]]), (1, 0, 0, 1))
    tensor([[0, 1, 2],
            [0, 0, 0]])
    """
    check_tensor(input, "pad")
    if value is not None and not isinstance(value, (int, float, complex, Tensor)):
        raise TypeError(f"pad: value must be a number, got {type(value).__name__}")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise ValueError(f"pad: padding length must be even (pairs per dim), got {len(pad)}")
    k = len(pad) // 2
    if k > input.ndim:
        raise ValueError(f"pad: padding {pad} has {k} dims but the input has only {input.ndim}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if k == 0:
        return input.clone()  # nothing to pad (also a 0-d input): a copy, as PyTorch
    pads = [(0, 0)] * input.ndim
    for i in range(k):
        pads[input.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode != "constant" and any(v < 0 for v in pad):
        # negative pads crop, as in PyTorch: replicate pads the original then crops (the edge it repeats is the
        # original's); reflect and circular crop first and pad what is left
        positive = tuple(max(v, 0) for v in pad)

        def crop(x):
            for d, (lo, hi) in enumerate(pads):
                if lo < 0 or hi < 0:
                    n = x.shape[d]
                    x = _slice_dim(x, d, max(-lo, 0), n - max(-hi, 0))
            return x

        if mode == "replicate":
            return crop(globals()["pad"](input, positive, mode, value))
        return globals()["pad"](crop(input), positive, mode, value)
    shp = input.shape
    for d, (l, r) in enumerate(pads):
        n = shp[d]
        if mode == "constant":
            # the negative pads crop the input first, as PyTorch: together they may not exceed its size
            if n + min(l, 0) + min(r, 0) < 0:
                raise ValueError(f"pad: padding {pad} crops {-min(l, 0) - min(r, 0)} from dim {d} of size {n}")
            continue
        if not (l or r):
            continue
        if mode == "reflect" and (l >= n or r >= n):
            raise ValueError(f"pad: reflect padding {(l, r)} must be smaller than the size {n} of dim {d}")
        if mode == "circular" and (l > n or r > n):
            raise ValueError(f"pad: circular padding {(l, r)} must not exceed the size {n} of dim {d}")
        if mode == "replicate" and n == 0:
            raise ValueError(f"pad: replicate padding needs a non-empty dim {d}")
    if mode != "constant" and value not in (None, 0):
        raise ValueError(f"pad: value is only used in constant mode, got mode={mode!r} and value={value}")
    return apply(Pad, (input,), {"pads": tuple(pads), "mode": mode, "value": 0 if value is None else value})


@declare(method=False)
def meshgrid(*tensors, indexing: str = "ij") -> tuple:
    """Coordinate grids from 1-D tensors (expanded views); with ``indexing='xy'`` the grids have shape
    ``(len(t1), len(t0), ...)`` (Cartesian: the first tensor varies along columns).

    >>> import pylucid
    >>> a, b = pylucid.meshgrid(pylucid.tensor([1, 2]), pylucid.tensor([3, 4, 5]), indexing="ij")
    >>> a.shape, b[0]
    ((2, 3), tensor([3, 4, 5]))
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for x in tensors:
        check_tensor(x, "meshgrid", "every argument")
        if x.ndim > 1:
            raise ValueError(f"meshgrid: expects 0-d or 1-D tensors, got a {x.ndim}-D tensor")
    ts = [reshape(x, (-1,)) for x in tensors]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(x.shape[0] for x in ts)
    out = []
    for i, x in enumerate(ts):
        view_shape = tuple(n if j == i else 1 for j, n in enumerate(shape))
        out.append(broadcast_to(reshape(x, view_shape), shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


# ---------------------------------------------------------------- matrices and index sets from tensors
@declare(method=False)
def block_diag(*tensors) -> Tensor:
    """The block-diagonal matrix with ``tensors`` (0-d, 1-d or 2-d; a 0-d one is a 1x1 block, a 1-d one a row)
    on its diagonal; the dtype is PyTorch's ``result_type`` of the blocks (a 0-d block of the same category
    does not widen it: ``block_diag(tensor(1.5, dtype=float64), ones(2))`` is float32).

    >>> import pylucid
    >>> pylucid.block_diag(pylucid.tensor([[1, 2]]), pylucid.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    from .. import dtypes as _dt

    blocks = []
    for t in tensors:
        check_tensor(t, "block_diag", "every argument")
        if t.ndim > 2:
            raise ValueError(f"block_diag: expects tensors with at most 2 dims, got a {t.ndim}-D tensor")
        blocks.append(reshape(t, (1, 1)) if t.ndim == 0 else reshape(t, (1, -1)) if t.ndim == 1 else t)
    if not blocks:
        from ..creation import zeros

        return zeros(1, 0)
    # PyTorch's result_type of the inputs: a 0-d block decides the dtype only when of a higher category
    dtype = _dt.result_type([t.dtype for t in tensors if t.ndim], [t.dtype for t in tensors if not t.ndim], [])
    widths = [b.shape[1] for b in blocks]
    total = sum(widths)
    rows, left = [], 0
    for b, w in zip(blocks, widths):
        rows.append(pad(b.to(dtype), (left, total - left - w)))
        left += w
    return cat(rows, 0)


@declare(method=False)
def cartesian_prod(*tensors) -> Tensor:
    """The Cartesian product of 1-D tensors: a ``(prod(len), n)`` tensor whose rows are the tuples, in the order
    of ``itertools.product``; a single tensor is returned as it is.

    >>> import pylucid
    >>> pylucid.cartesian_prod(pylucid.tensor([1, 2]), pylucid.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    for t in tensors:
        check_tensor(t, "cartesian_prod", "every argument")
        if t.ndim != 1:
            raise ValueError(f"cartesian_prod: expects 1-D tensors, got a {t.ndim}-D tensor")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, (-1,)) for g in grids], 1)


@declare()
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of the elements of a 1-D tensor, as rows (``itertools.combinations``, or
    ``combinations_with_replacement``); ``(0, r)`` when there are none.

    >>> import pylucid
    >>> pylucid.combinations(pylucid.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    import itertools

    from ..creation import tensor
    from .indexing import getitem

    check_tensor(input, "combinations")
    if input.ndim != 1:
        raise ValueError(f"combinations: expects a 1-D tensor, got a {input.ndim}-D tensor")
    if not isinstance(r, int) or r < 0:
        raise ValueError(f"combinations: r must be a non-negative int, got {r!r}")
    if r == 0:
        return input.new_empty(0)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = list(pick(range(input.shape[0]), r))
    from .. import dtypes as _dt

    # no combination (r > len): an empty index keeps the result in the graph, as PyTorch's
    index = tensor(idx, device=input.device) if idx else tensor([], dtype=_dt.int64, device=input.device).reshape(0, r)
    return getitem(input, index)


def _tri_indices(op, row, col, offset, dtype, device, upper):
    from .. import dtypes as _dt
    from .._tensor import _new_tensor
    from ..device import cpu
    from ..device import device as _device

    for name, v in (("row", row), ("col", col), ("offset", offset)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{op}: {name} must be an int, got {v!r}")
    if row < 0 or col < 0:
        raise ValueError(f"{op}: row and col must be non-negative, got {row} and {col}")
    dt = _dt.int64 if dtype is None else _dt.as_dtype(dtype)
    if dt.category != _dt.INT:
        raise TypeError(f"{op}: dtype must be an integer dtype, got {dt}")
    dev = cpu if device is None else _device(device)
    be = dev.backend
    r, c = (be.triu_indices if upper else be.tril_indices)(row, offset, col)
    return _new_tensor(be.stack([r, c]).astype(dt.numpy_dtype), dev)


@declare(method=False)
def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The ``(2, N)`` coordinates of the lower triangle (on and below diagonal ``offset``) of a ``row x col``
    matrix, row by row.

    >>> import pylucid
    >>> pylucid.tril_indices(2, 2)
    tensor([[0, 1, 1],
            [0, 0, 1]])
    """
    return _tri_indices("tril_indices", row, col, offset, dtype, device, upper=False)


@declare(method=False)
def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The ``(2, N)`` coordinates of the upper triangle (on and above diagonal ``offset``) of a ``row x col``
    matrix, row by row.

    >>> import pylucid
    >>> pylucid.triu_indices(2, 2)
    tensor([[0, 0, 1],
            [0, 1, 1]])
    """
    return _tri_indices("triu_indices", row, col, offset, dtype, device, upper=True)


@declare()
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """The square matrix with ``input`` flattened on its ``offset`` diagonal.

    >>> import pylucid
    >>> pylucid.diagflat(pylucid.tensor([[1, 2]]))
    tensor([[1, 0],
            [0, 2]])
    """
    check_tensor(input, "diagflat")
    return diag_embed(reshape(input, (-1,)), offset, 0, 1)


@declare(method=False)
def unravel_index(indices, shape) -> tuple:
    """The coordinates, one tensor per dim of ``shape``, of the flat (row-major) ``indices``; negative indices
    count from the end of the flattened shape.

    >>> import pylucid
    >>> pylucid.unravel_index(pylucid.tensor([5, 7]), (2, 4))
    (tensor([1, 1]), tensor([1, 3]))
    """
    from ..creation import tensor

    if not isinstance(indices, Tensor):
        indices = tensor(indices)
    if indices._data.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must be an integer tensor, got {indices.dtype}")
    shape = norm_shape((shape,), "unravel_index")
    if any(s < 0 for s in shape):
        raise ValueError(f"unravel_index: shape must hold non-negative sizes, got {shape}")
    numel = 1
    for s in shape:
        numel *= s
    data = indices._data
    if data.size and (int(data.min()) < -numel or int(data.max()) >= numel):
        raise IndexError(f"unravel_index: indices must be in [-{numel}, {numel}) for shape {shape}")
    flat = indices.long()
    flat = flat + (flat < 0).long() * numel
    out = []
    for s in reversed(shape):
        out.append(flat % s if s else flat * 0)
        flat = flat // s if s else flat
    return tuple(reversed(out))


# ---------------------------------------------------------------- scatters of a view's values (out of place)
def _dim_index(ndim, dim, item):
    return (slice(None),) * dim + (item,)


@declare()
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """``input`` with ``input[..., start:end:step, ...]`` (along ``dim``) replaced by ``src``; differentiable in
    both (``dinput = g`` zeroed on the slice, ``dsrc = g`` on the slice).

    >>> import pylucid
    >>> pylucid.zeros(4).slice_scatter(pylucid.ones(2), start=1, end=3)
    tensor([0., 1., 1., 0.])
    """
    from .indexing import _put

    check_tensor(input, "slice_scatter")
    check_tensor(src, "slice_scatter", "src")
    d = norm_dim(dim, max(input.ndim, 1), "slice_scatter")
    if step is None:
        step = 1
    if step <= 0:
        raise ValueError(f"slice_scatter: step must be positive, got {step}")
    idx = _dim_index(input.ndim, d, slice(start, end, step))
    want = tuple(input[idx].shape)
    if tuple(src.shape) != want:
        raise ShapeMismatch(f"slice_scatter: src of shape {tuple(src.shape)} does not match the slice's shape {want}")
    return _put(input, src, idx)


@declare()
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """``input`` with ``input.select(dim, index)`` replaced by ``src`` (which has that slice's shape).

    >>> import pylucid
    >>> pylucid.zeros(2, 2).select_scatter(pylucid.ones(2), 0, 1)
    tensor([[0., 0.],
            [1., 1.]])
    """
    from .indexing import _put

    check_tensor(input, "select_scatter")
    check_tensor(src, "select_scatter", "src")
    if input.ndim == 0:
        raise ValueError("select_scatter: cannot be applied to a 0-d tensor")
    d = norm_dim(dim, input.ndim, "select_scatter")
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select_scatter: index {index} is out of range for dim {d} of size {n}")
    want = input.shape[:d] + input.shape[d + 1:]
    if tuple(src.shape) != want:
        raise ShapeMismatch(f"select_scatter: src of shape {tuple(src.shape)} does not match the slice's shape "
                            f"{want}")
    return _put(input, src, _dim_index(input.ndim, d, int(index)))


@declare()
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """``input`` with ``input.diagonal(offset, dim1, dim2)`` replaced by ``src`` (which has that diagonal's
    shape); ``dinput = g`` zeroed on the diagonal, ``dsrc = g.diagonal(offset, dim1, dim2)``.

    >>> import pylucid
    >>> pylucid.zeros(2, 2).diagonal_scatter(pylucid.tensor([1., 2.]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    from .indexing import where

    check_tensor(input, "diagonal_scatter")
    check_tensor(src, "diagonal_scatter", "src")
    if isinstance(offset, bool) or isinstance(offset, float) or not hasattr(offset, "__index__"):
        raise TypeError(f"diagonal_scatter: offset must be an int, got {type(offset).__name__} {offset!r}")
    offset = offset.__index__()
    # a 1-D input names its missing dim as PyTorch does: dim2=1 is out of range of [-1, 0]
    nd = max(input.ndim, 1)
    a, b = norm_dim(dim1, nd, "diagonal_scatter"), norm_dim(dim2, nd, "diagonal_scatter")
    if a == b:
        raise ShapeMismatch(f"diagonal_scatter: dim1 and dim2 must name two different dims, got {dim1} and {dim2}")
    want = tuple(diagonal(input, offset, a, b).shape)
    if tuple(src.shape) != want:
        raise ShapeMismatch(f"diagonal_scatter: src of shape {tuple(src.shape)} does not match the diagonal's "
                            f"shape {want}")
    p = {"shape": tuple(input.shape), "offset": offset, "dim1": a, "dim2": b}
    from ..creation import ones

    mask = apply(DiagEmbed, (ones(want, dtype="bool", device=input.device),), p)
    return where(mask, apply(DiagEmbed, (src.to(input.dtype),), p), input)


# ---------------------------------------------------------------- strided windows
def _strided_index(input, size, stride, storage_offset, op):
    """Flat positions ``storage_offset + sum_i k_i * stride_i`` of an ``as_strided`` result in the row-major
    storage of ``input``."""
    from ..creation import arange

    size = norm_shape((size,), op)
    stride = norm_shape((stride,), op)
    if len(size) != len(stride):
        raise ValueError(f"{op}: size {size} and stride {stride} must have the same length")
    if any(s < 0 for s in stride):
        raise ValueError(f"{op}: strides must be non-negative, got {stride}")
    off = 0 if storage_offset is None else int(storage_offset)
    if off < 0:
        raise ValueError(f"{op}: storage_offset must be non-negative, got {off}")
    last = off + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else off - 1
    if last >= input.numel():
        raise ValueError(f"{op}: size {size}, stride {stride} and storage_offset {off} reach element {last} of a "
                         f"tensor of {input.numel()} elements")
    idx = arange(off, off + 1, device=input.device).reshape(())
    for i, (n, s) in enumerate(zip(size, stride)):
        shp = [1] * len(size)
        shp[i] = n
        idx = idx + arange(n, device=input.device).reshape(shp) * s
    return idx.reshape(size)


@declare()
def as_strided(input: Tensor, size, stride, storage_offset=None) -> Tensor:
    """The elements at ``storage_offset + sum_i k_i * stride[i]`` (``0 <= k_i < size[i]``) of ``input``'s
    row-major storage; overlapping windows share gradient (it adds up).

    pylucid returns a copy read from the row-major layout of ``input`` (for a contiguous tensor that is its
    storage, as in PyTorch); it is not a view (docs/semantics/shape_indexing.md).

    >>> import pylucid
    >>> pylucid.arange(6).as_strided((2, 2), (1, 2))
    tensor([[0, 2],
            [1, 3]])
    """
    from .indexing import getitem

    check_tensor(input, "as_strided")
    return getitem(reshape(input, (-1,)), _strided_index(input, size, stride, storage_offset, "as_strided"))


@declare()
def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset=None) -> Tensor:
    """``input`` with the elements ``as_strided(input, size, stride, storage_offset)`` reads replaced by ``src``
    (of shape ``size``); differentiable in both.

    >>> import pylucid
    >>> pylucid.zeros(4).as_strided_scatter(pylucid.ones(2), (2,), (2,))
    tensor([1., 0., 1., 0.])
    """
    from .indexing import _put

    check_tensor(input, "as_strided_scatter")
    check_tensor(src, "as_strided_scatter", "src")
    idx = _strided_index(input, size, stride, storage_offset, "as_strided_scatter")
    if tuple(src.shape) != tuple(idx.shape):
        raise ShapeMismatch(f"as_strided_scatter: src of shape {tuple(src.shape)} does not match size "
                            f"{tuple(idx.shape)}")
    return reshape(_put(reshape(input, (-1,)), src.to(input.dtype), idx), input.shape)


@declare(name="unfold", namespaces=())
def _unfold_method(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """``Tensor.unfold(dimension, size, step)``: every window of ``size`` elements along ``dimension``, ``step``
    apart, as a new last dim (the windowed dim gets ``(n - size) // step + 1`` entries). A copy in pylucid
    (PyTorch returns a view).

    >>> import pylucid
    >>> pylucid.arange(5).unfold(0, 2, 2)
    tensor([[0, 1],
            [2, 3]])
    """
    from ..creation import arange
    from .indexing import getitem

    check_tensor(self, "unfold")
    x = reshape(self, (1,)) if self.ndim == 0 else self
    d = norm_dim(dimension, x.ndim, "unfold")
    n = x.shape[d]
    if not isinstance(size, int) or size < 0 or size > n:
        raise ValueError(f"unfold: size {size!r} must be in [0, {n}] for dim {d} of size {n}")
    if not isinstance(step, int) or step <= 0:
        raise ValueError(f"unfold: step must be a positive int, got {step!r}")
    count = (n - size) // step + 1
    idx = arange(count, device=x.device).reshape(count, 1) * step + arange(size, device=x.device).reshape(1, size)
    out = getitem(x, (slice(None),) * d + (idx,))  # windows at d, window elements at d + 1
    out = movedim(out, d + 1, -1)
    return reshape(out, (size,)) if self.ndim == 0 else out


@declare()
def select(input: Tensor, dim: int, index: int) -> Tensor:
    """The slice at ``index`` along ``dim`` (that dim removed; a view).

    >>> import pylucid
    >>> pylucid.arange(6).reshape(2, 3).select(1, -1)
    tensor([2, 5])
    """
    from .indexing import getitem

    check_tensor(input, "select")
    if input.ndim == 0:
        raise IndexError("select: cannot be applied to a 0-d tensor")
    d = norm_dim(dim, input.ndim, "select")
    n = input.shape[d]
    if not isinstance(index, int) or not -n <= index < n:
        raise IndexError(f"select: index {index!r} is out of range for dim {d} of size {n}")
    return getitem(input, _dim_index(input.ndim, d, index))


@declare(namespaces=(), name="H", as_property=True)
def _H(self):  # noqa: N802
    """The conjugate transpose of a matrix (0-d and 2-d tensors)."""
    from .complex import conj

    if self.ndim not in (0, 2):
        raise ValueError(f"H: is only supported on matrices (2-D tensors), got a {self.ndim}-D tensor")
    return conj(transpose(self, 0, 1)) if self.ndim == 2 else conj(self)


@declare(namespaces=(), name="mH", as_property=True)
def _mH(self):  # noqa: N802
    """The last two dims swapped and conjugated (a batch of conjugate-transposed matrices)."""
    return adjoint(self)


@declare()
def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (``x.mT.conj()``).

    >>> import pylucid
    >>> pylucid.adjoint(pylucid.tensor([[1, 2]])).shape
    (2, 1)
    """
    from .complex import conj

    check_tensor(input, "adjoint")
    if input.ndim < 2:
        raise ValueError(f"adjoint: expects a tensor with >= 2 dims, got {input.ndim}")
    return conj(transpose(input, -2, -1))


# ---------------------------------------------------------------- copying forms of the views, and split spellings
def _copy_of(view_fn, name):
    def fn(input: Tensor, *args, **kwargs):
        from .conversion import clone

        check_tensor(input, name)
        out = view_fn(input, *args, **kwargs)
        return tuple(clone(o) for o in out) if isinstance(out, tuple) else clone(out)

    fn.__name__ = fn.__qualname__ = name
    # the view's parameters (``squeeze_copy(x, dim=None)``): its defaults, and the declaration's checks of them
    fn.__signature__ = inspect.signature(view_fn)
    fn.__doc__ = (f"``{view_fn.__name__}`` as a copy with its own storage (PyTorch's ``torch.{name}``); "
                  "differentiable as the view is.")
    return declare(method=False)(fn)


alias_copy = _copy_of(lambda input: input, "alias_copy")
as_strided_copy = _copy_of(as_strided, "as_strided_copy")
diagonal_copy = _copy_of(diagonal, "diagonal_copy")
expand_copy = _copy_of(expand, "expand_copy")
permute_copy = _copy_of(permute, "permute_copy")
squeeze_copy = _copy_of(squeeze, "squeeze_copy")
t_copy = _copy_of(t, "t_copy")
transpose_copy = _copy_of(transpose, "transpose_copy")
unbind_copy = _copy_of(unbind, "unbind_copy")
unfold_copy = _copy_of(_unfold_method, "unfold_copy")
unsqueeze_copy = _copy_of(unsqueeze, "unsqueeze_copy")
view_copy = _copy_of(view, "view_copy")


@declare()
def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Split into views of the given ``split_sizes`` along ``dim`` (which must add up to its size).

    >>> import pylucid
    >>> [t.tolist() for t in pylucid.arange(5).split_with_sizes([2, 3])]
    [[0, 1], [2, 3, 4]]
    """
    check_tensor(input, "split_with_sizes")
    sizes = list(split_sizes)
    d = norm_dim(dim, max(input.ndim, 1), "split_with_sizes")
    if sum(sizes) != input.shape[d]:
        raise ValueError(f"split_with_sizes: split_sizes {sizes} must add up to the size {input.shape[d]} of dim {d}")
    return split(input, sizes, d)


split_with_sizes_copy = _copy_of(split_with_sizes, "split_with_sizes_copy")


@declare()
def unsafe_split(input: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """``split`` (PyTorch's variant without view tracking; pylucid's views are safe either way)."""
    return split(input, split_size_or_sections, dim)


@declare()
def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """``chunk`` (PyTorch's variant without view tracking; pylucid's views are safe either way)."""
    return chunk(input, chunks, dim)


_pad = pad  # constant_pad_nd's argument ``pad`` shadows the function


@declare(method=False)
def constant_pad_nd(input: Tensor, pad, value: float = 0) -> Tensor:
    """``pad(input, pad, "constant", value)`` (PyTorch's ``torch.constant_pad_nd``): ``pad`` lists
    ``(left, right)`` pairs from the last dim backwards; negative entries crop.

    >>> import pylucid
    >>> pylucid.constant_pad_nd(pylucid.tensor([[1, 2]]), (1, 0), 7)
    tensor([[7, 1, 2]])
    """
    return _pad(input, pad, "constant", value)


def _check_resizable(self, op):
    check_tensor(self, op)
    if self._requires_grad or self.grad_fn is not None:
        raise RuntimeError(f"{op}: cannot resize a tensor that requires grad or is part of a graph; resize a "
                           "detached tensor (x.detach()) instead")
    if self._base is not None:
        raise RuntimeError(f"{op}: cannot resize a view; resize the tensor it views or a clone()")


def _resize(self, size, op):
    """Give ``self`` the shape ``size`` in place: its first elements (row-major) keep their values, elements past
    the old ones are uninitialised; the version is bumped."""
    _check_resizable(self, op)
    if any(s < 0 for s in size):
        raise ValueError(f"{op}: negative dimension in size {size}")
    be = self._device.backend
    n = 1
    for s in size:
        n *= s
    flat = self._data.reshape(-1)
    if n <= flat.shape[0]:
        data = flat[:n].reshape(size)
    else:
        with be.device_ctx():
            data = be.empty((n,), dtype=self._data.dtype)
        data[:flat.shape[0]] = flat
        data = data.reshape(size)
    self._data = data
    self._version[0] += 1
    return self


@declare(method="resize_", namespaces=())
def resize_(self: Tensor, *size, memory_format=None) -> Tensor:
    """Change this tensor's shape in place to ``size`` (``x.resize_(2, 3)`` or ``x.resize_((2, 3))``): the first
    elements in row-major order keep their values, new ones are uninitialised. A tensor that requires grad, is
    in a graph, or is a view cannot be resized (PyTorch refuses the first two as well).

    >>> import pylucid
    >>> x = pylucid.arange(6)
    >>> x.resize_(2, 3)
    tensor([[0, 1, 2],
            [3, 4, 5]])
    >>> x.resize_(4).shape
    (4,)
    """
    return _resize(self, norm_shape(size, "resize_"), "resize_")


@declare()
def resize_as_(input: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """``input.resize_(the_template.shape)`` (``torch.resize_as_`` and ``Tensor.resize_as_``).

    >>> import pylucid
    >>> pylucid.zeros(4).resize_as_(pylucid.ones(2, 2)).shape
    (2, 2)
    """
    check_tensor(the_template, "resize_as_")
    return _resize(input, tuple(the_template.shape), "resize_as_")
