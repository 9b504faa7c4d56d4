"""Autograd: graph nodes, the backward engine, grad modes, custom functions, checks."""

from . import functional
from .anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .graph import AccumulateGrad, Node

__all__ = [
    "backward", "grad", "Function", "FunctionCtx", "once_differentiable", "no_grad", "enable_grad",
    "set_grad_enabled", "inference_mode", "is_grad_enabled", "detect_anomaly", "set_detect_anomaly",
    "is_anomaly_enabled", "gradcheck", "gradgradcheck", "GradcheckError", "functional", "Node", "AccumulateGrad",
]
