"""Saving and loading: ``save``/``load`` checkpoints, PyTorch ``.pt`` files and the safetensors format.

``pylucid.save`` follows ``torch.save``: it saves any object. Plain data — nested ``dict``,
``OrderedDict``, ``list``, ``tuple``, ``str``, ``bytes``, ``int``, ``float``, ``bool``, ``None`` and
tensors, which is what a ``state_dict`` or an optimizer state is — is written as JSON plus raw tensor
bytes: nothing in such a file can run code. Anything else (a whole ``nn.Module``, a NumPy value, a set,
an object of your own) is pickled, with the tensors still stored as raw bytes beside the pickle.

``pylucid.load`` follows PyTorch >= 2.6: ``weights_only=True`` is the default, and then no code from
the file runs. Plain-data files load as they are; a pickle is read by a restricted unpickler that
rebuilds only tensors, the containers above, ``set``, ``bytearray``, ``complex``, ``OrderedDict``,
``Counter``, dtypes and devices, plus the globals you allow with :func:`add_safe_globals` or
:class:`safe_globals`; any other global raises :class:`WeightsOnlyUnpicklingError` naming it.
``weights_only=False`` is an explicit opt-in to Python's full unpickler, which can run arbitrary code
from the file: use it only for files you trust (a whole module saved with ``pylucid.save(model)``
needs it).

``pylucid.load`` also reads PyTorch checkpoints in the zip format that ``torch.save`` writes (since
PyTorch 1.6), through the same restricted unpickler: their tensors (and ``nn.Parameter``\\ s), plain
containers, ``torch.Size``, dtypes and devices become pylucid objects, so a PyTorch ``state_dict``
loads straight into the matching pylucid model. PyTorch objects beyond those (a pickled
``torch.nn.Module``, quantized or sparse tensors) raise :class:`CheckpointError` naming them.

Checkpoint layout (all integers little-endian)::

    offset 0   magic b"\\x89PYLUCID", u32 format version, u32 flags (0), zero padding to 64
    offset 64  tensor blobs, raw little-endian C-order bytes, each starting on a 64-byte boundary
    ...        (version 2 only) the pickle of the object, tensors referenced as ("tensor", index)
    ...        header: UTF-8 JSON {"format", "version", "tensors": [...], "root": ..., "pickle": ...}
    last 32    trailer: u64 header offset, u64 header length, u32 header CRC-32,
               u32 reserved (0), b"LUCIDEND"

A plain-data checkpoint is format version 1 (``"root"`` is the JSON tree, no ``"pickle"``); a pickled
one is version 2 (``"root"`` is ``null`` and ``"pickle"`` gives the pickle's offset, length and
CRC-32). The header comes *after* the data so tensors stream to disk one at a time (a CUDA tensor is
copied to the host only while it is written). Every tensor has its own CRC-32 and the header has one;
the trailer sits at the very end, so a truncated file is always detected. Values are encoded in the
JSON tree as: ``null``/``true``/``false``/ints/strings/finite floats natively, lists as arrays, and
everything else as a one-key tagged object: ``{"$tuple": [...]}``, ``{"$dict": [[key, value], ...]}``
(keys need not be strings), ``{"$odict": ...}`` (``collections.OrderedDict``),
``{"$bytes": base64}``, ``{"$float": "nan" | "inf" | "-inf"}`` and ``{"$tensor": index}``. A tensor
object that appears twice is stored once and loads as one object twice; distinct tensors that are
views of one buffer load as independent copies.

safetensors files are written and read by this module's own code (no dependency on the
``safetensors`` package): an 8-byte little-endian header length, a JSON header (``dtype``,
``shape``, ``data_offsets`` per tensor and optional ``"__metadata__"`` of strings), then the packed
bytes.

Every save to a path is atomic: the data go to a temporary file in the same directory, which is
flushed, fsync-ed and then renamed over the target with ``os.replace``. If anything fails half way,
the previous file is untouched and the temporary file is removed. A temporary file left behind by a
save that was killed (its process no longer runs) is removed by the next save to the same path.
"""

from __future__ import annotations

import _compat_pickle
import base64
import collections
import io
import json
import math
import os
import pickle
import pickletools
import re
import socket
import struct
import sys
import threading
import uuid
import zipfile
import zlib
from typing import IO, Any, Callable, Iterable, Mapping

import numpy as np

import pylucid
from pylucid.errors import LucidError

__all__ = [
    "save",
    "load",
    "save_safetensors",
    "load_safetensors",
    "load_safetensors_metadata",
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "safe_globals",
    "get_unsafe_globals_in_checkpoint",
    "CheckpointError",
    "WeightsOnlyUnpicklingError",
]

MAGIC = b"\x89PYLUCID"
END_MAGIC = b"LUCIDEND"
FORMAT_VERSION = 2  # the newest this module reads; plain-data files are still written as version 1
_PLAIN_VERSION = 1
_PICKLE_VERSION = 2
_ALIGN = 64
_PREAMBLE = struct.Struct("<8sII")  # magic, version, flags
_TRAILER = struct.Struct("<QQII8s")  # header offset, header length, header crc, reserved, end magic
_SAFETENSORS_MAX_HEADER = 100_000_000  # the limit the reference implementation enforces
DEFAULT_PROTOCOL = 2  # torch.save's default pickle protocol


class CheckpointError(LucidError, ValueError):
    """A checkpoint or safetensors file that cannot be read: truncated, corrupt or not ours.

    It is both a ``pylucid.errors.LucidError`` and a ``ValueError``; the
    message names the file.
    """


class WeightsOnlyUnpicklingError(pickle.UnpicklingError, LucidError):
    """``load(..., weights_only=True)`` met a global it does not allow (it never imports or calls one).

    A ``pickle.UnpicklingError``, as PyTorch raises, and a ``pylucid.errors.LucidError``. The message
    names the global and the two ways on: allow it with :func:`add_safe_globals`, or, for a file you
    trust, ``weights_only=False``.
    """


# ------------------------------------------------------------------- dtypes


def _ml_bfloat16() -> np.dtype:
    import ml_dtypes  # NumPy has no bfloat16; ml_dtypes is what pylucid uses for it

    return np.dtype(ml_dtypes.bfloat16)


# pylucid dtype name -> (safetensors code, NumPy dtype factory). The names are
# the only dtypes a file may name: nothing in a header can reach np.dtype(...)
# directly, so a file cannot ask for object arrays.
_DTYPES: dict[str, tuple[str | None, Callable[[], np.dtype]]] = {
    "float64": ("F64", lambda: np.dtype("<f8")),
    "float32": ("F32", lambda: np.dtype("<f4")),
    "float16": ("F16", lambda: np.dtype("<f2")),
    "bfloat16": ("BF16", _ml_bfloat16),
    "int64": ("I64", lambda: np.dtype("<i8")),
    "int32": ("I32", lambda: np.dtype("<i4")),
    "int16": ("I16", lambda: np.dtype("<i2")),
    "int8": ("I8", lambda: np.dtype("i1")),
    "uint8": ("U8", lambda: np.dtype("u1")),
    "bool": ("BOOL", lambda: np.dtype("?")),
    "uint16": ("U16", lambda: np.dtype("<u2")),
    "uint32": ("U32", lambda: np.dtype("<u4")),
    "uint64": ("U64", lambda: np.dtype("<u8")),
    "complex64": (None, lambda: np.dtype("<c8")),
    "complex128": (None, lambda: np.dtype("<c16")),
}
_SAFETENSORS_TO_NAME = {code: name for name, (code, _) in _DTYPES.items() if code is not None}


def _numpy_dtype(name: str) -> np.dtype:
    return _DTYPES[name][1]()


def _tensor_to_numpy(tensor: Any, where: str) -> tuple[np.ndarray, str]:
    """A C-contiguous little-endian host copy (or view) of ``tensor`` and its dtype name."""
    name = tensor.dtype.name
    if name not in _DTYPES:
        raise TypeError(f"{where}: cannot save a tensor of dtype {name}; supported: {', '.join(_DTYPES)}")
    detached = tensor.detach()
    if str(detached.device) != "cpu":
        detached = detached.to("cpu")
    array = np.ascontiguousarray(detached.numpy())
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return array, name


def _as_bytes(array: np.ndarray) -> np.ndarray:
    # A flat uint8 view: works for every dtype (ml_dtypes' bfloat16 included)
    # and is accepted by file.write and zlib.crc32 without another copy.
    return array.reshape(-1).view(np.uint8)


def _write_blob(f: IO[bytes], data: np.ndarray) -> None:
    """Write raw tensor bytes (one function, so tests can make writing fail)."""
    f.write(memoryview(data))


# ------------------------------------------------------------ atomic writes


def _fsync_directory(directory: str) -> None:
    # Makes the rename itself durable; not possible on every platform.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# Temporary files are ".<target name>.<pid>.<host tag>.<random>.tmp": the pid and host say whether
# the save that made one can still be running, so a later save can tell a stale file from a live one.
_HOST_TAG = f"{zlib.crc32(socket.gethostname().encode()):08x}"
_IN_FLIGHT: set[str] = set()  # this process's temporary files being written now (other threads' saves)
_IN_FLIGHT_LOCK = threading.Lock()


def _process_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process on Windows: assume it lives
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


def _remove_stale_temporaries(directory: str, target_name: str) -> None:
    """Delete temporary files of earlier saves to ``target_name`` whose process is gone."""
    pattern = re.compile(r"\." + re.escape(target_name) + r"\.(\d+)\.([0-9a-f]{8})\.[0-9a-f]{12}\.tmp")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        pid, host = int(match.group(1)), match.group(2)
        path = os.path.join(directory, name)
        if host != _HOST_TAG:
            continue  # another machine's save (a shared file system): its liveness is unknown here
        if pid == os.getpid():
            with _IN_FLIGHT_LOCK:
                if path in _IN_FLIGHT:
                    continue
        elif _process_alive(pid):
            continue
        try:
            os.unlink(path)
        except OSError:
            pass


def _atomic_write(path: Any, write: Callable[[IO[bytes]], None], where: str) -> None:
    """Run ``write(f)`` on a temp file beside ``path``, then rename it over ``path``."""
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{where}: cannot write {target!r}: directory {directory!r} does not exist")
    base = os.path.basename(target)
    _remove_stale_temporaries(directory, base)
    temp = os.path.join(directory, f".{base}.{os.getpid()}.{_HOST_TAG}.{uuid.uuid4().hex[:12]}.tmp")
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.add(temp)
    try:
        # O_EXCL with mode 0o666 lets the umask apply, as for a plain open().
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, target)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
    finally:
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.discard(temp)
    _fsync_directory(directory)


def _save_to(path_or_file: Any, write: Callable[[IO[bytes]], None], where: str) -> None:
    if hasattr(path_or_file, "write"):
        write(path_or_file)  # a file object: the caller owns atomicity
        return
    if not isinstance(path_or_file, (str, os.PathLike)):
        raise TypeError(
            f"{where}: path must be a str, an os.PathLike or a binary file object, got {type(path_or_file).__name__}"
        )
    _atomic_write(path_or_file, write, where)


# ------------------------------------------------------------------ safe globals

_user_safe_globals: list[Any] = []
_safe_globals_lock = threading.Lock()


def _global_name(entry: Any) -> tuple[str, Any]:
    """``"module.qualname"`` and the object of an :func:`add_safe_globals` entry."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError(f"add_safe_globals: a tuple entry must be (object, 'module.name'), got {entry!r}")
        return entry[1], entry[0]
    module, qualname = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if not module or not qualname:
        raise TypeError(f"add_safe_globals: {entry!r} has no __module__/__qualname__; pass (object, 'module.name')")
    return f"{module}.{qualname}", entry


def add_safe_globals(safe_globals: Iterable[Any]) -> None:
    """Allow these classes/functions in ``load(..., weights_only=True)`` (process-wide), as PyTorch.

    Each entry is the object itself, or ``(object, "module.name")`` when the file names it
    differently (e.g. a class that moved). Allow only what you trust: the unpickler may call it.
    """
    entries = list(safe_globals)
    for entry in entries:
        _global_name(entry)  # validate before changing anything
    with _safe_globals_lock:
        _user_safe_globals.extend(entries)


def get_safe_globals() -> list[Any]:
    """The entries :func:`add_safe_globals` added (in order)."""
    with _safe_globals_lock:
        return list(_user_safe_globals)


def clear_safe_globals() -> None:
    """Forget every entry :func:`add_safe_globals` added."""
    with _safe_globals_lock:
        _user_safe_globals.clear()


class safe_globals:  # noqa: N801 - mirrors torch.serialization.safe_globals
    """Context manager: the given globals are allowed for ``weights_only`` loads inside the block.

    >>> import collections, io, pylucid
    >>> buf = io.BytesIO()
    >>> pylucid.save({"counts": collections.defaultdict(int, a=1)}, buf)
    >>> with safe_globals([collections.defaultdict, int]):  # the defaultdict and its factory, int
    ...     _ = buf.seek(0)
    ...     dict(pylucid.load(buf)["counts"])
    {'a': 1}
    """

    def __init__(self, safe_globals: Iterable[Any]) -> None:
        self.safe_globals = list(safe_globals)

    def __enter__(self) -> "safe_globals":
        self._before = get_safe_globals()
        add_safe_globals(self.safe_globals)
        return self

    def __exit__(self, *exc) -> None:
        with _safe_globals_lock:
            _user_safe_globals[:] = self._before


def _user_allowed() -> dict[str, Any]:
    with _safe_globals_lock:
        return dict(_global_name(entry) for entry in _user_safe_globals)


# ------------------------------------------------------- checkpoint encoding


class _NeedsPickle(Exception):
    """The object is not plain data: it is saved through pickle instead."""


class _Encoder:
    """Turns the object tree into JSON-ready data plus a list of tensors."""

    def __init__(self) -> None:
        self.tensors: list[Any] = []
        self._tensor_index: dict[int, int] = {}
        self._active: set[int] = set()

    def add_tensor(self, tensor: Any) -> int:
        key = id(tensor)
        if key not in self._tensor_index:
            self._tensor_index[key] = len(self.tensors)
            self.tensors.append(tensor)
        return self._tensor_index[key]

    def encode(self, obj: Any) -> Any:
        if obj is None or type(obj) in (bool, int, str):
            return obj
        if type(obj) is float:
            if math.isfinite(obj):
                return obj
            return {"$float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
        if type(obj) is bytes:
            return {"$bytes": base64.b64encode(obj).decode("ascii")}
        if isinstance(obj, pylucid.Tensor):
            return {"$tensor": self.add_tensor(obj)}
        if type(obj) in (list, tuple, dict, collections.OrderedDict):
            if id(obj) in self._active:
                raise _NeedsPickle  # a container that contains itself: pickle keeps the cycle
            self._active.add(id(obj))
            try:
                if type(obj) is list:
                    return [self.encode(v) for v in obj]
                if type(obj) is tuple:
                    return {"$tuple": [self.encode(v) for v in obj]}
                if getattr(obj, "__dict__", None):
                    raise _NeedsPickle  # an OrderedDict with attributes (PyTorch's state_dict._metadata)
                tag = "$dict" if type(obj) is dict else "$odict"
                items = []
                for k, v in obj.items():
                    if isinstance(k, pylucid.Tensor):
                        raise _NeedsPickle
                    items.append([self.encode(k), self.encode(v)])
                return {tag: items}
            finally:
                self._active.discard(id(obj))
        raise _NeedsPickle


def _pickle_payload(obj: Any, encoder: _Encoder, pickle_module: Any, protocol: int) -> bytes:
    """Pickle ``obj`` with its tensors replaced by references into the checkpoint's tensor table."""

    class _Pickler(pickle_module.Pickler):
        def persistent_id(self, value):
            if isinstance(value, pylucid.Tensor):
                return ("tensor", encoder.add_tensor(value))
            return None

    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=protocol).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise TypeError(
            f"pylucid.save: cannot save an object of type {type(obj).__module__}.{type(obj).__qualname__}: it is "
            f"not plain data and it cannot be pickled ({exc})"
        ) from exc
    return buffer.getvalue()


def _pad(f: IO[bytes], position: int) -> int:
    padding = -position % _ALIGN
    if padding:
        f.write(b"\x00" * padding)
    return position + padding


def _write_checkpoint(f: IO[bytes], encoder: _Encoder, root: Any, payload: bytes | None) -> None:
    version = _PLAIN_VERSION if payload is None else _PICKLE_VERSION
    f.write(_PREAMBLE.pack(MAGIC, version, 0))
    position = _pad(f, _PREAMBLE.size)
    entries = []
    for index, tensor in enumerate(encoder.tensors):
        array, dtype_name = _tensor_to_numpy(tensor, f"pylucid.save (tensor {index})")
        data = _as_bytes(array)
        _write_blob(f, data)
        entries.append(
            {
                "dtype": dtype_name,
                "shape": [int(d) for d in tensor.shape],
                "offset": position,
                "nbytes": int(data.size),
                "crc32": zlib.crc32(data),
                "requires_grad": bool(getattr(tensor, "requires_grad", False)),
                "device": str(tensor.device),
                "kind": "parameter" if type(tensor).__name__ == "Parameter" else "tensor",
            }
        )
        position = _pad(f, position + int(data.size))
    header_fields: dict[str, Any] = {"format": "pylucid-checkpoint", "version": version, "tensors": entries,
                                     "root": root}
    if payload is not None:
        f.write(payload)
        header_fields["pickle"] = {"offset": position, "nbytes": len(payload), "crc32": zlib.crc32(payload)}
        position += len(payload)
    header = json.dumps(header_fields, allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    f.write(header)
    f.write(_TRAILER.pack(position, len(header), zlib.crc32(header), 0, END_MAGIC))


def save(obj: Any, f: Any, pickle_module: Any = pickle, pickle_protocol: int = DEFAULT_PROTOCOL) -> None:
    """Save ``obj`` to a checkpoint file, as ``torch.save``.

    Plain data — ``dict``, ``OrderedDict``, ``list``, ``tuple``, ``str``, ``bytes``, ``int``,
    ``float`` (NaN/inf too), ``bool``, ``None`` and ``pylucid.Tensor``, nested freely (a
    ``state_dict``, an optimizer's state) — is stored without pickle and loads with the default
    ``weights_only=True``. Any other picklable object (a whole ``nn.Module``, a NumPy value, a
    ``set``, an object of your own) is pickled; loading it needs ``weights_only=False`` (or its
    globals allowed with :func:`add_safe_globals`). Tensors are always stored as raw bytes with their
    dtype, shape, device and ``requires_grad``; accelerator tensors are copied to the host while
    written; ``.grad`` is not saved.

    Args:
        obj: what to save.
        f: a path (written atomically) or a writable binary file object.
        pickle_module: the module whose ``Pickler`` pickles non-plain objects.
        pickle_protocol: the pickle protocol (2, as PyTorch's default).

    Raises:
        TypeError: an object that is neither plain data nor picklable (a lambda, a local class);
            nothing is written.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pyl")
        >>> save({"w": pylucid.tensor([1.0, 2.0]), "step": 10}, path)
        >>> out = load(path)
        >>> out["w"].tolist(), out["step"]
        ([1.0, 2.0], 10)
    """
    # Encode (or pickle) first, before any file exists, so an error leaves no trace at all.
    encoder = _Encoder()
    payload = None
    try:
        root = encoder.encode(obj)
    except _NeedsPickle:
        encoder = _Encoder()
        root = None
        payload = _pickle_payload(obj, encoder, pickle_module, pickle_protocol)
    _save_to(f, lambda handle: _write_checkpoint(handle, encoder, root, payload), "pylucid.save")


# ------------------------------------------------------- checkpoint decoding


def _describe(source: Any) -> str:
    if hasattr(source, "read"):
        return repr(getattr(source, "name", "<file object>"))
    return repr(os.fspath(source))


def _sniff(head: bytes) -> str:
    if head.startswith(b"PK\x03\x04"):
        return " (it looks like a zip archive)"
    if len(head) >= 9 and head[8:9] == b"{":
        return " (it looks like a safetensors file: use pylucid.load_safetensors)"
    return ""


def _read_exact(f: IO[bytes], offset: int, size: int, what: str, where: str) -> bytearray:
    f.seek(offset)
    buf = bytearray(size)
    got = f.readinto(buf) if size else 0
    if got != size:
        raise CheckpointError(f"{where}: file {what} is truncated (wanted {size} bytes at {offset}, got {got})")
    return buf


class _Decoder:
    def __init__(self, f: IO[bytes], entries: list, where: str, place: Callable[[Any, str], Any]) -> None:
        self.f = f
        self.entries = entries
        self.where = where
        self.place = place
        self.loaded: dict[int, Any] = {}

    def bad(self, msg: str) -> CheckpointError:
        return CheckpointError(f"pylucid.load: {self.where} is corrupt: {msg}")

    def tensor(self, index: Any) -> Any:
        if type(index) is not int or not 0 <= index < len(self.entries):
            raise self.bad(f"tensor reference {index!r} out of range")
        if index not in self.loaded:
            e = self.entries[index]
            buf = _read_exact(
                self.f, e["offset"], e["nbytes"], f"data of tensor {index}", f"pylucid.load: {self.where}"
            )
            if zlib.crc32(buf) != e["crc32"]:
                raise self.bad(f"checksum mismatch in tensor {index}")
            dtype = _numpy_dtype(e["dtype"])
            array = np.frombuffer(buf, dtype=dtype, count=e["nbytes"] // dtype.itemsize).reshape(e["shape"])
            if dtype.kind == "b":  # only 0/1 bytes are valid booleans
                array = array.view(np.uint8) != 0
            tensor = self.place(pylucid.from_numpy(array), e["device"])
            if e["requires_grad"]:
                tensor = _set_requires_grad(tensor)
            if e.get("kind") == "parameter":
                tensor = _as_parameter(tensor, e["requires_grad"])
            self.loaded[index] = tensor
        return self.loaded[index]

    def persistent_load(self, pid: Any) -> Any:
        if type(pid) is not tuple or len(pid) != 2 or pid[0] != "tensor":
            raise self.bad(f"unknown persistent reference {str(pid)[:80]}")
        return self.tensor(pid[1])

    def decode(self, node: Any) -> Any:
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is list:
            return [self.decode(v) for v in node]
        if type(node) is not dict or len(node) != 1:
            raise self.bad(f"unexpected JSON node {str(node)[:80]}")
        ((tag, value),) = node.items()
        if tag == "$tensor":
            return self.tensor(value)
        if tag == "$tuple" and type(value) is list:
            return tuple(self.decode(v) for v in value)
        if tag in ("$dict", "$odict") and type(value) is list:
            out: dict = {} if tag == "$dict" else collections.OrderedDict()
            for item in value:
                if type(item) is not list or len(item) != 2:
                    raise self.bad("malformed dict item")
                key = self.decode(item[0])
                try:
                    out[key] = self.decode(item[1])
                except TypeError:
                    raise self.bad(f"unhashable dict key {key!r}") from None
            return out
        if tag == "$bytes" and type(value) is str:
            try:
                return base64.b64decode(value.encode("ascii"), validate=True)
            except ValueError:
                raise self.bad("bad base64 in bytes value") from None
        if tag == "$float" and value in ("nan", "inf", "-inf"):
            return float(value)
        raise self.bad(f"unknown tag {tag!r}")


def _set_requires_grad(tensor: Any) -> Any:
    setter = getattr(tensor, "requires_grad_", None)
    if callable(setter):
        setter(True)
    else:
        tensor.requires_grad = True
    return tensor


def _as_parameter(tensor: Any, requires_grad: bool) -> Any:
    try:
        from pylucid.nn import Parameter  # type: ignore[attr-defined]
    except ImportError:  # nn not available: a plain tensor is the next best thing
        return tensor
    return Parameter(tensor, requires_grad=requires_grad)


def _validate_entries(entries: Any, data_end: int, bad: Callable[[str], CheckpointError]) -> list:
    if type(entries) is not list:
        raise bad("tensor table is not a list")
    for i, e in enumerate(entries):
        if type(e) is not dict:
            raise bad(f"tensor {i} entry is not an object")
        if e.get("dtype") not in _DTYPES:
            raise bad(f"tensor {i} has unsupported dtype {e.get('dtype')!r}")
        shape = e.get("shape")
        if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
            raise bad(f"tensor {i} has bad shape {shape!r}")
        offset, nbytes = e.get("offset"), e.get("nbytes")
        if type(offset) is not int or type(nbytes) is not int or offset < _ALIGN or offset + nbytes > data_end:
            raise bad(f"tensor {i} has bad offset/size ({offset!r}, {nbytes!r})")
        if nbytes != math.prod(shape) * _numpy_dtype(e["dtype"]).itemsize:
            raise bad(f"tensor {i}: {nbytes} bytes do not match shape {shape} of {e['dtype']}")
        if (
            type(e.get("crc32")) is not int
            or type(e.get("requires_grad")) is not bool
            or type(e.get("device")) is not str
        ):
            raise bad(f"tensor {i} has a malformed entry")
    return entries


def _placer(map_location: Any, where: str) -> Callable[[Any, str], Any]:
    """How to put a freshly read CPU tensor on its device, per ``map_location``."""

    def move(tensor: Any, target: Any, saved: str) -> Any:
        if str(target) == "cpu":
            return tensor
        try:
            return tensor.to(target)
        except Exception as exc:
            raise CheckpointError(
                f"pylucid.load: {where}: cannot put a tensor saved on {saved!r} on {str(target)!r} ({exc}); "
                "pass map_location='cpu' (or another available device)"
            ) from exc

    if map_location is None:
        return lambda t, saved: move(t, saved, saved)
    if isinstance(map_location, str) or isinstance(map_location, getattr(pylucid, "device", ())):
        return lambda t, saved: move(t, map_location, saved)
    if isinstance(map_location, Mapping):
        return lambda t, saved: move(t, map_location.get(saved, saved), saved)
    if callable(map_location):
        return lambda t, saved: map_location(t, saved)
    raise TypeError(
        "pylucid.load: map_location must be None, a device string, a pylucid.device, a dict "
        "{saved device: new device} or a callable (tensor, saved_device) -> tensor; "
        f"got {type(map_location).__name__}"
    )


# ---------------------------------------------------------------- unpickling


class _Unsupported:
    """What a known global that pylucid cannot rebuild resolves to: the reason, raised when it is met."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _py3_name(module: str, name: str) -> tuple[str, str]:
    # Protocol-2 pickles name Python 2 modules (``__builtin__.set``); the stock unpickler maps them
    # inside its own find_class, which a restricted one replaces, so the mapping is repeated here.
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def _plain_globals() -> dict[str, Any]:
    """Globals every ``weights_only`` load allows: harmless builtins and pylucid's dtypes and devices."""
    import _codecs

    from pylucid import dtypes as _dtypes
    from pylucid.device import device as _device

    return {
        "builtins.set": set,
        "builtins.bytearray": bytearray,
        "builtins.complex": complex,
        "collections.OrderedDict": collections.OrderedDict,
        "collections.Counter": collections.Counter,
        "_codecs.encode": _codecs.encode,  # how protocol 2 pickles bytes
        "pylucid.dtypes._by_name": _dtypes._by_name,
        "pylucid.device.device": _device,
    }


class _Unpickling:
    """One load's unpickling rules: restricted (``weights_only``) or full, and the special globals."""

    def __init__(self, where: str, weights_only: bool, pickle_module: Any, load_args: dict,
                 special: dict[str, Any]) -> None:
        self.where = where
        self.weights_only = weights_only
        self.pickle_module = pickle_module
        self.load_args = load_args
        self.special = special
        self.allowed = {**_plain_globals(), **special}
        self.user = _user_allowed() if weights_only else {}

    def resolve(self, module: str, name: str, fallback: Callable[[str, str], Any]) -> Any:
        module, name = _py3_name(module, name)
        full = f"{module}.{name}"
        obj = self.allowed.get(full)
        if obj is None and full in self.user:
            return self.user[full]
        if isinstance(obj, _Unsupported):
            raise CheckpointError(f"pylucid.load: {self.where} holds {obj.reason} ({full}), which pylucid cannot "
                                  "rebuild")
        if obj is not None:
            return obj
        if module == "torch" or module.startswith("torch."):
            raise CheckpointError(
                f"pylucid.load: {self.where} pickles the PyTorch object {full}; pylucid reads tensors, parameters "
                "and plain containers from PyTorch files (save model.state_dict() with torch.save and load that "
                "into the pylucid model)"
            )
        if self.weights_only:
            raise WeightsOnlyUnpicklingError(
                f"pylucid.load: Weights only load of {self.where} failed: it pickles the global {full}, which is "
                f"not allowed by default. If you trust the file's source, either allow it with "
                f"pylucid.serialization.add_safe_globals([{name}]) (or the pylucid.serialization.safe_globals"
                f"([{name}]) context manager), or load with weights_only=False, which can run arbitrary code "
                "from the file."
            )
        return fallback(module, name)

    def load(self, data: bytes, persistent_load: Callable[[Any], Any]) -> Any:
        rules = self
        base = pickle.Unpickler if self.weights_only else self.pickle_module.Unpickler

        class _Unpickler(base):
            def find_class(self, module, name):
                return rules.resolve(module, name, lambda m, n: base.find_class(self, m, n))

            def persistent_load(self, pid):
                return persistent_load(pid)

        unpickler = _Unpickler(io.BytesIO(data), **self.load_args)
        if not self.weights_only:
            return unpickler.load()
        try:
            return unpickler.load()
        except (LucidError, pickle.UnpicklingError):
            raise
        except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, struct.error) as exc:
            raise CheckpointError(f"pylucid.load: {self.where}: the pickled data is malformed ({exc})") from exc


# ------------------------------------------------------------ PyTorch zip files

# torch storage class names (as torch.save pickles them) -> pylucid dtype names
_TORCH_STORAGES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}
_TORCH_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
                 "complex64", "complex128")


class _TorchStorageType:
    __slots__ = ("dtype_name", "torch_name")

    def __init__(self, dtype_name: str, torch_name: str) -> None:
        self.dtype_name = dtype_name
        self.torch_name = torch_name


class _TorchStorage:
    """A storage read from a PyTorch zip: a flat host array and the device it was saved from."""

    __slots__ = ("array", "location")

    def __init__(self, array: np.ndarray, location: str) -> None:
        self.array = array
        self.location = location


_TORCH_TENSOR = object()  # what torch.Tensor resolves to (the type argument of _rebuild_from_type_v2)
_TORCH_PARAMETER = object()  # and torch.nn.Parameter


def _torch_globals(where: str, place: Callable[[Any, str], Any]) -> dict[str, Any]:
    """The PyTorch globals a ``torch.save`` zip uses for tensors, mapped to pylucid rebuilders."""

    def bad(msg: str) -> CheckpointError:
        return CheckpointError(f"pylucid.load: {where} is not a valid PyTorch checkpoint: {msg}")

    def rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
        if not isinstance(storage, _TorchStorage):
            raise bad(f"a tensor is built from {type(storage).__name__}, not a storage")
        size, stride = tuple(size), tuple(stride)
        if not all(type(v) is int and v >= 0 for v in (storage_offset, *size, *stride)) or len(size) != len(stride):
            raise bad(f"bad tensor geometry (offset {storage_offset!r}, size {size!r}, stride {stride!r})")
        array = storage.array
        if math.prod(size):
            last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= array.size:
                raise bad(f"a tensor of size {size} and stride {stride} at offset {storage_offset} overruns its "
                          f"storage of {array.size} elements")
            view = np.lib.stride_tricks.as_strided(array[storage_offset:], shape=size,
                                                   strides=[s * array.itemsize for s in stride], writeable=False)
        else:
            view = np.zeros(size, dtype=array.dtype)
        data = np.array(view, order="C", copy=True)
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("="))
        tensor = place(pylucid.from_numpy(data), storage.location)
        if requires_grad:
            tensor = _set_requires_grad(tensor)
        return tensor

    def rebuild_tensor_v1(storage, storage_offset, size, stride):
        return rebuild_tensor(storage, storage_offset, size, stride)

    def rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                          metadata=None):
        return rebuild_tensor(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata)

    def set_state(obj, state):
        if state:
            for key, value in dict(state).items():
                setattr(obj, key, value)
        return obj

    def rebuild_parameter(data, requires_grad, backward_hooks, state=None):
        if not isinstance(data, pylucid.Tensor):
            raise bad(f"a parameter is built from {type(data).__name__}, not a tensor")
        return set_state(_as_parameter(data.detach(), bool(requires_grad)), state)

    def rebuild_from_type_v2(func, new_type, args, state):
        tensor = func(*args)
        if new_type is _TORCH_PARAMETER:
            tensor = _as_parameter(tensor.detach(), tensor.requires_grad)
        elif new_type is not _TORCH_TENSOR:
            raise bad(f"a tensor of type {new_type!r} (a torch.Tensor subclass)")
        return set_state(tensor, state)

    def device(kind, index=None):
        return pylucid.device(kind, index)

    table: dict[str, Any] = {
        "torch._utils._rebuild_tensor": rebuild_tensor_v1,
        "torch._utils._rebuild_tensor_v2": rebuild_tensor,
        "torch._utils._rebuild_tensor_v3": rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": rebuild_parameter,
        "torch._tensor._rebuild_from_type_v2": rebuild_from_type_v2,
        "torch.Tensor": _TORCH_TENSOR,
        "torch.nn.parameter.Parameter": _TORCH_PARAMETER,
        "torch.Size": tuple,
        "torch.device": device,
        "torch.storage.UntypedStorage": _TorchStorageType("uint8", "UntypedStorage"),
    }
    for storage_name, dtype_name in _TORCH_STORAGES.items():
        for prefix in ("torch.", "torch.cuda."):
            table[prefix + storage_name] = _TorchStorageType(dtype_name, storage_name)
    for name in _TORCH_DTYPES:
        table["torch." + name] = pylucid.dtypes._by_name(name)
    for name in ("_rebuild_qtensor", "_rebuild_sparse_tensor", "_rebuild_nested_tensor",
                 "_rebuild_meta_tensor_no_storage", "_rebuild_wrapper_subclass", "_rebuild_device_tensor_from_numpy",
                 "_rebuild_device_tensor_from_cpu_tensor"):
        kind = name.removeprefix("_rebuild_").replace("_", " ")
        table["torch._utils." + name] = _Unsupported(f"a PyTorch {kind} (quantized, sparse, nested, meta, "
                                                     "subclass or non-CUDA-device tensors have no pylucid form)")
    for name in ("QInt32Storage", "QInt8Storage", "QUInt2x4Storage", "QUInt4x2Storage", "QUInt8Storage"):
        table["torch." + name] = _Unsupported("a PyTorch quantized storage")
    table["torch.serialization._get_layout"] = _Unsupported("a PyTorch sparse layout")
    return table


def _load_torch_zip(handle: IO[bytes], where: str, place: Callable[[Any, str], Any], weights_only: bool,
                    pickle_module: Any, load_args: dict) -> Any:
    def bad(msg: str) -> CheckpointError:
        return CheckpointError(f"pylucid.load: {where} is not a valid PyTorch checkpoint: {msg}")

    try:
        archive = zipfile.ZipFile(handle)
        names = archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise bad(f"the zip archive is damaged ({exc})") from None
    if any(n.endswith("/constants.pkl") and n.count("/") == 1 for n in names):
        raise CheckpointError(f"pylucid.load: {where} is a TorchScript archive (torch.jit.save); pylucid reads "
                              "checkpoints written by torch.save")
    pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise bad("it is a zip archive without a data.pkl record (not written by torch.save)")
    prefix = pickles[0][: -len("data.pkl")]
    big_endian = False
    if prefix + "byteorder" in names:
        order = archive.read(prefix + "byteorder").decode("ascii", "replace").strip()
        if order not in ("little", "big"):
            raise bad(f"unknown byte order {order!r}")
        big_endian = order == "big"
    storages: dict[str, _TorchStorage] = {}

    def persistent_load(pid: Any) -> Any:
        if type(pid) is not tuple or len(pid) != 5 or pid[0] != "storage":
            raise bad(f"unknown persistent reference {str(pid)[:80]}")
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, _TorchStorageType) or type(key) is not str or type(location) is not str:
            raise bad(f"malformed storage reference {str(pid)[:80]}")
        if key not in storages:
            record = prefix + "data/" + key
            try:
                raw = archive.read(record)
            except KeyError:
                raise bad(f"the storage record {record!r} is missing") from None
            dtype = _numpy_dtype(storage_type.dtype_name)
            if big_endian:
                dtype = dtype.newbyteorder(">")
            if len(raw) % dtype.itemsize or (type(numel) is int and numel * dtype.itemsize > len(raw)):
                raise bad(f"the storage record {record!r} has {len(raw)} bytes, not {numel} elements of "
                          f"{storage_type.torch_name}")
            array = np.frombuffer(raw, dtype=dtype)
            if dtype.kind == "b":
                array = array.view(np.uint8) != 0
            storages[key] = _TorchStorage(array, location)
        return storages[key]

    rules = _Unpickling(where, weights_only, pickle_module, load_args, _torch_globals(where, place))
    return rules.load(archive.read(pickles[0]), persistent_load)


# -------------------------------------------------------------------- load


def load(f: Any, map_location: Any = None, pickle_module: Any = None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args: Any) -> Any:
    """Load an object saved by ``pylucid.save`` or by ``torch.save`` (zip format), as ``torch.load``.

    With ``weights_only=True`` (the default, as in PyTorch >= 2.6) nothing from the file is
    executed: plain-data checkpoints hold no pickle at all, and pickles (pylucid's and PyTorch's) go
    through a restricted unpickler that only rebuilds tensors, parameters, plain containers, ``set``,
    ``bytearray``, ``complex``, ``OrderedDict``, ``Counter``, dtypes, devices and the globals allowed
    with :func:`add_safe_globals`.

    .. warning::
        ``weights_only=False`` uses Python's full unpickler, which can run **arbitrary code** from the
        file while loading it. Pass it only for files you trust — it is needed to load a whole module
        saved with ``pylucid.save(model)``, or any other pickled object of your own classes.

    Args:
        f: a path or a readable binary file object.
        map_location: where tensors go: ``None`` (the device they were saved from), a device
            (``"cpu"``, ``"cuda:0"``, a ``pylucid.device``), a dict ``{"cuda:0": "cpu"}`` remapping
            saved devices, or a callable ``fn(cpu_tensor, saved_device: str) -> tensor``.
        pickle_module: the module whose ``Unpickler`` reads pickles under ``weights_only=False``.
            Giving one makes the default ``weights_only`` ``False``, as in PyTorch.
        weights_only: see above; ``None`` means ``True`` unless ``pickle_module`` is given.
        mmap: ``True`` is refused: pylucid reads tensors into memory.
        pickle_load_args: passed to the unpickler (``encoding``, default ``"utf-8"``).

    Raises:
        WeightsOnlyUnpicklingError: under ``weights_only=True``, a pickled global that is not
            allowed (a ``pickle.UnpicklingError``); the message names it.
        CheckpointError: the file is truncated, corrupt (checksums), of a newer format version, not a
            checkpoint, or holds PyTorch objects pylucid cannot rebuild; also when a saved device is
            unavailable. The message names the file.
        RuntimeError: ``weights_only=True`` together with a ``pickle_module``.
        FileNotFoundError: no such file.

    Example:
        >>> import io
        >>> buf = io.BytesIO()
        >>> save([1, (2.5, None), {3: "x"}], buf)
        >>> _ = buf.seek(0)
        >>> load(buf)
        [1, (2.5, None), {3: 'x'}]
    """
    if weights_only is None:
        weights_only = pickle_module is None
    elif weights_only and pickle_module is not None:
        raise RuntimeError("pylucid.load: cannot safely load weights when an explicit pickle_module is given; "
                           "drop pickle_module, or pass weights_only=False for a file you trust")
    if mmap:
        raise NotImplementedError("pylucid.load: mmap=True is not supported; tensors are read into memory "
                                  "(pass mmap=None or False)")
    pickle_module = pickle if pickle_module is None else pickle_module
    pickle_load_args.setdefault("encoding", "utf-8")
    where = _describe(f)
    place = _placer(map_location, where)
    if hasattr(f, "read"):
        handle: IO[bytes] = io.BytesIO(f.read())
        return _load_any(handle, where, place, bool(weights_only), pickle_module, pickle_load_args)
    with open(os.fspath(f), "rb") as handle:
        return _load_any(handle, where, place, bool(weights_only), pickle_module, pickle_load_args)


def _load_any(handle: IO[bytes], where: str, place: Callable[[Any, str], Any], weights_only: bool,
              pickle_module: Any, load_args: dict) -> Any:
    head = handle.read(16)
    handle.seek(0)
    if head.startswith(b"PK\x03\x04"):
        return _load_torch_zip(handle, where, place, weights_only, pickle_module, load_args)
    if head.startswith(b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"):
        raise CheckpointError(f"pylucid.load: {where} is in PyTorch's legacy (pre-1.6) format, which pylucid does "
                              "not read; re-save it with a current torch.save")
    rules = _Unpickling(where, weights_only, pickle_module, load_args, {})
    return _load_from(handle, where, place, rules)


def _open_checkpoint(f: IO[bytes], where: str, place: Callable[[Any, str], Any]) -> tuple[dict, _Decoder]:
    """Check a pylucid checkpoint's framing and header; the header and a decoder for its tensors."""
    def bad(msg: str) -> CheckpointError:
        return CheckpointError(f"pylucid.load: {where} is corrupt: {msg}")

    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    head = f.read(_PREAMBLE.size)
    if len(head) < _PREAMBLE.size or head[:8] != MAGIC:
        raise CheckpointError(f"pylucid.load: {where} is not a pylucid checkpoint (bad magic){_sniff(head)}")
    _, version, _ = _PREAMBLE.unpack(head)
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"pylucid.load: {where} has format version {version}; this pylucid reads up to "
            f"{FORMAT_VERSION}: upgrade pylucid"
        )
    if size < _ALIGN + _TRAILER.size:
        raise CheckpointError(f"pylucid.load: {where} is truncated ({size} bytes)")
    header_offset, header_len, header_crc, _, end_magic = _TRAILER.unpack(
        bytes(_read_exact(f, size - _TRAILER.size, _TRAILER.size, "trailer", f"pylucid.load: {where}"))
    )
    if end_magic != END_MAGIC:
        raise CheckpointError(f"pylucid.load: {where} is truncated or incomplete (no end marker)")
    if header_offset < _ALIGN or header_offset + header_len + _TRAILER.size != size:
        raise bad("header position does not match the file size")
    header_bytes = bytes(_read_exact(f, header_offset, header_len, "header", f"pylucid.load: {where}"))
    if zlib.crc32(header_bytes) != header_crc:
        raise bad("header checksum mismatch")
    try:
        header = json.loads(header_bytes.decode("utf-8"), parse_constant=lambda c: _raise(bad(f"constant {c}")))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"header is not valid JSON ({exc})") from None
    if type(header) is not dict or header.get("format") != "pylucid-checkpoint" or "root" not in header:
        raise bad("header lacks the pylucid-checkpoint fields")
    entries = _validate_entries(header.get("tensors"), header_offset, bad)
    pickled = header.get("pickle")
    if pickled is not None:
        if (type(pickled) is not dict or not all(type(pickled.get(k)) is int for k in ("offset", "nbytes", "crc32"))
                or pickled["offset"] < _ALIGN or pickled["offset"] + pickled["nbytes"] > header_offset):
            raise bad("malformed pickle entry")
    return header, _Decoder(f, entries, where, place)


def _pickle_bytes(f: IO[bytes], header: dict, where: str) -> bytes | None:
    pickled = header.get("pickle")
    if pickled is None:
        return None
    data = bytes(_read_exact(f, pickled["offset"], pickled["nbytes"], "pickle", f"pylucid.load: {where}"))
    if zlib.crc32(data) != pickled["crc32"]:
        raise CheckpointError(f"pylucid.load: {where} is corrupt: checksum mismatch in the pickle")
    return data


def _load_from(f: IO[bytes], where: str, place: Callable[[Any, str], Any], rules: _Unpickling) -> Any:
    header, decoder = _open_checkpoint(f, where, place)
    data = _pickle_bytes(f, header, where)
    if data is None:
        return decoder.decode(header["root"])
    return rules.load(data, decoder.persistent_load)


def _raise(exc: BaseException) -> Any:
    raise exc


# ------------------------------------------------------------ inspecting pickles

_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"}


def _pickled_globals(data: bytes) -> list[str]:
    """``module.name`` of every global a pickle refers to, in order of first use (never unpickles)."""
    found: dict[str, None] = {}
    stack: list[Any] = []  # the strings pushed lately (None for any other push), enough for STACK_GLOBAL
    memo: dict[int, Any] = {}
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            found[".".join(_py3_name(module, attr))] = None
            stack.append(None)
        elif name == "STACK_GLOBAL":
            if len(stack) >= 2 and isinstance(stack[-1], str) and isinstance(stack[-2], str):
                found[".".join(_py3_name(stack[-2], stack[-1]))] = None
            stack.append(None)
        elif name in _STRING_OPS:
            stack.append(arg)
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1] if stack else None
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(arg)] = stack[-1] if stack else None
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(int(arg)))
        else:
            stack.append(None)
        del stack[:-2]
    return list(found)


def get_unsafe_globals_in_checkpoint(f: Any) -> list[str]:
    """The globals of a checkpoint that ``load(f, weights_only=True)`` would refuse, without loading it.

    For a pylucid checkpoint or a PyTorch zip: the ``module.name`` of each pickled global that is
    neither allowed by default nor by :func:`add_safe_globals`. A plain-data pylucid checkpoint has
    none.
    """
    where = _describe(f)
    if hasattr(f, "read"):
        handle: IO[bytes] = io.BytesIO(f.read())
    else:
        with open(os.fspath(f), "rb") as raw:
            handle = io.BytesIO(raw.read())
    if handle.read(4) == b"PK\x03\x04":
        handle.seek(0)
        archive = zipfile.ZipFile(handle)
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise CheckpointError(f"get_unsafe_globals_in_checkpoint: {where} is not a torch.save zip")
        data: bytes | None = archive.read(pickles[0])
        known = {**_plain_globals(), **_torch_globals(where, lambda t, s: t)}
    else:
        header, _ = _open_checkpoint(handle, where, lambda t, s: t)
        data = _pickle_bytes(handle, header, where)
        known = _plain_globals()
    if data is None:
        return []
    allowed = set(known) | set(_user_allowed())
    return [name for name in _pickled_globals(data) if name not in allowed]


# ------------------------------------------------------------ foreign tensors


def as_pylucid_tensor(value: Any, what: str = "value") -> Any:
    """``value`` as a pylucid tensor: pylucid tensors as they are, PyTorch tensors copied over.

    A PyTorch CPU tensor is copied through NumPy (bfloat16 through its bit pattern, as NumPy has no
    bfloat16); a PyTorch CUDA tensor is shared through DLPack. This is what lets
    ``module.load_state_dict`` take a ``state_dict`` straight from a PyTorch model.

    Raises:
        TypeError: anything else, naming ``what`` and the value's type.

    >>> import pylucid
    >>> as_pylucid_tensor(pylucid.tensor([1.0])).tolist()
    [1.0]
    """
    if isinstance(value, pylucid.Tensor):
        return value
    cls = type(value)
    module = cls.__module__ or ""
    torch = sys.modules.get("torch")
    if module.split(".")[0] == "torch" and torch is not None and isinstance(value, torch.Tensor):
        t = value.detach()
        if t.device.type == "cuda":
            return pylucid.from_dlpack(t.contiguous())
        if t.device.type != "cpu":
            raise TypeError(f"{what}: a PyTorch tensor on {t.device} cannot be read; move it to the CPU first")
        t = t.resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            array = t.contiguous().view(torch.int16).numpy().view(_ml_bfloat16())
        else:
            array = t.numpy()
        return pylucid.from_numpy(np.array(array, copy=True))
    raise TypeError(
        f"{what}: expected a pylucid.Tensor (or a torch.Tensor), got {module}.{cls.__qualname__}"
    )


# ---------------------------------------------------------------- safetensors


def _write_safetensors(f: IO[bytes], items: list, metadata: dict | None) -> None:
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for key, tensor, dtype_name in items:
        nbytes = math.prod(tensor.shape) * _numpy_dtype(dtype_name).itemsize
        header[key] = {
            "dtype": _DTYPES[dtype_name][0],
            "shape": [int(d) for d in tensor.shape],
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    encoded = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    # Pad with spaces to 8 bytes so the data start is 8-aligned (as the reference writer does).
    encoded += b" " * (-len(encoded) % 8)
    f.write(struct.pack("<Q", len(encoded)))
    f.write(encoded)
    for key, tensor, _ in items:
        array, _ = _tensor_to_numpy(tensor, f"save_safetensors ({key!r})")
        _write_blob(f, _as_bytes(array))


def save_safetensors(tensors: Mapping[str, Any], path: Any, metadata: Mapping[str, str] | None = None) -> None:
    """Write a flat ``{name: tensor}`` dict in the safetensors format (atomically).

    Args:
        tensors: names (``str``) to ``pylucid.Tensor``; dtypes F64, F32, F16,
            BF16, I64, I32, I16, I8, U8, BOOL (and U16/U32/U64). Accelerator
            tensors are copied to the host.
        path: destination path (or a writable binary file object).
        metadata: optional ``{str: str}`` stored as ``"__metadata__"``.

    Raises:
        TypeError: a non-string key or metadata value, a value that is not a
            tensor, or an unsupported dtype.
        ValueError: the reserved key ``"__metadata__"`` used as a tensor name.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
        >>> save_safetensors({"w": pylucid.tensor([[1.0, 2.0]])}, path, metadata={"step": "3"})
        >>> load_safetensors(path)["w"].shape, load_safetensors_metadata(path)
        ((1, 2), {'step': '3'})
    """
    where = "save_safetensors"
    if not isinstance(tensors, Mapping):
        raise TypeError(f"{where}: tensors must be a dict of str -> pylucid.Tensor, got {type(tensors).__name__}")
    items = []
    for key, tensor in tensors.items():
        if type(key) is not str:
            raise TypeError(f"{where}: tensor names must be str, got {type(key).__name__} {key!r}")
        if key == "__metadata__":
            raise ValueError(f"{where}: '__metadata__' is reserved and cannot name a tensor")
        if not isinstance(tensor, pylucid.Tensor):
            raise TypeError(f"{where}: value for {key!r} must be a pylucid.Tensor, got {type(tensor).__name__}")
        dtype_name = tensor.dtype.name
        if _DTYPES.get(dtype_name, (None,))[0] is None:
            supported = ", ".join(n for n, (code, _) in _DTYPES.items() if code)
            raise TypeError(
                f"{where}: tensor {key!r} has dtype {dtype_name}, which safetensors cannot hold; supported: {supported}"
            )
        items.append((key, tensor, dtype_name))
    if metadata is not None:
        if not isinstance(metadata, Mapping) or not all(type(k) is str and type(v) is str for k, v in metadata.items()):
            raise TypeError(f"{where}: metadata must be a dict of str -> str (safetensors stores only strings)")
        metadata = dict(metadata)
    # Largest elements first, then by name: every tensor stays aligned to its
    # element size, and the file is deterministic (the reference writer does the same).
    items.sort(key=lambda item: (-_numpy_dtype(item[2]).itemsize, item[0]))
    _save_to(path, lambda f: _write_safetensors(f, items, metadata), where)


def _read_safetensors_header(f: IO[bytes], where: str) -> tuple[dict, dict | None, int, int]:
    def bad(msg: str) -> CheckpointError:
        return CheckpointError(f"load_safetensors: {where} is not a valid safetensors file: {msg}")

    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    first = f.read(8)
    if len(first) < 8:
        raise bad(f"only {len(first)} bytes")
    (header_len,) = struct.unpack("<Q", first)
    if header_len > _SAFETENSORS_MAX_HEADER or 8 + header_len > size:
        raise bad(f"header length {header_len} does not fit in a file of {size} bytes (truncated?){_sniff(first)}")
    raw = f.read(header_len)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"header is not JSON ({exc})") from None
    if type(header) is not dict:
        raise bad("header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and (
        type(metadata) is not dict or not all(type(k) is str and type(v) is str for k, v in metadata.items())
    ):
        raise bad("__metadata__ must map strings to strings")
    data_start = 8 + header_len
    data_size = size - data_start
    spans = []
    for key, e in header.items():
        if type(e) is not dict or set(e) != {"dtype", "shape", "data_offsets"}:
            raise bad(f"entry {key!r} must have exactly dtype, shape and data_offsets")
        if e["dtype"] not in _SAFETENSORS_TO_NAME:
            raise bad(
                f"tensor {key!r} has unsupported dtype {e['dtype']!r}; supported: {', '.join(_SAFETENSORS_TO_NAME)}"
            )
        shape, offsets = e["shape"], e["data_offsets"]
        if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
            raise bad(f"tensor {key!r} has bad shape {shape!r}")
        if type(offsets) is not list or len(offsets) != 2 or not all(type(o) is int for o in offsets):
            raise bad(f"tensor {key!r} has bad data_offsets {offsets!r}")
        begin, end = offsets
        itemsize = _numpy_dtype(_SAFETENSORS_TO_NAME[e["dtype"]]).itemsize
        if not 0 <= begin <= end or end - begin != math.prod(shape) * itemsize:
            raise bad(f"tensor {key!r}: data_offsets {offsets} do not match shape {shape} of {e['dtype']}")
        spans.append((begin, end, key))
    # The reference reader insists the tensors tile the data exactly: no gaps, no overlaps.
    position = 0
    for begin, end, key in sorted(spans):
        if begin != position:
            raise bad(f"tensor {key!r} starts at {begin}, expected {position} (gap or overlap)")
        position = end
    if position != data_size:
        state = "truncated" if position > data_size else "has trailing bytes"
        raise bad(f"the data section is {state}: tensors need {position} bytes, file has {data_size}")
    return header, metadata, data_start, size


def load_safetensors(path: Any, device: Any = "cpu") -> dict[str, Any]:
    """Read a safetensors file into ``{name: tensor}`` (in the file's header order).

    Args:
        path: the file.
        device: where to put the tensors (default the CPU).

    Raises:
        CheckpointError: truncated file, malformed header, an unsupported
            dtype, offsets that do not tile the data; the message names the file.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "t.safetensors")
        >>> save_safetensors({"b": pylucid.tensor([True, False])}, path)
        >>> load_safetensors(path)["b"].tolist()
        [True, False]
    """
    where = _describe(path)
    out: dict[str, Any] = {}
    with open(os.fspath(path), "rb") as f:
        header, _, data_start, _ = _read_safetensors_header(f, where)
        for key, e in header.items():
            begin, end = e["data_offsets"]
            buf = _read_exact(f, data_start + begin, end - begin, f"data of {key!r}", f"load_safetensors: {where}")
            dtype = _numpy_dtype(_SAFETENSORS_TO_NAME[e["dtype"]])
            array = np.frombuffer(buf, dtype=dtype, count=(end - begin) // dtype.itemsize).reshape(e["shape"])
            if dtype.kind == "b":
                array = array.view(np.uint8) != 0
            tensor = pylucid.from_numpy(array)
            if str(device) != "cpu":
                tensor = tensor.to(device)
            out[key] = tensor
    return out


def load_safetensors_metadata(path: Any) -> dict[str, str] | None:
    """The ``"__metadata__"`` of a safetensors file (``None`` if it has none), without reading tensors.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
        >>> save_safetensors({}, path, metadata={"format": "pt"})
        >>> load_safetensors_metadata(path)
        {'format': 'pt'}
    """
    with open(os.fspath(path), "rb") as f:
        return _read_safetensors_header(f, _describe(path))[1]
