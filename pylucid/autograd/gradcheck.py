"""``gradcheck`` and ``gradgradcheck``: analytic gradients against central finite differences.

The reference here is independent of the code under test: it only evaluates
the forward function at perturbed points (float64), never a backward formula.
"""

from __future__ import annotations

from pylucid._interop import np

from .._tensor import Tensor
from .engine import grad as _grad


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _diff_outputs(outs):
    """The outputs a Jacobian has rows for: floating or complex Tensors (integer/bool outputs and Python numbers
    carry no gradient; PyTorch's gradcheck skips them too)."""
    return [o for o in outs if isinstance(o, Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex)]


def _numeric_jacobian(fn, inputs, idx, eps):
    """d(outputs)/d(input idx) by central differences: one column per input element, one row per output element."""
    x = inputs[idx]
    data = x._data  # perturbed in place (element by element, any memory layout)
    be = x.device.backend
    cols = []
    for j in range(data.size):
        at = np.unravel_index(j, data.shape)
        orig = data[at].item()
        data[at] = orig + eps
        plus = [be.to_numpy(o.detach()._data).astype(np.float64).copy() for o in _diff_outputs(_as_tuple(fn(*inputs)))]
        data[at] = orig - eps
        minus = [be.to_numpy(o.detach()._data).astype(np.float64).copy()
                 for o in _diff_outputs(_as_tuple(fn(*inputs)))]
        data[at] = orig
        cols.append(np.concatenate([((p - m) / (2 * eps)).reshape(-1) for p, m in zip(plus, minus)] or [np.zeros(0)]))
    if not cols:  # an empty input: (number of output elements, 0)
        n_out = sum(o.numel() for o in _diff_outputs(_as_tuple(fn(*inputs))))
        return np.zeros((n_out, 0))
    return np.stack(cols, axis=1)


def _analytic_jacobian(fn, inputs, idx):
    """d(outputs)/d(input idx) by backward passes: one row per output element (zeros for outputs that do not
    require grad), one column per input element. Shapes match :func:`_numeric_jacobian` for every case,
    empty inputs and outputs included."""
    from ..creation import zeros_like

    outs = _diff_outputs(_as_tuple(fn(*inputs)))
    n_in = inputs[idx].numel()
    live_outs = [o for o in outs if o._requires_grad]
    rows = []
    k = 0  # position of o among live_outs
    for o in outs:
        if not o._requires_grad:
            rows.extend(np.zeros(n_in) for _ in range(o.numel()))
            continue
        for j in range(o.numel()):
            seeds = [zeros_like(oo) for oo in live_outs]
            seeds[k]._data.reshape(-1)[j] = 1.0
            (g,) = _grad(live_outs, (inputs[idx],), seeds, retain_graph=True, allow_unused=True)
            rows.append(np.zeros(n_in) if g is None else np.asarray(g).astype(np.float64).reshape(-1))
        k += 1
    return np.stack(rows, axis=0) if rows else np.zeros((0, n_in))


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, raise_exception: bool = True,
              nondet_tol: float = 0.0) -> bool:
    """Check the gradients of ``fn`` at ``inputs`` (float64 tensors) against finite differences.

    >>> import pylucid
    >>> x = pylucid.tensor([1.0, 2.0], dtype=pylucid.float64, requires_grad=True)
    >>> pylucid.autograd.gradcheck(pylucid.sqrt, (x,))
    True
    """
    inputs = _as_tuple(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x._requires_grad and x.dtype.name not in ("float64", "complex128"):
            raise GradcheckError(f"gradcheck: input {i} is {x.dtype}; use float64 inputs for finite differences")
    for i, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x._requires_grad):
            continue
        num = _numeric_jacobian(fn, inputs, i, eps)
        ana = _analytic_jacobian(fn, inputs, i)
        if num.size == 0 and ana.size == 0:
            continue  # nothing to compare (empty input or output)
        if num.shape != ana.shape or not np.allclose(ana, num, atol=atol, rtol=rtol, equal_nan=True):
            if raise_exception:
                raise GradcheckError(
                    f"gradcheck: Jacobian mismatch for input {i}\nnumerical:\n{num}\nanalytical:\n{ana}"
                )
            return False
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  raise_exception: bool = True, seed: int = 0) -> bool:
    """Check second derivatives: gradcheck of the function ``inputs, v -> J(inputs)^T v``."""
    from ..creation import tensor

    inputs = _as_tuple(inputs)
    outs = _as_tuple(fn(*inputs))
    rng = np.random.default_rng(seed)
    if grad_outputs is None:  # one per output; None for outputs that carry no gradient (integer, bool, numbers)
        diff = {id(o) for o in _diff_outputs(outs)}
        grad_outputs = tuple(
            tensor(rng.standard_normal(o.shape), dtype=o.dtype, requires_grad=True) if id(o) in diff else None
            for o in outs
        )
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._requires_grad]

    def vjp_fn(*args):
        xs, vs = args[:n_in], args[n_in:]
        o = _as_tuple(fn(*xs))
        live = [(a, v) for a, v in zip(o, vs) if isinstance(a, Tensor) and a._requires_grad and v is not None]
        gs = _grad([a for a, _ in live], [xs[i] for i in diff_idx], [v for _, v in live], create_graph=True,
                   allow_unused=True)
        from ..creation import zeros_like

        return tuple(zeros_like(xs[i]) if g is None else g for g, i in zip(gs, diff_idx))

    return gradcheck(vjp_fn, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception)
