r"""Probability measures on S^{d-1}: weighted atoms (empirical) and discretised spheres.

A measure is a pair ``(points (m, d), weights (m,))`` with weights ≥ 0 summing to 1.
:class:`EmpiricalMeasure` holds particles; :class:`GridMeasure` holds a quadrature of the
sphere (cells with centres ``points`` and areas ``areas``) and a density as cell masses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from particles.validation import (
    NONE,
    AnyOf,
    Checked,
    Function,
    Integer,
    InvalidParameterError,
    Points,
    Weights,
    check_real_array,
    check_returned,
    check_scale,
    declare,
    one_per,
    weights_or_uniform,
)

__all__ = ["EmpiricalMeasure", "GridMeasure", "circle_grid", "fibonacci_sphere"]

_POINTS = Points(hint="Pass unit vectors as rows (x / np.linalg.norm(x, axis=1, keepdims=True)).")


def _areas(a, name, caller):
    a = check_real_array(a, name, caller, ndim=(1,), expected="positive cell areas of shape (m,)")
    if np.any(a <= 0):
        raise InvalidParameterError(f"{name} must be positive cell areas; got min {a.min():.3g}.")
    return a


_AREAS = Checked(_areas, "positive cell areas of shape (m,)", [None, "abc", -np.ones(3), np.zeros(3),
                 np.ones((2, 2)), [np.nan, 1.0]], hint="Pass the areas returned with the points (circle_grid, "
                 "fibonacci_sphere).")
_MASS = Weights(probability=True, hint="Cell masses summing to 1; use GridMeasure.from_density for a density.")


@declare(points=_POINTS, weights=AnyOf(NONE, Weights(probability=True)), relations=[one_per("weights")])
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
        object.__setattr__(self, "weights", weights_or_uniform(self.weights, len(self.points)))

    @property
    def n(self) -> int:
        return len(self.points)

    def __repr__(self) -> str:  # (the dataclass repr prints every atom; messages need the sphere)
        return f"EmpiricalMeasure({self.n} atoms on {sphere_name(self.points.shape[1])})"


def sphere_name(d: int) -> str:
    """``S^{d-1} (d = d)``: the sphere a measure lives on, as messages and reprs name it."""
    return f"S^{d - 1} (d = {d})"


@declare(m=Integer(3, hint="Pass the number of cells, e.g. m=256."))
def circle_grid(m: int) -> tuple[np.ndarray, np.ndarray]:
    """m cell centres θ_k = 2π(k + 1/2)/m on S^1 and their arc lengths 2π/m."""
    theta = 2 * np.pi * (np.arange(m) + 0.5) / m
    return np.stack([np.cos(theta), np.sin(theta)], axis=1), np.full(m, 2 * np.pi / m)


@declare(m=Integer(4, hint="Pass the number of points, e.g. m=2000."))
def fibonacci_sphere(m: int) -> tuple[np.ndarray, np.ndarray]:
    """m quasi-uniform points on S^2 (Fibonacci lattice), each with area 4π/m."""
    k = np.arange(m) + 0.5
    z = 1 - 2 * k / m
    phi = np.pi * (1 + 5**0.5) * k
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1), np.full(m, 4 * np.pi / m)


@declare(points=_POINTS, areas=_AREAS, mass=_MASS, relations=[one_per("areas"), one_per("mass")])
@dataclass(frozen=True, eq=False)
class GridMeasure:
    r"""A measure on a discretised sphere: cell masses :math:`p_k \ge 0`, :math:`\sum_k p_k = 1`.

    The density is :math:`\rho_k = p_k/\omega_k` with cell areas :math:`\omega_k`.
    """

    points: np.ndarray
    areas: np.ndarray
    mass: np.ndarray

    @classmethod
    @declare(points=_POINTS, areas=_AREAS, density_fn=Function("density_fn(points) -> (m,)"),
             relations=[one_per("areas")])
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
        rho = check_returned(density_fn(points), "density_fn(points)", (len(points),), caller)
        if np.any(rho < 0) or not np.all(np.isfinite(rho)):
            raise InvalidParameterError(f"density_fn of {caller} must return finite non-negative values.")
        top = check_scale(rho, "density_fn(points)", caller).max()
        if not top > 0:
            # normalising would divide by zero and give NaN masses
            raise InvalidParameterError(
                f"density_fn of {caller} integrates to zero on the grid (it is 0 at all {len(points)} points); "
                "a probability density needs a positive integral. Check its support against the grid."
            )
        p = (rho / top) * areas  # scaled first: rho near the float64 maximum must not overflow
        return cls(points, areas, p / p.sum())

    def __repr__(self) -> str:
        return f"GridMeasure({len(self.mass)} cells on {sphere_name(self.points.shape[1])})"

    @property
    def density(self) -> np.ndarray:
        return self.mass / self.areas
