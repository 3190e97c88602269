"""What every Dataset records of how it was made, in netCDF-safe attrs.

Provenance (:func:`provenance`): every dataset also carries the full configuration of the run
(``config``, JSON), the library and dependency versions (``headflow_version``, ``versions``),
the seeds (``seeds``, JSON) and how the attention sums were evaluated (``summation``,
``summation_error_bound``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform

import numpy as np

from particles import MultiHead, __version__
from particles.validation import NONE, AnyOf, Boolean, Instance, Model, declare

__all__ = ["provenance", "model_attrs", "netcdf_safe", "to_json", "dependency_versions", "summation_paths",
           "CONVENTIONS",
           "DICT_OR_NONE"]

CONVENTIONS = "CF-1.10"

#: distributions whose versions every dataset records (PyPI names)
DEPENDENCIES = ("numpy", "scipy", "pot", "scikit-learn", "xarray", "netCDF4", "matplotlib", "tqdm",
                "dask", "distributed", "zarr", "finufft")


DICT_OR_NONE = AnyOf(NONE, Instance(dict, hint="Pass a dict (it is stored as JSON)."))


@declare(attrs=Instance(dict, test=lambda a: all(isinstance(k, str) for k in a), what="a dict with str keys",
                        bad=({1: 2}, [("a", 1)], None, "attrs")))
def netcdf_safe(attrs: dict) -> dict:
    """Turn attrs into netCDF-storable values (None → "none", bool → int, arrays → lists)."""
    out = {}
    for key, val in attrs.items():
        if val is None:
            val = "none"
        elif isinstance(val, (bool, np.bool_)):
            val = int(val)
        elif isinstance(val, np.ndarray):
            val = val.astype(float).ravel().tolist() if val.size > 1 else float(val.ravel()[0])
        elif isinstance(val, (np.integer,)):
            val = int(val)
        elif isinstance(val, (np.floating,)):
            val = float(val)
        elif isinstance(val, (list, tuple)):
            val = [float(v) for v in val] if all(isinstance(v, (int, float, np.number)) for v in val) else str(val)
        elif not isinstance(val, (int, float, str)):
            val = str(val)
        out[key] = val
    return out


def _jsonable(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if callable(obj):
        return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
    return str(obj)


def to_json(obj) -> str:
    """JSON text of a config or seed record (numpy values, paths and callables made plain)."""
    return json.dumps(obj, sort_keys=True, default=_jsonable)


@declare()
def dependency_versions() -> dict:
    """Versions of Python, headflow and every dependency (``"not installed"`` when absent).

    Read from the installed distributions' metadata, so nothing is imported.

    >>> dependency_versions()["headflow"] == __version__
    True
    """
    out = {"python": platform.python_version(), "headflow": __version__}
    for name in DEPENDENCIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


@declare(check_import=Boolean())
def summation_paths(*, check_import: bool = False) -> dict:
    """Which ways of evaluating the attention sums (:mod:`particles.summation`) are available.

    ``"exact"`` (the blocked exact pass) always is; ``"finufft"`` (the fast NUFFT routes of
    ``summation="fast"`` / ``"auto"``) needs the ``finufft`` package; ``"ducc0"`` (the faster NUFFT those
    routes use when it is installed, and the S^2 spectral solver's transforms) the ``ducc0`` package. With
    ``check_import=True`` the package is imported (:func:`particles.summation.fast_available`:
    slower, and catches a broken install), else only looked up.

    >>> summation_paths()["exact"]
    True
    """
    if check_import:
        from particles.summation import fast_available

        fast = fast_available()
    else:
        fast = importlib.util.find_spec("finufft") is not None
    return {"exact": True, "finufft": fast, "ducc0": importlib.util.find_spec("ducc0") is not None}


def _summation(model) -> tuple[str, float, float]:
    """The model's summation mode, its tolerance and the bound on the relative error of every
    partition function: 0 for the exact pass; ``tol`` for "fast" and "auto" (auto falls back to
    the exact pass wherever the fast bound cannot meet ``tol``)."""
    mode = str(getattr(model, "summation", "exact"))
    tol = float(getattr(model, "tol", 0.0))
    return mode, tol, (0.0 if mode == "exact" else tol)


@declare(config=DICT_OR_NONE, seeds=DICT_OR_NONE, model=AnyOf(NONE, Model()))
def provenance(*, config: dict | None = None, seeds: dict | None = None, model: MultiHead | None = None) -> dict:
    """Provenance attrs of a dataset: config, versions, seeds, summation path, conventions.

    Parameters
    ----------
    config : dict, optional
        The full configuration of the run (stored as JSON in ``attrs["config"]``).
    seeds : dict, optional
        Seeds or SeedSequence entropies (JSON in ``attrs["seeds"]``).
    model : particles.MultiHead, optional
        Its summation mode, tolerance and error bound are recorded (exact pass: ``"exact"``, 0);
        the bound actually met at each saved state is the ``summation_bound`` diagnostic.

    Returns
    -------
    dict of netCDF-safe attrs

    Examples
    --------
    >>> attrs = provenance(config={"beta": 1.0}, seeds={"x0": 0})
    >>> json.loads(attrs["config"]), attrs["Conventions"], attrs["summation"]
    ({'beta': 1.0}, 'CF-1.10', 'exact')
    """
    mode, tol, bound = _summation(model) if model is not None else ("exact", 0.0, 0.0)
    versions = dependency_versions()
    return netcdf_safe({
        "Conventions": CONVENTIONS,
        "headflow_version": __version__,
        "python_version": versions["python"],
        "versions": to_json(versions),
        "config": to_json(config or {}),
        "seeds": to_json(seeds or {}),
        "summation": mode,
        "summation_tol": tol,
        "summation_error_bound": bound,
    })


@declare(model=Model())
def model_attrs(model: MultiHead) -> dict:
    """Run parameters of a model as netCDF-safe attrs: :meth:`particles.MultiHead.to_attrs`,
    i.e. every constructor field (matrices flattened, with their shape), so that
    :func:`metrics.model_from_attrs` rebuilds the same model."""
    return netcdf_safe(model.to_attrs())
