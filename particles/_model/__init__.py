"""The model: :class:`~particles.MultiHead` (kinds, update rules, energies, its parameters as
attrs), :class:`~particles.Ensemble`, :class:`~particles.TimeDependent`, model checks."""

from . import kind_families as _kind_families  # noqa: F401  (registers the built-in kinds)
