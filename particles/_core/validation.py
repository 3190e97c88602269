"""Validation at the public boundary, shared by every headflow layer.

Contract: each checker either returns a clean float64 value (a contiguous array or a
Python float) or raises an :class:`InvalidParameterError` whose message names the
parameter, the caller, what was expected, what was received and how to fix it. Internal
code trusts what these functions return and never re-validates.
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import LIBRARY_ERRORS, ConvergenceWarning, InvalidParameterError, SolverError

__all__ = [
    "InvalidParameterError",
    "SolverError",
    "ConvergenceWarning",
    "LIBRARY_ERRORS",
    "check_param",
    "check_choice",
    "check_names",
    "check_bool",
    "check_callable",
    "check_instance",
    "check_rng",
]


def _fmt(caller: str) -> str:
    return f" of {caller}" if caller else ""


def check_param(
    value,
    name: str,
    caller: str = "",
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
    allow_inf: bool = False,
):
    """Validate a real scalar parameter against an interval.

    Returns ``float(value)`` (or ``int(value)`` when ``integer=True``).
    """
    kind = "an integer" if integer else "a float"
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    interval = f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"
    msg = f"The {name!r} parameter{_fmt(caller)} must be {kind} in {interval}. Got {value!r} instead."
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        else:
            raise InvalidParameterError(msg)
    try:
        as_float = float(value)
    except OverflowError:  # an int beyond float64
        raise InvalidParameterError(msg) from None
    if integer:
        if not as_float.is_integer():
            raise InvalidParameterError(msg)
        value = int(value)
    else:
        value = as_float
    if np.isnan(as_float) or (np.isinf(as_float) and not allow_inf):
        raise InvalidParameterError(msg)
    if low is not None and (value < low or (low_open and value == low)):
        raise InvalidParameterError(msg)
    if high is not None and (value > high or (high_open and value == high)):
        raise InvalidParameterError(msg)
    return value


def check_choice(value, name: str, choices, caller: str = ""):
    """Validate that ``value`` is one of ``choices`` (a dict's keys or a sequence)."""
    options = sorted(choices)
    if not isinstance(value, str) or value not in choices:
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be one of {options}; got {value!r}."
        )
    return value


def _typename(value) -> str:
    return type(value).__name__


def check_bool(value, name: str, caller: str = "") -> bool:
    """Validate a flag: ``True``/``False`` (or a numpy bool), nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be True or False. Got {value!r} instead."
        )
    return bool(value)


def check_callable(fn, name: str, caller: str = "", *, signature: str = "", allow_none: bool = False):
    """Validate that ``fn`` is callable (``None`` passes through when ``allow_none``)."""
    if fn is None and allow_none:
        return None
    if not callable(fn):
        sig = f" {signature}" if signature else ""
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be a callable{sig}. Got {_typename(fn)} instead."
        )
    return fn


def check_instance(obj, cls, name: str, caller: str = "", *, hint: str = ""):
    """Validate ``isinstance(obj, cls)``; ``hint`` says how to build a valid one."""
    if not isinstance(obj, cls):
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be a {names}. Got {_typename(obj)} instead."
            + (f" {hint}" if hint else "")
        )
    return obj


def check_rng(rng, name: str = "rng", caller: str = "") -> np.random.Generator:
    """``np.random.default_rng(rng)`` for a Generator, a non-negative int, a SeedSequence or None."""
    if isinstance(rng, (bool, np.bool_, float, str, bytes)) or (isinstance(rng, numbers.Integral) and rng < 0):
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be a np.random.Generator, a non-negative int, "
            f"a SeedSequence or None. Got {rng!r} instead."
        )
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be a np.random.Generator, a non-negative int, "
            f"a SeedSequence or None. Got {_typename(rng)} instead ({exc})."
        ) from None


def check_names(names, name: str, choices, caller: str = "") -> list:
    """Validate a sequence of names, each one of ``choices``; a bare string is refused
    (iterating it would ask for its letters)."""
    if isinstance(names, (str, bytes)):
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be a list of names; got the string {names!r}. "
            f"Wrap it in a list: [{names!r}]."
        )
    try:
        out = list(names)
    except TypeError:
        raise InvalidParameterError(
            f"The {name!r} parameter{_fmt(caller)} must be a list of names from {sorted(choices)}. "
            f"Got {_typename(names)} instead."
        ) from None
    for item in out:
        check_choice(item, name, choices, caller)
    return out


#: every exception type raised on purpose by headflow (bad input or a failed solve)
