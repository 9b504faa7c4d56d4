"""Utilities built on pylucid's public API.

``pylucid.utils.data`` holds the data-loading pieces (``Dataset``,
``DataLoader``, samplers, ``default_collate``), following
``torch.utils.data``.

Example:
    >>> from pylucid.utils.data import DataLoader
    >>> [batch.tolist() for batch in DataLoader(list(range(5)), batch_size=2)]
    [[0, 1], [2, 3], [4]]
"""

from pylucid.utils import data

__all__ = ["data"]
