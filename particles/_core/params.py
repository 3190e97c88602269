"""Every parameter's rule written once: declarations that validate, describe and generate bad inputs.

A public callable declares its parameters with :func:`declare` (scikit-learn's
``@validate_params`` is the model)::

    @declare(t1=Interval(0, None, closed="neither"), n_saves=Integer(2),
             kind=Options("usa", "softmax"), dt=Interval(0, None, closed="neither"),
             relations=[Relation(("dt", "t1"), lambda dt, t1: dt <= t1, "dt must be <= t1",
                                 breaks={"dt": 2.0, "t1": 1.0})])
    def study(model, *, t1=2.0, n_saves=5, kind="usa", dt=0.01): ...

The declaration is the one place the rule lives:

- **validation**, once, at the call (the wrapped function receives the checked, converted values and
  internal code does not check them again); an error names the parameter, the caller, what was
  expected, what was given, and the declared one-line fix hint;
- **the command line's config types** (``headflow/_schema.py`` turns the constraint of the
  parameter a TOML key feeds into that key's type, so the CLI and the function cannot disagree);
- **the generated bad-input suite** (``tests/test_declared_params.py``): :meth:`Constraint.invalid`
  derives invalid values from the constraint itself (each side of each interval, wrong types,
  NaN and inf, wrong shapes) and each :class:`Relation` carries the arguments that break it.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers

import numpy as np

from .errors import InvalidParameterError

__all__ = ["Constraint", "Interval", "Integer", "Options", "Boolean", "Instance", "Function", "SequenceOf",
           "AnyOf", "Relation", "NONE", "declare", "declaration"]

_WRONG_TYPES = (None, "1", [1.0], 1j, {"a": 1})
_INT64_MAX = 2**63 - 1


class Constraint:
    """A rule on one parameter: ``check`` returns the clean value or raises, ``invalid`` lists
    values the rule must refuse, ``describe`` says what it accepts."""

    hint = ""

    def describe(self) -> str:
        raise NotImplementedError

    def accepts(self, value) -> bool:
        raise NotImplementedError

    def convert(self, value):
        return value

    def invalid(self) -> list:
        raise NotImplementedError

    def check(self, value, name: str, caller: str):
        if not self.accepts(value):
            fix = f" {self.hint}" if self.hint else ""
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be {self.describe()}; got {_show(value)}.{fix}")
        return self.convert(value)



def _show(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" ({type(value).__name__})"


def _real(value) -> bool:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Interval(Constraint):
    """A real number in an interval; ``closed`` is "both", "left", "right" or "neither"
    (``None`` ends are infinite and always open); ``inf=True`` also admits +inf."""

    integer = False

    def __init__(self, low=None, high=None, *, closed: str = "both", inf: bool = False, hint: str = ""):
        self.low, self.high, self.closed, self.inf, self.hint = low, high, closed, inf, hint

    def _open(self, side: str) -> bool:
        return self.closed not in ("both", side)

    def describe(self) -> str:
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        left = "(" if self.low is None or self._open("left") else "["
        right = ")" if self.high is None or self._open("right") else "]"
        kind = "an integer" if self.integer else "a real number"
        return f"{kind} in {left}{lo}, {hi}{right}" + (" or inf" if self.inf else "")

    def accepts(self, value) -> bool:
        if not _real(value):
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
            if self.integer and not v.is_integer():
                return False
        if self.low is not None and (v < self.low or (v == self.low and self._open("left"))):
            return False
        return not (self.high is not None and (v > self.high or (v == self.high and self._open("right"))))

    def convert(self, value):
        value = value.item() if isinstance(value, np.ndarray) else value
        return int(value) if self.integer else float(value)

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

    def accepts(self, value) -> bool:
        return isinstance(value, str) and value in self.choices

    def invalid(self) -> list:
        return ["bogus", self.choices[0].upper() + "_", 3, None, [self.choices[0]]]



class Boolean(Constraint):
    """True or False (Python or numpy booleans)."""

    def describe(self) -> str:
        return "True or False"

    def accepts(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))

    def convert(self, value):
        return bool(value)

    def invalid(self) -> list:
        return ["yes", 2, None, 1.0]



class _NoneConstraint(Constraint):
    def describe(self) -> str:
        return "None"

    def accepts(self, value) -> bool:
        return value is None

    def invalid(self) -> list:
        return [0, "None"]


#: the value None (``AnyOf(NONE, c)`` is an optional parameter)
NONE = _NoneConstraint()


class Instance(Constraint):
    """An instance of ``cls`` passing an optional ``test`` (described by ``what``)."""

    def __init__(self, cls, *, test=None, what: str = "", hint: str = "", bad=()):
        self.cls, self.test, self.what, self.hint, self.bad = cls, test, what, hint, tuple(bad)

    def describe(self) -> str:
        return self.what or f"a {self.cls.__name__}"

    def accepts(self, value) -> bool:
        return isinstance(value, self.cls) and (self.test is None or bool(self.test(value)))

    def invalid(self) -> list:
        return [None, 3, "object", *self.bad]


class Function(Constraint):
    """A callable (its signature in ``what``)."""

    def __init__(self, what: str = "a callable", hint: str = ""):
        self.what, self.hint = what, hint

    def describe(self) -> str:
        return self.what

    def accepts(self, value) -> bool:
        return callable(value) and not isinstance(value, type)

    def invalid(self) -> list:
        return [None, 3, "f", [len]]


class SequenceOf(Constraint):
    """A list, tuple or 1-D array of items meeting ``item``; ``min_len`` entries at least,
    strictly increasing when ``increasing``."""

    def __init__(self, item: Constraint, *, min_len: int = 1, increasing: bool = False, hint: str = ""):
        self.item, self.min_len, self.increasing, self.hint = item, min_len, increasing, hint

    def describe(self) -> str:
        inc = "strictly increasing " if self.increasing else ""
        return f"a sequence of at least {self.min_len} {inc}values, each {self.item.describe()}"

    def _items(self, value):
        if isinstance(value, np.ndarray):
            return list(value) if value.ndim == 1 else None
        return list(value) if isinstance(value, (list, tuple)) else None

    def accepts(self, value) -> bool:
        items = self._items(value)
        if items is None or len(items) < self.min_len or not all(self.item.accepts(v) for v in items):
            return False
        return not (self.increasing and any(b <= a for a, b in zip(items, items[1:])))

    def convert(self, value):
        return [self.item.convert(v) for v in self._items(value)]

    def invalid(self) -> list:
        bad = ["abc", 5, None, [], np.ones((2, 2))] + [[v] * max(self.min_len, 1) for v in self.item.invalid()[:4]]
        if self.increasing:
            good = [v for v in (1, 2, 4, 8, 16) if self.item.accepts(v)]
            if len(good) >= 2:
                bad += [good[::-1], [good[0]] * max(self.min_len, 2)]
        return [v for v in bad if not self.accepts(v)]



class AnyOf(Constraint):
    """A value meeting at least one of the constraints (the first that accepts converts it)."""

    def __init__(self, *options: Constraint, hint: str = ""):
        self.options, self.hint = options, hint

    def describe(self) -> str:
        return " or ".join(c.describe() for c in self.options)

    def accepts(self, value) -> bool:
        return any(c.accepts(value) for c in self.options)

    def convert(self, value):
        return next(c for c in self.options if c.accepts(value)).convert(value)

    def invalid(self) -> list:
        seen, out = set(), []
        for c in self.options:
            for v in c.invalid():
                key = repr(v)
                if key not in seen and not self.accepts(v):
                    seen.add(key)
                    out.append(v)
        return out



class Relation:
    """A rule between parameters: ``test(**{name: value})`` must hold (on the checked values).

    ``breaks`` is a list of argument dicts (each valid alone) that break the rule, for the
    generated suite; the error names the first parameter and says ``message``.
    """

    def __init__(self, names, test, message: str, *, breaks=()):
        self.names, self.test, self.message = tuple(names), test, message
        self.breaks = [breaks] if isinstance(breaks, dict) else list(breaks)

    def check(self, values: dict, caller: str) -> None:
        if not self.test(*(values[n] for n in self.names)):
            got = ", ".join(f"{n} = {_show(values[n])}" for n in self.names)
            raise InvalidParameterError(f"The {self.names[0]!r} parameter of {caller}: {self.message}; got {got}.")


class Declaration:
    """The constraints and relations of one callable's parameters."""

    def __init__(self, caller: str, constraints: dict, relations: list):
        self.caller, self.constraints, self.relations = caller, constraints, relations

    def validate(self, arguments: dict) -> dict:
        """Check and convert every declared argument, then the relations; returns the new dict."""
        out = dict(arguments)
        for name, constraint in self.constraints.items():
            if name in out:
                out[name] = constraint.check(out[name], name, self.caller)
        for rel in self.relations:
            rel.check(out, self.caller)
        return out


def declare(*, caller: str | None = None, relations=(), **constraints):
    """Decorate a public callable with its parameters' constraints (validated at every call)."""

    def wrap(fn):
        sig = inspect.signature(fn)
        unknown = set(constraints) - set(sig.parameters)
        for rel in relations:
            unknown |= set(rel.names) - set(sig.parameters)
        if unknown:  # a declaration that names no parameter is a bug of the declaration
            raise TypeError(f"declare: {fn.__qualname__} has no parameter(s) {sorted(unknown)}")
        decl = Declaration(caller or fn.__name__, constraints, list(relations))

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise InvalidParameterError(f"{decl.caller}: {exc}.") from None
            bound.apply_defaults()
            for name, value in decl.validate(bound.arguments).items():
                bound.arguments[name] = value
            return fn(*bound.args, **bound.kwargs)

        checked.__headflow_params__ = decl
        return checked

    return wrap


def declaration(fn) -> Declaration | None:
    """The :class:`Declaration` of a declared callable (bound methods included), else None."""
    return getattr(getattr(fn, "__func__", fn), "__headflow_params__", None)
