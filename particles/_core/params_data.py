"""Constraints on the data a call receives (arrays, point clouds, matrix stacks, weights, seeds), for
:func:`~particles._core.declarations.declare`: each wraps the one checker of
:mod:`particles._core.validation` that owns the rule, so a declared parameter and an internal
``check_*`` call cannot disagree; the invalid values are the ways such data goes wrong."""

from __future__ import annotations

import numpy as np

from .arrays import check_points, check_real_array, check_scale, check_square_stack
from .declarations import Relation
from .errors import InvalidParameterError
from .params import Constraint, subject
from .states import check_states
from .validation import check_rng

__all__ = ["CheckedBy", "Array", "Checked", "Points", "States", "SquareStack", "Weights", "Seed", "one_per",
           "weights_or_uniform"]

_RAGGED = [[1.0, 0.0], [1.0]]


class CheckedBy(Constraint):
    """A constraint whose :meth:`check` does the work (a checker that converts or raises): it
    accepts what ``check`` lets through and converts as ``check`` does."""

    def accepts(self, value, strict: bool = False) -> bool:
        try:
            self.check(value, "value", "")
        except InvalidParameterError:
            return False
        return True

    def convert(self, value):
        return self.check(value, "value", "")


class Array(CheckedBy):
    """A real array (:func:`~particles._core.arrays.check_real_array`: float64, no ragged,
    complex, boolean or object input) with ``ndim`` dimensions (an int or a tuple of them),
    ``min_size`` entries at least, finite entries unless ``finite=False``, and entries in the domain
    ``within = (lo, hi)`` when given (:func:`~particles._core.arrays.check_within`)."""

    def __init__(self, ndim=None, *, min_size: int = 1, finite: bool = True, what: str = "a real array",
                 hint: str = "", within: tuple | None = None):
        self.ndim, self.min_size, self.finite, self.what, self.hint = ndim, min_size, finite, what, hint
        self.within = within

    def describe(self) -> str:
        return self.what

    def check(self, value, name: str, caller: str):
        try:  # (the checker's messages open with their subject: give it the one of every refusal)
            return check_real_array(value, subject(name, caller), "", ndim=self.ndim, finite=self.finite,
                                    min_size=self.min_size, expected=self.what, within=self.within)
        except InvalidParameterError as exc:
            fix = f" {self.hint}" if self.hint else ""
            raise InvalidParameterError(f"{exc}{fix}") from None

    def invalid(self) -> list:
        bad = [None, "abc", {"a": 1}, 1j, [1.0, 2j], [[1.0], [1.0, 2.0]], np.array([True, False]),
               np.array(["a"]), np.zeros((2, 2, 2, 2))]
        if self.finite:
            bad += [np.array([np.nan]), np.array([1.0, np.inf])]
        if self.min_size >= 1:
            bad += [np.zeros(0)]
        if self.within is not None:
            bad += [np.array([self.within[1] + 1.0]), np.array([self.within[0] - 1.0])]
        return [v for v in bad if not self.accepts(v)]


class Checked(CheckedBy):
    """A value that ``checker(value, name, "", **options)`` validates and converts.

    The checker's message is re-worded to name the parameter and the caller
    (``The 'x' parameter of f must ...``).
    """

    explains = True  # its checker's message says what is wrong (AnyOf(NONE, Checked) passes it on)

    def __init__(self, checker, what: str, bad, *, hint: str = "", **options):
        self.checker, self.what, self.bad, self.hint, self.options = checker, what, list(bad), hint, options

    def describe(self) -> str:
        return self.what

    def check(self, value, name: str, caller: str):
        try:
            return self.checker(value, name, caller="", **self.options)
        except InvalidParameterError as exc:
            msg, fix = str(exc), f" {self.hint}" if self.hint else ""
            for prefix in (f"The {name!r} parameter ", f"{name} "):
                if msg.startswith(prefix):
                    raise InvalidParameterError(f"{subject(name, caller)} {msg[len(prefix):]}{fix}") from None
            raise InvalidParameterError(f"{subject(name, caller)}: {msg}{fix}") from None

    def invalid(self) -> list:
        return [v for v in self.bad if not self.accepts(v)]


def Points(*, on_sphere: bool = True, min_d: int = 2, min_n: int = 1, atol: float = 1e-10, d: int | None = None,
           hint: str = "") -> Checked:
    """Points of shape (n, d), n >= min_n, d >= min_d (exactly ``d`` columns when given), finite, on
    the unit sphere when ``on_sphere`` (rows within ``atol``)."""
    where = " on the unit sphere" if on_sphere else ""
    bad = [None, "abc", 3, np.ones(3), np.ones((2, 3, 3)), np.zeros((0, 3)), _RAGGED, np.array([[1j, 0.0]]),
           np.full((2, 3), np.nan), np.array([[np.inf, 0.0, 0.0]]), np.eye(3)[:, :1] if min_d > 1 else "",
           2.0 * np.eye(3), np.eye(3)[:1]] + ([np.eye(d + 1)] if d is not None else [])
    shape = f"(n, {d})" if d is not None else "(n, d)"
    return Checked(check_points, f"points of shape {shape}{where}", bad, hint=hint, on_sphere=on_sphere,
                   min_d=min_d, min_n=min_n, atol=atol, d=d)


def States(*, on_sphere: bool = True, min_times: int = 1, hint: str = "") -> Checked:
    """Stacked states of shape (k, n, d) (saved times or ensemble members), finite, on the sphere."""
    bad = [None, "abc", 3, np.ones((3, 3)), np.full((1, 2, 3), np.nan), np.array([[[1j, 0.0]]]),
           2.0 * np.eye(3)[None]]
    return Checked(check_states, "states of shape (k, n, d)", bad, hint=hint, on_sphere=on_sphere,
                   min_times=min_times)


def SquareStack(*, hint: str = "") -> Checked:
    """Square matrices, shape (d, d) or (H, d, d), finite (a (d, d) matrix becomes (1, d, d))."""
    bad = [None, "abc", 3, np.ones((3, 4)), np.ones((2, 2, 3)), np.array([[np.nan, 0.0], [0.0, 1.0]]),
           np.zeros((0, 2, 2)), _RAGGED, np.array([[1j]])]
    return Checked(check_square_stack, "an array of shape (d, d) or (H, d, d)", bad, hint=hint)


def _weights(w, name, caller, probability=False):
    """Non-negative finite weights of shape (n,) with a positive total (their length is a relation);
    probabilities must also sum to 1 within 1e-8 (they are then renormalised exactly)."""
    w = check_real_array(w, name, caller, ndim=(1,), expected="non-negative weights of shape (n,)")
    if np.any(w < 0) or not w.sum() > 0:
        raise InvalidParameterError(f"{name} must be non-negative with a positive sum; got min {w.min():.3g}, "
                                    f"sum {w.sum():.3g}.")
    if probability and abs(w.sum() - 1.0) > 1e-8:
        raise InvalidParameterError(f"{name} must sum to 1; got sum {w.sum():.12g}. Use {name} / {name}.sum().")
    return w / w.sum() if probability else check_scale(w, name, caller)


def Weights(*, probability: bool = False, hint: str = "") -> Checked:
    """Non-negative weights of shape (n,) with a positive sum; ``probability=True``: summing to 1
    (within 1e-8; returned renormalised exactly)."""
    bad = [None, "abc", 3, np.ones((2, 2)), -np.ones(3), np.zeros(3), np.array([np.nan, 1.0]), np.zeros(0), [1j]]
    what = "probability weights of shape (n,) summing to 1" if probability else "non-negative weights of shape (n,)"
    return Checked(_weights, what, bad + ([np.ones(3)] if probability else []), hint=hint, probability=probability)


def Seed(*, hint: str = "") -> Checked:
    """A random source: None, a non-negative int, a SeedSequence or a Generator (``np.random.default_rng``)."""
    bad = [-1, "seed", 1.5, [1j], {"a": 1}, True]
    return Checked(_seed, "None, a non-negative int, a SeedSequence or a np.random.Generator", bad, hint=hint)


def _seed(value, name, caller):
    check_rng(value, name, caller)
    return value  # the body draws from it (np.random.default_rng(value) is the same generator or seed)


def one_per(name: str, of: str = "points") -> Relation:
    """The relation "``name`` has one entry per row of ``of``" (an absent ``name``, None, passes)."""
    return Relation((name, of), lambda v, x: v is None or len(v) == len(x), f"must have one entry per row of {of}",
                    breaks={name: np.full(7, 1 / 7)})  # (the valid calls never have 7 rows)


def weights_or_uniform(weights, n: int) -> np.ndarray:
    """Checked weights as they are, or 1/n each for ``None`` (an optional declared ``Weights``)."""
    return np.full(n, 1.0 / n) if weights is None else weights
