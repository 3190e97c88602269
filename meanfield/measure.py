r"""Probability measures on S^{d-1}: weighted atoms (empirical) and discretised spheres.

A measure is a pair ``(points (m, d), weights (m,))`` with weights ≥ 0 summing to 1.
:class:`EmpiricalMeasure` holds particles; :class:`GridMeasure` holds a quadrature of the
sphere (cells with centres ``points`` and areas ``areas``) and a density as cell masses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from particles.validation import (
    InvalidParameterError,
    check_callable,
    check_param,
    check_points,
    check_real_array,
    check_returned,
    check_weights,
)

__all__ = ["EmpiricalMeasure", "GridMeasure", "circle_grid", "fibonacci_sphere"]


@dataclass(frozen=True, eq=False)
class EmpiricalMeasure:
    r""":math:`\mu = \sum_i w_i\delta_{x_i}`; ``weights=None`` means :math:`w_i = 1/n`.

    Examples
    --------
    >>> mu = EmpiricalMeasure(np.eye(3))
    >>> float(mu.weights.sum())
    1.0
    """

    points: np.ndarray
    weights: np.ndarray | None = None

    def __post_init__(self):
        x = check_points(self.points, "points", "EmpiricalMeasure")
        object.__setattr__(self, "points", x)
        object.__setattr__(self, "weights", check_weights(self.weights, len(x), caller="EmpiricalMeasure"))

    @property
    def n(self) -> int:
        return len(self.points)


def circle_grid(m: int) -> tuple[np.ndarray, np.ndarray]:
    """m cell centres θ_k = 2π(k + 1/2)/m on S^1 and their arc lengths 2π/m."""
    m = check_param(m, "m", "circle_grid", low=3, integer=True)
    theta = 2 * np.pi * (np.arange(m) + 0.5) / m
    return np.stack([np.cos(theta), np.sin(theta)], axis=1), np.full(m, 2 * np.pi / m)


def fibonacci_sphere(m: int) -> tuple[np.ndarray, np.ndarray]:
    """m quasi-uniform points on S^2 (Fibonacci lattice), each with area 4π/m."""
    m = check_param(m, "m", "fibonacci_sphere", low=4, integer=True)
    k = np.arange(m) + 0.5
    z = 1 - 2 * k / m
    phi = np.pi * (1 + 5**0.5) * k
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1), np.full(m, 4 * np.pi / m)


@dataclass(frozen=True, eq=False)
class GridMeasure:
    r"""A measure on a discretised sphere: cell masses :math:`p_k \ge 0`, :math:`\sum_k p_k = 1`.

    The density is :math:`\rho_k = p_k/\omega_k` with cell areas :math:`\omega_k`.
    """

    points: np.ndarray
    areas: np.ndarray
    mass: np.ndarray

    def __post_init__(self):
        x = check_points(self.points, "points", "GridMeasure")
        areas = check_real_array(self.areas, "areas", "GridMeasure", min_size=0)
        if self.mass is None:
            raise InvalidParameterError("mass of GridMeasure is required (cell masses summing to 1); "
                                        "use GridMeasure.from_density for a density.")
        if areas.shape != (len(x),) or np.any(areas <= 0):
            raise InvalidParameterError(f"areas must be positive with shape ({len(x)},); got shape {areas.shape}.")
        object.__setattr__(self, "points", x)
        object.__setattr__(self, "areas", areas)
        object.__setattr__(self, "mass", check_weights(self.mass, len(x), "mass", "GridMeasure"))

    @classmethod
    def from_density(cls, points, areas, density_fn) -> GridMeasure:
        r"""Cell masses :math:`p_k = \rho(y_k)\,\omega_k / \sum_j \rho(y_j)\,\omega_j`.

        ``density_fn`` need not be normalised, but it must be finite, non-negative and have a
        positive integral :math:`\sum_k \rho(y_k)\omega_k` on the grid.

        Examples
        --------
        >>> pts, areas = circle_grid(8)
        >>> mu = GridMeasure.from_density(pts, areas, lambda y: 1 + y[:, 0])
        >>> bool(np.isclose(mu.mass.sum(), 1.0))
        True
        """
        caller = "GridMeasure.from_density"
        check_callable(density_fn, "density_fn", caller, signature="density_fn(points) -> (m,)")
        points = check_points(points, "points", caller)
        areas = check_real_array(areas, "areas", caller, min_size=0)
        if areas.shape != (len(points),) or np.any(areas <= 0):
            raise InvalidParameterError(
                f"areas of {caller} must be positive with one entry per point, shape ({len(points)},); got shape "
                f"{areas.shape} (min {areas.min() if areas.size else 'n/a'}). Pass the areas returned with the points."
            )
        rho = check_returned(density_fn(points), "density_fn(points)", (len(points),), caller)
        if np.any(rho < 0) or not np.all(np.isfinite(rho)):
            raise InvalidParameterError(f"density_fn of {caller} must return finite non-negative values.")
        top = rho.max()
        if not top > 0:
            # normalising would divide by zero and give NaN masses
            raise InvalidParameterError(
                f"density_fn of {caller} integrates to zero on the grid (it is 0 at all {len(points)} points); "
                "a probability density needs a positive integral. Check its support against the grid."
            )
        p = (rho / top) * areas  # scaled first: rho near the float64 maximum must not overflow
        return cls(points, areas, p / p.sum())

    @property
    def density(self) -> np.ndarray:
        return self.mass / self.areas
