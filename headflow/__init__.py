"""headflow: multi-head self-attention dynamics as interacting particles on the sphere.

The umbrella import. The library's three layers are the import packages ``particles``,
``meanfield`` and ``metrics``; PyPI has unrelated distributions with the first and last of
those names. ``headflow.particles``, ``headflow.meanfield`` and ``headflow.metrics`` are the
same module objects as ``import particles`` etc., imported on first access (so ``import
headflow`` costs nothing), and checked to be headflow's own: when an unrelated package of the
same name shadows one of them, the access raises ``ImportError`` saying where it was found.

>>> import headflow
>>> headflow.particles.MultiHead is __import__("particles").MultiHead
True
>>> headflow.__version__ == headflow.particles.__version__
True
"""

from __future__ import annotations

import importlib
import pathlib

__all__ = ["particles", "meanfield", "metrics", "__version__"]

_LAYERS = ("particles", "meanfield", "metrics")
_ROOT = pathlib.Path(__file__).resolve().parent.parent  # headflow's layers are installed next to it


def _layer(name: str):
    module = importlib.import_module(name)
    where = pathlib.Path(getattr(module, "__file__", None) or ".").resolve()
    if where.parent.parent != _ROOT:
        raise ImportError(
            f"the {name!r} module found at {where} is not headflow's (expected under {_ROOT}): an unrelated "
            f"package named {name!r} shadows it. Uninstall that package (pip uninstall {name}) or use a "
            "separate environment for headflow."
        )
    return module


def __getattr__(name: str):
    if name in _LAYERS:
        module = _layer(name)
        globals()[name] = module  # cache: later look-ups bypass __getattr__
        return module
    if name == "__version__":  # the one version source is particles.__version__
        return _layer("particles").__version__
    raise AttributeError(f"module 'headflow' has no attribute {name!r}; its layers are {list(_LAYERS)}.")


def __dir__():
    return sorted(set(globals()) | set(_LAYERS) | {"__version__"})
