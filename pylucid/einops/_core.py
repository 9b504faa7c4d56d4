"""The einops pattern grammar and the functions built on it.

A pattern side is a space-separated list of *groups*; a group is an axis
name (``h``), a composition in parentheses (``(h w)``, ``()`` for a unit
axis), an anonymous axis given by its length (``2``; ``1`` is a unit axis
that names nothing) or the ellipsis ``...`` (any number of axes, allowed once
per side and, on the right, inside parentheses too). Every transform lowers
to four tensor operations, in this order:

1. ``reshape`` the input to its *elementary* axes (the left groups split),
2. reduce the axes missing on the right (``reduce`` only),
3. ``permute`` the kept axes to their right-hand order,
4. insert the new right-hand axes with ``reshape`` + ``expand`` (``repeat``
   only) and ``reshape`` to the right-hand groups.

All four are registered ops with graph-mode backward passes, so gradients
(of any order) flow through every pattern. The parsed recipe of a pattern is
cached per (pattern, operation, given axis names, input rank).
"""

from __future__ import annotations

import functools
import keyword
import math
import string

from .._tensor import Tensor
from ..errors import LucidError

__all__ = ["EinopsError", "rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "parse_shape"]

_ELLIPSIS = "\u2026"  # "..." is rewritten to one character while parsing
_REDUCTIONS = ("min", "max", "sum", "mean", "prod", "any", "all")


class EinopsError(LucidError, ValueError):
    """A pattern that cannot be parsed, or one that does not fit the tensor it is applied to."""


class _Anonymous:
    """An axis given by its length only (``(h 2)``); each occurrence is its own axis."""

    __slots__ = ("value",)

    def __init__(self, value: int):
        if value <= 1:
            raise EinopsError(f"anonymous axis should have a length > 1 (1 is a unit axis), not {value}")
        self.value = value

    def __repr__(self):
        return f"{self.value}-axis"


def _axis_name_error(name: str, allow_underscore: bool) -> str | None:
    """Why ``name`` is not a valid axis name, or None."""
    if not str.isidentifier(name):
        return "not a valid python identifier"
    if name[0] == "_" or name[-1] == "_":
        if name == "_" and allow_underscore:
            return None
        return "axis name should not start or end with an underscore"
    if keyword.iskeyword(name):
        return "axis name is a python keyword"
    return None


class _Side:
    """One parsed side of a pattern: ``composition`` is a list of groups (lists) or the ellipsis marker."""

    def __init__(self, expression: str, *, allow_underscore: bool = False, allow_duplicates: bool = False):
        self.identifiers: set = set()
        self.has_ellipsis = False
        self.ellipsis_in_parens = False
        self.has_non_unitary_anonymous = False
        self.composition: list = []
        if "." in expression:
            if "..." not in expression:
                raise EinopsError(f"expression {expression!r} may contain dots only inside an ellipsis (...)")
            if expression.count("...") != 1 or expression.count(".") != 3:
                raise EinopsError(f"expression {expression!r} may contain dots only inside one ellipsis (...)")
            expression = expression.replace("...", _ELLIPSIS)
            self.has_ellipsis = True
        group: list | None = None

        def add(token: str):
            nonlocal group
            if token in self.identifiers and not allow_duplicates and token != "_":
                raise EinopsError(f"indexing expression contains duplicate dimension {token!r}")
            if token == _ELLIPSIS:
                self.identifiers.add(_ELLIPSIS)
                if group is None:
                    self.composition.append(_ELLIPSIS)
                else:
                    group.append(_ELLIPSIS)
                    self.ellipsis_in_parens = True
                return
            if token.isdecimal():
                value = int(token)
                if value == 1:  # a unit axis: a group of its own with no name, or nothing inside a group
                    if group is None:
                        self.composition.append([])
                    return
                axis = _Anonymous(value)
                self.has_non_unitary_anonymous = True
            else:
                reason = _axis_name_error(token, allow_underscore)
                if reason is not None:
                    raise EinopsError(f"invalid axis identifier {token!r}: {reason}")
                axis = token
            self.identifiers.add(axis)
            if group is None:
                self.composition.append([axis])
            else:
                group.append(axis)

        token = ""
        for char in expression:
            if char in "() ":
                if token:
                    add(token)
                    token = ""
                if char == "(":
                    if group is not None:
                        raise EinopsError("axis composition is one-level (brackets inside brackets are not allowed)")
                    group = []
                elif char == ")":
                    if group is None:
                        raise EinopsError(f"brackets are not balanced in {expression!r}")
                    self.composition.append(group)
                    group = None
            elif char.isalnum() or char in ("_", _ELLIPSIS):
                if char == _ELLIPSIS and token:
                    raise EinopsError(f"an ellipsis must stand on its own in {expression!r}")
                token += char
                if char == _ELLIPSIS:
                    add(token)
                    token = ""
            else:
                raise EinopsError(f"unknown character {char!r} in pattern {expression!r}")
        if group is not None:
            raise EinopsError(f"imbalanced parentheses in expression {expression!r}")
        if token:
            add(token)

    def has_composed_axes(self) -> bool:
        return any(g != _ELLIPSIS and len(g) > 1 for g in self.composition)


class _Recipe:
    __slots__ = ("left_groups", "elementary", "known", "from_kwargs", "reduced", "permutation", "new_axes",
                 "right_groups")


@functools.lru_cache(maxsize=512)
def _recipe(pattern: str, operation, axes_names: tuple, ndim: int) -> _Recipe:
    if pattern.count("->") != 1:
        raise EinopsError(f"pattern {pattern!r} must contain '->' exactly once")
    left_str, right_str = pattern.split("->")
    left = _Side(left_str)
    right = _Side(right_str)
    if not left.has_ellipsis and right.has_ellipsis:
        raise EinopsError(f"ellipsis found in the right side, but not the left side of pattern {pattern!r}")
    if left.ellipsis_in_parens:
        raise EinopsError(f"ellipsis inside parenthesis in the left side is not allowed: {pattern!r}")
    if operation == "rearrange":
        if left.has_non_unitary_anonymous or right.has_non_unitary_anonymous:
            raise EinopsError("non-unitary anonymous axes are not supported in rearrange (except length 1)")
        diff = left.identifiers ^ right.identifiers
        if diff:
            raise EinopsError(f"identifiers only on one side of expression (should be on both): {_names(diff)}")
    elif operation == "repeat":
        diff = left.identifiers - right.identifiers
        if diff:
            raise EinopsError(f"unexpected identifiers on the left side of repeat: {_names(diff)}")
        missing = {a for a in right.identifiers if isinstance(a, str)} - left.identifiers - set(axes_names)
        if missing:
            raise EinopsError(f"specify sizes for new axes in repeat: {_names(missing)}")
    elif operation in _REDUCTIONS or callable(operation):
        diff = right.identifiers - left.identifiers
        if diff:
            raise EinopsError(f"unexpected identifiers on the right side of reduce {operation}: {_names(diff)}")
    else:
        raise EinopsError(f"unknown reduction {operation!r}; expected one of {_REDUCTIONS} or a callable")

    # expand the ellipsis into numbered axes
    if left.has_ellipsis:
        n_other = len(left.composition) - 1
        if ndim < n_other:
            raise EinopsError(f"wrong shape: pattern {pattern!r} expects >= {n_other} dims, got a {ndim}-dim tensor")
        ell = [f"{_ELLIPSIS}{i}" for i in range(ndim - n_other)]
        left_groups = []
        for g in left.composition:
            left_groups.extend([[a] for a in ell] if g == _ELLIPSIS else [g])
        right_groups = []
        for g in right.composition:
            if g == _ELLIPSIS:
                right_groups.extend([[a] for a in ell])
            else:
                right_groups.append([b for a in g for b in (ell if a == _ELLIPSIS else [a])])
        right_ids = (right.identifiers - {_ELLIPSIS}) | (set(ell) if right.has_ellipsis else set())
    else:
        if ndim != len(left.composition):
            raise EinopsError(f"wrong shape: pattern {pattern!r} expects {len(left.composition)} dims, "
                              f"got a {ndim}-dim tensor")
        left_groups, right_groups = left.composition, right.composition
        right_ids = right.identifiers

    elementary = [a for g in left_groups for a in g]  # axes after the first reshape, in order
    position = {a: i for i, a in enumerate(elementary)}
    new_axes = [a for g in right_groups for a in g if a not in position]  # repeat's new axes
    for a in new_axes:
        position[a] = len(position)
    for name in axes_names:
        if _axis_name_error(name, False) is not None:
            raise EinopsError(f"invalid name for an axis: {name!r}")
        if name not in position:
            raise EinopsError(f"axis {name!r} is not used in transform {pattern!r}")
    given = set(axes_names)
    # per left group: positions with a known length (anonymous or given) and at most one to infer
    known = []
    for g in left_groups:
        unknown = [a for a in g if isinstance(a, str) and a not in given]
        if len(unknown) > 1:
            raise EinopsError(f"could not infer sizes for {_names(unknown)} in {pattern!r}")
        known.append(([position[a] for a in g if a not in unknown], [position[a] for a in unknown]))

    r = _Recipe()
    r.left_groups = left_groups
    r.elementary = elementary
    r.known = known
    r.from_kwargs = [(position[n], n) for n in axes_names]
    r.reduced = tuple(i for i, a in enumerate(elementary) if a not in right_ids)
    kept = [a for a in elementary if a in right_ids]
    order = [a for g in right_groups for a in g if a in position and position[a] < len(elementary)]
    r.permutation = tuple(kept.index(a) for a in order)
    r.new_axes = [(position[a], a.value if isinstance(a, _Anonymous) else None) for a in new_axes]
    r.right_groups = [[position[a] for a in g] for g in right_groups]
    return r


def _names(axes) -> str:
    return "{" + ", ".join(sorted(repr(a) for a in axes)) + "}"


def _reduce_axes(x: Tensor, operation, axes: tuple) -> Tensor:
    if callable(operation):
        return operation(x, axes)
    if operation == "sum":
        return x.sum(dim=axes)
    if operation == "mean":
        if not x.dtype.is_floating_point and not x.dtype.is_complex:
            raise EinopsError(f"reduce 'mean' needs a floating tensor, got {x.dtype}")
        return x.mean(dim=axes)
    if operation == "max":
        return x.amax(dim=axes)
    if operation == "min":
        return x.amin(dim=axes)
    for ax in reversed(axes):  # prod / any / all take one dim at a time; reversed keeps the others valid
        x = getattr(x, operation)(dim=ax)
    return x


def _apply(x: Tensor, pattern: str, operation, axes_lengths: dict) -> Tensor:
    if isinstance(x, (list, tuple)):
        if len(x) == 0:
            raise TypeError(f"{operation}: cannot be applied to an empty list")
        from .. import ops

        x = ops.stack(list(x))
    if not isinstance(x, Tensor):
        raise TypeError(f"{operation}: expected a Tensor (or a list of tensors), got {type(x).__name__}")
    shape = x.shape
    try:
        r = _recipe(pattern, operation, tuple(axes_lengths), len(shape))
    except EinopsError as e:
        what = operation if operation in ("rearrange", "repeat") else f"reduce({operation!r})"
        raise EinopsError(f"error while processing {what} pattern {pattern!r}.\n"
                          f" Input tensor shape: {tuple(shape)}. Additional info: {axes_lengths}.\n {e}") from None
    lengths = [0] * (len(r.elementary) + len(r.new_axes))
    for pos, value in r.new_axes:
        if value is not None:
            lengths[pos] = value
    for pos, name in r.from_kwargs:
        lengths[pos] = int(axes_lengths[name])
    for (known, unknown), group, dim in zip(r.known, r.left_groups, shape):
        product = 1
        for pos in known:
            axis = r.elementary[pos]
            if isinstance(axis, _Anonymous):
                lengths[pos] = axis.value
            product *= lengths[pos]
        if unknown:
            if product == 0 or dim % product != 0:
                raise EinopsError(f"shape mismatch in {pattern!r}: can't divide axis of length {dim} in chunks "
                                  f"of {product}")
            lengths[unknown[0]] = dim // product
        elif product != dim:
            raise EinopsError(f"shape mismatch in {pattern!r}: {dim} != {product}")
    n = len(r.elementary)
    elem_shape = tuple(lengths[:n])
    if elem_shape != tuple(shape):
        x = x.reshape(elem_shape)
    if r.reduced:
        x = _reduce_axes(x, operation, r.reduced)
    if r.permutation != tuple(range(len(r.permutation))):
        x = x.permute(*r.permutation)
    if r.new_axes:
        # the kept axes are in right-hand order now; a reshape slots in the new ones with length 1, expand grows them
        right_order = [a for g in r.right_groups for a in g]
        x = x.reshape(tuple(1 if pos >= n else lengths[pos] for pos in right_order))
        x = x.expand(*(lengths[pos] for pos in right_order))
    final = tuple(math.prod(lengths[a] for a in g) for g in r.right_groups)
    if tuple(x.shape) != final:
        x = x.reshape(final)
    return x


def rearrange(tensor, pattern: str, **axes_lengths) -> Tensor:
    """Reorder, compose and decompose axes: transpose, reshape, squeeze, unsqueeze, stack, concatenate in one.

    ``rearrange(x, 'b c h w -> b (h w) c')``; a list of tensors is stacked
    along a new first axis first. Sizes a decomposition cannot infer are given
    as keywords (``rearrange(x, 'b (h w) -> b h w', h=4)``).

    >>> import pylucid
    >>> from pylucid.einops import rearrange
    >>> x = pylucid.arange(24).reshape(2, 3, 4)
    >>> rearrange(x, 'a b c -> c (a b)').shape
    (4, 6)
    >>> rearrange(x, 'a b (c d) -> a (b c) d', d=2).shape
    (2, 6, 2)
    """
    return _apply(tensor, pattern, "rearrange", axes_lengths)


def reduce(tensor, pattern: str, reduction, **axes_lengths) -> Tensor:
    """Rearrange and reduce the axes that disappear from the right side.

    ``reduction`` is one of ``'min' 'max' 'sum' 'mean' 'prod' 'any' 'all'`` or
    a callable ``f(tensor, axes_tuple)``. ``'mean'`` needs a floating tensor.

    >>> import pylucid
    >>> from pylucid.einops import reduce
    >>> x = pylucid.arange(16.0).reshape(1, 4, 4)
    >>> reduce(x, 'b (h 2) (w 2) -> b h w', 'max')
    tensor([[[ 5.,  7.],
             [13., 15.]]])
    """
    return _apply(tensor, pattern, reduction, axes_lengths)


def repeat(tensor, pattern: str, **axes_lengths) -> Tensor:
    """Rearrange and add new axes (repeating the values along them): tile, broadcast, upsample.

    >>> import pylucid
    >>> from pylucid.einops import repeat
    >>> repeat(pylucid.tensor([1, 2]), 'w -> h (w 2)', h=2)
    tensor([[1, 1, 2, 2],
            [1, 1, 2, 2]])
    """
    return _apply(tensor, pattern, "repeat", axes_lengths)


def parse_shape(x, pattern: str) -> dict:
    """``{axis name: length}`` for the names of ``pattern`` (``_`` skips an axis; ``...`` any number of them).

    >>> import pylucid
    >>> from pylucid.einops import parse_shape
    >>> parse_shape(pylucid.zeros(2, 3, 5), 'b _ w')
    {'b': 2, 'w': 5}
    """
    side = _Side(pattern, allow_underscore=True)
    shape = tuple(x.shape)
    if side.has_composed_axes():
        raise RuntimeError(f"parse_shape: can't parse shape with composite axes: {pattern!r} {shape}")
    comp = side.composition
    if len(shape) != len(comp):
        if not side.has_ellipsis:
            raise RuntimeError(f"parse_shape: can't parse shape with a different number of dimensions: "
                               f"{pattern!r} {shape}")
        if len(shape) < len(comp) - 1:
            raise RuntimeError(f"parse_shape: can't parse shape with this number of dimensions: {pattern!r} {shape}")
    if side.has_ellipsis:
        i = comp.index(_ELLIPSIS)
        comp = comp[:i] + [["_"]] * (len(shape) - len(comp) + 1) + comp[i + 1:]
    out = {}
    for axes, length in zip(comp, shape):
        if not axes:
            if length != 1:
                raise RuntimeError(f"parse_shape: length of axis is not 1: {pattern!r} {shape}")
            continue
        (axis,) = axes
        if isinstance(axis, _Anonymous):
            if axis.value != length:
                raise RuntimeError(f"parse_shape: length of anonymous axis does not match: {pattern!r} {shape}")
        elif axis != "_":
            out[axis] = length
    return out


@functools.lru_cache(maxsize=256)
def _einsum_equation(pattern: str) -> str:
    if "->" not in pattern:
        raise ValueError(f"einsum: the pattern must contain '->', got {pattern!r}")
    lefts, right = pattern.split("->")
    letters = string.ascii_letters
    mapping: dict = {}

    def letter_of(group, where: str) -> str:
        if group == _ELLIPSIS:
            return "..."
        if len(group) == 0:
            raise NotImplementedError(f"einsum: singleton () axes are not supported ({pattern!r})")
        if len(group) > 1:
            raise NotImplementedError(f"einsum: shape rearrangement (a composition) is not supported ({pattern!r})")
        (axis,) = group
        if isinstance(axis, _Anonymous):
            raise NotImplementedError(f"einsum: anonymous axes are not supported ({pattern!r})")
        if axis not in mapping:
            if where == "right":
                raise EinopsError(f"einsum: unknown axis {axis!r} on the right side of {pattern!r}")
            if len(mapping) >= len(letters):
                raise RuntimeError(f"einsum: too many axes in {pattern!r}")
            mapping[axis] = letters[len(mapping)]
        return mapping[axis]

    ins = []
    for part in lefts.split(","):
        side = _Side(part, allow_underscore=True, allow_duplicates=True)
        ins.append("".join(letter_of(g, "left") for g in side.composition))
    out_side = _Side(right, allow_underscore=True)
    out = "".join(letter_of(g, "right") for g in out_side.composition)
    return ",".join(ins) + "->" + out


def einsum(*tensors_and_pattern) -> Tensor:
    """Einstein summation with einops' spelling: multi-letter axis names, the pattern last.

    >>> import pylucid
    >>> from pylucid.einops import einsum
    >>> a, b = pylucid.ones(2, 3), pylucid.ones(3, 4)
    >>> einsum(a, b, 'batch inner, inner out -> batch out')
    tensor([[3., 3., 3., 3.],
            [3., 3., 3., 3.]])
    """
    if len(tensors_and_pattern) <= 1:
        raise ValueError("einsum: pass at least one tensor and the pattern, as einsum(x, y, 'a b, b c -> a c')")
    *tensors, pattern = tensors_and_pattern
    if not isinstance(pattern, str):
        raise ValueError("einsum: the pattern must be the last argument, as einsum(x, y, 'a b, b c -> a c')")
    from .. import ops

    return ops.einsum(_einsum_equation(pattern), *tensors)


def _pack_axes(pattern: str, opname: str):
    axes = pattern.split()
    if len(axes) != len(set(axes)):
        raise EinopsError(f"duplicates in axes names in {opname}(..., {pattern!r})")
    if "*" not in axes:
        raise EinopsError(f"no *-axis in {opname}(..., {pattern!r})")
    for a in axes:
        if a != "*" and _axis_name_error(a, False) is not None:
            raise EinopsError(f"invalid axis name {a!r} in {opname}(..., {pattern!r})")
    before = axes.index("*")
    after = len(axes) - before - 1
    return before, after


def pack(tensors, pattern: str):
    """Pack tensors of different ranks into one along the ``*`` axis; returns ``(packed, packed_shapes)``.

    Each tensor's axes matching ``*`` are flattened into one, then the tensors
    are concatenated along it. :func:`unpack` inverts it.

    >>> import pylucid
    >>> from pylucid.einops import pack
    >>> packed, ps = pack([pylucid.zeros(2, 3, 5), pylucid.zeros(2, 3, 7, 5)], 'i j * k')
    >>> packed.shape, ps
    ((2, 3, 8, 5), [(), (7,)])
    """
    before, after = _pack_axes(pattern, "pack")
    reshaped, shapes = [], []
    for i, t in enumerate(tensors):
        shape = tuple(t.shape)
        if len(shape) < before + after:
            raise EinopsError(f"packed tensor #{i} (enumeration starts with 0) has shape {shape}, "
                              f"while pattern {pattern!r} assumes at least {before + after} axes")
        end = len(shape) - after
        shapes.append(shape[before:end])
        reshaped.append(t.reshape((*shape[:before], -1, *shape[end:])))
    from .. import ops

    return ops.cat(reshaped, dim=before), shapes


def unpack(tensor: Tensor, packed_shapes, pattern: str) -> list:
    """Split a packed tensor back: the inverse of :func:`pack`. One shape may hold a ``-1`` to infer.

    >>> import pylucid
    >>> from pylucid.einops import unpack
    >>> [t.shape for t in unpack(pylucid.zeros(2, 10), [(), (3, -1)], 'b *')]
    [(2,), (2, 3, 3)]
    """
    before, after = _pack_axes(pattern, "unpack")
    shape = tuple(tensor.shape)
    if len(shape) != before + 1 + after:
        raise EinopsError(f"unpack(..., {pattern!r}) received input of wrong dim with shape {shape}")
    total = shape[before]
    sizes = []
    unknown = None
    for i, ps in enumerate(packed_shapes):
        ps = tuple(ps)
        if -1 in ps:
            if unknown is not None or ps.count(-1) > 1:
                raise EinopsError(f"unpack(..., {pattern!r}): only one -1 may appear in the packed shapes, "
                                  f"got {list(packed_shapes)}")
            unknown = i
            sizes.append(None)
        else:
            sizes.append(math.prod(ps))
    if unknown is not None:
        rest = total - sum(s for s in sizes if s is not None)
        known = math.prod(s for s in packed_shapes[unknown] if s != -1)
        if rest < 0 or known == 0 or rest % known:
            raise EinopsError(f"unpack(..., {pattern!r}): can't infer -1 in {packed_shapes[unknown]} from "
                              f"axis of length {total}")
        sizes[unknown] = rest
        packed_shapes = list(packed_shapes)
        packed_shapes[unknown] = tuple(rest // known if s == -1 else s for s in packed_shapes[unknown])
    if sum(sizes) != total:
        raise EinopsError(f"unpack(..., {pattern!r}): the packed shapes {list(packed_shapes)} cover "
                          f"{sum(sizes)} elements of an axis of length {total}")
    from .. import ops

    parts = ops.split(tensor, sizes, dim=before)
    return [p.reshape((*shape[:before], *ps, *shape[before + 1:])) for p, ps in zip(parts, packed_shapes)]
