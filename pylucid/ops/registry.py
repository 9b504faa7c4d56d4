"""The op registry: every ``Op`` subclass with a schema registers itself here."""

from __future__ import annotations

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
