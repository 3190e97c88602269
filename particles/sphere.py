"""Geometry of the unit sphere S^{d-1} ⊂ R^d (and of flat space R^d).

A geometry is five functions with fixed signatures (jax-md's "pairs of functions"):

1. ``project_tangent(x, v)``: v − ⟨x, v⟩x row-wise (identity in flat space);
2. ``retract(x, v)``: move from x along tangent v and land back on the manifold;
3. ``exp_map(x, v)``: the exact geodesic step;
4. ``geodesic_distance(x, y)``: row-wise geodesic distance;
5. ``sample_uniform(n, d, rng)``: n i.i.d. points from the uniform (Haar) law.

``d`` is always the *ambient* dimension: points are arrays of shape ``(..., d)``.
``SPHERE`` and ``FLAT`` bundle the functions; ``GEOMETRIES`` maps names to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "project_tangent",
    "retract",
    "normalize",
    "exp_map",
    "geodesic_distance",
    "sample_uniform",
    "Geometry",
    "SPHERE",
    "FLAT",
    "GEOMETRIES",
]


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", a, b)


def project_tangent(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    r"""Tangent projection :math:`P_x v = v - \langle x, v\rangle x` (rows of unit norm).

    Parameters
    ----------
    x : ndarray of shape (..., d), unit rows
    v : ndarray of shape (..., d)

    Examples
    --------
    >>> project_tangent(np.array([[1.0, 0.0]]), np.array([[2.0, 3.0]]))
    array([[0., 3.]])
    """
    return v - _rowdot(x, v)[..., None] * x


def normalize(y: np.ndarray) -> np.ndarray:
    """Rescale rows to unit norm (the metric projection onto the sphere)."""
    return y / np.sqrt(_rowdot(y, y))[..., None]


def retract(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    r"""Projective retraction :math:`R_x(v) = (x + v) / \|x + v\|`.

    Agrees with the exponential map to second order in ``|v|``; ``retract(x, 0) == x``.
    """
    return normalize(x + v)


def exp_map(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    r"""Exponential map :math:`\exp_x(v) = \cos(\|v\|)x + \operatorname{sinc}(\|v\|)v`.

    ``v`` must be tangent at ``x``. np.sinc is used for sin(t)/t, which is exact at t = 0
    (no Taylor switch needed); the result is renormalised to round-off.
    """
    t = np.sqrt(_rowdot(v, v))[..., None]
    return normalize(np.cos(t) * x + np.sinc(t / np.pi) * v)


def geodesic_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Great-circle distance :math:`2\arctan2(\|x-y\|, \|x+y\|)`.

    Accurate at every angle, unlike arccos of the inner product, which loses half the
    digits near 0 and near π.

    Examples
    --------
    >>> float(geodesic_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0])))  # doctest: +ELLIPSIS
    1.5707963...
    """
    a = x - y
    b = x + y
    return 2.0 * np.arctan2(np.sqrt(_rowdot(a, a)), np.sqrt(_rowdot(b, b)))


def sample_uniform(n: int, d: int, rng=None) -> np.ndarray:
    """n i.i.d. uniform points on S^{d-1}: normalised standard Gaussians.

    ``rng`` is a ``np.random.Generator``, a seed, or ``None``.
    """
    from .validation import check_param

    n = check_param(n, "n", "sample_uniform", low=1, integer=True)
    d = check_param(d, "d", "sample_uniform", low=2, integer=True)
    g = np.random.default_rng(rng).standard_normal((n, d))
    return normalize(g)


def _flat_project(x, v):
    return v


def _flat_retract(x, v):
    return x + v


def _flat_distance(x, y):
    return np.sqrt(_rowdot(x - y, x - y))


def _flat_sample(n, d, rng=None):
    return np.random.default_rng(rng).standard_normal((int(n), int(d)))


@dataclass(frozen=True)
class Geometry:
    """A named bundle of the five geometry functions (see the module docstring)."""

    name: str
    project_tangent: Callable
    retract: Callable
    exp_map: Callable
    geodesic_distance: Callable
    sample_uniform: Callable
    on_sphere: bool


SPHERE = Geometry("sphere", project_tangent, retract, exp_map, geodesic_distance, sample_uniform, True)
FLAT = Geometry("flat", _flat_project, _flat_retract, _flat_retract, _flat_distance, _flat_sample, False)
GEOMETRIES = {"sphere": SPHERE, "flat": FLAT}
