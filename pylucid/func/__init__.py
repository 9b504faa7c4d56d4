"""``pylucid.func``: composable function transforms, as ``torch.func`` spells them.

- ``grad``, ``grad_and_value``, ``vjp``, ``jacrev``: reverse mode (pylucid's autograd engine);
- ``jvp``, ``jacfwd``, ``linearize``: forward mode, a tangent carried through every op
  (:mod:`pylucid.func._forward`);
- ``hessian = jacfwd(jacrev(f))``;
- ``vmap``: vectorisation through per-op batching rules (:mod:`pylucid.func._batching`), composing
  with the others (``vmap(grad(f))`` for per-sample gradients);
- ``functional_call``, ``stack_module_state``: run an ``nn.Module`` with given parameters.

>>> import pylucid
>>> from pylucid.func import grad, vmap
>>> w = pylucid.tensor([1.0, 2.0])
>>> xs = pylucid.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
>>> vmap(grad(lambda w, x: ((w * x).sum()) ** 2), in_dims=(None, 0))(w, xs)
tensor([[2., 0.],
        [0., 4.],
        [6., 6.]])
"""

from __future__ import annotations

from typing import Any

from contextlib import contextmanager

from ._core import BatchedTensor, DualTensor
from ._transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize",
           "functional_call", "stack_module_state", "BatchedTensor", "DualTensor"]


@contextmanager
def _swapped(module, tensors: dict, strict: bool):
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(dict(module.named_buffers(remove_duplicate=False)))
    if strict:
        missing = sorted(set(named) - set(tensors))
        unexpected = sorted(set(tensors) - set(named))
        if missing or unexpected:
            raise RuntimeError(f"functional_call: strict=True and the names differ; missing: {missing}, "
                               f"unexpected: {unexpected}")
    saved = []
    try:
        for name, t in tensors.items():
            owner_name, _, leaf = name.rpartition(".")
            mod = module.get_submodule(owner_name) if owner_name else module
            for table in (mod._parameters, mod._buffers):
                if leaf in table:
                    saved.append((table, leaf, table[leaf]))
                    table[leaf] = t
                    break
            else:
                raise AttributeError(f"functional_call: the module has no parameter or buffer named {name!r}")
        yield
    finally:
        for table, leaf, old in reversed(saved):
            table[leaf] = old


def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = (), kwargs: Any = None, *,
                    tie_weights: bool = True,
                    strict: bool = False):
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the given tensors.

    ``parameter_and_buffer_dicts`` maps dotted names (``"0.weight"``) to tensors; a tuple of dicts is
    merged (a name in two of them is an error). Names not given keep the module's own tensors
    (``strict=True``: every name must be given, none unknown). The module is restored afterwards, also
    on error. Works inside ``grad``/``vmap``: ``vmap(functional_call, in_dims=(0, None))`` runs an
    ensemble of stacked parameters (see :func:`stack_module_state`).

    >>> import pylucid
    >>> from pylucid.func import functional_call
    >>> lin = pylucid.nn.Linear(2, 1, bias=False)
    >>> functional_call(lin, {"weight": pylucid.tensor([[1.0, 2.0]])}, (pylucid.tensor([[3.0, 4.0]]),))
    tensor([[11.]])
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        tensors = dict(parameter_and_buffer_dicts)
    else:
        tensors = {}
        for d in parameter_and_buffer_dicts:
            dup = set(tensors) & set(d)
            if dup:
                raise ValueError(f"functional_call: {sorted(dup)} given in more than one dict")
            tensors.update(d)
    if not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, tensors, strict):
        return module(*args, **(kwargs or {}))


def stack_module_state(models: Any) -> Any:
    """``(params, buffers)``: each model's parameters and buffers stacked along a new leading dim.

    For ensembles: ``vmap(lambda p, b, x: functional_call(base, (p, b), (x,)))(params, buffers, xs)``.
    The stacked parameters are new leaves (``requires_grad`` as the originals).
    """
    from ..ops.shape import stack

    models = list(models)
    if not models:
        raise ValueError("stack_module_state: expected at least one model")
    names = [n for n, _ in models[0].named_parameters()]
    params = {}
    for n in names:
        ps = [dict(m.named_parameters())[n] for m in models]
        params[n] = stack([p.detach() for p in ps]).requires_grad_(ps[0].requires_grad)
    buffers = {}
    for n, _ in models[0].named_buffers():
        buffers[n] = stack([dict(m.named_buffers())[n] for m in models])
    return params, buffers
