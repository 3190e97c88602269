r"""Cell keys from the configuration alone: canonical forms of the few derived values a key holds.

A cell's file name is the SHA-256 of its key, so a key must be the same on every machine that is
given the same configuration. A value computed by a floating-point library call (``arccos``, ``exp``,
an SVD, a solver's output) can differ in its last bit between numpy builds and CPUs; such a value
never enters a key as it is. It enters as one of:

- its *correctly rounded* value, computed here in exact decimal arithmetic (:func:`exact_arccos`),
  which is the same double everywhere;
- a *rounded* form (:func:`canonical_float`, :func:`density_key`, :func:`study_density_key`): 10
  significant digits, so two machines whose values differ in the last bits agree unless a value lies
  within about :math:`10^{-16}` (relative) of a rounding boundary, a chance of about :math:`10^{-6}`
  per value;
- or the input it was derived from.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal, localcontext

import numpy as np

__all__ = ["exact_arccos", "canonical_float", "density_key", "study_density_key", "model_key"]

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


def study_density_key(density_fn, d: int, m_grid: int, caller: str = "") -> str:
    r"""A study's key for its initial density: tells apart any two densities that differ on the
    reference's own grid (:func:`metrics._observables.density.reference_grid`: the m_grid cells of S^1,
    the bound grid of S^{d-1}) by more than the key's rounding (:data:`KEY_DIGITS` significant digits of
    the density's maximum there).

    A density that its 64 probe values determine on that grid keeps the key of its probe values
    (:func:`density_key`, the form of the stores written before the grid entered the key): a
    trigonometric polynomial of degree < 32 on S^1 (the probes are 64 equispaced angles), a polynomial of
    low degree in the coordinates on S^{d-1} (least squares on the probes), reproduced on the whole grid
    within the rounding. Any other density is keyed by its values on the grid, each rounded to the
    decimal place of the maximum's last kept digit (so values at round-off level of zero are 0 on
    every machine). Two densities with equal probe values but a high mode apart (degree 64 on S^1, which
    the 64 probes alias to a constant) thus get different keys. Cells a store holds under the probe key of a
    density keyed by its grid are not migrated: the probe key cannot say which of such densities they are
    of (they stay, and this density's cells are computed). Also checks the density (its errors name
    ``caller``).
    """
    from .._observables.density import probe_density, probe_points, reference_grid

    probes = probe_density(density_fn, d, caller)
    points = reference_grid(d, int(m_grid))
    values = probe_density(density_fn, d, caller, points=points)
    scale = _rounding_step(values)
    fit = _probe_fit(probe_points(d), probes, points)
    if np.max(np.abs(fit - values)) <= scale:  # the probes determine it on the grid: the probe key
        return density_key(probes)
    q = np.rint(values / scale).astype(np.int64)
    text = f"grid {points.shape[0]}x{d}:" + ",".join(map(str, q.tolist()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _rounding_step(values) -> float:
    """The decimal place of the :data:`KEY_DIGITS`-th significant digit of ``max |values|`` (read from its
    decimal form, so the same double on every machine; 1.0 for an all-zero array)."""
    top = float(np.max(np.abs(values)))
    if top == 0.0:
        return 1.0
    exponent = int(f"{top:.{KEY_DIGITS - 1}e}".split("e")[1])
    return float(f"1e{exponent - KEY_DIGITS + 1}")


def _probe_fit(probes: np.ndarray, values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The values at ``points`` of the function the probe values determine: on S^1 the trigonometric
    interpolant of the 64 equispaced probes; on S^{d-1} the least-squares polynomial in the coordinates
    of the highest total degree with at most 40 monomials."""
    d = points.shape[1]
    if d == 2:
        m = len(values)
        c = np.fft.rfft(values) / m
        theta = np.arctan2(points[:, 1], points[:, 0])
        j = np.arange(1, m // 2)
        out = c[0].real + 2 * (np.exp(1j * np.outer(theta, j)) @ c[1:m // 2]).real
        return out + c[m // 2].real * np.cos(m // 2 * theta)
    from itertools import combinations_with_replacement

    degree = 0
    while _n_monomials(d, degree + 1) <= 40:
        degree += 1
    terms = [t for k in range(degree + 1) for t in combinations_with_replacement(range(d), k)]

    def design(x):
        return np.stack([np.prod(x[:, list(t)], axis=1) if t else np.ones(len(x)) for t in terms], axis=1)

    coef = np.linalg.lstsq(design(probes), values, rcond=None)[0]
    return design(points) @ coef


def _n_monomials(d: int, degree: int) -> int:
    from math import comb

    return comb(d + degree, degree)


def model_key(model) -> dict:
    """A model's fields as a key holds them: :func:`metrics.model_attrs` with the one derived float,
    ``log_time_scale`` (``"auto"`` resolves it through an operator norm), in its canonical form."""
    from .._data.provenance import model_attrs

    attrs = model_attrs(model)
    attrs["log_time_scale"] = canonical_float(attrs["log_time_scale"])
    return attrs
