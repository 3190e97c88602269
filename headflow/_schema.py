"""Types of the command line's config values: the library's own constraints
(:mod:`particles.validation`) in the strict mode of TOML values, so a config key and the parameter
it feeds check one rule and say it in one form::

    [study].n_values[1] must be an integer in [1, inf); got '64' (str). Write 64 without quotes.

The one value the library has no constraint for is here: a matrix written as nested lists
(:class:`Matrix`). Imported by :mod:`headflow._config` on first use (it loads numpy).
"""

from __future__ import annotations

import math

from particles.validation import Constraint, InvalidParameterError

__all__ = ["Matrix", "check_section"]


def _shape(value, depth: int):
    """The nested list's shape, or None if it is ragged or holds anything but finite numbers."""
    if depth == 0:
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
        return () if ok else None
    if not isinstance(value, list) or not value:
        return None
    shapes = [_shape(v, depth - 1) for v in value]
    if any(s is None for s in shapes) or len(set(shapes)) != 1:
        return None
    return (len(value),) + shapes[0]


def _bad_entry(value, index=()):
    """(index, entry) of the first entry of a nested list that is not a finite number, or None."""
    if isinstance(value, list):
        return next((bad for i, v in enumerate(value) if (bad := _bad_entry(v, index + (i,)))), None)
    return None if not index or _shape(value, 0) is not None else (index, value)


class Matrix(Constraint):
    """A square d x d matrix or a list of them, as TOML writes them: nested lists of finite numbers,
    every row as long as the matrix is tall (no booleans)."""

    def describe(self) -> str:
        return "a square matrix (a list of rows of finite numbers) or a list of square matrices of one size"

    def accepts(self, value, strict: bool = False) -> bool:
        found = _shape(value, 2) or _shape(value, 3)
        return found is not None and found[-1] == found[-2]

    def fix(self, value, strict: bool = False) -> str:
        found = _shape(value, 2) or _shape(value, 3)
        if found is not None:
            return f" It holds {found[-2]} x {found[-1]} matrices."
        if (bad := _bad_entry(value)) is None:
            return " It is not a rectangular array: every row needs the same length."
        what = "not a finite number" if type(bad[1]) in (int, float) else f"a {type(bad[1]).__name__}, not a number"
        return f" Its entry {''.join(f'[{i}]' for i in bad[0])} is {bad[1]!r}, {what}."

    def invalid(self) -> list:
        return [[[1.0, 2.0]], [[1.0], [2.0, 3.0]], "eye", [[True]], [[math.nan]], [], 3.0]


def check_section(section: str, given: dict, types: dict, error) -> dict:
    """Check and convert every given key of ``[section]`` by its constraint (strict: the caller is the
    section); a refusal becomes ``error`` with the constraint's message, which names the key."""
    out = {}
    for key, value in given.items():
        rule = types.get(key)
        try:
            out[key] = value if rule is None else rule.check(value, key, f"[{section}]")
        except InvalidParameterError as exc:
            raise error(str(exc)) from None
    return out
