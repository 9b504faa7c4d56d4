"""MNIST and Fashion-MNIST, read from the standard IDX files.

The IDX format (LeCun et al.): two zero bytes, a type byte, a byte giving the
number of dimensions, the dimensions as big-endian int32, then the values in
row-major order, big-endian. The reader checks all of it, including that the
file holds exactly as many bytes as the header announces, so a truncated
download fails loudly instead of giving garbage images. Files may be raw or
gzip-compressed (detected from the content, not the name).
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from pylucid._interop import np
from pylucid.datasets import DatasetFormatError, _FileImageDataset, _find_file

__all__ = ["read_idx", "MNIST", "FashionMNIST"]

# Type byte -> element dtype (all big-endian on disk).
_IDX_TYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":  # gzip magic
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DatasetFormatError(f"read_idx: {path} is a damaged gzip file ({exc})") from exc
    return raw


def read_idx(path: str | Path, expected_ndim: int | None = None) -> np.ndarray:
    """Read one IDX file (raw or gzipped) into a native-endian NumPy array.

    Args:
        path: the file.
        expected_ndim: if given, the number of dimensions the file must have.

    Raises:
        FileNotFoundError: no such file.
        DatasetFormatError: wrong magic number, unknown type, wrong number of
            dimensions, or a size that disagrees with the header.

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "labels-idx1-ubyte")
        >>> _ = open(p, "wb").write(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1]))
        >>> read_idx(p).tolist()
        [7, 2, 1]
    """
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DatasetFormatError(
            f"read_idx: {path} is not an IDX file: the magic number must start with two zero "
            f"bytes, got {raw[:4].hex() or 'an empty file'}"
        )
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_TYPES:
        raise DatasetFormatError(
            f"read_idx: {path} has unknown IDX type byte 0x{type_code:02x}; "
            f"accepted: {', '.join(f'0x{c:02x}' for c in _IDX_TYPES)}"
        )
    if expected_ndim is not None and ndim != expected_ndim:
        raise DatasetFormatError(f"read_idx: {path} has {ndim} dimensions, expected {expected_ndim}")
    header_size = 4 + 4 * ndim
    if len(raw) < header_size:
        raise DatasetFormatError(f"read_idx: {path} is truncated inside its header")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_TYPES[type_code]
    expected = header_size + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        state = "truncated" if len(raw) < expected else "longer than its header says"
        raise DatasetFormatError(
            f"read_idx: {path} is {state}: header {shape} of {dtype.name} needs {expected} bytes, file has {len(raw)}"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header_size).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


class MNIST(_FileImageDataset):
    """MNIST handwritten digits: 60,000 train / 10,000 test images of 28x28.

    Args:
        root: a directory holding the four IDX files (raw or ``.gz``), directly
            or in ``root/MNIST/raw/`` (torchvision's layout).
        train: the training files (``train-*``) or the test files (``t10k-*``).
        transform: applied to each image, a float32 tensor ``(1, 28, 28)`` in ``[0, 1]``.
        target_transform: applied to each label (a Python ``int``).
        download: accepted for compatibility; pylucid never downloads, and a
            missing file raises ``FileNotFoundError`` either way.

    Attributes ``data`` (uint8 ``(N, 1, 28, 28)``) and ``targets`` (int64) give everything at once.

    Example (needs the files)::

        train = MNIST("~/data", train=True)
        image, label = train[0]        # (1, 28, 28) float32, int
    """

    classes = tuple(
        f"{d} - {w}"
        for d, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
    )
    _folder = "MNIST"
    _url = "https://ossci-datasets.s3.amazonaws.com/mnist/"

    def _load(self, root: str | Path, train: bool, name: str) -> tuple[np.ndarray, np.ndarray]:
        prefix = "train" if train else "t10k"
        paths = []
        for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
            base = f"{prefix}-{kind}"
            paths.append(
                _find_file(
                    name,
                    root,
                    subdirs=(f"{self._folder}/raw", self._folder, ""),
                    names=(base + ".gz", base),
                    source=f"Download it from {self._url}{base}.gz; gzipped or uncompressed both work.",
                )
            )
        images = read_idx(paths[0], expected_ndim=3)
        labels = read_idx(paths[1], expected_ndim=1)
        if images.dtype != np.uint8 or labels.dtype != np.uint8:
            raise DatasetFormatError(
                f"{name}: expected unsigned-byte IDX files, got {images.dtype} images and {labels.dtype} labels"
            )
        if len(images) != len(labels):
            raise DatasetFormatError(
                f"{name}: {paths[0]} has {len(images)} images but {paths[1]} has {len(labels)} labels"
            )
        if labels.size and labels.max() >= len(self.classes):
            raise DatasetFormatError(
                f"{name}: label {labels.max()} in {paths[1]} is out of range 0..{len(self.classes) - 1}"
            )
        return images[:, None], labels.astype(np.int64)


class FashionMNIST(MNIST):
    """Fashion-MNIST (Zalando): 28x28 grey images of clothes in 10 classes.

    Same files, names and layout as ``MNIST`` (directly in ``root`` or in
    ``root/FashionMNIST/raw/``).

    Example (needs the files)::

        test = FashionMNIST("~/data", train=False)
    """

    classes = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
    _folder = "FashionMNIST"
    _url = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
