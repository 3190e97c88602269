r"""Cell keys from the configuration alone: canonical forms of the few derived values a key holds.

A cell's file name is the SHA-256 of its key, so a key must be the same on every machine that is
given the same configuration. A value computed by a floating-point library call (``arccos``, ``exp``,
an SVD, a solver's output) can differ in its last bit between numpy builds and CPUs; such a value
never enters a key as it is. It enters as one of:

- its *correctly rounded* value, computed here in exact decimal arithmetic (:func:`exact_arccos`),
  which is the same double everywhere;
- a *rounded* form (:func:`canonical_float`, :func:`density_key`): 10 significant digits, so two
  machines whose values differ in the last bits agree unless a value lies within about
  :math:`10^{-16}` (relative) of a rounding boundary, a chance of about :math:`10^{-6}` per value;
- or the input it was derived from.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal, localcontext

import numpy as np

__all__ = ["exact_arccos", "canonical_float", "density_key", "model_key"]

#: significant digits of a rounded derived value in a key
KEY_DIGITS = 10


def exact_arccos(x: float) -> float:
    r"""The double nearest to :math:`\arccos x` for :math:`x \in [-1, 1]`, in exact decimal arithmetic.

    Through :math:`\arccos x = 2\arcsin\sqrt{(1-x)/2}` and the series
    :math:`\arcsin y = \sum_k \frac{(2k)!}{4^k (k!)^2 (2k+1)} y^{2k+1}` (:math:`y \le 1/\sqrt2`
    for :math:`x \ge 0`; :math:`\arccos x = \pi - \arccos(-x)` otherwise) at 60 digits, then rounded
    once to a double (``float(Decimal)`` rounds correctly). Slow (a millisecond) and exact: for keys.

    >>> exact_arccos(0.999)
    0.044725087168733454
    >>> exact_arccos(-1.0) == np.pi, exact_arccos(1.0)
    (True, 0.0)
    """
    x = float(x)
    if not -1.0 <= x <= 1.0:
        raise ValueError(f"exact_arccos needs x in [-1, 1]; got {x!r}.")
    with localcontext() as ctx:
        ctx.prec = 60
        if x < 0:
            return float(_pi() - _arccos_nonneg(-Decimal(x)))
        return float(_arccos_nonneg(Decimal(x)))


def _arccos_nonneg(x: Decimal) -> Decimal:
    y = ((1 - x) / 2).sqrt()  # <= 1/sqrt(2): the series gains at least a factor 2 per term
    term, total, k, y2 = y, y, 0, y * y
    eps = Decimal(10) ** -58
    while abs(term) > eps:
        k += 1
        term = term * y2 * (2 * k - 1) * (2 * k - 1) / ((2 * k) * (2 * k + 1))
        total += term
    return 2 * total


def _pi() -> Decimal:
    return 2 * _arccos_nonneg(Decimal(0))  # arccos 0 = pi / 2


def canonical_float(x: float) -> float:
    """``x`` rounded to :data:`KEY_DIGITS` significant digits: the key form of a derived value (the
    identity on values written with 10 digits or fewer, such as 0.1, 2.5 or 1e-3).

    >>> canonical_float(0.1), canonical_float(2.0 / 3.0)
    (0.1, 0.6666666667)
    """
    return float(f"{float(x):.{KEY_DIGITS}g}")


def density_key(values) -> str:
    """A key for an initial density: the SHA-256 (16 digits) of its values at fixed probe points,
    each rounded by :func:`canonical_float` (a density's values, not a solver's output, name it)."""
    text = ",".join(f"{float(v):.{KEY_DIGITS}g}" for v in np.asarray(values, dtype=np.float64).ravel())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def model_key(model) -> dict:
    """A model's fields as a key holds them: :func:`metrics.model_attrs` with the one derived float,
    ``log_time_scale`` (``"auto"`` resolves it through an operator norm), in its canonical form."""
    from .._data.provenance import model_attrs

    attrs = model_attrs(model)
    attrs["log_time_scale"] = canonical_float(attrs["log_time_scale"])
    return attrs
