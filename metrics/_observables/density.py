r"""Densities on the sphere: one calling convention, exact and rejection samplers.

**Convention.** An initial density is a callable ``density_fn(points)`` taking points of shape
(m, d) on :math:`S^{d-1}` (on :math:`S^1`, d = 2: rows :math:`(\cos\theta, \sin\theta)`) and
returning m finite, non-negative values, proportional to the density with respect to the
uniform measure (unnormalised). A function of the angle θ on :math:`S^1` enters only through
:func:`density_of_angle`. :func:`check_density_fn` tells a wrong signature apart from bad values.

**Samplers** (vectorised, seeded by ``rng``):

- :math:`S^1`, :func:`circle_density_quantile` / :func:`sample_circle_density`: inverse CDF.
  The density is tabulated at m equispaced angles and interpolated linearly (periodically);
  the CDF of the interpolant is piecewise quadratic and inverted in closed form, so the draws
  are exact for the interpolant, whose CDF differs from the true one by :math:`O(m^{-2})` for a
  :math:`C^2` density.
- :math:`S^{d-1}`, :func:`sample_sphere_density`: rejection from the uniform law with an upper
  bound of the density (given, or 1.5 × the maximum over a quadrature grid); a proposal where
  the density exceeds the bound is an error, since the draws would then be biased.

**From a config** (the ``headflow study`` command): :class:`FamilyDensity` (uniform, cosine,
von Mises–Fisher) and :class:`ExpressionDensity` (an arithmetic expression of ``x1 … xd``,
parsed with :mod:`ast`, never ``eval``); both are picklable, so they work with process pools.
"""

from __future__ import annotations

import numpy as np

from particles.validation import (
    NONE,
    AnyOf,
    Checked,
    Function,
    Instance,
    Integer,
    Interval,
    InvalidParameterError,
    Points,
    Seed,
    check_real_array,
    declare,
    keyword_only,
)

__all__ = ["density_of_angle", "check_density_fn", "circle_density_quantile", "sample_circle_density",
           "sample_sphere_density"]

_TWO_PI = 2 * np.pi


class _AngleDensity:
    """density_fn(points) from f(θ), θ = atan2(x_2, x_1) in (-π, π] (picklable when f is)."""

    def __init__(self, f):
        self.f = f

    def __call__(self, points):
        points = np.asarray(points, dtype=np.float64)
        return self.f(np.arctan2(points[:, 1], points[:, 0]))

    def __repr__(self):
        return f"density_of_angle({getattr(self.f, '__qualname__', self.f)!r})"


@declare(f=Function("a callable f(theta) of the angle"))
def density_of_angle(f):
    r"""Turn a density of the angle, ``f(theta)``, into the library's ``density_fn(points)`` on
    :math:`S^1`, with :math:`\theta = \mathrm{atan2}(x_2, x_1) \in (-\pi, \pi]`.

    >>> import numpy as np
    >>> rho = density_of_angle(lambda th: 1 + 0.5 * np.cos(th))
    >>> rho(np.array([[1.0, 0.0], [-1.0, 0.0]]))
    array([1.5, 0.5])
    """
    return _AngleDensity(f)


def probe_density(density_fn, d: int, caller: str = "", *, points=None) -> np.ndarray:
    """Call ``density_fn`` on probe points of S^{d-1} and check the convention; returns the values.

    Errors say which rule failed: not callable, a call that raises on an (m, d) array, a result
    of the wrong shape (typically a function of the angle θ, or of one coordinate), or values that
    are not finite and non-negative with a positive sum.

    >>> import numpy as np
    >>> check_density_fn(lambda x: 1 + 0.5 * x[:, 2], 3).shape
    (64,)
    >>> check_density_fn(lambda th: 1 + np.cos(th), 2)
    Traceback (most recent call last):
    ...
    particles.validation.InvalidParameterError: density_fn must map points of shape (m, 2) to m values ...
    """
    where = f" of {caller}" if caller else ""
    if not callable(density_fn):
        raise InvalidParameterError(f"density_fn{where} must be a callable density_fn(points) with points of "
                                    f"shape (m, {d}); got {type(density_fn).__name__}.")
    if points is None:
        points = probe_points(d)
    m = len(points)
    hint = (" On S^1, wrap a function of the angle: metrics.density_of_angle(lambda theta: ...)." if d == 2 else "")
    try:
        values = density_fn(points)
    except Exception as exc:
        raise InvalidParameterError(
            f"density_fn{where} must take points of shape (m, {d}) (rows on S^{d - 1}); calling it on a "
            f"({m}, {d}) array raised {type(exc).__name__}: {exc}.{hint}") from exc
    try:
        v = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"density_fn{where} must return real numbers; got {type(values).__name__}.") \
            from exc
    if v.shape != (m,):
        raise InvalidParameterError(
            f"density_fn{where} must map points of shape (m, {d}) to m values (shape (m,)); on a ({m}, {d}) "
            f"array it returned shape {v.shape}.{hint}")
    if not np.all(np.isfinite(v)) or np.any(v < 0) or not v.sum() > 0:
        raise InvalidParameterError(
            f"density_fn{where} must return finite, non-negative values with a positive sum (an unnormalised "
            f"density); got min {np.nanmin(v) if np.any(~np.isnan(v)) else np.nan!r}, "
            f"{int(np.sum(~np.isfinite(v)))} non-finite value(s).")
    return v


# public: declared (the studies call the undecorated checker with their own caller's name)
check_density_fn = declare(_caller="check_density_fn", density_fn=Function("a callable density_fn(points) -> (m,)"),
                           d=Integer(2),
                           caller=Instance(str, what="a str (the caller the message names, or '')"),
                           points=AnyOf(NONE, Points()))(probe_density)
check_density_fn.__name__ = check_density_fn.__qualname__ = "check_density_fn"


def probe_points(d: int) -> np.ndarray:
    """The 64 points of S^{d-1} where :func:`probe_density` reads a density: equispaced angles on S^1,
    fixed uniform draws (seed 12345) on higher spheres."""
    rng = np.random.default_rng(12345)
    if d == 2:
        th = _TWO_PI * np.arange(64) / 64
        return np.stack([np.cos(th), np.sin(th)], axis=1)
    x = rng.standard_normal((64, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _circle_table(density_fn, m: int):
    th = _TWO_PI * np.arange(m) / m
    f = check_density_fn(density_fn, 2, "circle_density_quantile", points=np.stack([np.cos(th), np.sin(th)], 1))
    f1 = np.roll(f, -1)  # right end of each cell (periodic)
    h = _TWO_PI / m
    cell = 0.5 * h * (f + f1)
    cdf = np.concatenate([[0.0], np.cumsum(cell)])
    return f, f1, h, cdf


_M_GRID = Integer(8, hint="The number of grid cells, e.g. 4096.")


_DENSITY_FN = Function("a callable density_fn(points) -> (m,)")


def _probabilities(u, name, caller):
    u = check_real_array(u, name, caller)
    if not np.all((u >= 0) & (u <= 1)):
        raise InvalidParameterError(
            f"{name} must be probabilities in [0, 1]; got min {u.min():.3g}, max {u.max():.3g}.")
    return u


@declare(density_fn=_DENSITY_FN, u=Checked(_probabilities, "probabilities in [0, 1]", [-0.1, [1.5], None, "u",
                                                                                         [np.nan]]), m=_M_GRID)
def circle_density_quantile(density_fn, u, *, m: int = 4096) -> np.ndarray:
    r"""Angles :math:`F^{-1}(u) \in [0, 2\pi)` of a density on :math:`S^1` (``density_fn(points)``).

    The density is interpolated linearly between m equispaced angles; on the cell
    :math:`[\theta_k, \theta_k + h]` with end values :math:`f_0, f_1`, the mass left of
    :math:`\theta_k + sh` is :math:`h(f_0 s + (f_1 - f_0)s^2/2)`, and the root is taken in the
    cancellation-free form :math:`s = 2r / (f_0 + \sqrt{f_0^2 + 2(f_1 - f_0) r})`, r the target
    mass over h.

    Parameters
    ----------
    density_fn : callable, points (m, 2) -> (m,)
    u : array of probabilities in [0, 1]
    m : int
        Interpolation nodes (CDF error :math:`O(m^{-2})`).

    Examples
    --------
    >>> import numpy as np
    >>> q = circle_density_quantile(lambda x: np.ones(len(x)), [0.25, 0.5])
    >>> np.allclose(q, [np.pi / 2, np.pi])
    True
    """
    f0, f1, h, cdf = _circle_table(density_fn, m)
    target = u * cdf[-1]
    k = np.clip(np.searchsorted(cdf, target, side="right") - 1, 0, m - 1)
    r = np.maximum(target - cdf[k], 0.0) / h
    a, b = f0[k], f1[k]
    root = np.sqrt(np.maximum(a * a + 2 * (b - a) * r, 0.0))
    denom = a + root
    s = np.where(denom > 0, 2 * r / np.where(denom > 0, denom, 1.0), 0.0)
    return np.mod((k + np.clip(s, 0.0, 1.0)) * h, _TWO_PI)


@declare(density_fn=_DENSITY_FN, n=Integer(1), rng=Seed(), m=_M_GRID)
def sample_circle_density(density_fn, n: int, rng=None, *, m: int = 4096) -> np.ndarray:
    r"""n i.i.d. points (n, 2) on :math:`S^1` from ``density_fn(points)`` by the inverse CDF
    (:func:`circle_density_quantile`).

    >>> import numpy as np
    >>> x = sample_circle_density(lambda x: 1 + 0.5 * x[:, 0], 5, rng=0)
    >>> x.shape, bool(np.allclose(np.linalg.norm(x, axis=1), 1.0))
    ((5, 2), True)
    """
    rng = np.random.default_rng(rng)
    theta = circle_density_quantile(density_fn, rng.uniform(size=n), m=m)
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


def bound_grid(d: int, m: int) -> np.ndarray:
    """Points of S^{d-1} (d >= 3) on which a density's maximum is read for a rejection bound: m points of a
    Fibonacci lattice on S^2; on higher spheres max(m, 4096) fixed uniform draws (seed 0), as random points
    cover S^{d-1} thinly (16 draws on S^3 missed a von Mises peak by 1/3)."""
    if d == 3:
        import meanfield as mf

        return mf.fibonacci_sphere(m)[0]
    grid = np.random.default_rng(0).standard_normal((max(m, 4096), d))
    return grid / np.linalg.norm(grid, axis=1, keepdims=True)


def reference_grid(d: int, m: int) -> np.ndarray:
    """The grid on which a study's reference reads the density: the m cells of S^1
    (:func:`meanfield.circle_grid`), :func:`bound_grid` on S^{d-1}, d >= 3."""
    if d == 2:
        import meanfield as mf

        return mf.circle_grid(m)[0]
    return bound_grid(d, m)


@keyword_only("d", "rng", refuse=True)
@declare(density_fn=_DENSITY_FN, n=Integer(1), d=Integer(2), rng=Seed(),
         bound=AnyOf(NONE, Interval(0, None, closed="neither")), m_grid=_M_GRID)
def sample_sphere_density(density_fn, n: int, *, d: int, rng=None, bound: float | None = None,
                          m_grid: int = 4096) -> np.ndarray:
    r"""n i.i.d. points (n, d) on :math:`S^{d-1}` from ``density_fn(points)``.

    d = 2 uses the exact inverse CDF (:func:`sample_circle_density`). For d ≥ 3, rejection:
    uniform proposals (normalised Gaussians) are accepted with probability
    :math:`\rho(y)/B`, in batches until n are kept; the expected number of proposals is
    :math:`n B / \bar\rho`.

    Parameters
    ----------
    density_fn : callable, points (m, d) -> (m,)
    n, d : int
    rng : seed or numpy Generator
    bound : float, optional
        An upper bound B of the density; default 1.5 × its maximum over ``m_grid`` points (a
        Fibonacci grid on S^2, uniform draws otherwise). A proposal with :math:`\rho > B` raises.

    Examples
    --------
    >>> import numpy as np
    >>> x = sample_sphere_density(lambda y: 1 + 0.5 * y[:, 2], 1000, d=3, rng=0)
    >>> x.shape, bool(abs(x[:, 2].mean() - 0.5 / 3) < 0.05)  # E x_3 = a/3 for 1 + a x_3
    ((1000, 3), True)
    """
    caller = "sample_sphere_density"
    rng = np.random.default_rng(rng)
    if d == 2:
        return sample_circle_density(density_fn, n, rng, m=m_grid)
    if bound is None:
        bound = 1.5 * float(check_density_fn(density_fn, d, caller, points=bound_grid(d, m_grid)).max())
    else:
        check_density_fn(density_fn, d, caller)
    out, have = [], 0
    while have < n:
        k = int(1.3 * (n - have)) + 64
        y = rng.standard_normal((k, d))
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        rho = np.asarray(density_fn(y), dtype=np.float64)
        if np.any(rho > bound):
            raise InvalidParameterError(
                f"density_fn of {caller} exceeds the rejection bound {bound:.6g} (max seen {rho.max():.6g}): the "
                "draws would be biased. Pass a larger bound=, or a finer m_grid= to estimate it.")
        y = y[rng.uniform(size=k) * bound < rho]
        out.append(y)
        have += len(y)
    return np.concatenate(out)[:n]


# ---------------------------------------------------------------- named families and expressions

