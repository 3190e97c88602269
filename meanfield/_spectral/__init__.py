"""Spectral solvers (public face: :mod:`meanfield.spectral`)."""
