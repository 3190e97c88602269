"""Every parameter's rule written once: declarations that validate, describe and generate bad inputs.

A public callable declares its parameters with :func:`declare` (scikit-learn's
``@validate_params`` is the model)::

    @declare(t1=Interval(0, None, closed="neither"), n_saves=Integer(2), kind=Options("usa", "softmax"),
             relations=[Relation(("n_saves", "t1"), lambda k, t1: k <= 100 * t1, "...", breaks={...})])
    def study(model, *, t1=2.0, n_saves=5, kind="usa"): ...

The declaration is the one place the rule lives:

- **validation** (:func:`~particles._core.declarations.declare`), once, at the call (the wrapped
  function receives the checked, converted values and internal code does not check them again);
  an error names the parameter, the caller, what was expected, what was given, and the declared
  one-line fix hint;
- **the command line's config types**: a TOML key is checked by the constraint of the parameter it
  feeds, in strict mode, its caller being its section (``check(value, "beta", "[model]")``: the
  message names ``[model].beta``), so the CLI and the function cannot disagree;
- **the generated bad-input suite** (``tests/test_declared_params.py``): :meth:`Constraint.invalid`
  derives invalid values from the constraint itself (each side of each interval, wrong types,
  NaN and inf, wrong shapes) and each :class:`Relation` carries the arguments that break it.
"""

from __future__ import annotations

import math

import numpy as np

from .constraint import Constraint, _real, _show, is_section, subject
from .errors import InvalidParameterError

__all__ = ["Constraint", "Interval", "Integer", "Options", "Boolean", "Instance", "Function", "SequenceOf",
           "AnyOf", "MappingOf", "NONE", "subject"]

_WRONG_TYPES = (None, "1", [1.0], 1j, {"a": 1})
_INT64_MAX = 2**63 - 1


class Interval(Constraint):
    """A real number in an interval; ``closed`` is "both", "left", "right" or "neither"
    (``None`` ends are infinite and always open); ``inf=True`` also admits +inf."""

    integer = False

    def __init__(self, low=None, high=None, *, closed: str = "both", inf: bool = False, hint: str = "",
                 integer: bool | None = None):
        self.low, self.high, self.closed, self.inf, self.hint = low, high, closed, inf, hint
        if integer is not None:  # (Integer is the closed integer interval; an open one says integer=True)
            self.integer = integer

    def _open(self, side: str) -> bool:
        return self.closed not in ("both", side)

    def describe(self) -> str:
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        left = "(" if self.low is None or self._open("left") else "["
        right = ")" if self.high is None or self._open("right") else "]"
        kind = "an integer" if self.integer else "a real number"
        return f"{kind} in {left}{lo}, {hi}{right}" + (" or inf" if self.inf else "")

    def accepts(self, value, strict: bool = False) -> bool:
        if not _real(value) or (strict and self.integer and not isinstance(value, int)):
            return False
        value = value.item() if isinstance(value, np.ndarray) else value
        if isinstance(value, (int, np.integer)):
            v = int(value)  # exact: a float conversion of a huge int would overflow or round
            if abs(v) > _INT64_MAX:
                return False
        else:
            v = float(value)
            if math.isnan(v):
                return False
            if math.isinf(v):
                return self.inf and v > 0
            if self.integer and (not v.is_integer() or abs(v) > _INT64_MAX):
                return False
        if self.low is not None and (v < self.low or (v == self.low and self._open("left"))):
            return False
        return not (self.high is not None and (v > self.high or (v == self.high and self._open("right"))))

    def convert(self, value):
        value = value.item() if isinstance(value, np.ndarray) else value
        return int(value) if self.integer else float(value)

    def fix(self, value, strict: bool = False) -> str:
        whole = isinstance(value, (int, np.integer)) or self.integer and _real(value) and math.isfinite(value)
        if not (_real(value) and whole and abs(value) > _INT64_MAX):
            return super().fix(value, strict)
        as_float = "" if self.integer else "; write it as a float (e.g. 1e+20)"
        return f" It is too large: integers are limited to int64, at most 2^63 - 1 = {_INT64_MAX} in size{as_float}."

    def invalid(self) -> list:
        bad = [*_WRONG_TYPES, True, np.nan, -np.inf, 10**400] + ([] if self.inf else [np.inf])
        step = 1 if self.integer else 1e-9
        if self.low is not None:
            bad += [self.low - step, self.low - 1e6] + ([self.low] if self._open("left") else [])
        if self.high is not None:
            bad += [self.high + step, self.high + 1e6] + ([self.high] if self._open("right") else [])
        if self.integer:
            bad += [1.5, (self.low if self.low is not None else 0) + 0.5]
        return [v for v in bad if not self.accepts(v)]


class Integer(Interval):
    """An integer in ``[low, high]`` (Python or numpy integer, or an integral float)."""

    integer = True

    def __init__(self, low=None, high=None, *, hint: str = ""):
        super().__init__(low, high, closed="both", hint=hint)


class Options(Constraint):
    """One of the given strings."""

    def __init__(self, *choices: str, hint: str = ""):
        self.choices, self.hint = tuple(choices), hint

    def describe(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.choices)

    def accepts(self, value, strict: bool = False) -> bool:
        return isinstance(value, str) and value in self.choices

    def invalid(self) -> list:
        return ["bogus", self.choices[0].upper() + "_", 3, None, [self.choices[0]]]


class Boolean(Constraint):
    """True or False (Python or numpy booleans)."""

    def describe(self) -> str:
        return "True or False"

    def accepts(self, value, strict: bool = False) -> bool:
        return isinstance(value, (bool, np.bool_))

    def convert(self, value):
        return bool(value)

    def invalid(self) -> list:
        return ["yes", 2, None, 1.0]


class _NoneConstraint(Constraint):
    def describe(self) -> str:
        return "None"

    def accepts(self, value, strict: bool = False) -> bool:
        return value is None

    def invalid(self) -> list:
        return [0, "None"]


#: the value None (``AnyOf(NONE, c)`` is an optional parameter)
NONE = _NoneConstraint()

#: the inverse noise strength κ of every noisy flow (the noise's generator is κ⁻¹Δ): +inf is no noise
KAPPA = Interval(0, None, closed="neither", inf=True,
                 hint="kappa is the inverse noise strength (generator kappa^-1 Laplacian): kappa = np.inf (the "
                      "default) is noiseless, a smaller kappa is more noise; kappa = 0 would be infinite noise.")


class Instance(Constraint):
    """An instance of ``cls`` passing an optional ``test`` (described by ``what``)."""

    def __init__(self, cls, *, test=None, what: str = "", hint: str = "", bad=()):
        self.cls, self.test, self.what, self.hint, self.bad = cls, test, what, hint, tuple(bad)

    def describe(self) -> str:
        return self.what or f"a {self.cls.__name__}"

    def accepts(self, value, strict: bool = False) -> bool:
        return isinstance(value, self.cls) and (self.test is None or bool(self.test(value)))

    def invalid(self) -> list:
        return [v for v in (None, 3, 2.5, "object", *self.bad) if not self.accepts(v)]


class Function(Constraint):
    """A callable (its signature in ``what``); a class only with ``classes=True`` (a class passed for a
    function is usually a mistake: a factory that builds objects is then asked for explicitly)."""

    def __init__(self, what: str = "a callable", hint: str = "", *, classes: bool = False):
        self.what, self.hint, self.classes = what, hint, classes

    def describe(self) -> str:
        return self.what

    def accepts(self, value, strict: bool = False) -> bool:
        return callable(value) and (self.classes or not isinstance(value, type))

    def invalid(self) -> list:
        return [None, 3, "f", [len]]


class SequenceOf(Constraint):
    """A list, tuple or 1-D array of items meeting ``item``; ``min_len`` entries at least,
    strictly increasing when ``increasing``."""

    def __init__(self, item: Constraint, *, min_len: int = 1, increasing: bool = False, hint: str = ""):
        self.item, self.min_len, self.increasing, self.hint = item, min_len, increasing, hint

    def describe(self) -> str:
        inc = "strictly increasing " if self.increasing else ""
        size = f"at least {self.min_len} " if self.min_len else ""
        return f"a sequence of {size}{inc}values, each {self.item.describe()}"

    def _items(self, value, strict: bool = False):
        if isinstance(value, np.ndarray) and not strict:
            return list(value) if value.ndim == 1 else None
        return list(value) if isinstance(value, list if strict else (list, tuple)) else None

    def accepts(self, value, strict: bool = False) -> bool:
        items = self._items(value, strict)
        if items is None or len(items) < self.min_len or not all(self.item.accepts(v, strict) for v in items):
            return False
        return not (self.increasing and any(b <= a for a, b in zip(items, items[1:])))

    def check(self, value, name: str, caller: str):
        items = self._items(value, is_section(caller)) or []
        for i, v in enumerate(items if len(items) >= self.min_len else []):
            self.item.check(v, f"{name}[{i}]", caller)  # a bad entry is named: n_values[1]
        return super().check(value, name, caller)

    def convert(self, value):
        return [self.item.convert(v) for v in self._items(value)]  # (a strict value is a list: same items)

    def invalid(self) -> list:
        bad = ["abc", 5, None, [], np.ones((2, 2))] + [[v] * max(self.min_len, 1) for v in self.item.invalid()[:4]]
        if self.increasing:
            good = [v for v in (1, 2, 4, 8, 16) if self.item.accepts(v)]
            if len(good) >= 2:
                bad += [good[::-1], [good[0]] * max(self.min_len, 2)]
        return [v for v in bad if not self.accepts(v)]


class MappingOf(Constraint):
    """A dict of names (among ``items``) to non-empty lists of distinct values, each meeting the
    constraint of its name (a sweep's grid); errors name the entry, e.g. ``grid['beta']``."""

    def __init__(self, items: dict, *, hint: str = ""):
        self.items, self.hint = dict(items), hint

    def describe(self) -> str:
        return f"a dict of name -> non-empty list of distinct values, names among {sorted(self.items)}"

    def _problem(self, value, name: str, strict: bool = False):
        """(entry name, what is wrong) of the first bad entry, or None."""
        if not isinstance(value, dict) or not value:
            return name, f"must be {self.describe()}, e.g. {{'beta': [0.5, 1.0]}}; got {_show(value)}"
        unknown = sorted(map(str, set(value) - set(self.items)))
        if unknown:
            return name, f"has unknown key(s) {unknown}; valid: {sorted(self.items)}"
        for key, vals in value.items():
            entry = f"{name}[{key!r}]"
            nested = isinstance(self.items[key], SequenceOf)  # each value a list itself (head strengths)
            if isinstance(vals, (str, bytes, dict)) or not isinstance(vals, (list, tuple, np.ndarray)) \
                    or (not nested and np.ndim(vals) != 1):
                return entry, f"must be a list of values; got {_show(vals)}. Use [{vals!r}]"
            vals = list(vals)
            if nested and vals and not all(isinstance(v, (list, tuple, np.ndarray)) for v in vals):
                return entry, f"must be a list of lists (one per grid point); got {_show(vals)}. Use [{vals!r}]"
            if not vals:
                return entry, "is empty; give at least one value"
            for v in vals:
                if not self.items[key].accepts(v, strict):
                    fix = self.items[key].fix(v, strict).rstrip(".")  # (check ends the message)
                    return entry, f"values must each be {self.items[key].describe()}; got {_show(v)}" + (
                        f".{fix}" if fix else "")
            # distinct as the values the grid runs (1 and 1.0, or 1.0 and np.float64(1.0), are one value)
            if len(set(repr(self.items[key].convert(v)) for v in vals)) != len(vals):
                return entry, f"repeats a value; got {vals}"
        return None

    def accepts(self, value, strict: bool = False) -> bool:
        return self._problem(value, "", strict) is None

    def check(self, value, name: str, caller: str):
        problem = self._problem(value, name, is_section(caller))
        if problem is not None:
            fix = f" {self.hint}" if self.hint else ""
            raise InvalidParameterError(f"{subject(problem[0], caller)} {problem[1]}.{fix}")
        return self.convert(value)

    def convert(self, value):
        return {k: [self.items[k].convert(v) for v in list(vals)] for k, vals in value.items()}

    def invalid(self) -> list:
        key, item = next(iter(self.items.items()))
        good = next((v for v in (1, 2, 1.0, *getattr(item, "choices", ())) if item.accepts(v)), None)
        bad = ["beta", [1.0], {}, None, {"bogus": [good]}, {key: []}, {key: good}, {key: [good, good]}]
        bad += [{k: [c.invalid()[0]]} for k, c in self.items.items()]
        return [v for v in bad if not self.accepts(v)]


class AnyOf(Constraint):
    """A value meeting at least one of the constraints (the first that accepts converts it)."""

    def __init__(self, *options: Constraint, hint: str = ""):
        self.options, self.hint = options, hint

    def describe(self) -> str:
        return " or ".join(c.describe() for c in self.options)

    def accepts(self, value, strict: bool = False) -> bool:
        return any(c.accepts(value, strict) for c in self.options)

    def convert(self, value):
        return next(c for c in self.options if c.accepts(value)).convert(value)

    def check(self, value, name: str, caller: str):
        rest = [c for c in self.options if c is not NONE]
        if value is not None and len(rest) == 1 and getattr(rest[0], "explains", False) and not self.accepts(value):
            return rest[0].check(value, name, caller)  # "None or X" refusing a non-None value: X's checker says why
        return super().check(value, name, caller)

    def fix(self, value, strict: bool = False) -> str:  # "None or X" refusing a value: X's fix (e.g. too large)
        rest = [c for c in self.options if c is not NONE]
        return rest[0].fix(value, strict) if len(rest) == 1 and not self.hint else super().fix(value, strict)

    def invalid(self) -> list:
        seen, out = set(), []
        for c in self.options:
            for v in c.invalid():
                key = repr(v)
                if key not in seen and not self.accepts(v):
                    seen.add(key)
                    out.append(v)
        return out
