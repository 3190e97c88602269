"""The base of every declared rule: :class:`Constraint` (check, describe, derive invalid values) and the
one form of a refusal, ``{subject} must be {what}; got {value}.{fix}``, whose subject is an argument
(``The 'beta' parameter of MultiHead``) or a config key (``[model].beta``, checked in the strict mode
of TOML values). The rules themselves are in :mod:`particles._core.params`."""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InvalidParameterError

__all__ = ["Constraint", "subject", "is_section"]


def is_section(caller: str) -> bool:
    """Whether ``caller`` is a config file's TOML section (``"[model]"``) rather than a callable."""
    return caller.startswith("[")


def subject(name: str, caller: str) -> str:
    """What a refusal is about, in the one form of every message: ``The 'beta' parameter of MultiHead``
    for an argument, ``[model].beta`` for a config key (whose caller is its TOML section)."""
    if is_section(caller):
        return f"{caller}.{name}"
    return f"The {name!r} parameter" + (f" of {caller}" if caller else "")


class Constraint:
    """A rule on one parameter: ``check`` returns the clean value or raises, ``invalid`` lists
    values the rule must refuse, ``describe`` says what it accepts.

    ``accepts(value, strict)``: ``strict`` is the mode of a config file's values (a caller that is a
    TOML section, :func:`subject`): TOML has no numpy types, so an integer is an int (not 4.0) and a
    sequence a list; strings and booleans are refused where numbers are meant, as in every mode.
    """

    hint = ""

    def describe(self) -> str:
        raise NotImplementedError

    def accepts(self, value, strict: bool = False) -> bool:
        raise NotImplementedError

    def convert(self, value):
        return value

    def invalid(self) -> list:
        raise NotImplementedError

    def check(self, value, name: str, caller: str):
        strict = is_section(caller)
        if not self.accepts(value, strict):
            raise InvalidParameterError(
                f"{subject(name, caller)} must be {self.describe()}; got {_show(value)}.{self.fix(value, strict)}")
        return self.convert(value)

    def fix(self, value, strict: bool = False) -> str:
        """The fix a refusal of ``value`` names: a number written as text is unquoted, then the hint."""
        hint = f" {self.hint}" if self.hint else ""
        number = _number(value) if isinstance(value, str) else None
        if number is not None and self.accepts(number, strict):
            return f" Write {value.strip()} without quotes.{hint}"
        return hint


def _number(text: str):
    """The int or float a string spells (``"64"``, ``"1e-3"``), else None."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None


def _show(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" ({type(value).__name__})"


def _real(value) -> bool:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
