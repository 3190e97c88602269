"""Attention kinds added through the public extension point (:mod:`particles.extend`): each module
defines one :class:`~particles.extend.Kind` and registers it once (docs/architecture.md, "Where to
add")."""

from .sigmoid import Sigmoid
from .sinkhorn import Sinkhorn

__all__ = ["Sigmoid", "Sinkhorn"]
