"""Constructor fields of a frozen dataclass to and from netCDF-safe attrs.

One generic pair, so that a model's record is generated from its fields: a field added to
the dataclass is stored and restored without any further code (the cause of records that
silently dropped ``causal`` or ``update``). The types come from the field annotations.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping

import numpy as np

from .._core.errors import InvalidParameterError

__all__ = ["fields_to_attrs", "fields_from_attrs", "build_from_attrs"]


def fields_to_attrs(obj) -> dict:
    """``{name: value}`` of every init field of ``obj``: arrays flattened to float64 (their
    shape is the caller's to record), booleans as 0/1 (netCDF has no bool), None as "none".

    >>> from particles import MultiHead
    >>> fields_to_attrs(MultiHead(np.eye(2)))["causal"]
    0
    """
    out = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        if isinstance(value, np.ndarray):
            value = value.ravel().astype(np.float64)
        elif isinstance(value, (bool, np.bool_)):
            value = int(value)
        elif value is None:
            value = "none"
        out[f.name] = value
    return out


def fields_from_attrs(cls, attrs, *, shapes: dict) -> dict:
    """Constructor keywords of ``cls`` from attrs written by :func:`fields_to_attrs`; arrays
    are reshaped to ``shapes[name]``, bool and int fields cast back by their annotations.
    Fields absent from ``attrs`` keep their defaults (records of older versions); a missing
    field without a default raises ``KeyError`` with its name."""
    hints = typing.get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name not in attrs:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise KeyError(f.name)
            continue
        value = attrs[f.name]
        if isinstance(value, str) and value == "none":
            value = None
        elif f.name in shapes:
            value = np.asarray(value, dtype=np.float64).reshape(shapes[f.name])
        elif hints.get(f.name) is bool:
            value = bool(int(value))
        elif hints.get(f.name) is int:
            value = int(value)
        elif isinstance(value, np.generic):
            value = value.item()
        kw[f.name] = value
    return kw


def build_from_attrs(cls, attrs, *, arrays: tuple, caller: str):
    """``cls(**fields_from_attrs(...))`` with the arrays reshaped to ``attrs["matrix_shape"]``;
    every failure becomes an :class:`InvalidParameterError` that says what the attrs lack."""
    fix = f"pass the attrs written by {cls.__name__}.to_attrs (e.g. ds.attrs of metrics.trajectory_to_dataset)."
    if not isinstance(attrs, Mapping):
        raise InvalidParameterError(f"attrs of {caller} must be a mapping; got {type(attrs).__name__}.")
    if "tol" not in attrs and "summation_tol" in attrs:
        attrs = {**attrs, "tol": attrs["summation_tol"]}  # the name in files of earlier versions
    try:
        shape = tuple(int(s) for s in np.atleast_1d(attrs["matrix_shape"]))
        return cls(**fields_from_attrs(cls, attrs, shapes=dict.fromkeys(arrays, shape)))
    except KeyError as exc:
        raise InvalidParameterError(f"the attrs lack {exc.args[0]!r}: {fix}") from None
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"the attrs do not describe a valid model ({exc}): {fix}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidParameterError(f"the attrs are malformed ({type(exc).__name__}: {exc}): {fix}") from None
