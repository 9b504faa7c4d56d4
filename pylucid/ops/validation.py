"""Argument validation in one place, driven by the op schemas and the declared signatures.

Three checks, each precomputed when an op or a public function is declared so the common call pays almost
nothing (docs/semantics/validation.md has the rules):

- **dtype kinds** (``OpSchema(accepts=...)``): the kinds (``"float"``, ``"complex"``, ``"int"``, ``"bool"``)
  an op's tensor inputs may have, checked on the compute dtype in dispatch (``_op._finish``). The set of
  refused NumPy dtypes is built once per op class; an op that accepts everything checks nothing.
- **int and dim arguments** of a declared function: a parameter annotated ``int`` (or ``int | None``), a dim
  (``dim``, ``dim0``, ``start_dim``, ...) or one of the integer-only names (``diagonal``, ``offset``,
  ``shifts``, ...) must be an int (a float, even ``2.0``, raises ``TypeError`` as in PyTorch); a dim of a 0-d
  tensor must be ``-1`` or ``0``.
- **the failure path**: an exception escaping a declared function that is not typed (not a
  :mod:`pylucid.errors` class, or raised outside pylucid, or not naming the op) is diagnosed: a non-tensor
  where a tensor is expected becomes ``TypeError("<op>: target must be a Tensor, got str")`` (as
  ``check_tensor`` words it; a parameter annotated ``Tensor`` is checked before the call when the function does
  not check it itself), anything
  else is re-raised as a typed error naming the op (broadcast failures as ``ShapeMismatch``). This costs
  nothing until something is raised.
"""

from __future__ import annotations

import inspect
import linecache
import re
import types
from pathlib import Path

from .. import dtypes as _dt
from .._tensor import _TENSOR_TYPES as _TT
from ..errors import DtypeMismatch, LucidError, ShapeMismatch

#: the dtype kinds an ``OpSchema(accepts=...)`` names, and the pylucid dtypes of each
KINDS = {
    "bool": (_dt.bool_,),
    "int": (_dt.uint8, _dt.int8, _dt.int16, _dt.int32, _dt.int64),
    "float": (_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64),
    "complex": (_dt.complex64, _dt.complex128),
}
_KIND_OF = {d.numpy_dtype: k for k, ds in KINDS.items() for d in ds}


def rejected_dtypes(accepts):
    """``None`` (every dtype accepted) or a tuple of frozensets of refused NumPy dtypes, one per input position
    (the last covers the remaining positions)."""
    if not accepts:
        return None
    every = frozenset(_KIND_OF)
    if isinstance(accepts[0], tuple):  # per input: the last entry covers the remaining positions
        per = tuple(every - {d.numpy_dtype for k in kinds for d in KINDS[k]} for kinds in accepts)
        return per
    return (every - {d.numpy_dtype for k in accepts for d in KINDS[k]},)


def _accepted_words(op, i) -> str:
    acc = op.schema.accepts
    kinds = acc[min(i, len(acc) - 1)] if isinstance(acc[0], tuple) else acc
    return ", ".join(kinds)


def _arg_name(op, i) -> str:
    try:
        params = list(inspect.signature(op.forward).parameters)[1:]
        return params[i] if i < len(params) and not params[i].startswith("*") else f"input {i}"
    except (TypeError, ValueError):
        return f"input {i}"


def check_dtypes(op, arrays) -> None:
    """Raise ``DtypeMismatch`` if an array argument of ``op`` has a dtype kind its schema does not accept."""
    rej = op._rejects
    last = len(rej) - 1
    for i, a in enumerate(arrays):
        dt = getattr(a, "dtype", None)
        if dt is not None and getattr(a, "ndim", None) is not None and dt in rej[i if i < last else last]:
            name = op.schema.name
            raise DtypeMismatch(
                f"{name}: argument '{_arg_name(op, i)}' has dtype {_dt._FROM_NP[dt].name} ({_KIND_OF[dt]}); "
                f"{name} accepts {_accepted_words(op, i)} tensors"
            )


# ---------------------------------------------------------------------------------------------- int / dim arguments
_DIM_NAMES = frozenset(("dim", "dim0", "dim1", "dim2", "start_dim", "end_dim", "axis", "axis0", "axis1"))
_INT_NAMES = frozenset(("diagonal", "offset", "shifts", "num_classes", "groups", "k", "chunks", "storage_offset"))
#: sizes: an int or a sequence of ints (``None`` entries in an adaptive pool's ``output_size``; ``padding`` may be a
#: string, ``"same"``)
_SIZE_NAMES = frozenset(("output_size", "kernel_size", "stride", "padding", "dilation", "s", "pad", "size", "sections",
                         "indices_or_sections", "split_size_or_sections"))
_INT_ANN = frozenset(("int", "int | None", "None | int", "Optional[int]", "typing.Optional[int]"))
_SKIP = frozenset(("_stacklevel",))
_DIM, _INT, _TENSOR, _BOOL, _FLOAT, _SIZE = 0, 1, 2, 3, 4, 5
_BOOL_ANN = frozenset(("bool",))
_FLOAT_ANN = frozenset(("float",))


def _ann(p) -> str:
    a = p.annotation
    if a is p.empty:
        return ""
    return a if isinstance(a, str) else getattr(a, "__name__", str(a))


def signature_checks(fn, extra_ints=()) -> tuple:
    """``((name, position or -1, kind, allows None, allows a sequence), ...)`` of ``fn``'s int and dim parameters."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return ()
    # a function that checks its tensors itself (check_tensor, isinstance) words its own errors
    names = getattr(getattr(fn, "__code__", None), "co_names", ())
    checks_itself = "check_tensor" in names or "isinstance" in names or "_check_tensor" in names
    out = []
    for pos, p in enumerate(sig.parameters.values()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in _SKIP:
            continue
        ann = _ann(p)
        default = p.default
        int_default = default is not p.empty and default.__class__ is int
        if ann == "Tensor" and default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and \
                not checks_itself:
            kind = _TENSOR
        elif p.name in _DIM_NAMES and (ann == "" or "int" in ann) and (default is p.empty or default is None
                                                                    or int_default):
            kind = _DIM
        elif ann in _INT_ANN or (p.name in _INT_NAMES and (int_default or ann == "")) or p.name in extra_ints:
            kind = _INT
        elif (p.name in _SIZE_NAMES and (ann == "" or "str" not in ann or p.name == "padding")
              and not (p.name == "s" and p.default is p.empty)):  # fft's optional s; scalar_tensor's s is a number
            kind = _SIZE
        elif ann in _BOOL_ANN and default.__class__ is bool:
            kind = _BOOL  # a flag: PyTorch's argument parser takes a Python bool only (not None, 0/1, a tensor)
        elif ann in _FLOAT_ANN and default.__class__ in (float, int):
            kind = _FLOAT  # a number: not None or a string
        else:
            continue
        allow_none = True  # None is the function's to refuse (``dim is required``), in its own words
        allow_seq = ann not in _INT_ANN and (kind == _DIM or p.name == "shifts")
        where = pos if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else -1
        out.append((p.name, where, kind, allow_none, allow_seq))
    return tuple(out)


def _is_int(v) -> bool:
    c = v.__class__
    if c is int or c is bool:
        return True
    if c in _TT:
        return v._data.ndim == 0 and v._data.dtype.kind in "iub"
    return hasattr(v, "__index__") and not isinstance(v, (float, complex, str))


def bad_int_arg(fname, pname, kind, v, allow_none, allow_seq, args):
    """The error for one int/dim argument value, or None when it is acceptable."""
    if v.__class__ in _TT:
        return None  # a tensor (``max(a, b)``'s second operand, a 0-d index): the function decides
    if v is None:
        return None  # allowed (a default of None), or refused by the function in its own words
    if allow_seq and isinstance(v, (tuple, list)):
        for x in v:
            if not _is_int(x):
                return TypeError(f"{fname}: {pname} must be a tuple of ints, got {type(x).__name__} "
                                 f"in {v!r}")
        vals = v
    elif _is_int(v):
        vals = (v,)
    else:
        what = "int" if kind == _INT else "int (a dim)"
        if allow_seq:
            what += " or a tuple of ints"
        return TypeError(f"{fname}: {pname} must be an {what}, got {type(v).__name__} {v!r}")
    if kind == _DIM and args:
        a0 = args[0]
        if a0.__class__ in _TT and a0._data.ndim == 0:
            for d in vals:
                d = int(d)
                if d != 0 and d != -1:
                    return IndexError(f"{fname}: dimension out of range (expected to be in range of [-1, 0], "
                                      f"but got {d}): a 0-d tensor has dims -1 and 0 only")
    return None


def _not_tensor(fname, pname, v):
    """check_tensor's words: ``"<op>: <name> must be a Tensor, got <type>"``."""
    return TypeError(f"{fname}: {pname} must be a Tensor, got {type(v).__name__} {_describe(v)}")


def _slow_check(fname, check, v, args):
    pname, _, kind, allow_none, allow_seq = check
    if kind == _TENSOR:
        from .._tensor import Tensor

        if isinstance(v, (Tensor, int, float, complex)):
            return  # a number goes on to dispatch, which promotes it or words its own error
        raise _not_tensor(fname, pname, v)
    if kind == _SIZE:
        if v is None or v.__class__ in _TT or _is_int(v) or (pname == "padding" and isinstance(v, str)):
            return
        if isinstance(v, (tuple, list)):
            for x in v:
                if not (_is_int(x) or (x is None and pname == "output_size")):
                    raise TypeError(f"{fname}: {pname} must be a tuple of ints, got {type(x).__name__} in {v!r}")
            return
        raise TypeError(f"{fname}: {pname} must be an int or a tuple of ints, got {type(v).__name__} {_describe(v)}")
    if kind == _BOOL:
        raise TypeError(f"{fname}: {pname} must be a bool, got {type(v).__name__} {_describe(v)}")
    if kind == _FLOAT:
        if v.__class__ in _TT:
            if v._data.ndim == 0 and v._data.dtype.kind in "biuf":
                return
        elif isinstance(v, (int, float)) or (hasattr(v, "__float__") and not isinstance(v, (str, bytes, complex))):
            return  # a Python or NumPy number
        raise TypeError(f"{fname}: {pname} must be a float, got {type(v).__name__} {_describe(v)}")
    err = bad_int_arg(fname, pname, kind, v, allow_none, allow_seq, args)
    if err is not None:
        raise err


# ---------------------------------------------------------------------------------------------- the failure path
_PYLUCID_DIR = str(Path(__file__).resolve().parent.parent)
_OP_PREFIX = re.compile(r"^\s*[\w.]+(\(\))?: ")
_BROADCAST = re.compile(r"broadcast|could not be broadcast|shape mismatch|cannot reshape|not aligned|mismatch in its "
                        r"core dimension")
_TENSOR_NAMES = frozenset(("input", "other", "x", "y", "a", "b", "target", "weight", "tensor", "self", "mat1", "mat2",
                           "vec", "vec1", "vec2", "query", "key", "value", "log_probs", "targets", "src", "index",
                           "mask", "tensor1", "tensor2", "A", "B", "LU", "pivots", "grad_output", "mean", "rstd",
                           "input1", "input2", "anchor", "positive", "negative", "batch1", "batch2", "end",
                           "elements", "test_elements", "boundaries", "sorted_sequence", "mat", "offsets",
                           "indices", "tensors", "bias"))


def is_typed(exc, names) -> bool:
    """True when ``exc`` is a typed pylucid error: a ``pylucid.errors`` class, or an exception raised in pylucid
    (not Python's AttributeError/KeyError of a bad argument) whose message names an op."""
    if isinstance(exc, LucidError):
        return True
    if isinstance(exc, (AttributeError, KeyError)) or not isinstance(exc, Exception):
        return False
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None or not last.tb_frame.f_code.co_filename.startswith(_PYLUCID_DIR):
        return False
    msg = str(exc)
    return bool(_OP_PREFIX.match(msg)) or any(n in msg for n in names)


def _describe(v) -> str:
    if v.__class__ in _TT:
        return f"Tensor{tuple(v.shape)}:{v.dtype.name}"
    r = repr(v)
    return r if len(r) <= 40 else f"{type(v).__name__}"


def _junk_argument(fname, sig, args, kwargs):
    """A TypeError for a non-tensor in a tensor parameter, or None when no argument looks wrong."""
    if sig is None:
        return None
    try:
        bound = sig.bind_partial(*args, **kwargs)
    except TypeError as exc:
        return TypeError(f"{fname}: {exc}")
    for pname, v in bound.arguments.items():
        p = sig.parameters[pname]
        if p.kind is p.VAR_POSITIONAL:
            continue
        expects_tensor = "Tensor" in _ann(p) or (pname in _TENSOR_NAMES and p.default is p.empty)
        if not expects_tensor:
            continue
        if v is None and p.default is None:
            continue  # ``weight=None``: the parameter's own default, not a junk argument
        if v is None or isinstance(v, (str, bytes, dict, set, list)) or (
                v.__class__ not in _TT and not isinstance(v, (int, float, complex, tuple))):
            return _not_tensor(fname, pname, v)
    return None


def retyped(fname, sig, args, kwargs, exc):
    """The typed error to raise for an untyped ``exc`` escaping the declared function ``fname``.

    One that is not a bad argument carries ``_pylucid_internal = True``: the inputs passed every check and the op
    still failed inside, which is a defect of the op (the fuzzer reports it where PyTorch computes a result).
    """
    err = _junk_argument(fname, sig, args, kwargs)
    if err is not None:
        return err
    err = _internal(fname, args, kwargs, exc)
    if err is not None:
        err._pylucid_internal = True
    return err


def _internal(fname, args, kwargs, exc):
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    shown = ", ".join([_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()])
    text = f"{fname}: {msg} (called with {shown})"
    if isinstance(exc, IndexError):
        return IndexError(text)
    if isinstance(exc, ValueError) and _BROADCAST.search(msg):
        return ShapeMismatch(text)
    if isinstance(exc, (TypeError, AttributeError, KeyError)):
        return TypeError(text)
    if isinstance(exc, (ValueError, ArithmeticError)):
        return ValueError(text)
    if isinstance(exc, NotImplementedError):
        return NotImplementedError(text)
    if isinstance(exc, RuntimeError) and not isinstance(exc, RecursionError):
        return LucidError(text)
    return None


def _build(sig, checks):
    """Source of a wrapper factory with ``fn``'s own parameter list (no ``*args``/``**kwargs`` repacking: the
    call costs one extra frame), the common value of each checked parameter (an int, an int dim of a tensor with
    dims) tested inline and anything else sent to ``_slow_check``."""
    params, call, pos_names, kw_names = [], [], [], []
    star = ""
    seen_kwonly = False
    seen_posonly = False
    for i, p in enumerate(sig.parameters.values()):
        d = "" if p.default is p.empty else f"=_v_D[{i}]"
        if p.kind is p.POSITIONAL_ONLY:
            seen_posonly = True
            params.append(p.name + d)
            call.append(p.name)
            pos_names.append(p.name)
            continue
        if seen_posonly:
            params.append("/")
            seen_posonly = False
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            params.append(p.name + d)
            call.append(p.name)
            pos_names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            params.append("*" + p.name)
            call.append("*" + p.name)
            star = p.name
            seen_kwonly = True
        elif p.kind is p.KEYWORD_ONLY:
            if not seen_kwonly:
                params.append("*")
                seen_kwonly = True
            params.append(p.name + d)
            call.append(f"{p.name}={p.name}")
            kw_names.append(p.name)
        else:
            params.append("**" + p.name)
            call.append("**" + p.name)
            kw_names.append("**" + p.name)
    if seen_posonly:
        params.append("/")
    first = pos_names[0] if pos_names else None
    body = []
    for i, (pname, _, kind, allow_none, _) in enumerate(checks):
        if kind == _TENSOR:
            body += [f"if {pname}.__class__ not in _v_TT:", f"    _v_slow(_v_fname, _v_checks[{i}], {pname}, ())"]
        elif kind == _SIZE:
            # a pair of ints (a 2-d layer's stride, padding ...) passes inline; other tuples take the slow check
            body += [f"if {pname}.__class__ is not int and {pname} is not None and not ({pname}.__class__ is tuple "
                     f"and len({pname}) == 2 and {pname}[0].__class__ is int and {pname}[1].__class__ is int):",
                     f"    _v_slow(_v_fname, _v_checks[{i}], {pname}, ())"]
        elif kind == _BOOL:
            body += [f"if {pname}.__class__ is not bool:", f"    _v_slow(_v_fname, _v_checks[{i}], {pname}, ())"]
        elif kind == _FLOAT:
            body += [f"if {pname}.__class__ is not float and {pname}.__class__ is not int:",
                     f"    _v_slow(_v_fname, _v_checks[{i}], {pname}, ())"]
        elif kind == _INT:
            cond = f"{pname}.__class__ is not int" + (f" and {pname} is not None" if allow_none else "")
            body += [f"if {cond}:", f"    _v_slow(_v_fname, _v_checks[{i}], {pname}, ({first},))"]
        else:
            body.append(f"if {pname}.__class__ is int:")
            if first is not None:
                body += [f"    if {pname} != 0 and {pname} != -1 and {first}.__class__ in _v_TT and "
                         f"{first}._data.ndim == 0:",
                         f"        _v_slow(_v_fname, _v_checks[{i}], {pname}, ({first},))"]
            else:
                body.append("    pass")
            body += [f"elif {pname} is not None:" if allow_none else "else:",
                     f"    _v_slow(_v_fname, _v_checks[{i}], {pname}, ({first},))"]
    args_src = "(" + "".join(f"{n}, " for n in pos_names) + (f"*{star}, " if star else "") + ")"
    kw_items = [f"{n!r}: {n}" for n in kw_names if not n.startswith("**")]
    kw_src = "{" + ", ".join(kw_items + [n for n in kw_names if n.startswith("**")]) + "}"
    return "\n".join([
        "def make(_v_fn, _v_fname, _v_names, _v_sig, _v_checks, _v_typed, _v_retype, _v_slow, _v_TT, _v_D):",
        f"    def declared({', '.join(params)}):",
        "        try:",
        *["            " + ln for ln in body],
        f"            return _v_fn({', '.join(call)})",
        "        except Exception as _v_exc:",
        "            if _v_typed(_v_exc, _v_names):",
        "                raise",
        f"            _v_new = _v_retype(_v_fname, _v_sig, {args_src}, {kw_src}, _v_exc)",
        "            if _v_new is None:",
        "                raise",
        "            raise _v_new from _v_exc",
        "    return declared",
    ])


_BUILT: dict = {}
#: the file name of the generated wrappers: inside pylucid, so an error they raise counts as pylucid's
_GENERATED = str(Path(__file__).with_name("<declaration wrapper"))


def _generic(fn, fname, names, sig, checks):
    """The wrapper for a function whose parameter list cannot be copied: ``*args``/``**kwargs``, no int checks."""

    def declared(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if is_typed(exc, names):
                raise
            new = retyped(fname, sig, args, kwargs, exc)
            if new is None:
                raise
            raise new from exc

    return declared


def wrap_declared(fn, fname: str, names, checks):
    """The function a declaration installs: ``fn`` behind the int/dim checks and the failure path.

    It is rebuilt on ``fn``'s module globals so doctest and ``inspect`` find it where ``fn`` was defined.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    names = frozenset(names)
    if sig is None or any(p.name.startswith("_v_") for p in sig.parameters.values()):
        declared = _generic(fn, fname, names, sig, ())
    else:
        src = _build(sig, checks)
        make = _BUILT.get(src)
        if make is None:
            ns: dict = {}
            # a file name of its own, with the source in linecache: tracebacks show the wrapper's lines
            filename = f"{_GENERATED} {len(_BUILT)}>"
            linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
            exec(compile(src, filename, "exec"), ns)  # noqa: S102 - source built above
            make = _BUILT[src] = ns["make"]
        defaults = tuple(p.default for p in sig.parameters.values())
        declared = make(fn, fname, names, sig, checks, is_typed, retyped, _slow_check, _TT, defaults)
    g = getattr(fn, "__globals__", None)
    if g is not None:
        # the same code on fn's module globals: doctest and inspect find the function where fn was defined
        kwdefaults = declared.__kwdefaults__
        declared = types.FunctionType(declared.__code__, g, fname, declared.__defaults__, declared.__closure__)
        declared.__kwdefaults__ = kwdefaults
    declared.__name__ = getattr(fn, "__name__", fname)
    declared.__qualname__ = getattr(fn, "__qualname__", fname)
    declared.__module__ = getattr(fn, "__module__", None)
    declared.__doc__ = fn.__doc__
    declared.__wrapped__ = fn
    declared.__signature__ = sig
    declared.__dict__.update(getattr(fn, "__dict__", {}))
    return declared
