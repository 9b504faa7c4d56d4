"""Saving and loading: ``save``/``load`` checkpoints and the safetensors format.

``pylucid.save`` writes nested containers of tensors and plain values into
pylucid's own checkpoint format. ``pylucid.load`` reads them back **without
executing anything**: the structure is JSON, tensors are raw bytes, and there
is no pickle anywhere, so loading an untrusted file cannot run code (unlike
``torch.load(weights_only=False)``).

Checkpoint layout (version 1, all integers little-endian)::

    offset 0   magic b"\\x89PYLUCID", u32 format version, u32 flags (0), zero padding to 64
    offset 64  tensor blobs, raw little-endian C-order bytes, each starting on a 64-byte boundary
    ...        header: UTF-8 JSON {"format", "version", "tensors": [...], "root": ...}
    last 32    trailer: u64 header offset, u64 header length, u32 header CRC-32,
               u32 reserved (0), b"LUCIDEND"

The header comes *after* the data so tensors stream to disk one at a time (a
CUDA tensor is copied to the host only while it is written). Every tensor has
its own CRC-32 and the header has one; the trailer sits at the very end, so a
truncated file is always detected. Values are encoded in the JSON tree as:
``null``/``true``/``false``/ints/strings/finite floats natively, lists as
arrays, and everything else as a one-key tagged object: ``{"$tuple": [...]}``,
``{"$dict": [[key, value], ...]}`` (keys need not be strings),
``{"$odict": ...}`` (``collections.OrderedDict``), ``{"$bytes": base64}``,
``{"$float": "nan" | "inf" | "-inf"}`` and ``{"$tensor": index}``. A tensor
object that appears twice is stored once and loads as one object twice;
distinct tensors that are views of one buffer load as independent copies.

safetensors files are written and read by this module's own code (no
dependency on the ``safetensors`` package): an 8-byte little-endian header
length, a JSON header (``dtype``, ``shape``, ``data_offsets`` per tensor and
optional ``"__metadata__"`` of strings), then the packed bytes.

Every save to a path is atomic: the data go to a temporary file in the same
directory, which is flushed, fsync-ed and then renamed over the target with
``os.replace``. If anything fails half way, the previous file is untouched
and the temporary file is removed.
"""

from __future__ import annotations

import base64
import collections
import json
import math
import os
import struct
import uuid
import zlib
from typing import IO, Any, Callable, Mapping

import numpy as np

import pylucid
from pylucid.errors import LucidError

__all__ = [
    "save",
    "load",
    "save_safetensors",
    "load_safetensors",
    "load_safetensors_metadata",
    "CheckpointError",
]

MAGIC = b"\x89PYLUCID"
END_MAGIC = b"LUCIDEND"
FORMAT_VERSION = 1
_ALIGN = 64
_PREAMBLE = struct.Struct("<8sII")  # magic, version, flags
_TRAILER = struct.Struct("<QQII8s")  # header offset, header length, header crc, reserved, end magic
_SAFETENSORS_MAX_HEADER = 100_000_000  # the limit the reference implementation enforces


class CheckpointError(LucidError, ValueError):
    """A checkpoint or safetensors file that cannot be read: truncated, corrupt or not ours.

    It is both a ``pylucid.errors.LucidError`` and a ``ValueError``; the
    message names the file.
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


def _atomic_write(path: Any, write: Callable[[IO[bytes]], None], where: str) -> None:
    """Run ``write(f)`` on a temp file beside ``path``, then rename it over ``path``."""
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{where}: cannot write {target!r}: directory {directory!r} does not exist")
    temp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex[:12]}.tmp")
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


# ------------------------------------------------------- checkpoint encoding


class _Encoder:
    """Turns the object tree into JSON-ready data plus a list of tensors."""

    def __init__(self) -> None:
        self.tensors: list[Any] = []
        self._tensor_index: dict[int, int] = {}
        self._active: set[int] = set()

    def encode(self, obj: Any, where: str) -> Any:
        if obj is None or type(obj) in (bool, int, str):
            return obj
        if type(obj) is float:
            if math.isfinite(obj):
                return obj
            return {"$float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
        if type(obj) is bytes:
            return {"$bytes": base64.b64encode(obj).decode("ascii")}
        if isinstance(obj, pylucid.Tensor):
            key = id(obj)
            if key not in self._tensor_index:
                self._tensor_index[key] = len(self.tensors)
                self.tensors.append(obj)
            return {"$tensor": self._tensor_index[key]}
        if type(obj) in (list, tuple, dict, collections.OrderedDict):
            if id(obj) in self._active:
                raise ValueError(f"pylucid.save: circular reference at {where}")
            self._active.add(id(obj))
            try:
                if type(obj) is list:
                    return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
                if type(obj) is tuple:
                    return {"$tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
                tag = "$dict" if type(obj) is dict else "$odict"
                items = []
                for k, v in obj.items():
                    if isinstance(k, pylucid.Tensor):
                        raise TypeError(f"pylucid.save: a tensor cannot be a dict key (at {where})")
                    items.append([self.encode(k, f"{where} key {k!r}"), self.encode(v, f"{where}[{k!r}]")])
                return {tag: items}
            finally:
                self._active.discard(id(obj))
        hint = ""
        if isinstance(obj, (np.ndarray, np.generic)):
            hint = " (convert NumPy values with pylucid.from_numpy(...) or .item())"
        raise TypeError(
            f"pylucid.save: cannot save an object of type {type(obj).__module__}.{type(obj).__qualname__} "
            f"at {where}{hint}; accepted: dict, collections.OrderedDict, list, tuple, str, bytes, "
            "int, float, bool, None and pylucid.Tensor"
        )


def _pad(f: IO[bytes], position: int) -> int:
    padding = -position % _ALIGN
    if padding:
        f.write(b"\x00" * padding)
    return position + padding


def _write_checkpoint(f: IO[bytes], encoder: _Encoder, root: Any) -> None:
    f.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, 0))
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
    header = json.dumps(
        {"format": "pylucid-checkpoint", "version": FORMAT_VERSION, "tensors": entries, "root": root},
        allow_nan=False,
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    f.write(header)
    f.write(_TRAILER.pack(position, len(header), zlib.crc32(header), 0, END_MAGIC))


def save(obj: Any, f: Any) -> None:
    """Save ``obj`` (nested containers of tensors and plain values) to a checkpoint.

    Args:
        obj: ``dict``, ``OrderedDict``, ``list``, ``tuple``, ``str``,
            ``bytes``, ``int``, ``float`` (NaN/inf too), ``bool``, ``None`` and
            ``pylucid.Tensor``, nested freely; dict keys may be any of the
            non-container scalars or tuples of them. Tensors on an
            accelerator are copied to the host for writing; their device,
            dtype, shape and ``requires_grad`` are recorded.
        f: a path (written atomically) or a writable binary file object.

    Raises:
        TypeError: any other type, naming where it sits (``obj['optim'][0]``).
        ValueError: a container that contains itself.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pyl")
        >>> save({"w": pylucid.tensor([1.0, 2.0]), "step": 10}, path)
        >>> out = load(path)
        >>> out["w"].tolist(), out["step"]
        ([1.0, 2.0], 10)
    """
    # Encode first, before any file exists, so a TypeError leaves no trace at all.
    encoder = _Encoder()
    root = encoder.encode(obj, "obj")
    _save_to(f, lambda handle: _write_checkpoint(handle, encoder, root), "pylucid.save")


# ------------------------------------------------------- checkpoint decoding


def _describe(source: Any) -> str:
    if hasattr(source, "read"):
        return repr(getattr(source, "name", "<file object>"))
    return repr(os.fspath(source))


def _sniff(head: bytes) -> str:
    if head.startswith(b"PK\x03\x04"):
        return " (it looks like a zip archive, e.g. a torch.save file; pylucid.load never unpickles)"
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


def load(f: Any, map_location: Any = None) -> Any:
    """Load an object written by ``pylucid.save``. Never executes code from the file.

    Args:
        f: a path or a readable binary file object.
        map_location: where tensors go: ``None`` (the device they were saved
            from), a device (``"cpu"``, ``"cuda:0"``, a ``pylucid.device``), a
            dict ``{"cuda:0": "cpu"}`` remapping saved devices, or a callable
            ``fn(cpu_tensor, saved_device: str) -> tensor``.

    Raises:
        CheckpointError: the file is truncated, corrupt (checksums), of a
            newer format version, or not a pylucid checkpoint; the message
            names the file. Also when a saved device is unavailable.
        FileNotFoundError: no such file.

    Example:
        >>> import io
        >>> buf = io.BytesIO()
        >>> save([1, (2.5, None), {3: "x"}], buf)
        >>> _ = buf.seek(0)
        >>> load(buf)
        [1, (2.5, None), {3: 'x'}]
    """
    where = _describe(f)
    place = _placer(map_location, where)
    if hasattr(f, "read"):
        import io

        handle: IO[bytes] = io.BytesIO(f.read())
        return _load_from(handle, where, place)
    with open(os.fspath(f), "rb") as handle:
        return _load_from(handle, where, place)


def _load_from(f: IO[bytes], where: str, place: Callable[[Any, str], Any]) -> Any:
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
    return _Decoder(f, entries, where, place).decode(header["root"])


def _raise(exc: BaseException) -> Any:
    raise exc


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
