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

The ``ds.attn`` Dataset accessor is registered by importing :mod:`metrics` (``headflow.metrics``),
as cf_xarray registers ``ds.cf``; after ``import headflow`` it is there on any Dataset (a reopened
file too): a stand-in registered when xarray is imported loads :mod:`metrics` on the first ``ds.attn``
(``headflow/_accessor.py``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import pathlib
import sys
from importlib.machinery import ModuleSpec

from . import _accessor

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


# ---------------------------------------------------------------- from headflow.particles import ...


class _LayerAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``headflow.particles`` (and ``headflow.particles.validation``, ...) as import names: the
    modules of ``particles`` (etc.) themselves, never a copy, so ``from headflow.particles import
    MultiHead`` is ``from particles import MultiHead``, with the shadowing check of the umbrella."""

    def find_spec(self, fullname, path, target=None):
        head, _, rest = fullname.partition(".")
        layer, _, sub = rest.partition(".")
        if head != __name__ or layer not in _LAYERS:
            return None
        module = _layer(layer) if not sub else importlib.import_module(f"{layer}.{sub}")
        own = (module, module.__spec__)
        return ModuleSpec(fullname, self, loader_state=own, is_package=hasattr(module, "__path__"))

    def create_module(self, spec):
        return spec.loader_state[0]

    def exec_module(self, module):
        # the module ran under its own name; importlib has just given it the alias's spec: give
        # it back its own (reload, pickling by name and -m use it)
        module.__spec__ = module.__spec__.loader_state[1]


if not any(isinstance(f, _LayerAlias) for f in sys.meta_path):
    # first: the path finder would otherwise find headflow.particles.validation in the layer's
    # folder (the alias's __path__) and run a second copy of the module under the alias name
    sys.meta_path.insert(0, _LayerAlias())

_accessor.install()
