"""``Module`` and ``Parameter``, and the containers built on them.

A ``Module`` owns three ordered registries filled by ``__setattr__``:
``_parameters`` (``Parameter`` values), ``_buffers`` (tensors saved in the
state dict but not trained) and ``_modules`` (child modules). Everything else
(``parameters()``, ``state_dict()``, ``to()``, ``train()``) walks them, exactly
as PyTorch users expect.

>>> import pylucid
>>> from pylucid import nn
>>> class Net(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = nn.Linear(2, 3)
...         self.register_buffer("step", pylucid.zeros(()))
...     def forward(self, x):
...         return self.fc(x)
>>> net = Net()
>>> [n for n, _ in net.named_parameters()]
['fc.weight', 'fc.bias']
>>> sorted(net.state_dict())
['fc.bias', 'fc.weight', 'step']
>>> net
Net(
  (fc): Linear(in_features=2, out_features=3, bias=True)
)
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterable, Iterator

from .. import dtypes as _dt
from .._state import state
from .._tensor import Tensor, _new_tensor
from ..autograd.graph import RemovableHandle
from ..device import device as _device_cls

__all__ = ["Module", "Parameter", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
           "Buffer"]

_hook_ids = itertools.count()


# ---------------------------------------------------------------------------------------------------------------------
# Parameter
# ---------------------------------------------------------------------------------------------------------------------
class Parameter(Tensor):
    """A Tensor that a ``Module`` registers as a trainable parameter when assigned as an attribute.

    ``requires_grad`` defaults to True. It shares storage with the tensor it is
    built from.

    >>> import pylucid
    >>> pylucid.nn.Parameter(pylucid.tensor([1.0, 2.0]))
    Parameter containing:
    tensor([1., 2.], requires_grad=True)
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from ..creation import empty

            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected a Tensor as data, got {type(data).__name__}")
        p = _new_tensor(data._data, data._device, cls)
        p._version = data._version
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad: bool = True) -> None:
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        t = Tensor.__reduce_ex__(self, protocol)
        return (_rebuild_parameter, (t, self._requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(_new_tensor(self._data.copy(), self._device), self._requires_grad)
        memo[id(self)] = p
        return p


def _rebuild_parameter(t, requires_grad):
    fn, args = t
    return Parameter(fn(*args), requires_grad)


class Buffer:
    """Marker: ``self.x = Buffer(t, persistent=False)`` registers ``t`` as a buffer (PyTorch's ``nn.Buffer``)."""

    __slots__ = ("tensor", "persistent")

    def __init__(self, data: Tensor, *, persistent: bool = True) -> None:
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer: expected a Tensor as data, got {type(data).__name__}")
        self.tensor = data
        self.persistent = persistent


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class _BackwardHookFn:
    """Identity autograd Functions placed on a module's inputs and outputs for full backward hooks."""

    @staticmethod
    def make(module, n_inputs_holder):
        from ..autograd.function import Function

        class _OutputsIdentity(Function):
            @staticmethod
            def forward(ctx, *xs):
                return xs

            @staticmethod
            def backward(ctx, *grads):
                n_inputs_holder["grad_output"] = grads
                if n_inputs_holder["n_inputs"] == 0:
                    module._run_backward_hooks((None,), grads)
                return grads

        class _InputsIdentity(Function):
            @staticmethod
            def forward(ctx, *xs):
                return xs

            @staticmethod
            def backward(ctx, *grads):
                res = module._run_backward_hooks(grads, n_inputs_holder.get("grad_output", ()))
                return res if res is not None else grads

        return _InputsIdentity, _OutputsIdentity


# ---------------------------------------------------------------------------------------------------------------------
# Module
# ---------------------------------------------------------------------------------------------------------------------
class Module:
    """Base class of every layer and model.

    Subclasses assign ``Parameter``s, buffers (``register_buffer``) and child
    modules as attributes in ``__init__`` (after ``super().__init__()``) and
    define ``forward``. Call the module, not ``forward``, so hooks run.
    """

    training: bool
    _version: int = 1
    call_super_init: bool = False

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments {args} {kwargs}")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_backward_hooks"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()

    forward: Callable[..., Any]

    def forward(self, *args, **kwargs):  # type: ignore[no-redef]
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # -- registration ------------------------------------------------------------
    def _check_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or ``None``: a declared but absent parameter, like ``bias=False``)."""
        self._check_init("parameters")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' (pylucid.nn.Parameter or None "
                "required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created explicitly; "
                "use .detach() to build one from a computed tensor"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state that is not trained (running means) but moves with ``to()`` and,
        if ``persistent``, is saved in ``state_dict``."""
        self._check_init("buffers")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a child module, reachable as ``self.<name>``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_init("child modules")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string, got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name or name == "":
            raise KeyError(f'module name can\'t contain ".", and can\'t be empty, got {name!r}')
        self._modules[name] = module

    register_module = add_module

    @staticmethod
    def _check_name(name, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")

        def remove_from(*dicts):
            for dd in dicts:
                if name in dd:
                    if dd is d:
                        del d[name]
                    else:
                        del dd[name]

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, d["_buffers"], d["_modules"])
            d["_non_persistent_buffers_set"].discard(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' (pylucid.nn.Parameter or None "
                    "expected)"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, params, d["_buffers"])
            d["_non_persistent_buffers_set"].discard(name)
            d["_modules"][name] = value
        elif params is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (Module or None "
                                "expected)")
            d["_modules"][name] = value
        elif isinstance(value, Buffer):
            if params is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            remove_from(d, params, d["_modules"])
            self.register_buffer(name, value.tensor, value.persistent)
        elif params is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            reg = d.get(key)
            if reg is not None and name in reg:
                return reg[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        if name in d.get("_parameters", ()):
            del d["_parameters"][name]
        elif name in d.get("_buffers", ()):
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif name in d.get("_modules", ()):
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[:1].isdigit())

    def __setstate__(self, st) -> None:
        self.__dict__.update(st)

    # -- iteration -----------------------------------------------------------------
    def _named_members(self, get_members, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in modules:
            for k, v in get_members(mod):
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in memo:
                        continue
                    memo.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k), v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(name, parameter)`` pairs, children included when ``recurse``; shared parameters once."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """Every module of the tree (this one first, name ``prefix``), depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target: str) -> "Module":
        """The module at dotted path ``target`` (``""`` is this module)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    # -- modes and gradients -------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode (dropout active, batch norm uses batch statistics) on this module and its children."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the ``.grad`` of every parameter: to None (default) or to zeros in place."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g = g.detach()
                    p.grad = g
                g._data[...] = 0
                g._version[0] += 1

    # -- moving and casting ----------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> "Module":
        for m in self.children():
            m._apply(fn)
        for key, p in self._parameters.items():
            if p is None:
                continue
            with _no_grad():
                new = fn(p)
            if new is not p:
                # keep the Parameter object: optimizers hold it
                p._data = new._data
                p._device = new._device
                p._version[0] += 1
            if p.grad is not None:
                with _no_grad():
                    g = fn(p.grad)
                if g is not p.grad:
                    p.grad._data = g._data
                    p.grad._device = g._device
        for key, b in self._buffers.items():
            if b is not None:
                with _no_grad():
                    self._buffers[key] = fn(b)
        return self

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call ``fn`` on every submodule (children first) and then on this module; e.g. custom init."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``, ``to(memory_format=...)``.

        A dtype applies to floating-point (and complex) parameters and buffers
        only. Parameters are moved in place (the same Parameter objects), so an
        optimizer built before the move keeps working.
        """
        fmt = kwargs.pop("memory_format", None)
        dev, dtype = _parse_to(args, kwargs)
        if fmt is not None:
            from .. import _memory_format as mf

            fmt = mf.check("Module.to", fmt)
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(
                f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}"
            )

        def convert(t: Tensor) -> Tensor:
            out = t
            if dev is not None and t._device is not dev:
                out = out.to(dev)
            if dtype is not None and (t.is_floating_point() or t.is_complex()) and out.dtype is not dtype:
                if t.is_complex() and not dtype.is_complex:
                    target = dtype
                else:
                    target = dtype
                out = out.to(target)
            if fmt is not None and fmt.ndim == out.ndim and (out.is_floating_point() or out.is_complex()):
                out = out.contiguous(memory_format=fmt)  # channels_last: the 4-d weights and buffers, as PyTorch
            return out

        return self._apply(convert)

    def cpu(self) -> "Module":
        return self.to("cpu")

    def cuda(self, device=None) -> "Module":
        return self.to(_device_cls("cuda" if device is None else device))

    def _cast_float(self, dtype) -> "Module":
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> "Module":
        return self._cast_float(_dt.float32)

    def double(self) -> "Module":
        return self._cast_float(_dt.float64)

    def half(self) -> "Module":
        return self._cast_float(_dt.float16)

    def bfloat16(self) -> "Module":
        return self._cast_float(_dt.bfloat16)

    def type(self, dst_type) -> "Module":
        return self._apply(lambda t: t.to(dst_type))

    # -- state dict ----------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        extra = getattr(type(self), "get_extra_state", None)
        if extra is not None and extra is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False) -> "OrderedDict":
        """An ordered dict ``name -> tensor`` of the parameters and persistent buffers (detached unless keep_vars)."""
        if args:  # PyTorch's deprecated positional (destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, {})
            if res is not None:
                destination = res
        return destination

    def get_extra_state(self):
        raise RuntimeError("get_extra_state: this module does not define extra state")

    def set_extra_state(self, st) -> None:
        raise RuntimeError("set_extra_state: this module does not define extra state")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign: bool = False) -> None:
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items()) if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            src = state_dict[key]
            if not isinstance(src, Tensor):
                from ..serialization import as_pylucid_tensor

                try:
                    src = as_pylucid_tensor(src, f'the checkpoint entry "{key}"')
                except TypeError as exc:
                    error_msgs.append(f'While copying the parameter named "{key}", {exc}')
                    continue
            if tuple(src.shape) != tuple(param.shape):
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {_fmt_shape(src.shape)} from checkpoint, "
                    f"the shape in current model is {_fmt_shape(param.shape)}."
                )
                continue
            try:
                with _no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            new = Parameter(src.detach(), param.requires_grad)
                            self._parameters[name] = new
                        else:
                            self._buffers[name] = src.detach()
                    else:
                        src_t = src.detach().to(device=param.device, dtype=param.dtype)
                        param._data[...] = src_t._data
                        param._version[0] += 1
            except Exception as exc:  # noqa: BLE001 - reported as a load error like PyTorch
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model are '
                    f"{_fmt_shape(param.shape)} and whose dimensions in the checkpoint are {_fmt_shape(src.shape)}, "
                    f"an exception occurred : {exc}."
                )
        extra_key = prefix + "_extra_state"
        has_extra = getattr(type(self), "set_extra_state", None) is not Module.set_extra_state
        if has_extra:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix) or key == extra_key:
                    continue
                rest = key[len(prefix):]
                head = rest.split(".", 1)[0]
                if "." not in rest and head not in local:
                    unexpected_keys.append(key)
                elif "." in rest and head not in self._modules:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy tensors from ``state_dict`` into this module's parameters and buffers (in place).

        Returns ``(missing_keys, unexpected_keys)`` as a named tuple. With
        ``strict=True`` (default) any missing or unexpected key raises; a shape
        mismatch always raises, naming the key and both shapes.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        missing: list = []
        unexpected: list = []
        errors: list = []
        state_dict = OrderedDict(state_dict)

        def load(module, prefix=""):
            module._load_from_state_dict(state_dict, prefix, {}, True, missing, unexpected, errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self)
        if strict:
            if unexpected:
                keys = ", ".join(f'"{k}"' for k in unexpected)
                errors.insert(0, f"Unexpected key(s) in state_dict: {keys}. ")
            if missing:
                keys = ", ".join(f'"{k}"' for k in missing)
                errors.insert(0, f"Missing key(s) in state_dict: {keys}. ")
        if errors:
            raise RuntimeError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(type(self).__name__, "\n\t".join(errors))
            )
        return _IncompatibleKeys(missing, unexpected)

    def register_state_dict_hook(self, hook):
        key = next(_hook_ids)
        self._state_dict_hooks[key] = hook
        return RemovableHandle(self._state_dict_hooks, key)

    def _register_load_state_dict_pre_hook(self, hook):
        key = next(_hook_ids)
        self._load_state_dict_pre_hooks[key] = hook
        return RemovableHandle(self._load_state_dict_pre_hooks, key)

    # -- hooks and call --------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        """``hook(module, args) -> None | new args``.

        With ``with_kwargs``: ``hook(module, args, kwargs) -> None | (args, kwargs)``."""
        key = next(_hook_ids)
        self._forward_pre_hooks[key] = hook
        if prepend:
            self._forward_pre_hooks.move_to_end(key, last=False)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(key)
        return RemovableHandle(self._forward_pre_hooks, key)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """``hook(module, args, output) -> None | new output`` (with_kwargs: ``hook(module, args, kwargs, output)``)."""
        key = next(_hook_ids)
        self._forward_hooks[key] = hook
        if prepend:
            self._forward_hooks.move_to_end(key, last=False)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(key)
        return RemovableHandle(self._forward_hooks, key)

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_input, grad_output) -> None | new grad_input``, run when the gradients with
        respect to the module's tensor inputs are computed (``grad_input`` is ``(None,)`` when no input needs one)."""
        key = next(_hook_ids)
        self._backward_hooks[key] = hook
        if prepend:
            self._backward_hooks.move_to_end(key, last=False)
        return RemovableHandle(self._backward_hooks, key)

    def register_backward_hook(self, hook):
        return self.register_full_backward_hook(hook)

    def _run_backward_hooks(self, grad_input, grad_output):
        result = None
        for hook in list(self._backward_hooks.values()):
            res = hook(self, grad_input if result is None else result, grad_output)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_input):
                    raise RuntimeError(
                        f"backward hook returned {len(res)} gradients, but the module had {len(grad_input)} inputs"
                    )
                result = res
        return result

    def _call_impl(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks):
            return self.forward(*args, **kwargs)  # no hooks (the common call): nothing else to do
        for key, hook in list(self._forward_pre_hooks.items()):
            if key in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        bw = None
        if self._backward_hooks and state.grad_enabled:
            holder: dict = {}
            inputs_fn, outputs_fn = _BackwardHookFn.make(self, holder)
            pos = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
            holder["n_inputs"] = len(pos)
            if pos:
                wrapped = inputs_fn.apply(*(args[i] for i in pos))
                args = list(args)
                for i, w in zip(pos, wrapped):
                    args[i] = w
                args = tuple(args)
            bw = outputs_fn
        out = self.forward(*args, **kwargs)
        for key, hook in list(self._forward_hooks.items()):
            if key in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, out)
            else:
                res = hook(self, args, out)
            if res is not None:
                out = res
        if bw is not None:
            if isinstance(out, Tensor):
                if out.requires_grad:
                    (out,) = bw.apply(out)
            elif isinstance(out, tuple):
                pos = [i for i, o in enumerate(out) if isinstance(o, Tensor) and o.requires_grad]
                if pos:
                    wrapped = bw.apply(*(out[i] for i in pos))
                    lst = list(out)
                    for i, w in zip(pos, wrapped):
                        lst[i] = w
                    out = tuple(lst)
        return out

    __call__ = _call_impl

    # -- printing ----------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """One line shown inside ``Name(...)``; layers override it with their hyper-parameters."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for key, m in self._modules.items():
            mod_str = _addindent(repr(m), 2)
            lines.append("(" + key + "): " + mod_str)
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __getstate__(self):
        return self.__dict__.copy()

    def share_memory(self) -> "Module":
        return self


def _fmt_shape(shape) -> str:
    return "pylucid.Size([" + ", ".join(str(s) for s in shape) + "])"


class _no_grad:
    __slots__ = ("prev",)

    def __enter__(self):
        self.prev = state.grad_enabled
        state.grad_enabled = False

    def __exit__(self, *exc):
        state.grad_enabled = self.prev


def _parse_to(args, kwargs):
    dev = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(f"Module.to: unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dev, dtype = a.device, a.dtype
        elif isinstance(a, _dt.dtype):
            dtype = a
        elif isinstance(a, str) and a.removeprefix("torch.").removeprefix("pylucid.") in _dt._BY_NAME:
            dtype = a
        elif isinstance(a, (str, _device_cls, int)):
            dev = a
        elif a is not None:
            dtype = a
    if dev is not None:
        dev = _device_cls(dev)
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
    return dev, dtype


# ---------------------------------------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------------------------------------
class Sequential(Module):
    """Modules applied in order; indexing, slicing, ``append``, ``len`` and iteration work like a list.

    >>> import pylucid
    >>> from pylucid import nn
    >>> net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    >>> len(net), type(net[0]).__name__, type(net[-1]).__name__
    (2, 'Linear', 'ReLU')
    >>> net(pylucid.ones(2, 4)).shape
    (2, 3)
    """

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            for key, m in args[0].items():
                self.add_module(key, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _get_item_by_idx(self, iterator, idx):
        size = len(self)
        idx = idx.__index__()
        if not -size <= idx < size:
            raise IndexError(f"index {idx} is out of range")
        idx %= size
        return next(itertools.islice(iterator, idx, None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(iter(self._modules.values()), idx)

    def __setitem__(self, idx, module: Module) -> None:
        key = self._get_item_by_idx(iter(self._modules.keys()), idx)
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            key = self._get_item_by_idx(iter(self._modules.keys()), idx)
            delattr(self, key)
        # keep the numbering contiguous, as PyTorch does
        items = list(self._modules.items())
        self._modules.clear()
        for i, (_, m) in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        out = Sequential()
        for m in itertools.chain(self, other):
            out.append(m)
        return out

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not (-n <= index <= n):
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m
        return self

    def pop(self, key: int) -> Module:
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        for m in self:
            input = m(input)
        return input


def _list_position(self, idx: int) -> int:
    """``idx`` (negative counts from the end) as a position in a ModuleList/ParameterList; IndexError when out of
    range. Both classes use it as their ``_abs`` method."""
    idx = idx.__index__()
    n = len(self)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


class ModuleList(Module):
    """A list of modules, registered so their parameters are found; no ``forward`` of its own."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    _abs = _list_position

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(self._abs(idx))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(self._abs(idx)), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, str(self._abs(idx)))
        items = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        out = ModuleList()
        for m in itertools.chain(self, other):
            out.append(m)
        return out

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        offset = len(self)
        for i, m in enumerate(modules):
            self.add_module(str(offset + i), m)
        return self

    def pop(self, key: int) -> Module:
        v = self[key]
        del self[key]
        return v

    def __repr__(self) -> str:
        if not self._modules:
            return "ModuleList()"
        return super().__repr__()


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for j, kv in enumerate(items):
            if not isinstance(kv, (tuple, list)) or len(kv) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} should be a (key, module) pair")
            self[kv[0]] = kv[1]


def _set_params(module: Module, **tensors) -> None:
    """Set each of ``tensors`` on ``module`` as a ``Parameter``, in order; a ``None`` is registered as an absent
    parameter (``bias=False``, ``affine=False``)."""
    for name, tensor in tensors.items():
        if tensor is None:
            module.register_parameter(name, None)
        else:
            setattr(module, name, Parameter(tensor))


def _as_parameter(value):
    """A Tensor stored in a ParameterList/ParameterDict becomes a ``Parameter``; other objects are kept as they are."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class _ParameterContainer(Module):
    """What ParameterList and ParameterDict share: a repr with one line per entry, and refusing to be called."""

    _container_name = ""

    def _entries(self):  # pragma: no cover - abstract
        """(key, value) per entry, in order."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        lines = []
        for k, p in self._entries():
            if isinstance(p, Tensor):
                size = "x".join(str(s) for s in p.shape)
                dev = "" if p.device.type == "cpu" else f" ({p.device})"
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                lines.append(f"  ({k}): {kind} containing: [{p.dtype} of size {size}{dev}]")
            else:
                lines.append(f"  ({k}): Object of type: {type(p).__name__}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        body = self.extra_repr()
        return self._container_name + "(" + ("\n" + body + "\n" if body else "") + ")"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._container_name} should not be called.")


class ParameterList(_ParameterContainer):
    """A list of parameters, registered as ``"0"``, ``"1"``, ...; tensors assigned are wrapped in ``Parameter``."""

    _container_name = "ParameterList"

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self.__dict__["_size"] = 0
        if values is not None:
            self.extend(values)

    _abs = _list_position

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(self._abs(idx)))

    def __setitem__(self, idx: int, param) -> None:
        setattr(self, str(self._abs(idx)), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, params):
        return self.extend(params)

    def append(self, value) -> "ParameterList":
        new_idx = len(self)
        self.__dict__["_size"] += 1
        setattr(self, str(new_idx), _as_parameter(value))
        return self

    def extend(self, values) -> "ParameterList":
        for v in values:
            self.append(v)
        return self

    def _entries(self):
        return enumerate(self)


class ParameterDict(_ParameterContainer):
    """An ordered dict of parameters; tensors assigned are wrapped in ``Parameter``."""

    _container_name = "ParameterDict"

    def __init__(self, parameters=None) -> None:
        super().__init__()
        self.__dict__["_keys"] = OrderedDict()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def pop(self, key: str):
        v = self[key]
        del self[key]
        return v

    def clear(self) -> None:
        for k in list(self._keys):
            del self[k]

    def update(self, parameters) -> None:
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for kv in items:
            k, v = kv
            self[k] = v

    def _entries(self):
        return self.items()
