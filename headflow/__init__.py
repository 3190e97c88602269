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

``import headflow`` also registers the ``ds.attn`` Dataset accessor (:mod:`metrics.accessor`)
without importing xarray: if xarray is loaded already the accessor is registered at once,
otherwise when xarray is first imported (a post-import hook). Either way the accessor's module,
and with it POT and scikit-learn, load only on the first use of ``ds.attn``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import pathlib
import sys

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


class _LayerLoader(importlib.abc.Loader):
    """Hands out the layer's own module object (already imported and checked), never a copy."""

    def __init__(self, module):
        self._module, self._spec = module, module.__spec__

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):
        # the layer module ran when it was imported under its own name; importlib has just set
        # its __spec__ to the alias's: give it back its own (reload, pickling by name, -m use it)
        module.__spec__ = self._spec


class _LayerAlias(importlib.abc.MetaPathFinder):
    """``headflow.particles`` (and ``headflow.particles.validation``, ...) as import names: the
    modules of ``particles`` (etc.) themselves, so ``from headflow.particles import MultiHead`` is
    ``from particles import MultiHead``, with the shadowing check of the umbrella import."""

    def find_spec(self, fullname, path, target=None):
        head, _, rest = fullname.partition(".")
        layer, _, sub = rest.partition(".")
        if head != __name__ or layer not in _LAYERS:
            return None
        module = _layer(layer) if not sub else importlib.import_module(f"{layer}.{sub}")
        from importlib.machinery import ModuleSpec

        return ModuleSpec(fullname, _LayerLoader(module), is_package=hasattr(module, "__path__"))


if not any(isinstance(f, _LayerAlias) for f in sys.meta_path):
    # first: the path finder would otherwise find headflow.particles.validation in the layer's
    # folder (the alias's __path__) and run a second copy of the module under the alias name
    sys.meta_path.insert(0, _LayerAlias())


# ---------------------------------------------------------------- ds.attn without importing xarray


class _LazyAttn:
    """Stand-in for ``metrics.AttnAccessor``: builds the real accessor on first use."""

    _headflow_attn = True

    def __new__(cls, ds):
        return importlib.import_module("metrics").AttnAccessor(ds)


def _register_attn(xr) -> None:
    if getattr(getattr(xr.Dataset, "attn", None), "_headflow_attn", False):
        return  # metrics (or an earlier import headflow) registered it
    xr.register_dataset_accessor("attn")(_LazyAttn)


class _RegisteringLoader(importlib.abc.Loader):
    """Runs xarray's own loader, then registers ``ds.attn``; everything else is delegated."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _register_attn(module)

    def __getattr__(self, name):  # resource readers, is_package, ...
        return getattr(self._inner, name)


class _XarrayHook(importlib.abc.MetaPathFinder):
    """Post-import hook: when ``xarray`` is first imported, register ``ds.attn`` on it."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "xarray":
            return None
        sys.meta_path.remove(self)  # one shot; the other finders locate xarray
        from importlib.util import find_spec

        spec = find_spec("xarray")
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader)
        return spec


if "xarray" in sys.modules:
    _register_attn(sys.modules["xarray"])
elif not any(isinstance(f, _XarrayHook) for f in sys.meta_path):
    sys.meta_path.insert(0, _XarrayHook())
