"""Optimizers for distributed training."""
