"""Geometry of the unit sphere S^{d-1} ⊂ R^d (and of flat space R^d).

A geometry is five functions with fixed signatures (jax-md's "pairs of functions"):

1. ``project_tangent(x, v)``: v − ⟨x, v⟩x row-wise (identity in flat space);
2. ``retract(x, v)``: move from x along tangent v and land back on the manifold;
3. ``exp_map(x, v)``: the exact geodesic step;
4. ``geodesic_distance(x, y)``: row-wise geodesic distance;
5. ``sample_uniform(n, d=d, rng=rng)``: n i.i.d. points from the uniform (Haar) law.

``d`` is always the *ambient* dimension: points are arrays of shape ``(..., d)``.
``SPHERE`` and ``FLAT`` bundle the functions; ``GEOMETRIES`` maps names to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .arrays import check_real_array, unit_hint
from .declarations import Relation, declare
from .errors import InvalidParameterError
from .keywords import keyword_only
from .numerics import few_coords, rowdot
from .params import Integer
from .params_data import Checked, Seed

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


def _project_tangent(x, v):
    dot = rowdot(x, v)
    if not few_coords(x, v) or x.shape != v.shape:
        return v - dot[..., None] * x
    out = np.empty(v.shape, dtype=np.result_type(x, v))
    for c in range(v.shape[-1]):
        np.multiply(dot, x[..., c], out=out[..., c])
        np.subtract(v[..., c], out[..., c], out=out[..., c])
    return out


def _normalize(y, out=None):
    norm = np.sqrt(rowdot(y, y))
    if not few_coords(y):
        return np.divide(y, norm[..., None], out=out)
    out = np.empty(y.shape, dtype=np.result_type(y, norm)) if out is None else out
    for c in range(y.shape[-1]):
        np.divide(y[..., c], norm, out=out[..., c])
    return out


def _retract(x, v):
    y = x + v  # fresh: normalised in place (a second state-sized array costs page faults at large states)
    return _normalize(y, out=y) if np.issubdtype(y.dtype, np.floating) else _normalize(y)


def _exp_map(x, v):
    t = np.sqrt(rowdot(v, v))[..., None]
    return _normalize(np.cos(t) * x + np.sinc(t / np.pi) * v)


def _geodesic_distance(x, y):
    a = x - y
    b = x + y
    return 2.0 * np.arctan2(np.sqrt(rowdot(a, a)), np.sqrt(rowdot(b, b)))


# tolerance of the public functions for "on the sphere" (states of the solvers are unit to ~1e-15)
_ATOL = 1e-8


def _vectors(a, name, caller="", *, unit=False):
    """Real finite rows of shape (..., d), d >= 2 (unit rows when ``unit``)."""
    dtype = getattr(a, "dtype", None)
    a = check_real_array(a, name, caller, expected="an array of shape (..., d)")
    if a.ndim == 0 or a.shape[-1] < 2:
        raise InvalidParameterError(f"{name}{_of(caller)} must have shape (..., d) with d >= 2; got shape {a.shape}.")
    if unit:
        _check_unit(a, name, caller, dtype)
    return a


def _of(caller):
    return f" of {caller}" if caller else ""


_BAD_VECTORS = [None, "abc", 3, np.ones(1), np.array([[np.nan, 0.0]]), np.array([[1j, 0.0]]), [[1.0, 0.0], [1.0]],
                np.ones((2, 2))]
#: unit rows of shape (..., d) (the points of the public geometry functions, within 1e-8)
UNIT = Checked(_vectors, "unit vectors of shape (..., d), d >= 2", _BAD_VECTORS, unit=True)
#: any finite rows of shape (..., d)
VECTORS = Checked(_vectors, "vectors of shape (..., d), d >= 2", _BAD_VECTORS)


def _pair(second):
    """x and ``second`` have the same d and broadcast against each other (all pairs: add axes)."""

    def fits(a, b):
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            return False
        return a.shape[-1] == b.shape[-1]

    return Relation((second, "x"), fits, "must have the d of x and broadcast against it (for all pairs add axes: "
                    "x[:, None, :], y[None, :, :])", breaks=[{second: np.zeros((5, 2))}, {second: np.zeros((4, 3))}])


def _tangent(v, x):
    dots = np.abs(rowdot(x, v))
    return float(np.max(dots / np.maximum(1.0, np.sqrt(rowdot(v, v))))) <= 1e-6


#: v is tangent at x (max |<x_i, v_i>| / max(1, |v_i|) <= 1e-6)
_TANGENT = Relation(("v", "x"), _tangent, "must be tangent at x (|<x_i, v_i>| <= 1e-6 max(1, |v_i|)); project it "
                    "first with particles.project_tangent(x, v)", breaks={"v": np.ones((5, 3))})


def _check_unit(x, name, caller, dtype=None):
    dev = float(np.max(np.abs(np.sqrt(rowdot(x, x)) - 1.0)))
    if dev > _ATOL:
        raise InvalidParameterError(
            f"{name}{_of(caller)} must lie on the unit sphere (max |‖x_i‖ − 1| = {dev:.1e} > atol={_ATOL:g}); "
            + unit_hint(name, dtype, dev)
        )


@declare(x=UNIT, v=VECTORS, relations=[_pair("v")])
def project_tangent(x, v) -> np.ndarray:
    r"""Tangent projection :math:`P_x v = v - \langle x, v\rangle x` (rows of unit norm).

    Parameters
    ----------
    x : ndarray of shape (..., d), unit rows
    v : ndarray of shape (..., d), broadcasting against x

    Examples
    --------
    >>> project_tangent(np.array([[1.0, 0.0]]), np.array([[2.0, 3.0]]))
    array([[0., 3.]])
    """
    return _project_tangent(x, v)


@declare(y=VECTORS)
def normalize(y) -> np.ndarray:
    """Rescale rows to unit norm (the metric projection onto the sphere).

    Parameters
    ----------
    y : ndarray of shape (..., d), finite rows of positive norm
        A zero row has no direction and is refused (it would become NaN).
    """
    norms = np.sqrt(rowdot(y, y))
    if not np.all(norms > 0) or not np.all(np.isfinite(norms)):
        bad = int(np.sum(~(norms > 0) | ~np.isfinite(norms)))
        raise InvalidParameterError(
            f"The 'y' parameter of normalize has {bad} row(s) of zero (or overflowing) norm, which have no direction "
            "on the sphere; drop them or perturb them before normalising."
        )
    return y / norms[..., None]


@declare(x=UNIT, v=VECTORS, relations=[_pair("v"), _TANGENT])
def retract(x, v) -> np.ndarray:
    r"""Projective retraction :math:`R_x(v) = (x + v) / \|x + v\|`.

    Agrees with the exponential map to second order in ``|v|``; ``retract(x, 0) == x``.
    ``v`` must be tangent at ``x`` (then :math:`\|x + v\| \ge 1`).
    """
    return _retract(x, v)


@declare(x=UNIT, v=VECTORS, relations=[_pair("v"), _TANGENT])
def exp_map(x, v) -> np.ndarray:
    r"""Exponential map :math:`\exp_x(v) = \cos(\|v\|)x + \operatorname{sinc}(\|v\|)v`.

    ``v`` must be tangent at ``x``. np.sinc is used for sin(t)/t, which is exact at t = 0
    (no Taylor switch needed); the result is renormalised to round-off.
    """
    return _exp_map(x, v)


@declare(x=UNIT, y=UNIT, relations=[_pair("y")])
def geodesic_distance(x, y) -> np.ndarray:
    r"""Great-circle distance :math:`2\arctan2(\|x-y\|, \|x+y\|)`, shape: broadcast of the rows.

    Accurate at every angle, unlike arccos of the inner product, which loses half the
    digits near 0 and near π.

    Parameters
    ----------
    x, y : ndarray of shape (..., d), unit rows, broadcasting against each other

    Examples
    --------
    >>> float(geodesic_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0])))  # doctest: +ELLIPSIS
    1.5707963...
    """
    return _geodesic_distance(x, y)


@keyword_only("d", "rng")
@declare(n=Integer(1), d=Integer(2), rng=Seed())
def sample_uniform(n: int, *, d: int, rng=None) -> np.ndarray:
    """n i.i.d. uniform points on S^{d-1}: normalised standard Gaussians.

    ``rng`` is a ``np.random.Generator``, a seed, or ``None``.
    """
    return _normalize(np.random.default_rng(rng).standard_normal((n, d)))


class SeedStreams(NamedTuple):
    """The two random streams of one run: ``x0`` draws the initial tokens, ``noise`` the noise."""

    x0: np.random.Generator
    noise: np.random.Generator


@declare(seed=Integer(0, hint="Pass a non-negative integer (the root of the run's SeedSequence)."))
def seed_streams(seed: int) -> SeedStreams:
    """The random streams of a run from one seed: the rule of ``headflow simulate``.

    ``SeedSequence(seed).spawn(2)`` gives two independent children, the first for the initial
    tokens, the second for the noise of ``simulate(..., kappa=..., rng=...)``; so the tokens of
    a run do not depend on whether it has noise, and the noise is not a copy of the tokens' draws.

    Parameters
    ----------
    seed : int >= 0
        The ``[run] seed`` of a ``headflow simulate`` config.

    Returns
    -------
    SeedStreams
        ``(x0, noise)``, two ``np.random.Generator``.

    Examples
    --------
    The Python lines that give the run of ``headflow simulate`` with ``seed = 0``:

    >>> streams = seed_streams(0)
    >>> x0 = sample_uniform(64, d=3, rng=streams.x0)   # then simulate(..., rng=streams.noise)
    >>> x0.shape
    (64, 3)
    """
    x0, noise = (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(2))
    return SeedStreams(x0, noise)


def _flat_project(x, v):
    return v


def _flat_retract(x, v):
    return x + v


def _flat_distance(x, y):
    return np.sqrt(rowdot(x - y, x - y))


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


# the solve loop evaluates these on Runge–Kutta stage states (off the sphere): the bundle
# holds the unvalidated kernels; the public functions above validate, then call them
SPHERE = Geometry("sphere", _project_tangent, _retract, _exp_map, _geodesic_distance, sample_uniform, True)
FLAT = Geometry("flat", _flat_project, _flat_retract, _flat_retract, _flat_distance, _flat_sample, False)
GEOMETRIES = {"sphere": SPHERE, "flat": FLAT}
