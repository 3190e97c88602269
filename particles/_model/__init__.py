"""The model: :class:`~particles.MultiHead` (kinds, update rules, energies, its parameters as
attrs), :class:`~particles.Ensemble`, :class:`~particles.TimeDependent`, model checks."""
