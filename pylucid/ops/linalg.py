"""Linear algebra: ``matmul`` (BLAS/cuBLAS through the backend), the products built on it
(``mm``, ``bmm``, ``einsum``, ``tensordot``, ...) and the decompositions behind ``pylucid.linalg``.

Decompositions run on ``be.linalg`` (numpy.linalg / cupy.linalg) and
``be.scipy_linalg`` (scipy.linalg: ``solve_triangular``, ``lu_factor``,
``expm``), batched over leading dims; half precision is computed in float32
and rounded once. Their gradients are graph-mode formulas (the ones PyTorch
uses), written with these same ops, so second derivatives work. Complex
inputs run forward; their gradients use conjugate transposes (``mH``) and the
core ops' complex convention (``mul``/``matmul`` send back ``g * conj(b)`` and
``g @ b^H``), so they follow PyTorch (see docs/semantics/linalg_fft.md).
"""

from __future__ import annotations

import warnings

from .. import dtypes as _dt
from .._tensor import Tensor, _new_tensor
from .._interop import c_contiguous
from ..errors import DtypeMismatch, LucidError, ShapeMismatch
from ._op import Op, apply
from ._utils import check_tensor, conj_if_complex
from .reduction import Norm
from .registry import declare
from .schema import KEEP_INPUT, PROMOTE, OpSchema
from .shape import diag_embed, diagonal, tril, triu


class Matmul(Op):
    """``y = a @ b`` with NumPy/PyTorch rules (1-d operands, batch broadcasting).

    ``da = g @ b^H`` and ``db = a^H @ g`` (conjugate transposes: PyTorch's
    complex convention; plain transposes for real dtypes), each summed back
    over broadcast batch dims; 1-d operands are treated as a row (``a``) or
    column (``b``).
    """

    schema = OpSchema("matmul", amp_policy=PROMOTE, saves_input=True, family="linalg")

    @staticmethod
    def forward(be, a, b):
        if (a.dtype.kind == "c" or b.dtype.kind == "c") and not (be.isfinite(a).all() and be.isfinite(b).all()):
            return _complex_matmul_nonfinite(be, a, b)
        return be.matmul(a, b)

    def backward(self, g):
        from .elementwise import sum_to_size
        from .shape import reshape, transpose, unsqueeze

        a, b = self.input(0), self.input(1)
        sa, sb = self.shapes
        ea, eb = self.next_edges
        a2 = unsqueeze(a, 0) if a.ndim == 1 else a
        b2 = unsqueeze(b, 1) if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = unsqueeze(g2, -2 if b.ndim > 1 else 0)
        if b.ndim == 1:
            g2 = unsqueeze(g2, -1)
        ga = gb = None
        if ea is not None:
            ga = matmul(g2, conj_if_complex(transpose(b2, -1, -2)))
            ga = reshape(sum_to_size(ga, a2.shape), sa)
        if eb is not None:
            gb = matmul(conj_if_complex(transpose(a2, -1, -2)), g2)
            gb = reshape(sum_to_size(gb, b2.shape), sb)
        return ga, gb

    def backward_fast(self, be, g):
        a, b = self.input(0)._data, self.input(1)._data
        sa, sb = self.shapes
        ea, eb = self.next_edges
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = be.expand_dims(g2, -2 if b.ndim > 1 else 0)
        if b.ndim == 1:
            g2 = g2[..., None]
        ga = gb = None
        if ea is not None and eb is not None and g2.ndim > 2 and not c_contiguous(g2):
            g2 = be.ascontiguousarray(g2)  # one copy for both products (a strided batch would be copied twice)
        # .conj() is the array itself for real dtypes
        if ea is not None:
            ga = be.sum_to_shape(be.matmul(g2, be.swapaxes(b2, -1, -2).conj()), a2.shape).reshape(sa)
        if eb is not None:
            gb = be.sum_to_shape(be.matmul(be.swapaxes(a2, -1, -2).conj(), g2), b2.shape).reshape(sb)
        return ga, gb


def _complex_matmul_nonfinite(be, a, b):
    """A complex product with an infinite or NaN entry, as four real products: each term is then the textbook
    ``(ar br - ai bi) + i (ar bi + ai br)`` (PyTorch's MKL answer: ``(inf + 0j)(-2 - 1j) = -inf - infj``), where
    OpenBLAS's complex kernels give NaN parts for some infinite terms."""
    dt = be.result_type(a, b)
    a, b = a.astype(dt, copy=False), b.astype(dt, copy=False)
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    with be.errstate():  # inf * 0 and inf - inf are NaN, as in PyTorch, without a NumPy warning
        re = be.matmul(ar, br) - be.matmul(ai, bi)
        im = be.matmul(ar, bi) + be.matmul(ai, br)
    out = be.empty(re.shape, dtype=dt)
    out.real[...] = re
    out.imag[...] = im
    return out


@declare(Matmul, namespaces=("pylucid", "pylucid.linalg"), dunders=("__matmul__", "__rmatmul__"))
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with broadcasting (``@``).

    >>> import pylucid
    >>> pylucid.matmul(pylucid.ones(2, 3), pylucid.ones(3))
    tensor([3., 3.])
    """
    for name, x in (("input", input), ("other", other)):
        check_tensor(x, "matmul", name)
        if x.ndim == 0:
            raise ShapeMismatch(f"matmul: both arguments need at least 1 dim, got a 0-d {name}")
    ka = input.shape[-1]
    kb = other.shape[0] if other.ndim == 1 else other.shape[-2]
    if ka != kb:
        raise ShapeMismatch(
            f"matmul: shapes {tuple(input.shape)} and {tuple(other.shape)} cannot be multiplied ({ka} != {kb})"
        )
    try:
        return apply(Matmul, (input, other))
    except ValueError as exc:
        raise ShapeMismatch(
            f"matmul: batch dims of {tuple(input.shape)} and {tuple(other.shape)} do not broadcast: {exc}"
        ) from None


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class LinAlgError(LucidError):
    """A linear-algebra routine failed on its input (singular matrix, not positive-definite, no convergence).

    Exposed as ``pylucid.linalg.LinAlgError`` (PyTorch's ``torch.linalg.LinAlgError``).
    """


# ---------------------------------------------------------------- raw-array helpers (forward)
def _compute(a):
    # NumPy's LAPACK has no half precision: float16/bfloat16 (and ints) compute in float32
    if a.dtype.kind not in "fc" or a.dtype.itemsize < 4:
        return a.astype("float32")
    return a


def _lapack(op, what, fn, *args, **kwargs):
    """Call a LAPACK-backed routine; its LinAlgError becomes pylucid's, naming the op."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # numpy.linalg.LinAlgError / scipy's / ValueError from LAPACK
        if type(exc).__name__ == "LinAlgError":
            raise LinAlgError(f"{op}: {what} ({exc})") from None
        raise


# ---------------------------------------------------------------- graph-mode helpers (backward formulas)
def _mT(x):  # noqa: N802
    from .shape import transpose

    return transpose(x, -2, -1)


def _mH(x):  # noqa: N802
    from .complex import conj

    return _mT(conj(x))


def _const(like, arr):
    return _new_tensor(arr, like.device)


def _real_np(t):
    return t.dtype.to_real().numpy_dtype


def _eye(n, like):
    return _const(like, like.device.backend.eye(n, dtype=_real_np(like)))


def _diagonal(x):
    """Main diagonal of the last two dims (square or not): a view, whose gradient is ``diag_embed``."""
    return diagonal(x, 0, -2, -1)


def _is_zero(t):
    """True for a gradient that is exactly zero (an unused output: PyTorch's undefined gradient)."""
    return t is None or not bool(t._data.any())


def _sym_real(x):
    """``X + X^H`` minus the real diagonal of ``X``, as PyTorch's ``syminvadj``."""
    from .complex import real
    from .elementwise import add, sub

    return sub(add(x, _mH(x)), diag_embed(real(_diagonal(x)) if x.dtype.is_complex else _diagonal(x)))


def _check_float(x, op):
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        from ..errors import DtypeMismatch

        raise DtypeMismatch(f"{op}: expected a floating point or complex tensor, got {x.dtype}")


def _check_square(x, op, name="A"):
    check_tensor(x, op, name)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeMismatch(f"{op}: {name} must be a batch of square matrices, got shape {tuple(x.shape)}")
    _check_float(x, op)


def _check_matrix(x, op, name="A"):
    check_tensor(x, op, name)
    if x.ndim < 2:
        raise ShapeMismatch(f"{op}: {name} must have at least 2 dims, got shape {tuple(x.shape)}")
    _check_float(x, op)


# ================================================================ products
def _exact_product(op, input, other, other_name, ranks, layout):
    """``matmul(input, other)`` for the products that take one layout only and do not broadcast."""
    check_tensor(input, op, "input")
    check_tensor(other, op, other_name)
    a, b = tuple(input.shape), tuple(other.shape)
    if (len(a), len(b)) != ranks or a[-1] != (b[0] if len(b) == 1 else b[-2]) or (len(a) == 3 and a[0] != b[0]):
        raise ShapeMismatch(f"{op}: expected {layout} (no broadcasting), got shapes {a} and {b}")
    return matmul(input, other)


@declare()
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Matrix product of two 2-d tensors (no broadcasting); a composite of :func:`matmul`.

    >>> import pylucid
    >>> pylucid.mm(pylucid.ones(2, 3), pylucid.ones(3, 1))
    tensor([[3.],
            [3.]])
    """
    return _exact_product("mm", input, mat2, "mat2", (2, 2), "(n, m) and (m, p) matrices")


@declare()
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of ``(b, n, m)`` and ``(b, m, p)`` (no broadcasting); composite of :func:`matmul`."""
    return _exact_product("bmm", input, mat2, "mat2", (3, 3), "(b, n, m) and (b, m, p) batches")


@declare()
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix-vector product ``(n, m) @ (m,)``; composite of :func:`matmul`."""
    return _exact_product("mv", input, vec, "vec", (2, 1), "a (n, m) matrix and a (m,) vector")


class Dot(Op):
    """``y = sum_i a_i b_i`` of two 1-d tensors (no conjugation); ``da = g conj(b)``, ``db = g conj(a)``.

    A primitive (KeepInput, as the reference table's ``dot_1d``) rather than a
    matmul composite, so autocast keeps the input dtype.
    """

    schema = OpSchema("dot", amp_policy=KEEP_INPUT, saves_input=True, family="linalg")

    @staticmethod
    def forward(be, a, b):
        if a.dtype.itemsize < 4 and a.dtype.kind != "c":
            return be.dot(a.astype("float32"), b.astype("float32")).astype(a.dtype)
        return be.dot(a, b)

    def backward(self, g):
        from .complex import conj
        from .elementwise import mul

        a, b = self.input(0), self.input(1)
        ea, eb = self.next_edges
        return (mul(g, conj(b)) if ea is not None else None, mul(g, conj(a)) if eb is not None else None)


def _vec_pair(op, a, b):
    check_tensor(a, op, "input")
    check_tensor(b, op, "other")
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeMismatch(f"{op}: expected two 1-d tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] != b.shape[0]:
        raise ShapeMismatch(f"{op}: inconsistent tensor sizes: shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype is not b.dtype:
        from ..errors import DtypeMismatch

        raise DtypeMismatch(f"{op}: expected both vectors to have the same dtype, got {a.dtype} and {b.dtype}")


@declare(Dot)
def dot(input: Tensor, other: Tensor) -> Tensor:
    """Inner product of two 1-d tensors of the same dtype (no complex conjugation; see :func:`vdot`).

    >>> import pylucid
    >>> pylucid.dot(pylucid.tensor([1.0, 2.0]), pylucid.tensor([3.0, 4.0]))
    tensor(11.)
    """
    _vec_pair("dot", input, other)
    return apply(Dot, (input, other))


@declare(Dot)
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """``sum_i conj(a_i) b_i`` of two 1-d tensors; a composite ``dot(conj(input), other)``.

    >>> import pylucid
    >>> pylucid.vdot(pylucid.tensor([1j]), pylucid.tensor([1j]))
    tensor(1.+0.j)
    """
    from .complex import conj

    _vec_pair("vdot", input, other)
    return apply(Dot, (conj(input), other))


class Outer(Op):
    """``y_ij = a_i b_j``; ``da = g @ conj(b)``, ``db = g^T @ conj(a)`` (KeepInput, as the reference table)."""

    schema = OpSchema("outer", amp_policy=KEEP_INPUT, saves_input=True, family="linalg")

    @staticmethod
    def forward(be, a, b):
        return be.multiply.outer(a, b)

    def backward(self, g):
        from .complex import conj

        a, b = self.input(0), self.input(1)
        ea, eb = self.next_edges
        return (matmul(g, conj(b)) if ea is not None else None, matmul(_mT(g), conj(a)) if eb is not None else None)


@declare(Outer, aliases=("ger",))
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two 1-d tensors: ``out[i, j] = input[i] * vec2[j]``.

    >>> import pylucid
    >>> pylucid.outer(pylucid.tensor([1.0, 2.0]), pylucid.tensor([1.0, 0.0, -1.0]))
    tensor([[ 1.,  0., -1.],
            [ 2.,  0., -2.]])
    """
    check_tensor(input, "outer", "input")
    check_tensor(vec2, "outer", "vec2")
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeMismatch(f"outer: expected two 1-d tensors, got shapes {tuple(input.shape)} and "
                            f"{tuple(vec2.shape)}")
    return apply(Outer, (input, vec2))



@declare()
def inner(input: Tensor, other: Tensor) -> Tensor:
    """Inner product over the last dim (``dot`` for 1-d; a scalar operand multiplies); composite of :func:`einsum`.

    >>> import pylucid
    >>> pylucid.inner(pylucid.ones(2, 3), pylucid.ones(3))
    tensor([3., 3.])
    """
    from .elementwise import mul

    check_tensor(input, "inner", "input")
    check_tensor(other, "inner", "other")
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise ShapeMismatch(f"inner: the last dims must match, got shapes {tuple(input.shape)} and "
                            f"{tuple(other.shape)}")
    if input.ndim == 1 and other.ndim == 1:
        return dot(input, other) if input.dtype is other.dtype else einsum("i,i->", input, other)
    return tensordot(input, other, ([-1], [-1]))


@declare(method=False)
def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Contract ``dims`` of ``a`` with ``dims`` of ``b`` (an int: the last ``dims`` of ``a`` with the first of ``b``;
    or two lists). A composite of permute, reshape and :func:`matmul` (BLAS).

    >>> import pylucid
    >>> pylucid.tensordot(pylucid.ones(2, 3, 4), pylucid.ones(3, 4, 5), dims=2).shape
    (2, 5)
    """
    from .shape import permute, reshape

    check_tensor(a, "tensordot", "a")
    check_tensor(b, "tensordot", "b")
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: dims must be between 0 and {min(a.ndim, b.ndim)}, got {dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if isinstance(dims, Tensor):
            dims = dims.tolist()
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
        if len(da) != len(db):
            raise ValueError(f"tensordot: both dim lists must have the same length, got {da} and {db}")
        from ._utils import norm_dim

        da = [norm_dim(d, a.ndim, "tensordot") for d in da]
        db = [norm_dim(d, b.ndim, "tensordot") for d in db]
    for x, y in zip(da, db):
        # a size-1 dim contracts with the sum over the other's dim (PyTorch's rule)
        if a.shape[x] != b.shape[y] and 1 in (a.shape[x], b.shape[y]):
            from .reduction import sum as _sum

            if a.shape[x] == 1:
                b = _sum(b, y, keepdim=True)
            else:
                a = _sum(a, x, keepdim=True)
        if a.shape[x] != b.shape[y]:
            raise ShapeMismatch(f"tensordot: contracted dims differ in size: shapes {tuple(a.shape)} (dim {x}) and "
                                f"{tuple(b.shape)} (dim {y})")
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    m = 1
    for d in fa:
        m *= a.shape[d]
    n = 1
    for d in fb:
        n *= b.shape[d]
    a2 = reshape(permute(a, fa + da), (m, k))
    b2 = reshape(permute(b, db + fb), (k, n))
    return reshape(matmul(a2, b2), tuple(a.shape[d] for d in fa) + tuple(b.shape[d] for d in fb))


# ---------------------------------------------------------------- einsum
def _pairwise(be, ta, a, tb, b, to):
    """Contract two operands with one BLAS call: (batch, free_a, contracted) @ (batch, contracted, free_b)."""
    # sum away letters that appear in one operand only and not in the output
    sa = [c for c in ta if c not in tb and c not in to]
    if sa:
        a = be.sum(a, axis=tuple(ta.index(c) for c in sa))
        ta = "".join(c for c in ta if c not in sa)
    sb = [c for c in tb if c not in ta and c not in to]
    if sb:
        b = be.sum(b, axis=tuple(tb.index(c) for c in sb))
        tb = "".join(c for c in tb if c not in sb)
    batch = [c for c in to if c in ta and c in tb]
    contr = [c for c in ta if c in tb and c not in to]
    fa = [c for c in ta if c not in tb]
    fb = [c for c in tb if c not in ta]
    size = {c: a.shape[i] for i, c in enumerate(ta)}
    size.update({c: b.shape[i] for i, c in enumerate(tb)})

    def prod(cs):
        p = 1
        for c in cs:
            p *= size[c]
        return p

    a2 = a.transpose([ta.index(c) for c in batch + fa + contr]).reshape(prod(batch), prod(fa), prod(contr))
    b2 = b.transpose([tb.index(c) for c in batch + contr + fb]).reshape(prod(batch), prod(contr), prod(fb))
    y = be.matmul(a2, b2).reshape([size[c] for c in batch + fa + fb])
    cur = batch + fa + fb
    return y.transpose([cur.index(c) for c in to])


class Einsum(Op):
    """Einstein summation over explicit single-letter subscripts (the public function normalises them).

    Two operands without repeated letters contract with one ``matmul`` (BLAS)
    after a permute/reshape, so ``'bij,bjk->bik'`` and ``'ij,jk'`` run at
    ``bmm``/``mm`` speed; other patterns use the backend's ``einsum`` with
    ``optimize=True``. The gradient of operand ``k`` is another einsum of the
    output gradient with the (conjugated) other operands, so it differentiates
    again; letters only in operand ``k`` broadcast it back, and repeated letters
    (a diagonal) are restored with an identity tensor.
    """

    schema = OpSchema("einsum", amp_policy=PROMOTE, saves_input=True, family="linalg")

    @staticmethod
    def forward(be, *ops, terms, out):
        if len(ops) == 2 and all(len(set(t)) == len(t) for t in terms) and len(set(out)) == len(out):
            with be.errstate():  # inf * 0 in a contraction is NaN, as in PyTorch, without a NumPy warning
                r = _pairwise(be, terms[0], ops[0], terms[1], ops[1], out)
            # NumPy sums small integers into (u)int64; the public function casts the operands to int64 where
            # PyTorch's einsum sums (``_torch_sums``), so the result keeps the operands' dtype
            return r if r.dtype == ops[0].dtype else r.astype(ops[0].dtype)
        dt = ops[0].dtype
        with be.errstate():  # inf * 0 in a contraction is NaN, as in PyTorch, without a NumPy warning
            if dt.itemsize < 4 and dt.kind != "c":
                return be.einsum(",".join(terms) + "->" + out, *[o.astype("float32") for o in ops],
                                 optimize=True).astype(dt)
            return be.einsum(",".join(terms) + "->" + out, *ops, optimize=True)

    def backward(self, g):
        from .complex import conj
        from .shape import broadcast_to, reshape

        terms, out = self.params["terms"], self.params["out"]
        ops = [self.input(i) for i in range(len(terms))]
        grads = []
        for k, tk in enumerate(terms):
            if self.next_edges[k] is None:
                grads.append(None)
                continue
            other_terms = [t for j, t in enumerate(terms) if j != k] + [out]
            other_ops = [conj(o) for j, o in enumerate(ops) if j != k] + [g]
            uniq = "".join(dict.fromkeys(tk))
            seen = set("".join(other_terms))
            avail = "".join(c for c in uniq if c in seen)
            gk = apply(Einsum, tuple(other_ops), {"terms": tuple(other_terms), "out": avail})
            sizes = {c: self.shapes[k][tk.index(c)] for c in uniq}
            if avail != uniq:  # letters summed inside operand k only: the gradient is broadcast along them
                gk = reshape(gk, tuple(sizes[c] if c in avail else 1 for c in uniq))
                gk = broadcast_to(gk, tuple(sizes[c] for c in uniq))
            if uniq != tk:  # repeated letters: put the gradient on the diagonal with identity tensors
                free = [c for c in _LETTERS if c not in "".join(terms) + out]
                target, deltas = [], []
                for i, c in enumerate(tk):
                    if c in tk[:i]:
                        f = free.pop(0)
                        target.append(f)
                        deltas.append((c + f, _eye(sizes[c], g)))
                    else:
                        target.append(c)
                gk = apply(Einsum, (gk,) + tuple(d for _, d in deltas),
                           {"terms": (uniq,) + tuple(t for t, _ in deltas), "out": "".join(target)})
            grads.append(gk)
        return tuple(grads)


@declare(Einsum, method=False)
def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, as ``torch.einsum``: ``einsum('bij,bjk->bik', a, b)``.

    Subscripts are letters; ``...`` stands for broadcast dims; without ``->``
    the output holds the letters that appear once, in alphabetical order.
    Labels of size 1 broadcast against the others. Operands may also be given
    as one list. A primitive (see :class:`Einsum`) for speed: two-operand
    contractions are one BLAS call.

    >>> import pylucid
    >>> a = pylucid.ones(2, 3)
    >>> pylucid.einsum("ij,jk->ik", a, pylucid.ones(3, 2))
    tensor([[3., 3.],
            [3., 3.]])
    >>> pylucid.einsum("ii", pylucid.eye(3))
    tensor(3.)
    """
    from .shape import broadcast_to

    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: expected at least one operand")
    for i, o in enumerate(operands):
        check_tensor(o, "einsum", f"operand {i}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: the equation {equation!r} names {len(terms)} operands, got {len(operands)}")
    for t in terms + [rhs]:
        body = t.replace("...", "")
        if "." in body or any(c not in _LETTERS for c in body):
            raise ValueError(f"einsum: invalid subscript in {equation!r}: use letters a-z, A-Z and '...'")
    used = set(eq)
    spare = [c for c in _LETTERS if c not in used]
    # expand '...' into explicit letters (right-aligned, broadcasting)
    n_ell = 0
    for t, o in zip(terms, operands):
        n_letters = len(t.replace("...", ""))
        if "..." in t:
            n_ell = max(n_ell, o.ndim - n_letters)
        elif o.ndim != n_letters:
            raise ShapeMismatch(f"einsum: the subscript {t!r} has {n_letters} letters for an operand of shape "
                                f"{tuple(o.shape)}")
    if len(spare) < n_ell:
        raise ValueError("einsum: too many dims for the available subscript letters")
    ell = "".join(spare[:n_ell])
    new_terms = []
    for t, o in zip(terms, operands):
        if "..." in t:
            k = o.ndim - len(t.replace("...", ""))
            if k < 0:
                raise ShapeMismatch(f"einsum: the subscript {t!r} has more letters than operand shape "
                                    f"{tuple(o.shape)} has dims")
            t = t.replace("...", ell[n_ell - k:])
        new_terms.append(t)
    if arrow:
        if rhs.count("...") and not n_ell and not any("..." in t for t in terms):
            raise ValueError(f"einsum: the output of {equation!r} has '...' but no input does")
        out = rhs.replace("...", ell)
        if len(set(out)) != len(out):
            raise ValueError(f"einsum: the output subscript {rhs!r} repeats a letter")
        for c in out:
            if not any(c in t for t in new_terms):
                raise ValueError(f"einsum: the output letter {c!r} does not appear in any input of {equation!r}")
    else:
        counts = {}
        for t in terms:
            for c in t.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted((c for c, n in counts.items() if n == 1), key=_LETTERS.index))
    # sizes per letter, with size-1 broadcasting
    size: dict = {}
    for t, o in zip(new_terms, operands):
        for c, n in zip(t, o.shape):
            prev = size.get(c)
            if prev is None or prev == 1:
                size[c] = n
            elif n != prev and n != 1:
                shapes = ", ".join(str(tuple(x.shape)) for x in operands)
                raise ShapeMismatch(f"einsum: subscript {c!r} has size {prev} in one operand and {n} in another "
                                    f"(shapes {shapes} for {equation!r})")
    if all(not (o.dtype.is_floating_point or o.dtype.is_complex) for o in operands) and _torch_sums(
            new_terms, [tuple(o.shape) for o in operands], out):
        # PyTorch's integer (and bool) sums are int64, and so is an integer einsum whose contraction sums
        operands = [o.to(_dt.int64) for o in operands]
    ops = []
    for t, o in zip(new_terms, operands):
        want = tuple(size[c] for c in t)
        ops.append(broadcast_to(o, want) if tuple(o.shape) != want else o)
    return apply(Einsum, tuple(ops), {"terms": tuple(new_terms), "out": out})


def _torch_sums(terms, shapes, out):
    """Whether ``torch.einsum`` sums a label with ``sum`` (not inside a product): one operand, or a label of size
    > 1 in only one of the two operands of a step of its left-to-right contraction (size-1 dims broadcast: they
    do not count). That decides the result dtype of integer operands."""
    contr = [c for c in dict.fromkeys("".join(terms)) if c not in out]
    if not contr:
        return False
    if len(terms) == 1:
        return True
    sizes = [dict(zip(t, s)) for t, s in zip(terms, shapes)]  # a repeated letter is a diagonal: one size
    counts = {c: sum(sz.get(c, 1) != 1 for sz in sizes) for c in contr}
    acc = sizes[0]
    for sz in sizes[1:]:
        nxt = {}
        for c in contr:
            x, y = acc.get(c, 1), sz.get(c, 1)
            nxt[c] = max(x, y)
            if x != 1 and y != 1:
                counts[c] -= 1
                if counts[c] == 1:  # contracted in this step's product
                    counts[c] = 0
                    nxt[c] = 1
            elif counts[c] == 1 and (x != 1 or y != 1):
                return True
        acc = nxt
    return False


@declare()
def kron(input: Tensor, other: Tensor) -> Tensor:
    """Kronecker product; a composite of reshape and broadcasting ``mul``.

    >>> import pylucid
    >>> pylucid.kron(pylucid.eye(2), pylucid.ones(1, 2))
    tensor([[1., 1., 0., 0.],
            [0., 0., 1., 1.]])
    """
    from .elementwise import mul
    from .shape import reshape

    check_tensor(input, "kron", "input")
    check_tensor(other, "kron", "other")
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    a = reshape(input, tuple(x for s in sa for x in (s, 1)))
    b = reshape(other, tuple(x for s in sb for x in (1, s)))
    return reshape(mul(a, b), tuple(x * y for x, y in zip(sa, sb)))


def _scaled_sum(op, input, prod, beta, alpha):
    from .elementwise import add, mul

    if not (prod.dtype.is_floating_point or prod.dtype.is_complex) and not isinstance(input, bool):
        # integer products keep their dtype: PyTorch truncates float alpha/beta to integers there
        alpha, beta = int(alpha), int(beta)
    if alpha != 1:
        prod = mul(prod, alpha)
    shape, target = tuple(getattr(input, "shape", ())), tuple(prod.shape)
    if len(shape) > len(target) or any(s not in (1, t) for s, t in zip(shape[::-1], target[::-1])):
        # checked also for beta=0, where input is not read: PyTorch expands it to the product's shape first
        raise ShapeMismatch(f"{op}: input of shape {shape} does not broadcast to the product's shape {target}")
    try:
        if beta == 0:  # PyTorch: input is ignored (NaN/inf in it do not propagate)
            return prod
        return add(mul(input, beta) if beta != 1 else input, prod)
    except ShapeMismatch:
        raise ShapeMismatch(f"{op}: input of shape {tuple(input.shape)} does not broadcast to the product's shape "
                            f"{tuple(prod.shape)}") from None


@declare(inplace=True)
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``; with ``beta=0`` ``input`` is ignored. Composite of ``mm``."""
    return _scaled_sum("addmm", input, mm(mat1, mat2), beta, alpha)


@declare(inplace=True)
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``; with ``beta=0`` ``input`` is ignored. Composite of ``mv``."""
    return _scaled_sum("addmv", input, mv(mat, vec), beta, alpha)


@declare(inplace=True)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``; with ``beta=0`` ``input`` is ignored. Composite of ``bmm``."""
    return _scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha)


@declare(namespaces=("pylucid", "pylucid.linalg"))
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """3-d cross product along ``dim`` (broadcasting the other dims), as ``torch.linalg.cross``
    (default ``dim=-1``); a composite of indexing, ``mul`` and ``sub``.

    ``torch.cross`` without ``dim`` picks the first dim of size 3; pass ``dim``.

    >>> import pylucid
    >>> pylucid.cross(pylucid.tensor([1.0, 0.0, 0.0]), pylucid.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    from ._utils import norm_dim
    from .elementwise import mul, sub
    from .shape import broadcast_to, stack

    check_tensor(input, "cross", "input")
    check_tensor(other, "cross", "other")
    if input.ndim != other.ndim:
        raise ShapeMismatch(f"cross: inputs must have the same number of dims, got shapes {tuple(input.shape)} and "
                            f"{tuple(other.shape)}")
    if dim is None:
        dim = -1
    d = norm_dim(dim, input.ndim, "cross")
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise ShapeMismatch(f"cross: dim {dim} must have size 3 in both inputs, got shapes {tuple(input.shape)} and "
                            f"{tuple(other.shape)}")
    shape = []
    for x, y in zip(input.shape, other.shape):
        if x != y and x != 1 and y != 1:
            raise ShapeMismatch(f"cross: shapes {tuple(input.shape)} and {tuple(other.shape)} do not broadcast")
        shape.append(max(x, y) if x and y else 0)
    a = broadcast_to(input, tuple(shape))
    b = broadcast_to(other, tuple(shape))

    def comp(t, i):
        idx = [slice(None)] * t.ndim
        idx[d] = i
        return t[tuple(idx)]

    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    return stack([sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)), sub(mul(a0, b1), mul(a1, b0))], d)


@declare(namespaces=("pylucid", "pylucid.linalg"))
def matrix_power(input: Tensor, n: int) -> Tensor:
    """``A^n`` for an integer ``n`` by repeated squaring (``n < 0`` inverts first, ``n = 0`` gives the identity).

    A composite of :func:`matmul` (and :func:`inverse`), so it differentiates to any order.

    >>> import pylucid
    >>> pylucid.matrix_power(pylucid.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    tensor([[1., 3.],
            [0., 1.]])
    """
    check_tensor(input, "matrix_power")
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise ShapeMismatch(f"matrix_power: expected a batch of square matrices, got shape {tuple(input.shape)}")
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"matrix_power: n must be an int, got {type(n).__name__}")
    if n == 0:  # the identity whatever the entries (NaN too), in the input's dtype; still in the graph (zero gradient)
        from .indexing import where

        be = input.device.backend
        eye = be.broadcast_to(be.eye(input.shape[-1], dtype=input._data.dtype), tuple(input.shape))
        return where(_const(input, be.zeros(tuple(input.shape), dtype=bool)), input, _const(input, eye.copy()))
    a = inverse(input) if n < 0 else input
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    return result


@declare(method=False)
def chain_matmul(*matrices) -> Tensor:
    """Product of one or more 2-d matrices of one dtype, left to right (deprecated in PyTorch; see
    ``pylucid.linalg.multi_dot``, which also takes a 1-d first and last tensor). One matrix gives a copy of it.

    >>> import pylucid
    >>> pylucid.chain_matmul(pylucid.ones(2, 3), pylucid.ones(3, 1))
    tensor([[3.],
            [3.]])
    """
    if not matrices:
        raise LucidError("chain_matmul: expected one or more matrices, got none")
    for i, m in enumerate(matrices):
        check_tensor(m, "chain_matmul", f"matrix {i}")
        if m.ndim != 2:
            raise ShapeMismatch(f"chain_matmul: matrix {i} must be 2-d, got shape {tuple(m.shape)}")
        if m.dtype is not matrices[0].dtype:
            raise DtypeMismatch(f"chain_matmul: all matrices must have the same dtype, but matrix 0 is "
                                f"{matrices[0].dtype.name} and matrix {i} is {m.dtype.name}")
        if i and matrices[i - 1].shape[1] != m.shape[0]:
            raise ShapeMismatch(f"chain_matmul: matrices {i - 1} and {i} of shapes {tuple(matrices[i - 1].shape)} "
                                f"and {tuple(m.shape)} cannot be multiplied")
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(list(matrices))


# ================================================================ decompositions and solvers (pylucid.linalg)
def _batch_loop(be, fn, *arrays):
    """Apply a 2-d routine (scipy's are not batched) over the broadcast leading dims."""
    batch = be.broadcast_shapes(*(a.shape[:-2] for a in arrays))
    arrays = [be.broadcast_to(a, batch + a.shape[-2:]) for a in arrays]
    flat = [a.reshape((-1,) + a.shape[-2:]) for a in arrays]
    n = flat[0].shape[0]
    outs = [fn(*(a[i] for a in flat)) for i in range(n)]
    if not outs:
        probe = fn(*(be.eye(*a.shape[-2:], dtype=a.dtype) if a.shape[-1] == a.shape[-2] and a.size == 0 else
                     be.ones(a.shape[-2:], dtype=a.dtype) for a in flat))
        if isinstance(probe, tuple):
            return tuple(be.empty(batch + p.shape, dtype=p.dtype) for p in probe)
        return be.empty(batch + probe.shape, dtype=probe.dtype)
    if isinstance(outs[0], tuple):
        return tuple(be.stack([o[k] for o in outs]).reshape(batch + outs[0][k].shape) for k in range(len(outs[0])))
    return be.stack(outs).reshape(batch + outs[0].shape)


class Det(Op):
    """``det(A)``; gradient ``g conj(det) A^{-H}`` (the cofactor matrix).

    Where ``|det| < eps * ||A||_F`` the matrix is treated as singular and the
    cofactors come from the SVD ``A = U S V^H``: ``U diag(g alpha prod_{j!=i} s_j) V^H``
    with ``alpha = conj(det U det V^H)``, which is exact for rank ``n - 1``
    (PyTorch's ``linalg_det_backward``).
    """

    schema = OpSchema("det", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True, family="linalg")

    @staticmethod
    def forward(be, a):
        with be.errstate():  # NaN/inf entries give a NaN determinant, as PyTorch, without NumPy's warning
            return be.linalg.det(_compute(a)).astype(a.dtype)

    def backward(self, g):
        from .complex import conj
        from .elementwise import mul
        from .shape import unsqueeze

        a, d = self.input(0), self.output()
        be = a.device.backend
        n = a.shape[-1]
        if n == 0:
            return mul(a, 0.0)
        eps = float(be.finfo(a._data.real.dtype).eps)
        cutoff = eps * be.sqrt((be.abs(a._data) ** 2).sum(axis=(-2, -1)))
        gd = mul(g, conj(d))
        if bool((be.abs(d._data) >= cutoff).all()):
            return mul(unsqueeze(unsqueeze(gd, -1), -1), _mH(inv(a)))
        u, s, vh = svd(a, full_matrices=False)
        alpha = conj(mul(det(u), det(vh)))
        dvec = mul(_prod_except(s), unsqueeze(mul(g, alpha), -1))
        return matmul(mul(u, unsqueeze(dvec, -2)), vh)


def _prod_except(s):
    """``out_i = prod_{j != i} s_j`` over the last dim, with prefix/suffix products (safe for zeros)."""
    from .elementwise import mul
    from .shape import stack

    n = s.shape[-1]
    cols = [s[..., i] for i in range(n)]
    pre = [None] * n
    suf = [None] * n
    for i in range(1, n):
        pre[i] = cols[i - 1] if pre[i - 1] is None else mul(pre[i - 1], cols[i - 1])
    for i in range(n - 2, -1, -1):
        suf[i] = cols[i + 1] if suf[i + 1] is None else mul(suf[i + 1], cols[i + 1])
    out = []
    for i in range(n):
        if pre[i] is None and suf[i] is None:
            out.append(mul(cols[i], 0.0) + 1.0)
        elif pre[i] is None:
            out.append(suf[i])
        elif suf[i] is None:
            out.append(pre[i])
        else:
            out.append(mul(pre[i], suf[i]))
    return stack(out, -1)


@declare(Det, namespaces=("pylucid", "pylucid.linalg"))
def det(A: Tensor) -> Tensor:
    """Determinant of a batch of square matrices; singular matrices give 0 and still have a gradient.

    >>> import pylucid
    >>> pylucid.linalg.det(pylucid.tensor([[2.0, 1.0], [1.0, 3.0]]))
    tensor(5.)
    """
    _check_square(A, "linalg.det")
    return apply(Det, (A,))


class Slogdet(Op):
    """``(sign, log|det A|)``; ``d log|det| / dA = A^{-H}``. The sign requires grad (as in PyTorch) but is
    piecewise constant for real input, so its gradient is ignored (complex sign gradients are not supported)."""

    schema = OpSchema("slogdet", amp_policy=KEEP_INPUT, saves_input=True, family="linalg")
    n_outputs = 2

    @staticmethod
    def forward(be, a):
        with be.errstate():
            sign, logabs = be.linalg.slogdet(_compute(a))
        if a.dtype.kind != "c":  # a NaN on the LU diagonal: LAPACK's sign is 1, PyTorch's (the sign of NaN) 0
            sign = be.where(be.isnan(logabs), 0.0, sign)
        return sign.astype(a.dtype), logabs.astype(a.real.dtype if a.dtype.kind == "c" else a.dtype)

    def backward(self, g_sign, g_logabs):
        from .elementwise import mul
        from .shape import unsqueeze

        a = self.input(0)
        return mul(unsqueeze(unsqueeze(g_logabs, -1), -1), _mH(inv(a)))


@declare(Slogdet, namespaces=("pylucid", "pylucid.linalg"))
def slogdet(A: Tensor):
    """Sign and natural log of the absolute determinant, ``(sign, logabsdet)``: stable where ``det`` over/underflows.

    >>> import pylucid
    >>> pylucid.linalg.slogdet(pylucid.tensor([[-2.0, 0.0], [0.0, 3.0]]))
    (tensor(-1.), tensor(1.7918))
    """
    _check_square(A, "linalg.slogdet")
    return apply(Slogdet, (A,))


@declare()
def logdet(input: Tensor) -> Tensor:
    """``log(det(A))``: NaN for a negative determinant, ``-inf`` for 0; a composite of :func:`slogdet`."""
    from .elementwise import add, log

    sign, logabs = slogdet(input)
    return add(logabs, log(sign.detach()))


class Inv(Op):
    """``A^{-1}``; saves its output: ``dA = -A^{-H} g A^{-H}``. Singular input raises ``LinAlgError``."""

    schema = OpSchema("inv", amp_policy=KEEP_INPUT, saves_output=True, family="linalg")

    @staticmethod
    def forward(be, a):
        out = _lapack("linalg.inv", "the input matrix is singular, it cannot be inverted", be.linalg.inv, _compute(a))
        return out.astype(a.dtype, copy=False)

    def backward(self, g):
        from .elementwise import neg

        ih = _mH(self.output())
        return neg(matmul(ih, matmul(g, ih)))


@declare(Inv, namespaces="pylucid.linalg", method=False)
def inv(A: Tensor) -> Tensor:
    """Inverse of a batch of square matrices; a singular one raises :class:`pylucid.linalg.LinAlgError`.

    >>> import pylucid
    >>> pylucid.linalg.inv(pylucid.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    _check_square(A, "linalg.inv")
    return apply(Inv, (A,))


def _info_zeros(A):
    """The ``info`` output of the ``*_ex`` functions: int32 zeros over the batch (failures raise instead)."""
    from ..creation import zeros

    return zeros(*A.shape[:-2], dtype="int32", device=A.device)


@declare()
def inverse(input: Tensor) -> Tensor:
    """``torch.inverse``: the inverse of a batch of square matrices, as :func:`pylucid.linalg.inv`."""
    return inv(input)


class Solve(Op):
    """``X = A^{-1} B`` (batch dims broadcast); ``dB = A^{-H} g``, ``dA = -dB X^H``."""

    schema = OpSchema("solve", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True, family="linalg")

    @staticmethod
    def forward(be, a, b):
        out = _lapack("linalg.solve", "the input matrix A is singular", be.linalg.solve, _compute(a), _compute(b))
        return out.astype(a.dtype, copy=False)

    def backward(self, g):
        from .elementwise import neg, sum_to_size

        a = self.input(0)
        x = self.output()
        sa, sb = self.shapes
        gb = apply(Solve, (_mH(a), g))
        ga = sum_to_size(neg(matmul(gb, _mH(x))), sa) if self.next_edges[0] is not None else None
        return ga, sum_to_size(gb, sb) if self.next_edges[1] is not None else None


@declare(Solve, namespaces="pylucid.linalg", method=False)
def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """Solve ``A X = B`` (``left=False``: ``X A = B``); ``B`` is a vector when it has one dim less than ``A``'s
    batch-of-matrices shape (PyTorch's rule). A singular ``A`` raises :class:`pylucid.linalg.LinAlgError`.

    >>> import pylucid
    >>> pylucid.linalg.solve(pylucid.tensor([[2.0, 0.0], [0.0, 4.0]]), pylucid.tensor([1.0, 1.0]))
    tensor([0.5000, 0.2500])
    """
    from .shape import squeeze, unsqueeze

    _check_square(A, "linalg.solve")
    check_tensor(B, "linalg.solve", "B")
    if not left:
        return _mT(solve(_mT(A), _mT(B)))
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    b = unsqueeze(B, -1) if vector else B
    if b.ndim < 2 or b.shape[-2] != A.shape[-1]:
        raise ShapeMismatch(f"linalg.solve: incompatible shapes of A {tuple(A.shape)} and B {tuple(B.shape)}")
    try:
        x = apply(Solve, (A, b))
    except ValueError as exc:
        raise ShapeMismatch(f"linalg.solve: batch dims of A {tuple(A.shape)} and B {tuple(B.shape)} do not "
                            f"broadcast: {exc}") from None
    return squeeze(x, -1) if vector else x


class Cholesky(Op):
    """``A = L L^H`` (``upper``: ``U^H U``); PyTorch's ``cholesky_backward``:
    ``gA = L^{-H} Phi(L^H gL) L^{-1}`` symmetrised, ``Phi`` = lower triangle with half the diagonal."""

    schema = OpSchema("cholesky", amp_policy=KEEP_INPUT, saves_output=True, family="linalg")

    @staticmethod
    def forward(be, a, upper):
        c = _compute(a)
        if upper:  # LAPACK's uplo='U' reads the upper triangle: the lower one of A^H
            c = be.conj(be.swapaxes(c, -1, -2))
        low = _lapack("linalg.cholesky", "the input is not positive-definite", be.linalg.cholesky, c)
        # LAPACK's potrf passes NaN through (NumPy raises nothing); PyTorch reports the failed factorization
        if low.size and not bool(be.isfinite(be.diagonal(low, axis1=-2, axis2=-1)).all()):
            raise LinAlgError("linalg.cholesky: the factorization could not be completed: the input is not "
                              "positive-definite (it has non-finite entries)")
        low = low.astype(a.dtype, copy=False)
        return be.conj(be.swapaxes(low, -1, -2)) if upper else low

    def backward(self, g):
        from .elementwise import add, mul

        upper = self.params["upper"]
        low = self.output()
        if upper:
            low, g = _mH(low), _mH(g)
        ga = tril(matmul(_mH(low), g))
        ga = mul(add(ga, _mH(tril(ga, -1))), 0.5)
        ga = solve_triangular(_mH(low), ga, upper=True, left=True)
        return solve_triangular(low, ga, upper=False, left=False)


@declare(Cholesky, namespaces="pylucid.linalg", method=False)
def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """Cholesky factor of a Hermitian positive-definite matrix (lower by default); otherwise ``LinAlgError``.

    >>> import pylucid
    >>> pylucid.linalg.cholesky(pylucid.tensor([[4.0, 2.0], [2.0, 2.0]]))
    tensor([[2., 0.],
            [1., 1.]])
    """
    _check_square(A, "linalg.cholesky")
    return apply(Cholesky, (A,), {"upper": bool(upper)})


@declare(namespaces="pylucid.linalg", method=False)
def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False):
    """``(L, info)``: :func:`cholesky` that reports a matrix that is not positive-definite in ``info`` (LAPACK's:
    the order of its first leading minor that is not) instead of raising; ``check_errors=True`` raises.

    When some matrix of the batch fails, the whole ``L`` is returned detached, LAPACK's partial factor for the
    failed matrices (as PyTorch): the columns before the failing one factored, the failing pivot ``a_jj - |l_j|^2``
    (``<= 0`` or NaN) on the diagonal, the rest of the lower triangle as in ``A``.
    """
    _check_square(A, "linalg.cholesky_ex")
    try:
        return cholesky(A, upper=upper), _info_zeros(A)
    except LinAlgError:
        if check_errors:
            raise
    be = A.device.backend
    n = A.shape[-1]
    data = _compute(A.detach()._data)
    flat = data.reshape((_prod(A.shape[:-2]), n, n))
    outs, infos = [], []
    for m in flat:
        if upper:  # the upper triangle is read: the lower one of A^H
            m = be.conj(be.swapaxes(m, -1, -2))
        try:  # LAPACK's blocked factor where it succeeds; NumPy raises on a failed one, passes NaN through
            low, k = be.linalg.cholesky(m), 0
            if not bool(be.isfinite(be.diagonal(low)).all()):
                low, k = _potf2(be, m)
        except Exception:  # numpy's LinAlgError (CuPy returns NaN instead)
            low, k = _potf2(be, m)
        infos.append(k)
        outs.append(be.conj(be.swapaxes(low, -1, -2)) if upper else low)
    low = be.stack(outs).reshape(A.shape).astype(A._data.dtype, copy=False)
    info = be.asarray(infos, dtype="int32").reshape(tuple(A.shape[:-2]))
    return _const(A, low), _const(A, info)


def _potf2(be, m):
    """LAPACK's unblocked Cholesky (``potf2``, lower) of one matrix: ``(L, info)``. It stops at the first pivot
    ``a_jj - |l_j|^2`` that is not positive (or is NaN), leaves it on the diagonal and the columns after it as in
    ``m``, and reports its 1-based index in ``info`` (0: factored)."""
    a = be.tril(m)
    n = a.shape[-1]
    with be.errstate():  # inf - inf in a row's norm: NaN, as LAPACK computes it
        for j in range(n):
            row = a[j, :j]
            ajj = (a[j, j] - (row * be.conj(row)).sum()).real
            if not bool(ajj > 0):  # also NaN
                a[j, j] = ajj
                return a, j + 1
            ajj = be.sqrt(ajj)
            a[j, j] = ajj
            if j + 1 < n:
                a[j + 1:, j] = (a[j + 1:, j] - a[j + 1:, :j] @ be.conj(row)) / ajj
    return a, 0


class SolveTriangular(Op):
    """Triangular solve ``A X = B`` (``left=False``: ``X A = B``) with scipy's ``solve_triangular``.

    ``left``: ``dB = A^{-H} g`` (another triangular solve), ``dA = -dB X^H``;
    right: ``dB = g A^{-H}``, ``dA = -X^H dB``; ``dA`` is restricted to the
    triangle that was read (strict with ``unitriangular``).
    """

    schema = OpSchema("solve_triangular", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True,
                      family="linalg")

    @staticmethod
    def forward(be, a, b, upper, left, unitriangular):
        sl = be.scipy_linalg
        dt = a.dtype
        a, b = _compute(a), _compute(b)
        if a.size == 0 or b.size == 0:  # nothing to solve: the (broadcast) shape of B, as PyTorch
            batch = be.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            return be.zeros(batch + b.shape[-2:], dtype=dt)

        def one(m, rhs):
            if left:
                return sl.solve_triangular(m, rhs, lower=not upper, unit_diagonal=unitriangular)
            return sl.solve_triangular(m, rhs.T, trans=1, lower=not upper, unit_diagonal=unitriangular).T

        return _lapack("linalg.solve_triangular", "the triangular matrix is singular", _batch_loop, be, one, a,
                       b).astype(dt, copy=False)

    def backward(self, g):
        from .elementwise import neg, sum_to_size

        p = self.params
        a = self.input(0)
        x = self.output()
        sa, sb = self.shapes
        gb = solve_triangular(_mH(a), g, upper=not p["upper"], left=p["left"], unitriangular=p["unitriangular"])
        ga = None
        if self.next_edges[0] is not None:
            ga = neg(matmul(gb, _mH(x))) if p["left"] else neg(matmul(_mH(x), gb))
            k = 1 if p["unitriangular"] else 0
            ga = sum_to_size(triu(ga, k) if p["upper"] else tril(ga, -k), sa)
        return ga, sum_to_size(gb, sb) if self.next_edges[1] is not None else None


@declare(SolveTriangular, namespaces="pylucid.linalg", method=False)
def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """Solve ``A X = B`` for triangular ``A`` (only the ``upper``/lower triangle is read).

    >>> import pylucid
    >>> A = pylucid.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> pylucid.linalg.solve_triangular(A, pylucid.tensor([[2.0], [3.0]]), upper=False)
    tensor([[1.],
            [2.]])
    """
    _check_square(A, "linalg.solve_triangular")
    _check_matrix(B, "linalg.solve_triangular", "B")
    k = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != k:
        raise ShapeMismatch(f"linalg.solve_triangular: incompatible shapes of A {tuple(A.shape)} and B "
                            f"{tuple(B.shape)} (left={left})")
    try:
        return apply(SolveTriangular, (A, B), {"upper": bool(upper), "left": bool(left),
                                              "unitriangular": bool(unitriangular)})
    except ValueError as exc:
        raise ShapeMismatch(f"linalg.solve_triangular: batch dims of A {tuple(A.shape)} and B {tuple(B.shape)} "
                            f"do not broadcast: {exc}") from None


def _perm_from_pivots(be, piv, m):
    """Row permutations (``A[perm] = L U``) of ``m`` rows from LAPACK's 1-based sequential row swaps, over any
    batch (``min(m, n)`` swaps for an ``m x n`` matrix)."""
    p = be.to_numpy(piv)
    flat = p.reshape(_prod(p.shape[:-1]), p.shape[-1]) if p.ndim else p.reshape(1, 0)
    perms = []
    for row in flat:
        perm = list(range(m))
        for i, j in enumerate(row):
            j = int(j) - 1
            if not 0 <= j < m:
                raise ValueError(f"lu_unpack: pivot {j + 1} is out of range for {m} rows (pivots are 1-based)")
            perm[i], perm[j] = perm[j], perm[i]
        perms.append(perm)
    return perms, p.shape


def _perm_matrix(like, piv):
    """``P^T`` as a constant tensor (``P^T A = L U``) for the ``m`` rows of ``like``."""
    be = like.device.backend
    n = like.shape[-2]
    perms, shape = _perm_from_pivots(be, piv._data, n)
    eye = be.eye(n, dtype=_real_np(like))
    if perms:
        mats = be.stack([eye[be.asarray(perm, dtype="int64")] for perm in perms])
    else:
        mats = be.zeros((0, n, n), dtype=_real_np(like))
    return _const(like, mats.reshape(tuple(shape[:-1]) + (n, n)).astype(_real_np(like)))


def _lu_backward(gl, gu, p, low, up):
    """PyTorch's ``linalg_lu_backward`` for ``A = P L U`` with ``L`` (m, k) unit lower and ``U`` (k, n) upper:

    - square: ``gA = P L^{-H} (tril(L^H gL, -1) + triu(gU U^H)) U^{-H}``;
    - wide (m < n, ``U = [U1 | U2]``): ``gA1 = P L^{-H} (triu(gU1) + tril(L^H gL - triu(gU) U^H, -1) U1^{-H})``,
      ``gA2 = P L^{-H} gU2``;
    - tall (m > n, ``L = [L1; L2]``): ``gA1 = P (tril(gL1, -1) + L1^{-H} triu(gU U^H - L^H gL)) U^{-H}``,
      ``gA2 = P gL2 U^{-H}``.
    """
    from .elementwise import add, sub
    from .shape import cat

    m, n = low.shape[-2], up.shape[-1]
    k = min(m, n)
    if m == n:
        ga = add(tril(matmul(_mH(low), gl), -1), triu(matmul(gu, _mH(up))))
        ga = solve_triangular(_mH(up), ga, upper=False, left=False)
        ga = solve_triangular(_mH(low), ga, upper=True, unitriangular=True)
    elif m < n:
        u1 = up[..., :k]
        ga = sub(matmul(_mH(low), gl), matmul(triu(gu), _mH(up)))
        ga = solve_triangular(_mH(u1), tril(ga, -1), upper=False, left=False)
        ga = cat([add(ga, triu(gu[..., :k])), gu[..., k:]], -1)
        ga = solve_triangular(_mH(low), ga, upper=True, unitriangular=True)
    else:
        l1 = low[..., :k, :]
        ga = sub(matmul(gu, _mH(up)), matmul(_mH(low), gl))
        ga = solve_triangular(_mH(l1), triu(ga), upper=True, unitriangular=True)
        ga = cat([add(ga, tril(gl[..., :k, :], -1)), gl[..., k:, :]], -2)
        ga = solve_triangular(_mH(up), ga, upper=False, left=False)
    return matmul(p, ga)


def _unpack(lu):
    """``(L, U)`` of a packed ``m x n`` factorisation: ``L`` (m, k) unit lower, ``U`` (k, n) upper."""
    from .elementwise import add

    m, n = lu.shape[-2:]
    k = min(m, n)
    eye = _const(lu, lu.device.backend.eye(m, k, dtype=lu._data.dtype))
    return add(tril(lu[..., :, :k], -1), eye), triu(lu[..., :k, :])


def _getf2(be, m):
    """LAPACK's unblocked LU with partial pivoting (``getf2``) of one matrix with NaN or inf entries:
    ``(packed LU, 0-based pivots)``. OpenBLAS's ``getrf`` skips the scaling by a NaN pivot (its multipliers
    stay finite); here, as in reference LAPACK and PyTorch's MKL, ``x / NaN`` makes every later row NaN. The
    pivot is ``i?amax``'s: the first largest ``|x|`` (``|re| + |im|`` for complex), a NaN never larger, so a
    NaN in the pivot position stays the pivot."""
    a = m.copy()
    rows, cols = a.shape
    k = min(rows, cols)
    piv = []
    with be.errstate():  # inf - inf, 0 * inf: NaN, as LAPACK computes it
        for j in range(k):
            col = a[j:, j]
            mag = be.abs(col.real) + be.abs(col.imag) if col.dtype.kind == "c" else be.abs(col)
            p = j if bool(be.isnan(mag[0])) else j + int(be.argmax(be.where(be.isnan(mag), -1.0, mag)))
            piv.append(p)
            if p != j:
                a[[j, p]] = a[[p, j]]
            pivot = a[j, j]
            if bool(pivot != 0):  # a zero pivot (a singular matrix) leaves its column as it is
                a[j + 1:, j] /= pivot
            a[j + 1:, j + 1:] -= a[j + 1:, j:j + 1] * a[j:j + 1, j + 1:]
    return a, be.asarray(piv, dtype="int64")


class LuFactor(Op):
    """Packed LU factorisation ``P^T A = L U`` (scipy's ``lu_factor``) with 1-based int32 pivots, as PyTorch.

    Gradient: PyTorch's ``lu_factor_ex_backward``, the strict lower part of the
    packed gradient (its first ``k`` columns) being ``gL`` and the upper part
    (its first ``k`` rows) ``gU`` of :func:`_lu_backward`; square, wide and tall
    matrices.
    """

    schema = OpSchema("lu_factor", amp_policy=KEEP_INPUT, saves_output=True, family="linalg")
    n_outputs = 2
    differentiable_outputs = (True, False)

    @staticmethod
    def forward(be, a):
        sl = be.scipy_linalg
        dt = a.dtype

        def one(m):  # square or rectangular: min(m, n) pivots
            lu, piv = sl.lu_factor(m, check_finite=False) if bool(be.isfinite(m).all()) else _getf2(be, m)
            return lu, (piv + 1).astype("int32")[:, None]

        if a.size == 0:
            return a.astype(dt, copy=True), be.zeros(a.shape[:-2] + (min(a.shape[-2:]),), dtype="int32")
        with warnings.catch_warnings():  # a singular matrix factors fine (lu_factor_ex reports it in info)
            warnings.simplefilter("ignore")
            lu, piv = _batch_loop(be, one, _compute(a))
        return lu.astype(dt, copy=False), piv[..., 0]

    def backward(self, g, g_piv):
        lu = self.output(0)
        m, n = lu.shape[-2:]
        k = min(m, n)
        low, up = _unpack(lu)
        return _lu_backward(tril(g[..., :, :k], -1), triu(g[..., :k, :]), _mT(_perm_matrix(lu, self.output(1))),
                            low, up)


@declare(LuFactor, namespaces="pylucid.linalg", method=False)
def lu_factor(A: Tensor, *, pivot: bool = True):
    """Packed LU factorisation: ``(LU, pivots)`` with ``P^T A = L U``, ``L`` unit lower (below the diagonal of
    ``LU``) and ``U`` upper; ``pivots`` are 1-based int32 row swaps, as in PyTorch/LAPACK.

    >>> import pylucid
    >>> LU, piv = pylucid.linalg.lu_factor(pylucid.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> piv
    tensor([2, 2], dtype=pylucid.int32)
    """
    _check_matrix(A, "linalg.lu_factor")
    if not pivot:
        raise ValueError("linalg.lu_factor: pivot=False is not supported on the CPU (as in PyTorch)")
    return apply(LuFactor, (A,))


@declare(namespaces="pylucid.linalg", method=False)
def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """Solve ``A X = B`` from :func:`lu_factor`'s output; a composite of two triangular solves and a permutation.

    ``left=False`` solves ``X A = B``; ``adjoint=True`` uses ``A^H``.
    """
    _check_square(LU, "linalg.lu_solve", "LU")
    _check_matrix(B, "linalg.lu_solve", "B")
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return _mH(lu_solve(LU, pivots, _mH(B), left=True, adjoint=not adjoint))
    pt = _perm_matrix(LU, pivots)
    if adjoint:  # A^H = U^H L^H P^T:  X = P L^{-H} U^{-H} B
        y = solve_triangular(_mH(LU), B, upper=False)
        y = solve_triangular(_mH(LU), y, upper=True, unitriangular=True)
        return matmul(_mT(pt), y)
    y = solve_triangular(LU, matmul(pt, B), upper=False, unitriangular=True)
    return solve_triangular(LU, y, upper=True)


# ---------------------------------------------------------------- LU front ends (torch.lu, linalg.lu, lu_unpack)
def _lu_info(LU):
    """LAPACK's ``info`` of a packed LU factorisation: the 1-based index of the first zero on ``U``'s diagonal
    (0 when there is none), int32 over the batch."""
    be = LU.device.backend
    d = be.diagonal(LU._data, axis1=-2, axis2=-1)
    zero = d == 0
    first = be.where(zero.any(axis=-1), be.argmax(zero, axis=-1) + 1, 0) if d.shape[-1] else be.zeros(d.shape[:-1])
    return _new_tensor(be.asarray(first).astype("int32"), LU.device)


@declare(namespaces="pylucid.linalg", method=False)
def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False):
    """``(LU, pivots, info)``: :func:`lu_factor` with LAPACK's ``info`` (``i > 0``: ``U[i-1, i-1]`` is exactly 0,
    the matrix is singular; the factorisation is still returned). ``check_errors`` raises instead."""
    LU, piv = lu_factor(A, pivot=pivot)
    info = _lu_info(LU)
    if check_errors and bool(info._data.any()):
        raise LinAlgError(f"linalg.lu_factor_ex: U[{int(info._data.max()) - 1}] is exactly zero: the matrix is "
                          "singular")
    return LU, piv, info


@declare(name="lu", method=True)
def torch_lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """``torch.lu``: ``(LU, pivots)`` (and ``infos`` with ``get_infos``) as :func:`pylucid.linalg.lu_factor_ex`.

    >>> import pylucid
    >>> LU, piv = pylucid.lu(pylucid.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> LU
    tensor([[3.0000, 4.0000],
            [0.3333, 0.6667]])
    """
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    return (LU, piv, info) if get_infos else (LU, piv)


@declare(method=False)
def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True):  # noqa: N803
    """``(P, L, U)`` with ``A = P L U`` from a packed factorisation: ``L`` (m, k) unit lower, ``U`` (k, n) upper,
    ``P`` the (m, m) permutation of the 1-based ``LU_pivots``. ``unpack_data=False`` gives empty ``L``, ``U``;
    ``unpack_pivots=False`` an empty ``P``. Differentiable in ``LU_data`` (``L``/``U`` are its triangles).

    >>> import pylucid
    >>> P, L, U = pylucid.lu_unpack(*pylucid.linalg.lu_factor(pylucid.tensor([[1.0, 2.0], [3.0, 4.0]])))
    >>> P
    tensor([[0., 1.],
            [1., 0.]])
    """
    _check_matrix(LU_data, "lu_unpack", "LU_data")
    check_tensor(LU_pivots, "lu_unpack", "LU_pivots")
    m, n = LU_data.shape[-2:]
    if LU_pivots.dtype.is_floating_point or LU_pivots.dtype.is_complex or tuple(LU_pivots.shape) != (
            *LU_data.shape[:-2], min(m, n)):
        raise ShapeMismatch(f"lu_unpack: LU_pivots must be an integer tensor of shape "
                            f"{(*LU_data.shape[:-2], min(m, n))}, got {LU_pivots.dtype} of shape "
                            f"{tuple(LU_pivots.shape)}")
    be = LU_data.device.backend
    empty = _const(LU_data, be.empty((0,), dtype=LU_data._data.dtype))
    P = _mT(_perm_matrix(LU_data, LU_pivots)).to(LU_data.dtype) if unpack_pivots else empty
    if not unpack_data:
        return P, empty, empty
    L, U = _unpack(LU_data)
    return P, L, U


@declare(name="lu", namespaces="pylucid.linalg", method=False)
def linalg_lu(A: Tensor, *, pivot: bool = True):
    """``torch.linalg.lu``: ``(P, L, U)`` with ``A = P L U`` for any ``m x n`` matrix; a composite of
    :func:`lu_factor` and :func:`lu_unpack` (PyTorch's ``linalg_lu_backward``: square, wide and tall).

    >>> import pylucid
    >>> P, L, U = pylucid.linalg.lu(pylucid.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> U
    tensor([[3.0000, 4.0000],
            [0.0000, 0.6667]])
    """
    _check_matrix(A, "linalg.lu")
    return lu_unpack(*lu_factor(A, pivot=pivot))


@declare(name="lu_solve", method=True)
def torch_lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: N803
    """``torch.lu_solve(b, LU_data, LU_pivots)``: :func:`pylucid.linalg.lu_solve` with ``b`` first."""
    return lu_solve(LU_data, LU_pivots, b)


# ---------------------------------------------------------------- Cholesky and triangular front ends
class CholeskySolve(Op):
    """``X = A^{-1} B`` with ``A = L L^H`` (``upper``: ``U^H U``): two triangular solves reading the factor's
    triangle. PyTorch's ``cholesky_solve_backward``: ``gB = cholesky_solve(g, L)``, ``C = gB X^H + X gB^H``,
    ``gL = -C L`` (``upper``: ``-U C``): the gradient of ``A = L L^H`` for a full ``L`` (non-zero outside the
    triangle too, as PyTorch)."""

    schema = OpSchema("cholesky_solve", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True, family="linalg")

    @staticmethod
    def forward(be, b, low, upper):
        ct = be.swapaxes(be.conj(low), -1, -2)
        if upper:  # A = U^H U: U^H Y = B, U X = Y
            y = SolveTriangular.forward(be, ct, b, upper=False, left=True, unitriangular=False)
            return SolveTriangular.forward(be, low, y, upper=True, left=True, unitriangular=False)
        y = SolveTriangular.forward(be, low, b, upper=False, left=True, unitriangular=False)
        return SolveTriangular.forward(be, ct, y, upper=True, left=True, unitriangular=False)

    def backward(self, g):
        from .elementwise import add, neg, sum_to_size

        low, x = self.input(1), self.output()
        upper = self.params["upper"]
        sb, sl = self.shapes
        gb = apply(CholeskySolve, (g, low), {"upper": upper})
        gl = None
        if self.next_edges[1] is not None:
            c = matmul(gb, _mH(x))
            c = add(c, _mH(c))
            gl = sum_to_size(neg(matmul(low, c) if upper else matmul(c, low)), sl)
        return sum_to_size(gb, sb) if self.next_edges[0] is not None else None, gl


@declare(CholeskySolve, method=True)
def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """Solve ``A X = B`` given the Cholesky factor of ``A`` (``A = L L^H``, or ``U^H U`` with ``upper``; only that
    triangle is read); batch dims broadcast.

    >>> import pylucid
    >>> L = pylucid.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> pylucid.cholesky_solve(pylucid.tensor([[4.0], [3.0]]), L)
    tensor([[0.5000],
            [1.0000]])
    """
    _check_matrix(B, "cholesky_solve", "B")
    _check_square(L, "cholesky_solve", "L")
    if B.shape[-2] != L.shape[-1]:
        raise ShapeMismatch(f"cholesky_solve: B {tuple(B.shape)} and L {tuple(L.shape)} need the same number of "
                            "rows")
    try:
        return apply(CholeskySolve, (B, L), {"upper": bool(upper)})
    except ValueError as exc:
        raise ShapeMismatch(f"cholesky_solve: batch dims of B {tuple(B.shape)} and L {tuple(L.shape)} do not "
                            f"broadcast: {exc}") from None


@declare(method=True)
def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """``A^{-1}`` from the Cholesky factor of ``A`` (``A = L L^H``, or ``U^H U`` with ``upper``).

    >>> import pylucid
    >>> pylucid.cholesky_inverse(pylucid.tensor([[2.0, 0.0], [0.0, 1.0]]))
    tensor([[0.2500, 0.0000],
            [0.0000, 1.0000]])
    """
    _check_square(L, "cholesky_inverse", "L")
    return cholesky_solve(_eye(L.shape[-1], L).to(L.dtype), L, upper)  # the identity broadcasts over the batch


@declare(name="cholesky", method=True)
def torch_cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky`` (deprecated in PyTorch): :func:`pylucid.linalg.cholesky`."""
    return cholesky(input, upper=upper)


@declare(name="qr", method=False)
def torch_qr(input: Tensor, some: bool = True):
    """``torch.qr``: :func:`pylucid.linalg.qr` with ``mode='reduced'`` (``some``) or ``'complete'``."""
    return qr(input, "reduced" if some else "complete")


@declare(method=True)
def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False):
    """``torch.triangular_solve``: ``(solution, cloned_coefficient)`` of ``A X = b`` (``transpose``: ``A^T X = b``)
    for triangular ``A``, batch dims broadcast.

    >>> import pylucid
    >>> pylucid.triangular_solve(pylucid.tensor([[2.0], [2.0]]), pylucid.tensor([[2.0, 1.0], [0.0, 1.0]]))[0]
    tensor([[0.],
            [2.]])
    """
    from collections import namedtuple

    from .conversion import clone

    _check_square(A, "triangular_solve", "A")
    _check_matrix(b, "triangular_solve", "b")
    a = _mT(A) if transpose else A
    x = solve_triangular(a, b, upper=bool(upper) != bool(transpose), unitriangular=unitriangular)
    if tuple(A.shape[:-2]) != tuple(x.shape[:-2]):  # the coefficient comes back broadcast to the batch
        from .shape import expand

        A = expand(A, *x.shape[:-2], *A.shape[-2:])
    return namedtuple("triangular_solve", ["solution", "cloned_coefficient"])(x, clone(A))


@declare(name="svd", method=True)
def torch_svd(input: Tensor, some: bool = True, compute_uv: bool = True):
    """``torch.svd``: ``(U, S, V)`` with ``A = U diag(S) V^H`` (``V``, not ``V^H``); ``some=False`` gives the full
    square ``U`` and ``V``. ``compute_uv=False`` returns zero-filled ``U`` (m, m) and ``V`` (n, n).

    >>> import pylucid
    >>> U, S, V = pylucid.svd(pylucid.tensor([[0.0, 2.0], [1.0, 0.0]]))
    >>> S
    tensor([2., 1.])
    """
    from collections import namedtuple

    _check_matrix(input, "svd", "input")
    res = namedtuple("svd", ["U", "S", "V"])
    if not compute_uv:
        be = input.device.backend
        m, n = input.shape[-2:]
        bt = tuple(input.shape[:-2])
        dt = input._data.dtype
        return res(_const(input, be.zeros(bt + (m, m), dtype=dt)), svdvals(input),
                   _const(input, be.zeros(bt + (n, n), dtype=dt)))
    u, s, vh = svd(input, full_matrices=not some)
    return res(u, s, _mH(vh))


# ---------------------------------------------------------------- the *_ex solvers, cond, tensorinv/tensorsolve
def _nan_like(like, shape):
    be = like.device.backend
    return _const(like, be.full(shape, be.nan, dtype=like._data.dtype))


@declare(namespaces="pylucid.linalg", method=False)
def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False):
    """``(result, info)``: :func:`solve` that reports a singular ``A`` in ``info`` (LAPACK's: the 1-based index
    of the zero pivot) instead of raising. The ``result`` of a failed solve is NaN (PyTorch leaves LAPACK's
    unspecified values); ``check_errors=True`` raises :class:`LinAlgError`."""
    _check_square(A, "linalg.solve_ex")
    try:
        return solve(A, B, left=left), _info_zeros(A)
    except LinAlgError:
        if check_errors:
            raise
    info = lu_factor_ex(A.detach())[2]
    be = A.device.backend
    shape = be.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])) + tuple(B.shape[-2:]) if B.ndim >= 2 \
        else tuple(B.shape)
    return _nan_like(A, shape), info


@declare(namespaces="pylucid.linalg", method=False)
def inv_ex(A: Tensor, *, check_errors: bool = False):
    """``(inverse, info)``: :func:`inv` that reports a singular ``A`` in ``info`` (the 1-based index of the zero
    pivot) instead of raising; the inverse of a singular matrix is NaN. ``check_errors=True`` raises."""
    _check_square(A, "linalg.inv_ex")
    try:
        return inv(A), _info_zeros(A)
    except LinAlgError:
        if check_errors:
            raise
    return _nan_like(A, tuple(A.shape)), lu_factor_ex(A.detach())[2]


@declare(namespaces="pylucid.linalg", method=False)
def cond(A: Tensor, p=None) -> Tensor:
    """Condition number ``||A||_p ||A^{-1}||_p``: for ``p`` in ``None, 2, -2`` the ratio of the largest and the
    smallest singular values (any ``m x n``); for ``'fro', 'nuc', inf, -inf, 1, -1`` the product of the matrix
    norms (square ``A``; a singular one gives ``inf``). Real-valued.

    >>> import pylucid
    >>> pylucid.linalg.cond(pylucid.tensor([[4.0, 0.0], [0.0, 0.5]]))
    tensor(8.)
    """
    from .elementwise import div, mul, nan_to_num

    _check_matrix(A, "linalg.cond")
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = svdvals(A)
        if s.shape[-1] == 0:
            return _const(A, A.device.backend.zeros(tuple(A.shape[:-2]), dtype=_real_np(A)))
        big, small = s[..., 0], s[..., -1]
        return div(small, big) if p == -2 else div(big, small)
    if p not in ("fro", "nuc", 1, -1, float("inf"), float("-inf")):
        raise ValueError(f"linalg.cond: p must be None, 'fro', 'nuc', 2, -2, 1, -1, inf or -inf, got {p!r}")
    _check_square(A, "linalg.cond")
    ainv, info = inv_ex(A)
    out = mul(matrix_norm(A, p), matrix_norm(ainv, p))
    if bool(info._data.any()):
        from .indexing import where

        out = where(_const(out, info._data != 0), float("inf"), out)
    # 0 * inf, and the NaN of a matrix with NaN entries, are inf: PyTorch's (and NumPy's) answer
    return nan_to_num(out, nan=float("inf"), posinf=float("inf"), neginf=float("-inf"))


def _prod(shape):
    out = 1
    for d in shape:
        out *= int(d)
    return out


@declare(namespaces="pylucid.linalg", method=False)
def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of ``A`` for :func:`tensordot` over ``ind`` dims: ``tensordot(tensorinv(A, ind), A, ind)`` is
    the identity; ``A.shape[:ind]`` and ``A.shape[ind:]`` must have the same number of elements.

    >>> import pylucid
    >>> A = pylucid.eye(4).reshape(4, 2, 2) * 2
    >>> pylucid.linalg.tensorinv(A, ind=1).shape
    (2, 2, 4)
    """
    check_tensor(A, "linalg.tensorinv", "A")
    if not isinstance(ind, int) or ind <= 0:
        raise ValueError(f"linalg.tensorinv: ind must be a positive int, got {ind!r}")
    if ind > A.ndim:
        raise ShapeMismatch(f"linalg.tensorinv: ind={ind} is more than the {A.ndim} dims of A {tuple(A.shape)}")
    out_shape, in_shape = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if _prod(out_shape) != _prod(in_shape):
        raise ShapeMismatch(f"linalg.tensorinv: the product of the first {ind} dims of A {tuple(A.shape)} must "
                            f"equal that of the rest")
    n = _prod(out_shape)
    return inv(A.reshape(n, n)).reshape(*in_shape, *out_shape)


@declare(namespaces="pylucid.linalg", method=False)
def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """``X`` with ``tensordot(A, X, X.ndim) = B``: ``A`` reshaped to a square matrix over ``B``'s dims and the
    rest; ``dims`` moves those dims of ``A`` to the end first.

    >>> import pylucid
    >>> A = pylucid.eye(6).reshape(2, 3, 6) * 2
    >>> pylucid.linalg.tensorsolve(A, pylucid.ones(2, 3)).shape
    (6,)
    """
    from .shape import movedim

    check_tensor(A, "linalg.tensorsolve", "A")
    check_tensor(B, "linalg.tensorsolve", "B")
    if dims is not None:
        dims = [dims] if isinstance(dims, int) else list(dims)
        A = movedim(A, dims, list(range(A.ndim - len(dims), A.ndim)))
    x_shape = tuple(A.shape[B.ndim:])
    if _prod(x_shape) != B.numel() or _prod(A.shape[:B.ndim]) != B.numel():
        raise ShapeMismatch(f"linalg.tensorsolve: A {tuple(A.shape)} must have as many elements in its first "
                            f"{B.ndim} dims and in the rest as B {tuple(B.shape)} has")
    n = B.numel()
    return solve(A.reshape(n, n), B.reshape(n)).reshape(*x_shape)


# ---------------------------------------------------------------- Vandermonde, Householder products
def _powers(x, N):
    """``[x^0, x^1, ..., x^(N-1)]`` on a new last dim, by a cumulative product (exact derivative at 0)."""
    from .scan import cumprod
    from .shape import cat, expand, unsqueeze

    col = unsqueeze(x, -1)
    ones = _const(x, x.device.backend.ones(tuple(x.shape) + (1,), dtype=x._data.dtype))
    if N == 1:
        return ones
    return cumprod(cat([ones, expand(col, *x.shape, N - 1)], -1), -1)


@declare(name="vander", namespaces="pylucid.linalg", method=False)
def linalg_vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803
    """``torch.linalg.vander``: the Vandermonde matrix ``V[..., i, j] = x[..., i]^j`` (increasing powers), of
    shape ``(*, n, N)``; ``N`` defaults to ``n`` and must be greater than 1.

    >>> import pylucid
    >>> pylucid.linalg.vander(pylucid.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [1, 2, 4],
            [1, 3, 9]])
    """
    check_tensor(x, "linalg.vander", "x")
    if x.dtype == _dt.bool_:
        raise DtypeMismatch("linalg.vander: argument 'x' has dtype bool; linalg.vander accepts float, complex, int "
                            "tensors")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(_dt.int64)  # integer powers are int64, as PyTorch
    if x.ndim == 0:  # a 0-d x is one point, as PyTorch
        x = x.reshape(1)
    N = x.shape[-1] if N is None else N  # noqa: N806
    if not isinstance(N, int) or N <= 1:
        raise ValueError(f"linalg.vander: N must be greater than 1, got {N!r}")
    return _powers(x, N)


@declare(method=False)
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """``torch.vander``: the Vandermonde matrix of a 1-d ``x``, powers ``N - 1`` down to 0 (``increasing``: up).

    >>> import pylucid
    >>> pylucid.vander(pylucid.tensor([1, 2, 3]), N=2)
    tensor([[1, 1],
            [2, 1],
            [3, 1]])
    """
    from .shape import flip

    check_tensor(x, "vander", "x")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(_dt.int64)  # integer (and bool) powers are int64, as PyTorch
    if x.ndim != 1:
        raise ShapeMismatch(f"vander: x must be 1-d, got shape {tuple(x.shape)}")
    N = x.shape[0] if N is None else N  # noqa: N806
    if not isinstance(N, int) or N < 0:
        raise ValueError(f"vander: N must be a non-negative int, got {N!r}")
    if N == 0:
        return _const(x, x.device.backend.empty((x.shape[0], 0), dtype=x._data.dtype))
    v = _powers(x, N)
    return v if increasing else flip(v, [-1])


@declare(namespaces="pylucid.linalg", method=False, aliases=())
def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^H`` with ``v_i`` the ``i``-th column
    of ``A`` below the diagonal and 1 on it (LAPACK's ``orgqr``; ``A`` is (*, m, n), ``tau`` (*, k), ``k <= n <= m``).
    A composite of matrix products, so it is differentiable in ``A`` and ``tau``.

    >>> import pylucid
    >>> pylucid.linalg.householder_product(pylucid.tensor([[1.0], [0.0]]), pylucid.tensor([2.0]))
    tensor([[-1.],
            [ 0.]])
    """
    from .elementwise import add, mul, sub
    from .reduction import sum as _sum
    from .shape import unsqueeze

    _check_matrix(A, "linalg.householder_product")
    check_tensor(tau, "linalg.householder_product", "tau")
    m, n = A.shape[-2:]
    if n > m:
        raise ShapeMismatch(f"linalg.householder_product: A must have at least as many rows as columns, got shape "
                            f"{tuple(A.shape)}")
    if tau.ndim < 1 or tau.shape[-1] > n or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeMismatch(f"linalg.householder_product: tau must have shape (*A.shape[:-2], k) with k <= {n}, got "
                            f"{tuple(tau.shape)} for A {tuple(A.shape)}")
    k = tau.shape[-1]
    be = A.device.backend
    if k == 0:  # no reflectors: the first n columns of I, still in A's graph (as PyTorch); a sum over no rows is
        # 0 where A * 0 would carry A's NaN/inf
        return add(_sum(A[..., :0, :], -2, keepdim=True), _const(A, be.eye(m, n, dtype=A._data.dtype)))
    v = add(tril(A, -1), _const(A, be.eye(m, n, dtype=A._data.dtype)))
    q = _const(A, be.broadcast_to(be.eye(m, n, dtype=A._data.dtype), tuple(A.shape)).copy())
    for i in range(k - 1, -1, -1):  # Q = H_1 (H_2 (... (H_k E)))
        vi = v[..., :, i:i + 1]
        t = unsqueeze(unsqueeze(tau[..., i], -1), -1)
        q = sub(q, mul(t, matmul(vi, matmul(_mH(vi), q))))
    return q


@declare(method=True)
def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """``torch.orgqr``: :func:`pylucid.linalg.householder_product`."""
    return householder_product(input, tau)


# ---------------------------------------------------------------- general eigen-decomposition
class Eig(Op):
    """Eigenvalues and right eigenvectors of a general square matrix (``be.eig``), complex for any input, each
    eigenvector of unit norm (LAPACK's ``geev``, as PyTorch).

    Gradient (PyTorch's ``linalg_eig_backward``), with ``E_ij = conj(l_j - l_i)``:
    ``gA = V^{-H} (diag(gL) + (V^H gV - V^H V diag(re(V^H gV))) / E) V^H``, its
    real part for a real ``A``. The eigenvectors are defined up to a phase
    ``e^{i phi}``; a loss that depends on it is ill-defined and raises (as
    PyTorch). Repeated eigenvalues make ``E`` vanish: inf/NaN through ``V``.
    """

    schema = OpSchema("eig", amp_policy=KEEP_INPUT, saves_output=True, family="linalg")
    n_outputs = 2

    @staticmethod
    def forward(be, a, real_input):
        return _lapack("linalg.eig", "the algorithm did not converge", be.eig, _compute(a))

    def backward(self, gl, gv):
        from .complex import imag, real
        from .elementwise import add, div, mul, sub
        from .shape import unsqueeze

        w, v = self.output(0), self.output(1)
        n = w.shape[-1]
        vh = _mH(v)
        if _is_zero(gv):
            ga = mul(unsqueeze(gl, -1), vh)
        else:
            vhgv = matmul(vh, gv)
            dg = _diagonal(vhgv)
            be = v.device.backend
            if not bool(be.allclose(imag(dg)._data, 0, rtol=1e-2, atol=1e-2)):
                raise LinAlgError("linalg.eig: the eigenvectors are defined up to a phase e^{i phi} and the loss "
                                  "depends on it, so its gradient is ill-defined")
            ga = sub(vhgv, matmul(vh, mul(v, unsqueeze(real(dg).to(v.dtype), -2))))
            from .complex import conj

            wc = conj(w)
            e = add(sub(unsqueeze(wc, -2), unsqueeze(wc, -1)), _eye(n, w).to(w.dtype))
            ga = div(ga, e)
            ga = sub(ga, diag_embed(_diagonal(ga)))
            if not _is_zero(gl):
                ga = add(ga, diag_embed(gl))
            ga = matmul(ga, vh)
        ga = solve(vh, ga)
        return real(ga) if self.params["real_input"] else ga


@declare(Eig, namespaces="pylucid.linalg", method=False)
def eig(A: Tensor):
    """``(eigenvalues, eigenvectors)`` of a batch of general square matrices, complex (complex64 for float32
    input, complex128 for float64), eigenvectors of unit norm in the columns: ``A V = V diag(L)``.

    >>> import pylucid
    >>> L, V = pylucid.linalg.eig(pylucid.tensor([[2.0, 0.0], [0.0, 3.0]]))
    >>> L
    tensor([2.+0.j, 3.+0.j])
    """
    _check_square(A, "linalg.eig")
    return apply(Eig, (A,), {"real_input": not A.dtype.is_complex})


@declare(namespaces="pylucid.linalg", method=False)
def eigvals(A: Tensor) -> Tensor:
    """Eigenvalues of a general square matrix, complex; a composite of :func:`eig` (the eigenvalue gradient is
    ``V^{-H} diag(gL) V^H``).

    >>> import pylucid
    >>> pylucid.linalg.eigvals(pylucid.tensor([[0.0, -1.0], [1.0, 0.0]]))
    tensor([0.+1.j, 0.-1.j])
    """
    return eig(A)[0]


# ---------------------------------------------------------------- Householder QR pieces (geqrf, ormqr), addbmm/addr
class Geqrf(Op):
    """LAPACK's ``geqrf``: ``(a, tau)`` with ``R`` in the upper triangle of ``a`` and the Householder vectors below
    it (``be.linalg.qr(mode='raw')``, whose ``h`` comes transposed). PyTorch has no derivative and raises at
    backward; so does pylucid."""

    schema = OpSchema("geqrf", amp_policy=KEEP_INPUT, family="linalg")
    n_outputs = 2

    @staticmethod
    def forward(be, a):
        c = _compute(a)
        if c.size == 0:
            return c.astype(a.dtype, copy=True), be.zeros(c.shape[:-2] + (min(c.shape[-2:]),), dtype=a.dtype)

        def one(m):  # one matrix at a time: mode='raw' is not batched in every CuPy
            h, tau = be.linalg.qr(m, mode="raw")
            return h.T, tau

        h, tau = one(c) if c.ndim == 2 else _batch_loop(be, one, c)
        return h.astype(a.dtype), tau.astype(a.dtype, copy=False)

    def backward(self, ga, gtau):
        raise NotImplementedError("geqrf: the derivative is not implemented (as in PyTorch); use linalg.qr")


@declare(Geqrf, method=True)
def geqrf(input: Tensor):
    """``(a, tau)``: the QR factorisation in LAPACK's compact form, for :func:`householder_product` /
    :func:`ormqr` (``Q = householder_product(a, tau)``, ``R = triu(a)``).

    >>> import pylucid
    >>> a, tau = pylucid.geqrf(pylucid.tensor([[3.0], [4.0]]))
    >>> a.round(decimals=4), tau.round(decimals=4)
    (tensor([[-5.0000],
            [ 0.5000]]), tensor([1.6000]))
    """
    from collections import namedtuple

    _check_matrix(input, "geqrf", "input")
    return namedtuple("geqrf", ["a", "tau"])(*apply(Geqrf, (input,)))


@declare(method=True)
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """``Q @ other`` (``left=False``: ``other @ Q``; ``transpose``: ``Q^H``) for the ``Q`` of Householder
    reflectors ``(input, tau)`` (:func:`geqrf`), without forming it by LAPACK but as a composite of
    :func:`householder_product` on ``input`` padded to a square, so it is differentiable in all three.

    >>> import pylucid
    >>> a, tau = pylucid.geqrf(pylucid.tensor([[3.0], [4.0]]))
    >>> pylucid.ormqr(a, tau, pylucid.tensor([[3.0], [4.0]]), transpose=True).round(decimals=4)
    tensor([[-5.],
            [ 0.]])
    """
    from .shape import cat

    _check_matrix(input, "ormqr", "input")
    _check_matrix(other, "ormqr", "other")
    check_tensor(tau, "ormqr", "tau")
    mn = other.shape[-2] if left else other.shape[-1]
    if input.shape[-2] != mn:
        raise ShapeMismatch(f"ormqr: input {tuple(input.shape)} must have {mn} rows for other {tuple(other.shape)} "
                            f"(left={left})")
    if tau.shape[-1] > min(mn, input.shape[-1]):
        raise ShapeMismatch(f"ormqr: tau {tuple(tau.shape)} has more reflectors than input {tuple(input.shape)}")
    k = input.shape[-1]
    if k < mn:
        be = input.device.backend
        input = cat([input, _const(input, be.zeros(tuple(input.shape[:-1]) + (mn - k,), dtype=input._data.dtype))], -1)
    elif k > mn:
        input = input[..., :mn]
    q = householder_product(input, tau)
    if transpose:
        q = _mH(q)
    return matmul(q, other) if left else matmul(other, q)




def _bool_dtype():
    from .. import dtypes

    return dtypes.bool_


# ---------------------------------------------------------------- LDL factorisation (Bunch-Kaufman)
class LdlFactor(Op):
    """``A = L D L^T`` (``L D L^H``) with Bunch-Kaufman pivoting (``be.ldl_factor``: LAPACK's ``sytrf``/``hetrf``),
    read from the lower triangle; ``(LD, pivots, info)``. No derivative, as PyTorch."""

    schema = OpSchema("ldl_factor", amp_policy=KEEP_INPUT, differentiable=False, family="linalg")
    n_outputs = 3

    @staticmethod
    def forward(be, a, hermitian):
        ld, piv, info = be.ldl_factor(_compute(a), hermitian)
        return ld.astype(a.dtype, copy=False), piv, info


class LdlSolve(Op):
    """``A X = B`` from :class:`LdlFactor`'s ``(LD, pivots)`` (``be.ldl_solve``: ``sytrs``/``hetrs``); no
    derivative, as PyTorch."""

    schema = OpSchema("ldl_solve", amp_policy=KEEP_INPUT, differentiable=False, family="linalg")
    promote_args = (0, 2)

    @staticmethod
    def forward(be, ld, pivots, b, hermitian):
        return be.ldl_solve(_compute(ld), pivots, _compute(b), hermitian).astype(ld.dtype, copy=False)


@declare(LdlFactor, namespaces="pylucid.linalg", method=False)
def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False):
    """``(LD, pivots, info)``: the Bunch-Kaufman factorisation of a symmetric (``hermitian``: Hermitian) matrix
    from its lower triangle, in LAPACK's compact form (``L`` unit lower below the diagonal of ``LD``, the 1x1 and
    2x2 blocks of ``D`` on and next to it; 1-based int32 ``pivots``, negative for a 2x2 block). ``info > 0``: ``D``
    is exactly singular there (``check_errors`` raises).

    >>> import pylucid
    >>> pylucid.linalg.ldl_factor_ex(pylucid.tensor([[4.0, 2.0], [2.0, 3.0]]))[0]
    tensor([[4.0000, 0.0000],
            [0.5000, 2.0000]])
    """
    from collections import namedtuple

    _check_square(A, "linalg.ldl_factor_ex")
    ld, piv, info = apply(LdlFactor, (A,), {"hermitian": bool(hermitian)})
    if check_errors and bool(info._data.any()):
        raise LinAlgError("linalg.ldl_factor_ex: D is exactly singular (info > 0); the factorisation cannot be used "
                          "to solve")
    return namedtuple("ldl_factor_ex", ["LD", "pivots", "info"])(ld, piv, info)


@declare(namespaces="pylucid.linalg", method=False)
def ldl_factor(A: Tensor, *, hermitian: bool = False):
    """``(LD, pivots)`` of :func:`ldl_factor_ex`."""
    from collections import namedtuple

    ld, piv, _ = ldl_factor_ex(A, hermitian=hermitian)
    return namedtuple("ldl_factor", ["LD", "pivots"])(ld, piv)


@declare(LdlSolve, namespaces="pylucid.linalg", method=False)
def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False) -> Tensor:  # noqa: N803
    """Solve ``A X = B`` from :func:`ldl_factor`'s output (batch dims broadcast).

    >>> import pylucid
    >>> LD, piv = pylucid.linalg.ldl_factor(pylucid.tensor([[4.0, 2.0], [2.0, 3.0]]))
    >>> pylucid.linalg.ldl_solve(LD, piv, pylucid.tensor([[6.0], [5.0]]))
    tensor([[1.],
            [1.]])
    """
    _check_square(LD, "linalg.ldl_solve", "LD")
    _check_matrix(B, "linalg.ldl_solve", "B")
    check_tensor(pivots, "linalg.ldl_solve", "pivots")
    if B.shape[-2] != LD.shape[-1] or tuple(pivots.shape[-1:]) != (LD.shape[-1],):
        raise ShapeMismatch(f"linalg.ldl_solve: LD {tuple(LD.shape)}, pivots {tuple(pivots.shape)} and B "
                            f"{tuple(B.shape)} do not match")
    if pivots.dtype.is_floating_point or pivots.dtype.is_complex:
        from ..errors import DtypeMismatch

        raise DtypeMismatch(f"linalg.ldl_solve: pivots must be an integer tensor, got {pivots.dtype}")
    return apply(LdlSolve, (LD, pivots, B), {"hermitian": bool(hermitian)})


# ---------------------------------------------------------------- randomized low-rank SVD / PCA (Halko et al. 2009)
def _approximate_basis(A, q, niter):
    """An orthonormal ``(*, m, q)`` basis of the range of ``A`` by a Gaussian sketch and ``niter`` subspace
    iterations (PyTorch's ``get_approximate_basis``)."""
    from ..random import randn

    r = randn(A.shape[-1], q, dtype=A.dtype, device=A.device)
    Q = qr(matmul(A, r))[0]
    for _ in range(niter):
        Q = qr(matmul(_mH(A), Q))[0]
        Q = qr(matmul(A, Q))[0]
    return Q


@declare(method=False)
def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None):  # noqa: N803
    """Randomized rank-``q`` SVD ``(U, S, V)`` with ``A - M ~ U diag(S) V^H`` (Halko et al. 2009, Algorithm 5,
    as PyTorch): exact for a matrix of rank at most ``q``; the draws come from pylucid's generator. A composite,
    differentiable through the QR and SVD it runs.

    >>> import pylucid
    >>> a = pylucid.outer(pylucid.tensor([1.0, 2.0, 2.0]), pylucid.tensor([3.0, 4.0]))
    >>> pylucid.svd_lowrank(a, q=2)[1].round(decimals=4)
    tensor([15.,  0.])
    """
    from .elementwise import sub

    _check_matrix(A, "svd_lowrank")
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    if not isinstance(q, int) or q < 1 or not isinstance(niter, int) or niter < 0:
        raise ValueError(f"svd_lowrank: q must be a positive int and niter a non-negative int, got q={q!r}, "
                         f"niter={niter!r}")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        A = A.to(_default_float())
    if M is not None:
        A = sub(A, M)
    m, n = A.shape[-2:]
    wide = m < n
    if wide:
        A = _mH(A)
    Q = _approximate_basis(A, q, niter)
    u, s, vh = svd(matmul(_mH(Q), A), full_matrices=False)
    U, V = matmul(Q, u), _mH(vh)
    return (V, s, U) if wide else (U, s, V)


def _default_float():
    from .. import dtypes

    return dtypes.get_default_dtype()


@declare(method=False)
def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2):  # noqa: N803
    """Randomized PCA: :func:`svd_lowrank` of ``A`` minus its column means (``center``), with ``q`` defaulting to
    ``min(6, m, n)``; ``(U, S, V)``, the principal directions in ``V``.

    >>> import pylucid
    >>> x = pylucid.tensor([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    >>> pylucid.pca_lowrank(x, q=1)[1].round(decimals=4)
    tensor([3.1623])
    """
    from .reduction import mean

    _check_matrix(A, "pca_lowrank")
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else q
    if not isinstance(q, int) or not 0 < q <= min(m, n):
        raise ValueError(f"pca_lowrank: q must be an int in [1, min(m, n) = {min(m, n)}], got {q!r}")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        A = A.to(_default_float())
    if center:
        A = A - mean(A, -2, keepdim=True)
    return svd_lowrank(A, q, niter)


class MatrixExp(Op):
    """``exp(A) = sum_k A^k / k!`` (scipy's ``expm``). The gradient is the top-right block of
    ``exp([[A^H, g], [0, A^H]])`` (the Fréchet derivative's adjoint), itself a ``matrix_exp``."""

    schema = OpSchema("matrix_exp", amp_policy=KEEP_INPUT, saves_input=True, family="linalg")

    @staticmethod
    def forward(be, a):
        # single precision runs in double: the scaling and squaring loses digits float32 cannot spare
        c = _compute(a)
        c = c.astype("complex128" if c.dtype.kind == "c" else "float64")
        if c.ndim == 2:
            return be.scipy_linalg.expm(c).astype(a.dtype, copy=False)
        return _batch_loop(be, be.scipy_linalg.expm, c).astype(a.dtype, copy=False)

    def backward(self, g):
        from .shape import cat

        a = self.input(0)
        n = a.shape[-1]
        ah = _mH(a)
        top = cat([ah, g], -1)
        bottom = cat([_const(ah, a.device.backend.zeros(ah.shape, dtype=ah._data.dtype)), ah], -1)
        big = matrix_exp(cat([top, bottom], -2))
        return big[..., :n, n:]


@declare(MatrixExp, namespaces=("pylucid", "pylucid.linalg"))
def matrix_exp(A: Tensor) -> Tensor:
    """Matrix exponential of a batch of square matrices.

    >>> import pylucid
    >>> pylucid.linalg.matrix_exp(pylucid.zeros(2, 2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    _check_square(A, "linalg.matrix_exp")
    return apply(MatrixExp, (A,))


class Svd(Op):
    """``A = U diag(S) V^H`` (``full_matrices`` as ``numpy``/``torch.linalg.svd``); PyTorch's ``svd_backward``.

    With ``E_ij = s_j^2 - s_i^2`` the gradient divides by ``E``: repeated (or
    all-zero) singular values give inf/NaN when the gradient flows through
    ``U`` or ``V^H``, as PyTorch documents; through ``S`` alone it is always
    finite (``U diag(gS) V^H``). With ``full_matrices=True`` the extra columns
    of ``U``/``V`` carry no gradient (as in PyTorch).
    """

    schema = OpSchema("svd", amp_policy=KEEP_INPUT, saves_output=True, family="linalg")
    n_outputs = 3

    @staticmethod
    def forward(be, a, full_matrices):
        c = _compute(a)
        u, s, vh = _lapack("linalg.svd", "the SVD did not converge", be.linalg.svd, c, full_matrices=full_matrices)
        rdt = a.real.dtype if a.dtype.kind == "c" else a.dtype
        return u.astype(a.dtype, copy=False), s.astype(rdt, copy=False), vh.astype(a.dtype, copy=False)

    def backward(self, gu, gs, gvh):
        from .elementwise import add, div, mul, sub
        from .shape import unsqueeze

        u, s, vh = self.output(0), self.output(1), self.output(2)
        m, n = u.shape[-2], vh.shape[-1]
        k = s.shape[-1]
        if self.params["full_matrices"]:
            u, gu = u[..., :k], gu[..., :k]
            vh, gvh = vh[..., :k, :], gvh[..., :k, :]
        use_u, use_v = not _is_zero(gu), not _is_zero(gvh)
        if not use_u and not use_v:
            return matmul(mul(u, unsqueeze(gs, -2)), vh)
        sr = s.to(u.dtype) if u.dtype.is_complex else s
        s2 = mul(s, s)
        e = sub(unsqueeze(s2, -2), unsqueeze(s2, -1))
        e = add(e, _eye(k, s))  # the diagonal is overwritten below; avoid 0/0 there
        uhgu = _skew(matmul(_mH(u), gu)) if use_u else None
        vhgv = _skew(matmul(vh, _mH(gvh))) if use_v else None
        if use_u and use_v:
            ret = div(add(mul(uhgu, unsqueeze(sr, -2)), mul(unsqueeze(sr, -1), vhgv)), e)
        elif use_u:
            ret = mul(div(uhgu, e), unsqueeze(sr, -2))
        else:
            ret = mul(unsqueeze(sr, -1), div(vhgv, e))
        ret = sub(ret, diag_embed(_diagonal(ret)))
        ret = add(ret, diag_embed(gs.to(ret.dtype) if ret.dtype.is_complex else gs))
        if m > n and use_u:
            ga = matmul(u, ret)
            gus = div(gu, unsqueeze(sr, -2))
            ga = add(ga, sub(gus, matmul(u, matmul(_mH(u), gus))))
            return matmul(ga, vh)
        if m < n and use_v:
            ga = matmul(ret, vh)
            sgv = div(gvh, unsqueeze(sr, -1))
            ga = add(ga, sub(sgv, matmul(matmul(sgv, _mH(vh)), vh)))
            return matmul(u, ga)
        return matmul(u, matmul(ret, vh))


def _skew(x):
    from .elementwise import sub

    return sub(x, _mH(x))


@declare(Svd, namespaces="pylucid.linalg", method=False)
def svd(A: Tensor, full_matrices: bool = True, *, driver=None):
    """Singular value decomposition ``A = U diag(S) Vh``, singular values descending (as ``torch.linalg.svd``).

    >>> import pylucid
    >>> U, S, Vh = pylucid.linalg.svd(pylucid.tensor([[3.0, 0.0], [0.0, -2.0]]))
    >>> S
    tensor([3., 2.])
    """
    _check_matrix(A, "linalg.svd")
    return apply(Svd, (A,), {"full_matrices": bool(full_matrices)})


@declare(namespaces="pylucid.linalg", method=False)
def svdvals(A: Tensor, *, driver=None) -> Tensor:
    """Singular values, descending; a composite (``svd(A, full_matrices=False)[1]``) with an always-finite gradient.

    >>> import pylucid
    >>> pylucid.linalg.svdvals(pylucid.tensor([[0.0, 2.0], [1.0, 0.0]]))
    tensor([2., 1.])
    """
    _check_matrix(A, "linalg.svdvals")
    return svd(A, full_matrices=False)[1]


class Eigh(Op):
    """Eigen-decomposition of a Hermitian matrix (ascending eigenvalues), PyTorch's ``linalg_eig_backward``:
    ``gA = V (diag(gL) + (V^H gV) / E) V^H`` with ``E_ij = l_j - l_i``.

    Repeated eigenvalues make ``E`` vanish off the diagonal: a gradient through
    the eigenvectors is then inf/NaN, as PyTorch documents; eigenvalues alone
    always have a finite gradient.
    """

    schema = OpSchema("eigh", amp_policy=KEEP_INPUT, saves_output=True, family="linalg")
    n_outputs = 2

    @staticmethod
    def forward(be, a, uplo):
        c = _compute(a)
        w, v = _lapack("linalg.eigh", "the algorithm did not converge", be.linalg.eigh, c, UPLO=uplo)
        rdt = a.real.dtype if a.dtype.kind == "c" else a.dtype
        return w.astype(rdt, copy=False), v.astype(a.dtype, copy=False)

    def backward(self, gl, gv):
        from .elementwise import add, div, sub
        from .shape import unsqueeze

        w, v = self.output(0), self.output(1)
        n = w.shape[-1]
        if _is_zero(gv):
            mid = diag_embed(gl.to(v.dtype) if v.dtype.is_complex else gl)
        else:
            vhgv = matmul(_mH(v), gv)
            vhgv = div(_skew(vhgv), 2.0)
            e = add(sub(unsqueeze(w, -2), unsqueeze(w, -1)), _eye(n, w))
            mid = div(vhgv, e.to(v.dtype) if v.dtype.is_complex else e)
            mid = sub(mid, diag_embed(_diagonal(mid)))
            mid = add(mid, diag_embed(gl.to(v.dtype) if v.dtype.is_complex else gl))
        return matmul(v, matmul(mid, _mH(v)))


@declare(Eigh, namespaces="pylucid.linalg", method=False)
def eigh(A: Tensor, UPLO: str = "L"):  # noqa: N803 - mirrors torch.linalg.eigh
    """Eigenvalues (ascending) and orthonormal eigenvectors of a Hermitian matrix, reading the ``UPLO`` triangle.

    >>> import pylucid
    >>> L, Q = pylucid.linalg.eigh(pylucid.tensor([[2.0, 0.0], [0.0, 1.0]]))
    >>> L
    tensor([1., 2.])
    """
    _check_square(A, "linalg.eigh")
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return apply(Eigh, (A,), {"uplo": UPLO})


@declare(namespaces="pylucid.linalg", method=False)
def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803
    """Eigenvalues (ascending) of a Hermitian matrix; a composite of :func:`eigh` (finite gradient always)."""
    return eigh(A, UPLO)[0]


@declare(name="diagonal", namespaces="pylucid.linalg", method=False)
def linalg_diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.linalg.diagonal``: :func:`pylucid.diagonal` with the matrix dims (the last two) as the default.

    >>> import pylucid
    >>> pylucid.linalg.diagonal(pylucid.arange(8).reshape(2, 2, 2))
    tensor([[0, 3],
            [4, 7]])
    """
    return diagonal(A, offset, dim1, dim2)


class Qr(Op):
    """``A = Q R`` (``mode`` 'reduced', 'complete' or 'r'); PyTorch's ``linalg_qr_backward``.

    ``m >= n``: ``gA = (gQ + Q syminvadj(triu(gR R^H - Q^H gQ))) R^{-H}``; ``m < n``
    splits ``A = [X | Y]``. Not differentiable for ``mode='r'`` or for
    ``'complete'`` with ``m > n`` (PyTorch raises there too).
    """

    schema = OpSchema("qr", amp_policy=KEEP_INPUT, saves_output=True, family="linalg")
    n_outputs = 2

    @staticmethod
    def forward(be, a, mode):
        c = _compute(a)
        if mode == "r":
            r = be.linalg.qr(c, mode="r")
            return be.empty((0,), dtype=a.dtype), r.astype(a.dtype, copy=False)
        q, r = be.linalg.qr(c, mode=mode)
        return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)

    def backward(self, gq, gr):
        q, r = self.output(0), self.output(1)
        mode = self.params["mode"]
        m, n = q.shape[-2], r.shape[-1]
        if mode == "r" or (mode == "complete" and m > n):
            raise LucidError(f"linalg.qr: the derivative is not implemented for mode={mode!r} with shape "
                             f"({m}, {n}); use mode='reduced'")
        return _qr_backward(gq, gr, q, r)


def _qr_backward(gq, gr, q, r):
    from .elementwise import add, sub
    from .shape import cat

    m, n = q.shape[-2], r.shape[-1]
    if m >= n:
        x = sub(matmul(gr, _mH(r)), matmul(_mH(q), gq))
        ga = add(matmul(q, _sym_real(triu(x))), gq)
        return solve_triangular(_mH(r), ga, upper=False, left=False)
    # m < n: A = [X | Y] with X = Q U (square), Y = Q V
    u, vpart = r[..., :m], r[..., m:]
    gu, gvp = gr[..., :m], gr[..., m:]
    y = matmul(q, vpart)
    gx = _qr_backward(add(gq, matmul(y, _mH(gvp))), gu, q, u)
    gy = matmul(q, gvp)
    return cat([gx, gy], -1)


@declare(Qr, namespaces="pylucid.linalg", method=False)
def qr(A: Tensor, mode: str = "reduced"):
    """QR decomposition ``A = Q R`` with orthonormal ``Q`` and upper-triangular ``R``.

    >>> import pylucid
    >>> Q, R = pylucid.linalg.qr(pylucid.tensor([[3.0, 0.0], [4.0, 1.0]]))
    >>> (Q @ R).allclose(pylucid.tensor([[3.0, 0.0], [4.0, 1.0]])) if hasattr(Q, "allclose") else True
    True
    """
    _check_matrix(A, "linalg.qr")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    return apply(Qr, (A,), {"mode": mode})


@declare(name="qr", namespaces=())
def _qr_method(self: Tensor, some: bool = True):
    """``Tensor.qr(some=True)``: :func:`pylucid.linalg.qr` with ``mode='reduced'`` (``some``) or ``'complete'``."""
    return qr(self, "reduced" if some else "complete")


class Pinv(Op):
    """Moore-Penrose pseudo-inverse from the SVD (``hermitian``: from ``eigh``), singular values below
    ``max(atol, rtol * s_max)`` treated as zero; PyTorch's ``pinv_backward`` (valid at constant rank)."""

    schema = OpSchema("pinv", amp_policy=KEEP_INPUT, saves_input=True, saves_output=True, family="linalg")

    @staticmethod
    def forward(be, a, atol, rtol, hermitian):
        c = _compute(a)
        m, n = c.shape[-2:]
        if c.size == 0:
            return be.zeros(c.shape[:-2] + (n, m), dtype=a.dtype)
        rtol, atol = _tolerances(be, c, atol, rtol)
        if hermitian:
            w, v = be.linalg.eigh(c)
            cut = be.maximum(atol, rtol * be.abs(w).max(axis=-1, keepdims=True))
            with be.errstate():
                winv = be.where(be.abs(w) > cut, 1.0 / w, 0.0)
            out = be.matmul(v * winv[..., None, :], be.conj(be.swapaxes(v, -1, -2)))
        else:
            u, s, vh = _lapack("linalg.pinv", "the SVD did not converge", be.linalg.svd, c, full_matrices=False)
            cut = be.maximum(atol, rtol * s.max(axis=-1, keepdims=True)) if s.shape[-1] else atol
            with be.errstate():
                sinv = be.where(s > cut, 1.0 / s, 0.0)
            out = be.matmul(be.conj(be.swapaxes(vh, -1, -2)) * sinv[..., None, :], be.conj(be.swapaxes(u, -1, -2)))
        return out.astype(a.dtype, copy=False)

    def backward(self, g):
        from .elementwise import add, neg, sub

        a, p = self.input(0), self.output()
        m, n = a.shape[-2:]
        ph, gh = _mH(p), _mH(g)
        if m <= n:
            k = matmul(gh, p)
            kph = matmul(k, ph)
            return add(sub(add(neg(_mH(matmul(p, k))), kph), matmul(matmul(a, p), kph)),
                       matmul(matmul(ph, p), sub(gh, matmul(k, a))))
        k = matmul(p, gh)
        phk = matmul(ph, k)
        return sub(add(add(neg(_mH(matmul(k, p))), matmul(matmul(sub(gh, matmul(a, k)), p), ph)), phk),
                   matmul(matmul(phk, p), a))


@declare(Pinv, namespaces="pylucid.linalg", method=False)
def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """Moore-Penrose pseudo-inverse (``rtol`` defaults to ``max(m, n) * eps`` when ``atol`` is not given).

    >>> import pylucid
    >>> pylucid.linalg.pinv(pylucid.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.0000]])
    """
    _check_matrix(A, "linalg.pinv")
    atol, rtol = (_tol_param("linalg.pinv", A, name, v) for name, v in (("atol", atol), ("rtol", rtol)))
    return apply(Pinv, (A,), {"atol": atol, "rtol": rtol, "hermitian": bool(hermitian)})


def _tol_param(op, A, name, v):
    """A tolerance as a float, or a Tensor broadcastable to ``A``'s batch as a raw array with a trailing axis (it
    broadcasts against the singular values); not differentiable."""
    if v is None or isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if not isinstance(v, Tensor):
        raise TypeError(f"{op}: {name} must be a float or a Tensor, got {type(v).__name__}")
    if v.dtype.is_complex:
        from ..errors import DtypeMismatch

        raise DtypeMismatch(f"{op}: {name} must be real, got {v.dtype}")
    if v.device != A.device:
        from ..errors import DeviceMismatch

        raise DeviceMismatch(f"{op}: {name} is on {v.device}, A on {A.device}")
    return v.detach()._data.astype(_real_np(A))[..., None]


def _tolerances(be, c, atol, rtol):
    """PyTorch's defaults: ``rtol = eps * max(m, n)`` unless ``atol > 0`` is given (then 0), element-wise for
    tensor tolerances; ``atol`` defaults to 0."""
    m, n = c.shape[-2:]
    default = float(be.finfo(c.real.dtype).eps) * max(m, n)
    if rtol is None:
        if atol is None:
            rtol = default
        elif isinstance(atol, (int, float)):
            rtol = 0.0 if atol > 0 else default
        else:
            rtol = be.where(atol > 0, 0.0, default)
    return rtol, 0.0 if atol is None else atol


@declare()
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: :func:`pinv` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@declare(namespaces="pylucid.linalg", method=False)
def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None):
    """Least-squares solution of ``A X = B``: ``(solution, residuals, rank, singular_values)``, shaped per
    ``driver`` as PyTorch's CPU drivers (default ``'gelsy'``):

    - ``residuals`` (``(*, k)``: ``||A x - b||^2`` per column) only for tall ``A`` (``m > n``) and a driver other
      than ``gelsy``; for ``gelsd``/``gelss`` only when every matrix has full rank ``n``; else empty ``(0,)``;
    - ``rank``: the batch of numerical ranks (int64; singular values above ``rcond * s_max``, ``rcond``
      defaulting to ``eps * max(m, n)``), empty for ``gels`` (which assumes full rank);
    - ``singular_values`` ``(*, min(m, n))`` for ``gelsd``/``gelss``, else empty.

    The solution is the composite ``pinv(A) @ B`` (minimum norm for rank-deficient ``A``), so its gradient is
    PyTorch's (``lstsq`` backward is the ``pinv`` one); the other outputs are not differentiable, as PyTorch.

    >>> import pylucid
    >>> r = pylucid.linalg.lstsq(pylucid.tensor([[1.0], [1.0]]), pylucid.tensor([[1.0], [3.0]]), driver="gelsd")
    >>> r.solution.round(decimals=4), r.residuals.round(decimals=4), r.rank
    (tensor([[2.]]), tensor([2.]), tensor(1))
    """
    from collections import namedtuple

    from .shape import squeeze, unsqueeze

    _check_matrix(A, "linalg.lstsq")
    check_tensor(B, "linalg.lstsq", "B")
    if driver is None:
        driver = "gelsy"
    if driver not in _LSTSQ_DRIVERS:
        raise ValueError(f"linalg.lstsq: driver must be one of {_LSTSQ_DRIVERS} (or None), got {driver!r}")
    if A.dtype != B.dtype:
        from ..errors import DtypeMismatch

        raise DtypeMismatch(f"linalg.lstsq: A and B must have the same dtype, got {A.dtype} and {B.dtype}")
    vector = B.ndim == A.ndim - 1
    b = unsqueeze(B, -1) if vector else B
    if b.shape[-2] != A.shape[-2]:
        raise ShapeMismatch(f"linalg.lstsq: A {tuple(A.shape)} and B {tuple(B.shape)} need the same number of rows")
    x = matmul(pinv(A, rtol=rcond), b)
    be = A.device.backend
    m, n = A.shape[-2:]
    batch = tuple(A.shape[:-2])
    rdt = _real_np(A)
    s = be.linalg.svd(_compute(A._data), compute_uv=False).astype(rdt, copy=False) if A.numel() else \
        be.zeros(batch + (min(m, n),), dtype=rdt)
    tol = rcond if rcond is not None else float(be.finfo(s.dtype).eps) * max(m, n)
    smax = s.max(axis=-1, keepdims=True) if s.shape[-1] else be.zeros(batch + (1,), dtype=rdt)
    rank = be.asarray((s > tol * smax).sum(axis=-1)).astype("int64")
    from .elementwise import abs as _abs

    empty = _new_tensor(be.empty((0,), dtype=rdt), A.device)
    # residuals are differentiable, as PyTorch's (sum |A x - B|^2 over the rows); an empty one is still linked
    residuals = _abs(x).reshape(-1)[:0]
    if m > n and driver != "gelsy" and (driver == "gels" or bool((rank == n).all())):
        from .elementwise import square
        from .reduction import sum as _sum

        residuals = _sum(square(_abs(matmul(A, x) - b)), -2)
    res = namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])
    rank_t = _new_tensor(be.empty((0,), dtype="int64"), A.device) if driver == "gels" else _new_tensor(rank, A.device)
    sv = _new_tensor(s, A.device) if driver in ("gelsd", "gelss") else empty
    return res(squeeze(x, -1) if vector else x, residuals, rank_t, sv)


# ---------------------------------------------------------------- norms
@declare(Norm, namespaces="pylucid.linalg", method=False)
def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Vector ``ord``-norm over ``dim`` (all elements when ``None``); ``ord`` any real, ``inf`` or ``-inf``.

    Runs the registered ``norm`` op (:class:`pylucid.ops.reduction.Norm`), the
    one vector-norm primitive: the gradient at the zero vector is 0, complex
    input gives a real norm, half precision accumulates in float32.

    >>> import pylucid
    >>> pylucid.linalg.vector_norm(pylucid.tensor([3.0, -4.0]))
    tensor(5.)
    >>> pylucid.linalg.vector_norm(pylucid.tensor([3.0, -4.0]), ord=float("inf"))
    tensor(4.)
    """
    from ._utils import norm_dims

    check_tensor(x, "linalg.vector_norm", "x")
    if dtype is not None:
        x = x.to(dtype)
    _check_float(x, "linalg.vector_norm")
    if isinstance(ord, str) or isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg.vector_norm: ord must be a number (or inf), got {ord!r}")
    dims = norm_dims(dim, x.ndim, "linalg.vector_norm") if x.ndim or dim is None else None
    if ord < 0 and x.numel() == 0:
        raise LucidError(f"linalg.vector_norm: cannot compute the {ord} norm of an empty tensor")
    return apply(Norm, (x,), {"p": float(ord), "axes": dims, "keepdim": bool(keepdim)})


@declare(namespaces="pylucid.linalg", method=False)
def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """Matrix norm over the two ``dim``: ``'fro'``, ``'nuc'``, ``2``/``-2`` (largest/smallest singular value),
    ``1``/``-1`` (max/min column abs-sum), ``inf``/``-inf`` (max/min row abs-sum). A composite.

    >>> import pylucid
    >>> pylucid.linalg.matrix_norm(pylucid.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    from ._utils import norm_dim
    from .elementwise import abs as _abs
    from .reduction import amax, amin
    from .reduction import sum as _sum
    from .shape import permute, unsqueeze

    _check_matrix(A, "linalg.matrix_norm")
    if dtype is not None:
        A = A.to(dtype)
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ValueError(f"linalg.matrix_norm: dim must be a pair of dims, got {dim!r}")
    d0, d1 = (norm_dim(d, A.ndim, "linalg.matrix_norm") for d in dim)
    if d0 == d1:
        raise ValueError(f"linalg.matrix_norm: dim {tuple(dim)} names one dim twice")
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if A.numel() == 0 and ord in (2, 1, float("inf")):  # a max over nothing is 0 here, as PyTorch
        return _sum(_abs(A), (d0, d1), keepdim=keepdim)
    if ord in ("nuc", 2, -2):
        rest = [i for i in range(A.ndim) if i not in (d0, d1)]
        s = svdvals(permute(A, rest + [d0, d1]))
        if ord == "nuc":
            out = _sum(s, -1)
        else:
            out = amax(s, -1) if ord == 2 else amin(s, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = unsqueeze(out, d)
        return out
    if ord in (1, -1, float("inf"), float("-inf")):
        sum_dim, red_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = _sum(_abs(A), sum_dim, keepdim=True)
        red = amax if ord in (1, float("inf")) else amin
        out = red(sums, red_dim, keepdim=True)
        if not keepdim:
            from .shape import squeeze

            out = squeeze(out, (d0, d1))
        return out
    raise ValueError(f"linalg.matrix_norm: ord must be 'fro', 'nuc', 2, -2, 1, -1, inf or -inf, got {ord!r}")


@declare(name="norm", namespaces="pylucid.linalg", method=False)
def linalg_norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``torch.linalg.norm``: a vector norm for one dim (or a 1-d input), a matrix norm for two."""
    check_tensor(A, "linalg.norm", "A")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise ValueError(f"linalg.norm: dim must name 1 or 2 dims, got {dim!r}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise ValueError(f"linalg.norm: with ord={ord!r} and dim=None the input must be 1-d or 2-d, got "
                     f"{A.ndim} dims")


@declare()
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """``torch.norm``: ``p='fro'`` (2-norm of the elements over ``dim``), ``'nuc'``, or a number (vector norm).

    >>> import pylucid
    >>> pylucid.norm(pylucid.tensor([[3.0, 4.0]]))
    tensor(5.)
    """
    check_tensor(input, "norm")
    if p == "nuc":
        return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if p == "fro" or p is None:
        if dim is not None and not isinstance(dim, int) and len(dim) == 2:
            return matrix_norm(input, "fro", dim, keepdim, dtype=dtype)
        return vector_norm(input, 2, dim, keepdim, dtype=dtype)
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


@declare(namespaces="pylucid.linalg", method=False)
def multi_dot(tensors) -> Tensor:
    """Chain of matrix products; the first may be 1-d (a row) and the last 1-d (a column). A composite of
    :func:`matmul`, multiplied in the cheapest order for three matrices.

    >>> import pylucid
    >>> pylucid.linalg.multi_dot([pylucid.ones(2), pylucid.ones(2, 3), pylucid.ones(3)])
    tensor(6.)
    """
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        check_tensor(t, "linalg.multi_dot", f"tensor {i}")
        if t.ndim not in (1, 2) or (t.ndim == 1 and 0 < i < len(tensors) - 1):
            raise ShapeMismatch(f"linalg.multi_dot: tensor {i} must be 2-d (the first and last may be 1-d), got "
                                f"shape {tuple(t.shape)}")
    if len(tensors) == 3 and all(t.ndim == 2 for t in tensors):
        a, b, c = tensors
        left = a.shape[0] * a.shape[1] * b.shape[1] + a.shape[0] * b.shape[1] * c.shape[1]
        right = b.shape[0] * b.shape[1] * c.shape[1] + a.shape[0] * a.shape[1] * c.shape[1]
        if right < left:
            return matmul(a, matmul(b, c))
    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


@declare(namespaces="pylucid.linalg", method=False)
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """``sum(conj(x) * y, dim)`` with broadcasting; a composite.

    >>> import pylucid
    >>> pylucid.linalg.vecdot(pylucid.ones(2, 3), pylucid.ones(3))
    tensor([3., 3.])
    """
    from .complex import conj
    from .elementwise import mul
    from .reduction import sum as _sum

    check_tensor(x, "linalg.vecdot", "x")
    check_tensor(y, "linalg.vecdot", "y")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"linalg.vecdot: argument 'dim' must be an int, got {type(dim).__name__}")
    _check_float(x, "linalg.vecdot")
    _check_float(y, "linalg.vecdot")
    return _sum(mul(conj(x), y), dim)


@declare(namespaces="pylucid.linalg", method=False)
def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """Number of singular values above ``max(atol, rtol * s_max)`` (int64; not differentiable)."""
    _check_matrix(A, "linalg.matrix_rank")
    be = A.device.backend
    atol, rtol = (_tol_param("linalg.matrix_rank", A, name, v) for name, v in (("atol", atol), ("rtol", rtol)))
    c = _compute(A._data)
    if c.size:
        s = _lapack("linalg.matrix_rank", "the decomposition did not converge",
                    (lambda m: be.abs(be.linalg.eigvalsh(m))) if hermitian else
                    (lambda m: be.linalg.svd(m, compute_uv=False)), c)
    else:
        s = be.zeros(c.shape[:-2] + (min(c.shape[-2:]),), dtype=c.real.dtype)
    rtol, atol = _tolerances(be, c, atol, rtol)
    smax = s.max(axis=-1, keepdims=True) if s.shape[-1] else be.zeros(s.shape[:-1] + (1,), dtype=s.dtype)
    cut = be.maximum(atol, rtol * smax)
    return _new_tensor(be.asarray((s > cut).sum(axis=-1)).astype("int64"), A.device)
