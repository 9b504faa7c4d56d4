"""The activation layers, at PyTorch's module path ``torch.nn.modules.activation``.

``MultiheadAttention`` is here too, where PyTorch files it.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.activation.X is pylucid.nn.X``.
"""

from ..activation import (  # noqa: F401
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from ..transformer import MultiheadAttention  # noqa: F401

__all__ = [
    "Threshold", "ReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish", "Hardswish", "ELU",
    "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus", "Softshrink", "PReLU",
    "Softsign", "Tanhshrink", "Softmin", "Softmax", "LogSoftmax", "MultiheadAttention", "RReLU", "Softmax2d",
]
