"""``pylucid.onnx``: export a model to ONNX by tracing it, as ``torch.onnx.export``.

``onnx`` (and, to run the file, ``onnxruntime``) are optional: importing this module does not import
them, ``export`` does (the ``onnx`` extra installs both).
"""

from __future__ import annotations

from ._export import export, supported_ops
from ._graph import UnsupportedOperatorError

__all__ = ["export", "supported_ops", "UnsupportedOperatorError"]
