"""Ready-made datasets: the bundled 8x8 digits, MNIST, Fashion-MNIST and CIFAR.

``Digits`` / ``load_digits`` need nothing: the data ships with pylucid (UCI
optical recognition of handwritten digits, 1,797 images, CC BY 4.0; see
``pylucid/datasets/data/LICENSE-digits.txt``). The others read the standard
files from a directory you provide; pylucid never downloads anything, and a
missing file raises ``FileNotFoundError`` saying which file to put where and
where to get it.

Every image dataset returns ``(image, target)``: ``image`` a float32 tensor of
shape ``(C, H, W)`` scaled to ``[0, 1]`` (what torchvision's ``ToTensor``
gives), ``target`` a Python ``int`` (so ``default_collate`` makes int64
labels). ``transform`` / ``target_transform`` are applied to each.

Example:
    >>> from pylucid.datasets import Digits
    >>> ds = Digits(split="train")
    >>> image, label = ds[0]
    >>> len(ds), image.shape, image.dtype.name, label
    (1442, (1, 8, 8), 'float32', 0)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from pylucid._interop import np
import pylucid
from pylucid.errors import LucidError
from pylucid.utils.data import Dataset

# Defined before the submodules are imported: they import these names back.


class DatasetFormatError(LucidError, ValueError):
    """A dataset file exists but is not what it should be (bad magic, truncated, unsafe pickle).

    It is both a ``pylucid.errors.LucidError`` and a ``ValueError``.
    """


class _ImageClassificationDataset(Dataset):
    """Images held as one NumPy array ``(N, C, H, W)``, labels as ``(N,)`` int64.

    ``scale`` turns stored integers into ``[0, 1]`` floats per item (255 for
    bytes, 16 for the digits), so the dataset stays compact in memory.
    """

    classes: Sequence[str] = ()

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        scale: float,
        transform: Callable[[Any], Any] | None,
        target_transform: Callable[[int], Any] | None,
    ) -> None:
        if images.ndim != 4:
            raise ValueError(f"{type(self).__name__}: images must be (N, C, H, W), got shape {images.shape}")
        if len(images) != len(labels):
            raise ValueError(f"{type(self).__name__}: {len(images)} images but {len(labels)} labels")
        for name, fn in (("transform", transform), ("target_transform", target_transform)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{type(self).__name__}: {name} must be callable or None, got {type(fn).__name__}")
        self._images = images
        self._labels = labels.astype(np.int64, copy=False)
        self._scale = float(scale)
        self.transform = transform
        self.target_transform = target_transform

    @property
    def data(self) -> Any:
        """All images as stored (``uint8`` for MNIST/CIFAR), shape ``(N, C, H, W)``, as a tensor."""
        return pylucid.from_numpy(self._images)

    @property
    def targets(self) -> Any:
        """All labels, an int64 tensor of shape ``(N,)``."""
        return pylucid.from_numpy(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        # A fresh float32 array per item: callers may modify it in place.
        image: Any = pylucid.from_numpy(np.asarray(self._images[index], dtype=np.float32) / np.float32(self._scale))
        target: Any = int(self._labels[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={len(self)}, image_shape={tuple(self._images.shape[1:])})"


class _FileImageDataset(_ImageClassificationDataset):
    """An image dataset read from standard files under ``root`` (MNIST, CIFAR): 8-bit images scaled by 255.

    Subclasses implement ``_load(root, train, name) -> (images (N, C, H, W), labels (N,) int64)``.
    """

    def __init__(
        self,
        root: str | Path,
        train: bool = True,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
        download: bool = False,
    ) -> None:
        name = type(self).__name__
        if not isinstance(train, bool):
            raise TypeError(f"{name}: train must be a bool, got {type(train).__name__}")
        images, labels = self._load(root, train, name)
        self.root = Path(root).expanduser()
        self.train = train
        super().__init__(images, labels, 255.0, transform, target_transform)

    def _load(self, root: str | Path, train: bool, name: str) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
        raise NotImplementedError


def _find_file(dataset: str, root: str | Path, subdirs: Sequence[str], names: Sequence[str], source: str) -> Path:
    """The first of ``root/subdir/name`` that exists, else a FileNotFoundError that says what to do."""
    root = Path(root).expanduser()
    tried = []
    for sub in subdirs:
        for name in names:
            path = root / sub / name if sub else root / name
            if path.is_file():
                return path
            tried.append(str(path))
    raise FileNotFoundError(
        f"{dataset}: missing file {names[0]!r}. Put it at {tried[0]}. {source} "
        f"(pylucid never downloads.) Looked for: {', '.join(tried)}"
    )


from pylucid.datasets.cifar import CIFAR10, CIFAR100, safe_load_pickle  # noqa: E402
from pylucid.datasets.digits import Digits, load_digits  # noqa: E402
from pylucid.datasets.idx import MNIST, FashionMNIST, read_idx  # noqa: E402

__all__ = [
    "Digits",
    "load_digits",
    "MNIST",
    "FashionMNIST",
    "read_idx",
    "CIFAR10",
    "CIFAR100",
    "safe_load_pickle",
    "DatasetFormatError",
]
