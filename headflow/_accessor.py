"""``ds.attn`` on any Dataset once ``import headflow`` ran, without importing xarray or the layers.

``import headflow`` stays light: it registers a stand-in accessor through xarray's own
``register_dataset_accessor`` when xarray is imported (now, if it already is; else right after its
import, through a one-shot import hook). The first ``ds.attn`` imports :mod:`metrics`, whose import
registers the real accessor in place of the stand-in, and returns the real accessor of ``ds``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys

__all__ = ["install"]


class _LazyAttn:
    """The stand-in: xarray calls ``accessor(ds)``; this imports metrics and returns its accessor."""

    __headflow_stand_in__ = True

    def __new__(cls, ds):
        # through the umbrella, so that its check against a shadowing package applies
        return importlib.import_module("headflow").metrics.AttnAccessor(ds)


def _register(xr) -> None:
    if "attn" not in vars(xr.Dataset):  # metrics may have registered the real one already
        xr.register_dataset_accessor("attn")(_LazyAttn)


class _AfterXarray(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it lets the other finders find ``xarray`` and registers the stand-in
    once the module has run, then leaves ``sys.meta_path``."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "xarray":
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _uninstall()
            _register(module)

        spec.loader.exec_module = exec_module
        return spec


def _uninstall() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterXarray)]


def install() -> None:
    """Make ``ds.attn`` available now (xarray imported) or right after xarray's import."""
    if "xarray" in sys.modules:
        _register(sys.modules["xarray"])
    elif not any(isinstance(f, _AfterXarray) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterXarray())
