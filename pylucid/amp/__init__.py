"""Mixed precision: ``autocast`` applies each op's ``AmpPolicy`` at dispatch."""

from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler, OptState

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "GradScaler", "OptState"]
