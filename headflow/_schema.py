"""Types of the command line's config values: every TOML value is checked before any work.

A type is a small object with ``check(value) -> value`` raising :class:`Bad` with what was
expected; :func:`check_section` turns that into a message naming the TOML key, e.g.
``[study] n_values[1] = "64": must be an integer >= 1; got a string (write 64, without quotes)``.
"""

from __future__ import annotations

import math


class Bad(Exception):
    """A value of the wrong type or range; ``args[0]`` says what was expected."""


def _what(value) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "a list",
             dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _quoted_hint(value, want_number: bool) -> str:
    if want_number and isinstance(value, str):
        try:
            float(value)
            return f" (write {value}, without quotes)"
        except ValueError:
            return ""
    return ""


class Int:
    def __init__(self, low=None, high=None):
        self.low, self.high = low, high

    def describe(self):
        rng = "" if self.low is None else f" >= {self.low}"
        rng += "" if self.high is None else f" and <= {self.high}"
        return f"an integer{rng}"

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise Bad(f"must be {self.describe()}; got {_what(value)}{_quoted_hint(value, True)}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise Bad(f"must be {self.describe()}")
        return value


class Float:
    def __init__(self, low=None, *, open_low=False, high=None, open_high=False, inf=False):
        self.low, self.open_low, self.high, self.open_high, self.inf = low, open_low, high, open_high, inf

    def describe(self):
        rng = "" if self.low is None else f" {'>' if self.open_low else '>='} {self.low:g}"
        rng += "" if self.high is None else f" and {'<' if self.open_high else '<='} {self.high:g}"
        return f"a number{rng}" + (" (or inf)" if self.inf else "")

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Bad(f"must be {self.describe()}; got {_what(value)}{_quoted_hint(value, True)}")
        value = float(value)
        if math.isnan(value) or (math.isinf(value) and not (self.inf and value > 0)):
            raise Bad(f"must be {self.describe()}")
        if self.low is not None and (value < self.low or (self.open_low and value == self.low)) and \
                not (self.inf and math.isinf(value)):
            raise Bad(f"must be {self.describe()}")
        if self.high is not None and (value > self.high or (self.open_high and value == self.high)):
            raise Bad(f"must be {self.describe()}")
        return value


class Bool:
    def describe(self):
        return "true or false"

    def check(self, value):
        if not isinstance(value, bool):
            raise Bad(f"must be true or false; got {_what(value)}")
        return value


class Str:
    def __init__(self, choices=None):
        self.choices = None if choices is None else tuple(choices)

    def describe(self):
        return "a string" if self.choices is None else "one of " + ", ".join(f'"{c}"' for c in self.choices)

    def check(self, value):
        if not isinstance(value, str) or (self.choices is None and not value.strip()):
            raise Bad(f"must be {self.describe()}; got {_what(value)}")
        if self.choices is not None and value not in self.choices:
            raise Bad(f"must be {self.describe()}")
        return value


class Either:
    def __init__(self, *types):
        self.types = types

    def describe(self):
        return " or ".join(t.describe() for t in self.types)

    def check(self, value):
        for t in self.types:
            try:
                return t.check(value)
            except Bad:
                pass
        raise Bad(f"must be {self.describe()}; got {_what(value)}")


class ListOf:
    def __init__(self, item, *, min_len=1, increasing=False):
        self.item, self.min_len, self.increasing = item, min_len, increasing

    def describe(self):
        inc = " strictly increasing" if self.increasing else ""
        return f"a list of at least {self.min_len}{inc} values, each {self.item.describe()}"

    def check(self, value, key=""):
        if not isinstance(value, list):
            raise Bad(f"must be {self.describe()}; got {_what(value)}")
        if len(value) < self.min_len:
            raise Bad(f"must be {self.describe()}; got {len(value)}")
        out = []
        for i, v in enumerate(value):
            try:
                out.append(self.item.check(v))
            except Bad as exc:
                raise Bad(f"[{i}] = {v!r}: {exc.args[0]}") from None
        if self.increasing and any(b <= a for a, b in zip(out, out[1:])):
            raise Bad(f"must be {self.describe()}")
        return out


class Matrix:
    """A square d x d matrix or a list of them (nested lists of finite numbers, every row as long
    as the matrix is tall)."""

    def describe(self):
        return "a square matrix (list of rows of numbers) or a list of square matrices of one size"

    def check(self, value):
        def shape(v, depth):
            """The nested list's shape, or None if it is ragged or holds anything but finite numbers."""
            if depth == 0:
                ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
                return () if ok else None
            if not isinstance(v, list) or not v:
                return None
            shapes = [shape(u, depth - 1) for u in v]
            if any(s is None for s in shapes) or len(set(shapes)) != 1:
                return None
            return (len(v),) + shapes[0]

        found = shape(value, 2) or shape(value, 3)
        if found is None:
            raise Bad(f"must be {self.describe()}, all finite; got {_what(value)} that is not a rectangular "
                      "array of numbers (every row needs the same length)")
        if found[-1] != found[-2]:
            raise Bad(f"must be {self.describe()}; got {' x '.join(map(str, found[-2:]))} matrices")
        return value


class Table:
    """A TOML table with checked keys (e.g. the sweep grid); ``types`` maps key -> type."""

    def __init__(self, types):
        self.types = types

    def describe(self):
        return "a table of " + ", ".join(self.types)

    def check(self, value):
        if not isinstance(value, dict) or not value:
            raise Bad(f"must be a non-empty table of {', '.join(self.types)}; got {_what(value)}")
        unknown = set(value) - set(self.types)
        if unknown:
            raise Bad(f"has unknown key(s) {sorted(unknown)}; valid: {sorted(self.types)}")
        out = {}
        for k, v in value.items():
            try:
                out[k] = self.types[k].check(v)
            except Bad as exc:
                msg = exc.args[0]
                raise Bad(f".{k}{msg}" if msg.startswith("[") else f".{k} = {v!r}: {msg}") from None
        return out


def check_section(section: str, given: dict, types: dict, error) -> dict:
    """Check every given key of ``[section]`` against ``types``; raise ``error`` naming the key."""
    out = {}
    for key, value in given.items():
        t = types.get(key)
        if t is None:
            out[key] = value
            continue
        try:
            out[key] = t.check(value)
        except Bad as exc:
            msg = exc.args[0]
            if msg.startswith(("[", ".")):  # an element of a list or table: the path continues the key
                raise error(f"[{section}] {key}{msg}") from None
            raise error(f"[{section}] {key} = {value!r}: {msg}.") from None
    return out


def from_constraint(constraint):
    """The TOML type of a key that feeds a declared parameter (:func:`particles.validation.declare`):
    the CLI and the function check one rule. Parts a TOML value cannot express (None, Python
    objects such as a dask client) are left out of an ``AnyOf``."""
    from particles.validation import NONE, AnyOf, Boolean, Interval, MappingOf, Options, SequenceOf

    if isinstance(constraint, Interval):
        if constraint.integer:
            return Int(constraint.low, constraint.high)
        low_open = constraint.low is not None and constraint.closed not in ("both", "left")
        high_open = constraint.high is not None and constraint.closed not in ("both", "right")
        return Float(constraint.low, open_low=low_open, high=constraint.high, open_high=high_open, inf=constraint.inf)
    if isinstance(constraint, Options):
        return Str(constraint.choices)
    if isinstance(constraint, Boolean):
        return Bool()
    if isinstance(constraint, SequenceOf):
        return ListOf(from_constraint(constraint.item), min_len=constraint.min_len, increasing=constraint.increasing)
    if isinstance(constraint, MappingOf):
        return Table({k: ListOf(from_constraint(c)) for k, c in constraint.items.items()})
    if isinstance(constraint, AnyOf):
        parts = []
        for c in constraint.options:
            if c is NONE:
                continue
            try:
                parts.append(from_constraint(c))
            except TypeError:  # not expressible in TOML (a Python object)
                continue
        return parts[0] if len(parts) == 1 else Either(*parts)
    raise TypeError(f"{type(constraint).__name__} has no TOML form")
