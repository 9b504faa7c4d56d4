"""``pylucid.utils.tensorboard``: log scalars, histograms, text, images and hyperparameters for TensorBoard.

:class:`SummaryWriter` follows ``torch.utils.tensorboard.SummaryWriter``. The event files are
written by the ``tensorboard`` package's own writer (``EventFileWriter`` and its protocol
buffers), so TensorBoard reads them as it reads PyTorch's. The package is optional: this module
always imports, and constructing a ``SummaryWriter`` without it raises ``ImportError`` saying
``pip install tensorboard``.
"""

from .writer import SummaryWriter

__all__ = ["SummaryWriter"]
