"""The bundled 8x8 handwritten digits (UCI optical recognition of handwritten digits).

1,797 grey images of 8x8 pixels, each pixel a count 0..16 of "on" pixels in a
4x4 block of the original 32x32 bitmap, labels 0..9. This is the UCI test set
(``optdigits.tes``), the same file scikit-learn ships as ``load_digits``.
Source and licence (CC BY 4.0): ``data/LICENSE-digits.txt``.

The train/test split is fixed and needs no random numbers, so it is the same
on every machine and NumPy version: within each digit class, in file order,
every fifth sample (positions 4, 9, 14, ...) is test, the rest train. That is
a stratified 80/20 split: 1,442 train and 355 test images.
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path
from typing import Any, Callable

import pylucid
from pylucid._interop import np
from pylucid.datasets import DatasetFormatError, _ImageClassificationDataset

__all__ = ["Digits", "load_digits"]

DATA_FILE = Path(__file__).resolve().parent / "data" / "digits.csv.gz"
_N_IMAGES = 1797
_SPLITS = ("train", "test", "all")


@functools.lru_cache(maxsize=1)
def _load_all() -> tuple[np.ndarray, np.ndarray]:
    """Parse the CSV once per process: (pixels uint8 (N, 1, 8, 8), labels int64 (N,))."""
    if not DATA_FILE.is_file():
        raise FileNotFoundError(
            f"Digits: the bundled data file {DATA_FILE} is missing; reinstall pylucid "
            "(it must ship pylucid/datasets/data/digits.csv.gz as package data)"
        )
    with gzip.open(DATA_FILE, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    if table.shape != (_N_IMAGES, 65) or table[:, :64].min() < 0 or table[:, :64].max() > 16:
        raise DatasetFormatError(
            f"Digits: {DATA_FILE} should hold {_N_IMAGES} rows of 64 pixels in 0..16 and a label; "
            f"got shape {table.shape}"
        )
    images = table[:, :64].astype(np.uint8).reshape(-1, 1, 8, 8)
    labels = table[:, 64].astype(np.int64)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def _split_mask(labels: np.ndarray) -> np.ndarray:
    """True where a sample belongs to the test split (every fifth of its class)."""
    test = np.zeros(len(labels), dtype=bool)
    for digit in range(10):
        test[np.flatnonzero(labels == digit)[4::5]] = True
    return test


def _select(split: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    if split not in _SPLITS:
        raise ValueError(f"{where}: split must be one of {_SPLITS}, got {split!r}")
    images, labels = _load_all()
    if split == "all":
        return images.copy(), labels.copy()
    test = _split_mask(labels)
    keep = test if split == "test" else ~test
    return images[keep], labels[keep]


class Digits(_ImageClassificationDataset):
    """The bundled 8x8 digits as a dataset of ``(image, label)``.

    Args:
        split: ``"train"`` (1,442 images), ``"test"`` (355) or ``"all"`` (1,797);
            see the module docstring for how the split is made.
        transform: applied to each image, a float32 tensor ``(1, 8, 8)`` in ``[0, 1]``.
        target_transform: applied to each label (a Python ``int``).

    Example:
        >>> ds = Digits(split="test")
        >>> x, y = ds[0]
        >>> len(ds), x.shape, float(x.numpy().max()) <= 1.0, y
        (355, (1, 8, 8), True, 5)
    """

    classes = tuple(str(d) for d in range(10))

    def __init__(
        self,
        split: str = "train",
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
    ) -> None:
        images, labels = _select(split, "Digits")
        self.split = split
        super().__init__(images, labels, 16.0, transform, target_transform)


def load_digits(split: str = "all") -> tuple[Any, Any]:
    """All images and labels of a split at once, as two tensors.

    Returns:
        ``(images, labels)``: float32 ``(N, 1, 8, 8)`` in ``[0, 1]`` (pixel
        counts divided by 16) and int64 ``(N,)``.

    Example:
        >>> x, y = load_digits()
        >>> x.shape, x.dtype.name, y.shape, y.dtype.name
        ((1797, 1, 8, 8), 'float32', (1797,), 'int64')
    """
    images, labels = _select(split, "load_digits")
    return (
        pylucid.from_numpy(images.astype(np.float32) / np.float32(16.0)),
        pylucid.from_numpy(labels.copy()),
    )
