"""CIFAR-10 and CIFAR-100, read from the "python version" batches, safely.

The batches are Python pickles of a dict with a NumPy array inside. Plain
``pickle.load`` would run whatever code a tampered file names, so
``safe_load_pickle`` uses a restricted unpickler:

* only five globals resolve: NumPy's ``_reconstruct``, ``ndarray``,
  ``dtype``, ``_frombuffer`` (the protocol-5 array path) and
  ``_codecs.encode`` (how Python 3 writes ``bytes`` at protocol 2), each
  under its NumPy 1 and NumPy 2 module names; any other global raises
  ``DatasetFormatError`` before anything is called;
* even those never reach NumPy during unpickling: they build inert
  placeholder objects that record their arguments. Only after the whole file
  is read are the placeholders turned into arrays, and only for plain numeric
  dtypes (no objects, no records), with the byte count checked against the
  shape. NumPy's own ``__setstate__`` never sees file content, so a crafted
  dtype state cannot make NumPy treat bytes as object pointers.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from pylucid._interop import np
from pylucid.datasets import DatasetFormatError, _FileImageDataset, _find_file

__all__ = ["safe_load_pickle", "CIFAR10", "CIFAR100"]

# Plain numeric kinds only: bool, signed, unsigned, float.
_SAFE_DTYPE_KINDS = "biuf"


class _DtypeStub:
    def __init__(self, spec: Any, align: Any = False, copy: Any = True) -> None:
        self.spec = spec
        self.byteorder = "="

    def __setstate__(self, state: Any) -> None:
        # numpy's dtype state: (version, byteorder, subarray, names, fields, ...)
        if not isinstance(state, tuple) or len(state) < 5:
            raise DatasetFormatError("safe_load_pickle: malformed dtype state")
        if state[2] is not None or state[3] is not None or state[4] is not None:
            raise DatasetFormatError("safe_load_pickle: structured or sub-array dtypes are refused")
        self.byteorder = state[1] if isinstance(state[1], str) else state[1].decode("ascii")

    def resolve(self) -> np.dtype:
        spec = self.spec.decode("ascii") if isinstance(self.spec, bytes) else self.spec
        if not isinstance(spec, str):
            raise DatasetFormatError(f"safe_load_pickle: dtype spec must be a string, got {type(spec).__name__}")
        try:
            dtype = np.dtype(spec)
        except TypeError as exc:
            raise DatasetFormatError(f"safe_load_pickle: unknown dtype {spec!r}") from exc
        if dtype.kind not in _SAFE_DTYPE_KINDS or dtype.fields is not None or dtype.subdtype is not None:
            raise DatasetFormatError(f"safe_load_pickle: refusing non-numeric dtype {spec!r}")
        if self.byteorder not in ("<", ">", "=", "|"):
            raise DatasetFormatError(f"safe_load_pickle: bad byte order {self.byteorder!r}")
        return dtype.newbyteorder(self.byteorder) if self.byteorder in "<>" else dtype


class _ArrayStub:
    """Stands for ``_reconstruct(ndarray, (0,), b'b')`` until its state arrives."""

    def __init__(self) -> None:
        self.state: tuple | None = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def resolve(self) -> np.ndarray:
        state = self.state
        if not isinstance(state, tuple) or len(state) != 5:
            raise DatasetFormatError("safe_load_pickle: malformed ndarray state")
        _, shape, dtype_stub, is_fortran, raw = state
        return _make_array(raw, dtype_stub, shape, "F" if is_fortran else "C")


class _FrombufferStub:
    def __init__(self, buffer: Any, dtype_stub: Any, shape: Any, order: Any) -> None:
        self.args = (buffer, dtype_stub, shape, order)

    def resolve(self) -> np.ndarray:
        buffer, dtype_stub, shape, order = self.args
        return _make_array(buffer, dtype_stub, shape, order)


def _make_array(raw: Any, dtype_stub: Any, shape: Any, order: Any) -> np.ndarray:
    if not isinstance(dtype_stub, _DtypeStub):
        raise DatasetFormatError("safe_load_pickle: array dtype is not a numpy dtype")
    dtype = dtype_stub.resolve()
    if isinstance(raw, str):  # Python 2 pickles read with encoding="latin1"
        raw = raw.encode("latin1")
    if isinstance(raw, pickle.PickleBuffer):
        raw = raw.raw()
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise DatasetFormatError(f"safe_load_pickle: array data must be bytes, got {type(raw).__name__}")
    if not isinstance(shape, tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise DatasetFormatError(f"safe_load_pickle: bad array shape {shape!r}")
    count = int(np.prod(shape, dtype=np.int64))
    if len(raw) != count * dtype.itemsize:
        raise DatasetFormatError(
            f"safe_load_pickle: array of shape {shape} and dtype {dtype} needs "
            f"{count * dtype.itemsize} bytes, got {len(raw)}"
        )
    if isinstance(order, bytes):
        order = order.decode("ascii")
    if order not in ("C", "F"):
        raise DatasetFormatError(f"safe_load_pickle: bad array order {order!r}")
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape, order=order).copy()


class _NdarrayToken:
    """Stands for ``numpy.ndarray``; only ``_reconstruct`` may receive it."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise DatasetFormatError("safe_load_pickle: refusing to call numpy.ndarray directly")


_NDARRAY = _NdarrayToken()


def _reconstruct(cls: Any, shape: Any, typecode: Any) -> _ArrayStub:
    if cls is not _NDARRAY or typecode not in (b"b", "b"):
        raise DatasetFormatError("safe_load_pickle: _reconstruct is only allowed for plain numpy arrays")
    return _ArrayStub()


def _codecs_encode(text: Any, encoding: Any = "utf-8") -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise DatasetFormatError("safe_load_pickle: _codecs.encode is only allowed as (str, 'latin1')")
    return text.encode("latin1")


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _DtypeStub,
    ("numpy.core.numeric", "_frombuffer"): _FrombufferStub,
    ("numpy._core.numeric", "_frombuffer"): _FrombufferStub,
    ("_codecs", "encode"): _codecs_encode,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise DatasetFormatError(
                f"safe_load_pickle: refusing to load global {module}.{name}; only plain "
                "containers, numbers, strings, bytes and numeric numpy arrays are allowed"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise DatasetFormatError("safe_load_pickle: persistent ids are not allowed")


def _resolve(obj: Any) -> Any:
    if isinstance(obj, (_ArrayStub, _FrombufferStub)):
        return obj.resolve()
    if isinstance(obj, (_DtypeStub, _NdarrayToken)):
        raise DatasetFormatError("safe_load_pickle: a bare numpy dtype/ndarray is not allowed as a value")
    if isinstance(obj, dict):
        return {_resolve(k): _resolve(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_resolve(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_resolve(v) for v in obj)
    return obj


def safe_load_pickle(source: str | Path | bytes, encoding: str = "bytes") -> Any:
    """Unpickle data that may only contain containers, scalars, strings, bytes and numeric arrays.

    Args:
        source: a path, or the pickled bytes.
        encoding: how Python 2 ``str`` objects are decoded; ``"bytes"``
            (default) keeps them as bytes, as CIFAR's own loader does.

    Raises:
        DatasetFormatError: the data names any other global (code), or is malformed.

    Example:
        >>> import pickle
        >>> safe_load_pickle(pickle.dumps({"a": [1, 2.5, b"x"]}))
        {'a': [1, 2.5, b'x']}
    """
    if isinstance(source, (bytes, bytearray)):
        data, where = bytes(source), "<bytes>"
    else:
        with open(source, "rb") as f:
            data, where = f.read(), str(source)
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data), encoding=encoding).load()
    except DatasetFormatError as exc:
        raise DatasetFormatError(f"{exc} (in {where})") from None
    except Exception as exc:  # truncated or garbled stream
        raise DatasetFormatError(
            f"safe_load_pickle: {where} is not a valid pickle ({type(exc).__name__}: {exc})"
        ) from exc
    try:
        return _resolve(obj)
    except DatasetFormatError as exc:
        raise DatasetFormatError(f"{exc} (in {where})") from None


def _text_keys(batch: Any, path: Path, name: str) -> dict[str, Any]:
    if not isinstance(batch, dict):
        raise DatasetFormatError(f"{name}: {path} should hold a dict, got {type(batch).__name__}")
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in batch.items()}


class CIFAR10(_FileImageDataset):
    """CIFAR-10: 32x32 colour images in 10 classes, 50,000 train / 10,000 test.

    Args:
        root: a directory holding ``cifar-10-batches-py/`` (what the official
            tarball extracts to), or the batch files themselves.
        train: ``data_batch_1`` ... ``data_batch_5``, or ``test_batch``.
        transform: applied to each image, a float32 tensor ``(3, 32, 32)`` in ``[0, 1]``.
        target_transform: applied to each label (a Python ``int``).
        download: accepted for compatibility; pylucid never downloads.

    Example (needs the files)::

        train = CIFAR10("~/data", train=True)
        image, label = train[0]        # (3, 32, 32) float32, int
    """

    classes = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
    _folder = "cifar-10-batches-py"
    _train_files = tuple(f"data_batch_{i}" for i in range(1, 6))
    _test_files = ("test_batch",)
    _label_key = "labels"
    _url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"

    def _load(self, root: str | Path, train: bool, name: str) -> tuple[np.ndarray, np.ndarray]:
        images, labels = [], []
        for file_name in self._train_files if train else self._test_files:
            path = _find_file(
                name,
                root,
                subdirs=(self._folder, ""),
                names=(file_name,),
                source=(
                    f"Download {self._url} and extract it inside {Path(root).expanduser()} "
                    f"(it unpacks to {self._folder}/)."
                ),
            )
            batch = _text_keys(safe_load_pickle(path), path, name)
            data, batch_labels = batch.get("data"), batch.get(self._label_key)
            if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
                raise DatasetFormatError(
                    f"{name}: {path} must hold 'data' as uint8 (N, 3072); got "
                    f"{getattr(data, 'dtype', type(data).__name__)} {getattr(data, 'shape', '')}"
                )
            batch_labels = np.asarray(batch_labels)
            if batch_labels.shape != (len(data),) or batch_labels.dtype.kind not in "iu":
                raise DatasetFormatError(
                    f"{name}: {path} must hold {len(data)} integer {self._label_key!r}, got {batch_labels.shape}"
                )
            if batch_labels.size and (batch_labels.min() < 0 or batch_labels.max() >= len(self.classes)):
                raise DatasetFormatError(f"{name}: {path} has labels outside 0..{len(self.classes) - 1}")
            images.append(data.reshape(-1, 3, 32, 32))
            labels.append(batch_labels.astype(np.int64))
        return np.concatenate(images), np.concatenate(labels)


class CIFAR100(CIFAR10):
    """CIFAR-100: like ``CIFAR10`` with 100 fine classes; files ``cifar-100-python/train`` and ``test``.

    Example (needs the files)::

        test = CIFAR100("~/data", train=False)
    """

    classes = tuple(str(i) for i in range(100))  # names live in the 'meta' file
    _folder = "cifar-100-python"
    _train_files = ("train",)
    _test_files = ("test",)
    _label_key = "fine_labels"
    _url = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
