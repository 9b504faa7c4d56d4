"""The op registry and the public-function declarations.

Two tables live here:

- the ops: every ``Op`` subclass with a ``schema`` registers itself
  (``schema(name)``, ``op_class(name)``, ``list_ops()``);
- the public functions: ``declare`` registers a function under its names in
  one or more namespaces (``pylucid``, ``pylucid.nn.functional``,
  ``pylucid.linalg``, ...) and installs, from that one declaration, its
  ``Tensor`` method, its in-place variant (``Tensor.sqrt_``), its aliases and
  its operator dunders. The namespace modules are built from this table
  (``namespace(name)``), and the op-database coverage test walks it.

>>> import pylucid
>>> d = pylucid.ops.declaration("sqrt")
>>> d.op.__name__, d.methods, d.inplace
('Sqrt', ('sqrt',), ('sqrt_',))
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from .schema import OpSchema

_REGISTRY: dict[str, type] = {}


def register(op_cls) -> None:
    name = op_cls.schema.name
    prev = _REGISTRY.get(name)
    if prev is not None and prev is not op_cls:
        raise ValueError(f"op {name!r} registered twice: {prev.__qualname__} and {op_cls.__qualname__}")
    _REGISTRY[name] = op_cls


def schema(name: str) -> OpSchema:
    """The ``OpSchema`` registered under ``name``.

    >>> import pylucid
    >>> pylucid.ops.schema("sqrt").amp_policy
    <AmpPolicy.PROMOTE: 'Promote'>
    """
    try:
        return _REGISTRY[name].schema
    except KeyError:
        raise KeyError(f"pylucid.ops.schema: no op named {name!r} is registered; see pylucid.ops.list_ops()") from None


def op_class(name: str):
    return _REGISTRY[name]


def list_ops() -> list[str]:
    """Names of every registered op, sorted."""
    return sorted(_REGISTRY)


# ---------------------------------------------------------------- public functions
@dataclass(frozen=True)
class Declaration:
    """One public function and everything generated from it.

    ``name`` is the canonical name, ``fn`` the function, ``op`` the registered
    ``Op`` class it dispatches to (None for a composite built from other
    public ops), ``namespaces`` where it is exported, ``aliases`` its other
    names there, ``methods`` / ``inplace`` the ``Tensor`` attributes made from
    it, ``dunders`` the operator methods.
    """

    name: str
    fn: object
    op: type | None
    namespaces: tuple[str, ...]
    aliases: tuple[str, ...]
    methods: tuple[str, ...]
    inplace: tuple[str, ...]
    dunders: tuple[str, ...]


_DECLARED: dict[tuple[str, str], Declaration] = {}  # (namespace, canonical name) -> declaration
_NAMESPACES: dict[str, dict[str, object]] = {}  # namespace -> {name or alias: function}
_BY_FN: dict[int, Declaration] = {}
_ALL: list[Declaration] = []  # every declaration, method-only ones included


def _tensor_cls():
    from .._tensor import Tensor

    return Tensor


def _set_method(name: str, value, owner: str) -> None:
    T = _tensor_cls()
    prev = T.__dict__.get(name)
    # a method declared twice would silently shadow one of the two functions
    prev_decl = getattr(prev, "_pylucid_declared", None)
    if prev_decl is not None and prev_decl != owner:
        raise ValueError(f"Tensor.{name} is declared twice: by {prev_decl!r} and by {owner!r}")
    try:
        value._pylucid_declared = owner
    except AttributeError:  # builtins, bound methods: nothing to tag
        pass
    setattr(T, name, value)


# operator names with reflected (``__radd__``) and in-place (``__iadd__``) forms
_BINARY_OPERATORS = frozenset(("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
                               "lshift", "rshift"))


def _reflected(fn, name):
    def method(self, other):
        return fn(other, self)

    method.__name__ = name
    method.__doc__ = f"``other {name[3:-2]} self``: {fn.__name__}(other, self)."
    return method


def declare(op=None, *, name: str | None = None, namespaces=("pylucid",), aliases=(), method=True, inplace=False,
            inplace_functions: bool = False, dunders=(), as_property: bool = False):
    """Declare a public function once; its method, in-place variant, aliases and dunders follow.

    Use it as a decorator on the function that calls the op::

        @declare(Sqrt, method=True, inplace=True)
        def sqrt(input): return apply(Sqrt, (input,))

    or call ``.unary()``-style generation through :func:`op_function` for ops
    whose function only passes its tensors on. Arguments:

    - ``op``: the ``Op`` class the function dispatches to (None: a composite).
    - ``name``: the canonical name (default: the function's ``__name__``).
    - ``namespaces``: where the function is exported (``"pylucid"``,
      ``"pylucid.nn.functional"``, ``"pylucid.linalg"``, ``"pylucid.fft"``,
      ``"pylucid.special"``); ``()`` for a method-only declaration.
    - ``aliases``: other names, in every namespace and (with ``method``) as methods.
    - ``method``: ``True`` installs ``Tensor.<name>`` (and its aliases), a
      string installs that name instead, ``False`` none.
    - ``inplace``: ``True`` installs ``Tensor.<name>_`` (and ``<alias>_``)
      through the generic in-place wrapper; a callable ``factory(fn, name)``
      builds the method itself (the optimizers' direct ``add_``).
    - ``inplace_functions``: also export the in-place names as functions
      (``pylucid.relu_(x)``), as PyTorch does for some ops.
    - ``dunders``: operator methods; ``__rX__`` calls ``fn(other, self)``,
      ``__iX__`` is the in-place variant, any other is the function itself.
    - ``as_property``: install the method(s) as read-only properties (``x.T``, ``x.real``).
    """
    if isinstance(namespaces, str):
        namespaces = (namespaces,)
    aliases = tuple(aliases)

    def decorate(fn):
        canonical = name or fn.__name__
        if method is True:
            methods = (canonical, *aliases)
        elif isinstance(method, str):
            methods = (method,)
        else:
            methods = ()
        # errors name the op as users call it: a method-only name (``cast`` installed as ``Tensor.astype``) by it
        shown = methods[0] if len(methods) == 1 and methods[0] != canonical else canonical
        fn = _validated(fn, shown, op, (canonical, *aliases, *methods))
        owner = f"{fn.__module__}.{canonical}"
        for m in methods:
            _set_method(m, property(fn, doc=fn.__doc__) if as_property else fn, owner)
        inplace_names: tuple[str, ...] = ()
        if inplace:
            from ._op import inplace_variant

            factory = inplace if callable(inplace) else inplace_variant
            inplace_names = tuple(n + "_" for n in (canonical, *aliases))
            for n in inplace_names:
                _set_method(n, factory(fn, n), owner)
        for d in dunders:
            T = _tensor_cls()
            if d[3:-2] in _BINARY_OPERATORS and d.startswith("__r"):
                _set_method(d, _reflected(fn, d), owner)
            elif d[3:-2] in _BINARY_OPERATORS and d.startswith("__i"):
                if not inplace_names:
                    raise ValueError(f"declare({canonical}): dunder {d} needs inplace=...")
                setattr(T, d, T.__dict__[inplace_names[0]])
            else:
                _set_method(d, fn, owner)
        decl = Declaration(canonical, fn, op, tuple(namespaces), aliases, methods, inplace_names, tuple(dunders))
        for ns in namespaces:
            key = (ns, canonical)
            prev = _DECLARED.get(key)
            if prev is not None and prev.fn is not fn:
                raise ValueError(f"{ns}.{canonical} is declared twice ({prev.fn.__module__} and {fn.__module__})")
            _DECLARED[key] = decl
            table = _NAMESPACES.setdefault(ns, {})
            for n in (canonical, *aliases):
                table[n] = fn
            if inplace_functions:
                T = _tensor_cls()
                for n in inplace_names:
                    table[n] = T.__dict__[n]
        _BY_FN[id(fn)] = decl
        _ALL.append(decl)
        return fn

    return decorate


def _validated(fn, canonical, op, names):
    """``fn`` behind the argument checks of pylucid.ops.validation: its int and dim parameters, and typed errors on
    the failure path."""
    from .validation import signature_checks, wrap_declared

    extra = op.schema.int_params if op is not None else ()
    names = {canonical, *names}
    if op is not None:
        names.add(op.schema.name)
    return wrap_declared(fn, canonical, names, signature_checks(fn, extra))


def op_function(op, *, name: str | None = None, doc: str | None = None, **declare_kwargs):
    """Generate and declare the public function of an op that only passes its arguments on.

    The signature comes from the op's ``forward`` without ``be``: positional
    parameters are the tensor arguments, keyword-only ones the op's params;
    the docstring is the class's (or ``doc``). ``exp2 = op_function(Exp2, inplace=True)``
    is the whole declaration of ``pylucid.exp2``, ``Tensor.exp2`` and ``Tensor.exp2_``.
    """
    from ._op import apply

    sig = inspect.signature(op.forward)
    params = list(sig.parameters.values())[1:]  # drop ``be``
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
    n = len(positional)
    fname = name or op.schema.name

    if keywords:
        def fn(*args, **kwargs):
            if len(args) != n:
                raise TypeError(f"{fname}() takes {n} positional argument{'s' if n != 1 else ''} "
                                f"({', '.join(positional)}), got {len(args)}")
            extra = set(kwargs) - set(keywords)
            if extra:
                raise TypeError(f"{fname}() got unexpected keyword argument(s) {sorted(extra)}; "
                                f"accepted: {sorted(keywords)}")
            full = {k: kwargs.get(k, v) for k, v in keywords.items()}
            return apply(op, args, full)
    elif n == 1:
        def fn(input):
            return apply(op, (input,))

        params = [params[0].replace(name="input")]
    elif n == 2:
        def fn(input, other):
            return apply(op, (input, other))

        params = [params[0].replace(name="input"), params[1].replace(name="other")]
    else:
        def fn(*args):
            if len(args) != n:
                raise TypeError(f"{fname}() takes {n} positional argument{'s' if n != 1 else ''} "
                                f"({', '.join(positional)}), got {len(args)}")
            return apply(op, args)

    fn.__name__ = fn.__qualname__ = fname
    fn.__module__ = op.__module__
    fn.__doc__ = doc if doc is not None else op.__doc__
    fn.__signature__ = sig.replace(parameters=params, return_annotation="Tensor")
    return declare(op, name=fname, **declare_kwargs)(fn)


def namespace(ns: str) -> dict[str, object]:
    """``{name: function}`` of every declaration exported in namespace ``ns`` (aliases included)."""
    return dict(_NAMESPACES.get(ns, {}))


def declarations() -> list[Declaration]:
    """Every declaration (method-only ones too), one per function, sorted by namespaces and name."""
    return sorted(_ALL, key=lambda d: (d.namespaces, d.name))


def declaration(name: str, ns: str = "pylucid") -> Declaration:
    """The declaration of ``ns.name`` (canonical name or alias)."""
    d = _DECLARED.get((ns, name))
    if d is None:
        fn = _NAMESPACES.get(ns, {}).get(name)
        d = _BY_FN.get(id(fn)) if fn is not None else None
    if d is None:
        raise KeyError(f"pylucid.ops.declaration: nothing named {name!r} is declared in {ns}")
    return d


def declaration_of(fn) -> Declaration | None:
    """The declaration a public function came from, or None."""
    return _BY_FN.get(id(fn))
