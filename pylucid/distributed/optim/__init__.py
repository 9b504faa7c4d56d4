"""Optimizers for distributed training: ``ZeroRedundancyOptimizer`` (optimizer state sharded over the ranks)."""

from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
