"""Activation memory of a forward: when each tensor is created and freed
(:mod:`~yolo_sm.topics.memory.collect_lifetimes`), and how PyTorch's caching allocator holds memory
over a run of changing batch sizes (:mod:`~yolo_sm.topics.memory.collect_pool`)."""

from __future__ import annotations

from yolo_sm.topics.memory.collect_lifetimes import (
    DEFAULT_LIFETIME_MODELS,
    lifetime_rows,
    lifetimes_table,
    memory_layers,
)
from yolo_sm.topics.memory.collect_pool import ALLOC_CONFS, pool_rows, pool_table

__all__ = [
    "ALLOC_CONFS",
    "DEFAULT_LIFETIME_MODELS",
    "lifetime_rows",
    "lifetimes_table",
    "memory_layers",
    "pool_rows",
    "pool_table",
]
