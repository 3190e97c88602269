"""Validation at the public boundary, shared by every headflow layer.

The ``check_*`` helpers are one-line calls of the constraints of :mod:`particles._core.params` (the
one implementation of every rule and of the message form) for code that checks a value outside a
declaration. Contract: each checker either returns a clean float64 value (a contiguous array or a
Python float) or raises an :class:`InvalidParameterError` whose message names the
parameter, the caller, what was expected, what was received and how to fix it. Internal
code trusts what these functions return and never re-validates.
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import LIBRARY_ERRORS, ConvergenceWarning, InvalidParameterError, SolverError
from .params import NONE, AnyOf, Boolean, Function, Instance, Interval, Options, SequenceOf

__all__ = ["InvalidParameterError", "SolverError", "ConvergenceWarning", "LIBRARY_ERRORS", "check_param",
           "check_choice", "check_names", "check_bool", "check_callable", "check_instance", "check_rng"]


def _fmt(caller: str) -> str:
    return f" of {caller}" if caller else ""


def check_param(value, name: str, caller: str = "", *, low: float | None = None, high: float | None = None,
                low_open: bool = False, high_open: bool = False, integer: bool = False, allow_inf: bool = False):
    """Validate a real scalar parameter against an interval: :class:`~particles._core.params.Interval`
    (an integer one when ``integer=True``; ``allow_inf`` admits +inf). Returns ``float(value)`` (or
    ``int(value)``)."""
    closed = {(False, False): "both", (True, False): "right", (False, True): "left"}.get((low_open, high_open),
                                                                                          "neither")
    return Interval(low, high, closed=closed, inf=allow_inf, integer=integer).check(value, name, caller)


def check_choice(value, name: str, choices, caller: str = ""):
    """Validate that ``value`` is one of ``choices`` (a dict's keys or a sequence): :class:`Options`."""
    return Options(*sorted(choices)).check(value, name, caller)


def _typename(value) -> str:
    return type(value).__name__


def check_bool(value, name: str, caller: str = "") -> bool:
    """Validate a flag: ``True``/``False`` (or a numpy bool), nothing else: :class:`Boolean`."""
    return Boolean().check(value, name, caller)


def check_callable(fn, name: str, caller: str = "", *, signature: str = "", allow_none: bool = False):
    """Validate that ``fn`` is callable (``None`` passes through when ``allow_none``): :class:`Function`."""
    rule = Function(f"a callable {signature}".rstrip(), classes=True)
    return (AnyOf(NONE, rule) if allow_none else rule).check(fn, name, caller)


def check_instance(obj, cls, name: str, caller: str = "", *, hint: str = ""):
    """Validate ``isinstance(obj, cls)``; ``hint`` says how to build a valid one: :class:`Instance`."""
    names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
    return Instance(cls, what=f"a {names}", hint=hint).check(obj, name, caller)


def check_rng(rng, name: str = "rng", caller: str = "") -> np.random.Generator:
    """``np.random.default_rng(rng)`` for a Generator, a non-negative int, a SeedSequence or None."""
    shown = f"{rng!r} instead"
    if not (isinstance(rng, (bool, np.bool_, float, str, bytes)) or (isinstance(rng, numbers.Integral) and rng < 0)):
        try:
            return np.random.default_rng(rng)
        except (TypeError, ValueError) as exc:
            shown = f"{_typename(rng)} instead ({exc})"
    raise InvalidParameterError(f"The {name!r} parameter{_fmt(caller)} must be a np.random.Generator, a non-negative "
                                f"int, a SeedSequence or None. Got {shown}.") from None


def check_names(names, name: str, choices, caller: str = "") -> list:
    """Validate a sequence of names, each one of ``choices``: :class:`SequenceOf` :class:`Options`; a bare
    string is refused (iterating it would ask for its letters)."""
    hint = f"Wrap it in a list: [{names!r}]." if isinstance(names, str) else ""
    return SequenceOf(Options(*sorted(choices)), min_len=0, hint=hint).check(names, name, caller)


#: every exception type raised on purpose by headflow (bad input or a failed solve)
