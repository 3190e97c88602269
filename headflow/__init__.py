"""headflow: multi-head self-attention dynamics as interacting particles on the sphere.

The umbrella import. The library's three layers are the import packages ``particles``,
``meanfield`` and ``metrics``; PyPI has unrelated distributions with the first and last of
those names, so ``headflow.particles``, ``headflow.meanfield`` and ``headflow.metrics``
name ours unambiguously (they are the same module objects). Each layer is imported on first
access, so ``import headflow`` stays as light as ``import particles``.

>>> import headflow
>>> headflow.particles.MultiHead is __import__("particles").MultiHead
True
>>> headflow.__version__ == headflow.particles.__version__
True
"""

from __future__ import annotations

import importlib

from particles import __version__

__all__ = ["particles", "meanfield", "metrics", "__version__"]

_LAYERS = ("particles", "meanfield", "metrics")


def __getattr__(name: str):
    if name in _LAYERS:
        module = importlib.import_module(name)
        globals()[name] = module  # cache: later look-ups bypass __getattr__
        return module
    raise AttributeError(f"module 'headflow' has no attribute {name!r}; its layers are {list(_LAYERS)}.")


def __dir__():
    return sorted(set(globals()) | set(_LAYERS))
