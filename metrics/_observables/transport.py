r"""Optimal-transport distances between weighted point clouds on the sphere, through POT.

All functions take plain arrays ``(x, y, a=None, b=None)``: points of shape (n, d) and
(m, d) with unit rows and probability weights (``None`` = uniform). The ground cost is
the geodesic distance :math:`d(x, y) = 2\arctan2(\|x-y\|, \|x+y\|)`.

- :func:`wasserstein`: exact :math:`W_p(\mu,\nu) = (\min_{\pi\in\Pi(a,b)}\sum_{ij}\pi_{ij}d(x_i,y_j)^p)^{1/p}`
  (network simplex, ``ot.emd2``); O(nm) memory by nature, so it refuses
  :math:`nm >` :data:`MAX_DENSE_PAIRS` (about 70 bytes per pair inside the solver).
- :func:`sinkhorn_divergence`: debiased entropic cost
  :math:`S_\varepsilon = OT_\varepsilon(a,b) - \tfrac12 OT_\varepsilon(a,a) - \tfrac12 OT_\varepsilon(b,b)`
  with cost :math:`d^2`, log-domain Sinkhorn; dense costs, so it refuses
  :math:`\max(nm, n^2, m^2) >` :data:`MAX_DENSE_PAIRS`.
- :func:`sliced_wasserstein_sphere`: spherical sliced :math:`SSW_p` (Bonet et al. 2023,
  ``ot.sliced_wasserstein_sphere``), O((n + m) L) time for L projections, evaluated a few
  projections at a time so that memory stays O(n + m); circle coordinates are normalised
  to length 1, so values are in units of one full turn.
- :func:`distance_to_uniform`: :math:`SSW_2(\mu, \mathrm{Unif}(S^{d-1}))` (``ot.sliced_wasserstein_sphere_unif``),
  projections chunked in the same way.

The sliced distances are the scalable ones: use them past :data:`MAX_DENSE_PAIRS`.
"""

from __future__ import annotations

import warnings

import numpy as np

from particles.extend import unchecked_geodesic_distance
from particles.validation import (
    NONE,
    AnyOf,
    ConvergenceWarning,
    Integer,
    Interval,
    InvalidParameterError,
    Points,
    Relation,
    Weights,
    declare,
    one_per,
    weights_or_uniform,
)

__all__ = [
    "geodesic_cost",
    "wasserstein",
    "sinkhorn_divergence",
    "sliced_wasserstein_sphere",
    "sliced_wasserstein_embedded",
    "distance_to_uniform",
    "MAX_DENSE_PAIRS",
]

#: largest n·m (and n², m² for Sinkhorn) the dense-cost distances accept: 4·10⁶ pairs is
#: ~300 MB inside POT's network simplex (cost, plan and arcs) and ~200 MB for Sinkhorn
MAX_DENSE_PAIRS = 4_000_000

# entries (projections x points) of one chunk of the sliced distances
_SLICED_CHUNK_ENTRIES = 2**20


def _check_dense(sizes, caller):
    big = max(a * b for a, b in sizes)
    if big > MAX_DENSE_PAIRS:
        shown = " x ".join(str(v) for v in max(sizes, key=lambda ab: ab[0] * ab[1]))
        raise InvalidParameterError(
            f"{caller} needs a dense {shown} cost matrix ({big:.3g} pairs > MAX_DENSE_PAIRS = {MAX_DENSE_PAIRS:.3g}), "
            "which would exhaust memory. Use the scalable sliced_wasserstein_sphere(x, y) (or distance_to_uniform(x)), "
            "or subsample the clouds."
        )


#: the rules the transport functions share: two clouds on one sphere, each with optional probability weights
_CLOUD = Points(atol=1e-8)
_PROB = AnyOf(NONE, Weights(probability=True))
_SAME_D = Relation(("y", "x"), lambda y, x: y.shape[1] == x.shape[1], "must live in the same R^d as x",
                   breaks={"y": np.eye(5)})  # (no valid call is on S^4)
_TWO = dict(x=_CLOUD, y=_CLOUD)
_TWO_WEIGHTED = dict(_TWO, a=_PROB, b=_PROB)
_TWO_RELATIONS = [_SAME_D, one_per("a", "x"), one_per("b", "y")]
_P = Interval(1, hint="p is the order of the Wasserstein distance, e.g. 2.")
_N_PROJECTIONS = Integer(1, hint="The number of random directions, e.g. 200.")
_SEED = AnyOf(NONE, Integer(0, 2**32 - 1), hint="Pass a seed in [0, 2**32) or None.")


@declare(**_TWO, p=Interval(0, None, closed="neither"), relations=[_SAME_D])
def geodesic_cost(x, y, p: float = 1.0) -> np.ndarray:
    r"""Cost matrix :math:`C_{ij} = d(x_i, y_j)^p`, shape (n, m); refuses n·m > :data:`MAX_DENSE_PAIRS`."""
    _check_dense([(len(x), len(y))], "geodesic_cost")
    return _cost(x, y, p)


def _cost(x, y, p):
    return unchecked_geodesic_distance(x[:, None, :], y[None, :, :]) ** p


@declare(**_TWO_WEIGHTED, p=_P, relations=_TWO_RELATIONS)
def wasserstein(x, y, a=None, b=None, *, p: float = 2.0) -> float:
    r"""Exact Wasserstein distance :math:`W_p` with geodesic ground cost (radians).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0]])
    >>> y = np.array([[0.0, 1.0]])
    >>> round(wasserstein(x, y, p=1), 12) == round(np.pi / 2, 12)
    True
    """
    import ot

    a, b = weights_or_uniform(a, len(x)), weights_or_uniform(b, len(y))
    _check_dense([(len(x), len(y))], "wasserstein")
    cost = ot.emd2(a, b, _cost(x, y, p), numItermax=10_000_000)
    return float(max(cost, 0.0) ** (1.0 / p))


def _entropic_dual(a, b, C, reg, max_iter, tol, omega: float = 1.8):
    r"""OT_ε(a, b) as the dual value ⟨a, f⟩ + ⟨b, g⟩, log-domain Sinkhorn with ε-scaling.

    The updates are POT's ``sinkhorn_log`` template (``f = −ε LSE((g − C)/ε + log b)``);
    ε is annealed from the cost's scale down to ``reg`` (Schmitzer 2019), which cuts the
    iteration count from thousands to a few hundred at small ε. At ε = ``reg`` the updates are
    over-relaxed, :math:`f \leftarrow (1-\omega) f + \omega\,T(g)` with ω = 1.8 (Thibault,
    Chizat, Dossal & Papadakis 2021), falling back to ω = 1 if the marginal error grows three
    times in a row; and the row-marginal error of the current pair costs nothing, being
    :math:`\sum_i a_i|e^{(f_i - T(g)_i)/\varepsilon} - 1|` with the T(g) of the next update (the
    columns' error is added once the rows meet ``tol``). At 1000 × 2000 points, reg = 0.05,
    tol = 1e-9: about 95 iterations instead of 329 (``benchmarks/bench_sinkhorn.py`` prints the
    table). Returns (value, marginal error).
    """
    from scipy.special import logsumexp

    loga, logb = np.log(a), np.log(b)
    f = np.zeros_like(a)
    g = np.zeros_like(b)
    eps = max(reg, float(C.max()))
    err, rises = np.inf, 0
    for _ in range(max_iter):
        Tg = -eps * logsumexp(logb[None, :] + (g[None, :] - C) / eps, axis=1)
        w = 1.0
        if eps == reg:
            new_err = float(np.abs(a * np.expm1((f - Tg) / eps)).sum())
            if new_err < tol:  # rows converged: add the columns' error (a relaxed g is not T(f) exactly)
                Tf = -eps * logsumexp(loga[:, None] + (f[:, None] - C) / eps, axis=0)
                new_err += float(np.abs(b * np.expm1((g - Tf) / eps)).sum())
                if new_err < tol:
                    err = new_err
                    break
            rises = rises + 1 if new_err > err else 0
            if rises >= 3:
                omega = 1.0  # over-relaxation not contracting here: plain Sinkhorn always converges
            err, w = new_err, omega
        f = (1 - w) * f + w * Tg
        Tf = -eps * logsumexp(loga[:, None] + (f[:, None] - C) / eps, axis=0)
        g = (1 - w) * g + w * Tf
        if eps > reg:
            eps = max(reg, eps * 0.7)
    return float(a @ f + b @ g), err


def _entropic_self(a, C, reg, max_iter, tol):
    """Symmetric OT_ε(a, a) = 2⟨a, f⟩ by the averaged fixed point f ← (f + T f)/2 (Feydy et al. 2019),
    which converges in a few dozen iterations where alternating Sinkhorn needs thousands."""
    from scipy.special import logsumexp

    loga = np.log(a)
    f = np.zeros_like(a)
    err = np.inf
    for _ in range(max_iter):
        Tf = -reg * logsumexp(loga[None, :] + (f[None, :] - C) / reg, axis=1)
        new = 0.5 * (f + Tf)
        err = float(np.abs(new - f).max())
        f = new
        if err < tol:
            break
    return float(2 * a @ f), err


@declare(**_TWO_WEIGHTED, reg=Interval(0, None, closed="neither"), max_iter=Integer(1),
         tol=Interval(0, None, closed="neither"), relations=_TWO_RELATIONS)
def sinkhorn_divergence(x, y, a=None, b=None, *, reg: float = 0.1, max_iter: int = 10000, tol: float = 1e-9) -> float:
    r"""Debiased Sinkhorn divergence with cost :math:`d(x, y)^2` (rad²); ≥ 0, zero iff μ = ν.

    :math:`OT_\varepsilon` is the entropic dual value; the cross term comes from POT's
    log-domain Sinkhorn, the symmetric terms from the averaged symmetric fixed point.
    Warns :class:`~particles.ConvergenceWarning` if a loop stops above ``tol``.
    """
    a, b = weights_or_uniform(a, len(x)), weights_or_uniform(b, len(y))
    _check_dense([(len(x), len(y)), (len(x), len(x)), (len(y), len(y))], "sinkhorn_divergence")
    if x.shape == y.shape and np.array_equal(x, y) and np.array_equal(a, b):
        return 0.0  # S_ε(μ, μ) = 0 exactly; alternating Sinkhorn would crawl towards it
    xy, e1 = _entropic_dual(a, b, _cost(x, y, 2), reg, max_iter, tol)
    xx, e2 = _entropic_self(a, _cost(x, x, 2), reg, max_iter, tol)
    yy, e3 = _entropic_self(b, _cost(y, y, 2), reg, max_iter, tol)
    if max(e1, e2, e3) > 10 * tol:
        warnings.warn(
            f"Sinkhorn stopped with error {max(e1, e2, e3):.1e} > tol={tol:g}; increase max_iter or reg.",
            ConvergenceWarning, stacklevel=2,
        )
    return float(max(xy - 0.5 * xx - 0.5 * yy, 0.0))


def _chunked_projected(fn, d, n_points, n_projections, seed):
    """Per-projection values of a POT spherical-sliced function, a chunk of projections at
    a time (POT's own projections for this seed, so the result is POT's to round-off; POT
    reshapes by ``n_projections``, so each call passes the chunk's length)."""
    from ot.sliced import get_projections_sphere

    proj = get_projections_sphere(d, n_projections, seed=seed)
    step = max(1, _SLICED_CHUNK_ENTRIES // max(1, n_points))
    vals = [fn(proj[s: s + step]) for s in range(0, n_projections, step)]
    return np.concatenate([np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in vals])


@declare(**_TWO_WEIGHTED, n_projections=_N_PROJECTIONS, p=_P, seed=_SEED, relations=_TWO_RELATIONS)
def sliced_wasserstein_sphere(x, y, a=None, b=None, *, n_projections: int = 200, p: float = 2.0,
                              seed: int = 0) -> float:
    r"""Spherical sliced Wasserstein :math:`SSW_p` (POT); the same ``seed`` gives the same projections.

    :math:`SSW_p^p` is the mean over projections of the circle :math:`W_p^p`; the projections
    are evaluated in chunks, so memory is O(n + m) whatever ``n_projections``.

    Parameters
    ----------
    x, y : ndarray of shape (n, d), (m, d), unit rows
    a, b : ndarray of shape (n,), (m,), optional
    n_projections : int >= 1
    p : float >= 1
    seed : int in [0, 2**32) or None
    """
    import ot

    a, b = weights_or_uniform(a, len(x)), weights_or_uniform(b, len(y))

    def chunk(proj):
        log = ot.sliced_wasserstein_sphere(x, y, a, b, n_projections=len(proj), p=p, projections=proj, log=True)[1]
        return log["projected_emds"]

    vals = _chunked_projected(chunk, x.shape[1], len(x) + len(y), n_projections, seed)
    return float(np.mean(vals) ** (1.0 / p))


@declare(x=_CLOUD, weights=_PROB, n_projections=_N_PROJECTIONS, seed=_SEED, relations=[one_per("weights", "x")])
def distance_to_uniform(x, weights=None, *, n_projections: int = 200, seed: int = 0) -> float:
    r""":math:`SSW_2(\mu, \sigma)` to the uniform measure σ on :math:`S^{d-1}` (POT), projections chunked."""
    import ot

    w = weights_or_uniform(weights, len(x))

    def chunk(proj):
        log = ot.sliced_wasserstein_sphere_unif(x, w, n_projections=len(proj), projections=proj, log=True)[1]
        return log["projected_emds"]

    vals = _chunked_projected(chunk, x.shape[1], len(x), n_projections, seed)
    return float(np.mean(vals) ** 0.5)


@declare(x=Points(), y=Points(), n_projections=_N_PROJECTIONS, seed=_SEED, relations=[_SAME_D])
def sliced_wasserstein_embedded(x, y, *, n_projections: int = 256, seed: int = 0) -> tuple[float, float]:
    r"""Sliced :math:`SW_2` between two point clouds of :math:`S^{d-1}` **embedded in**
    :math:`\mathbb R^d` (uniform weights): the distance the limit study uses on :math:`S^{d-1}`.

    .. math:: SW_2^2(\mu, \nu) = \int_{S^{d-1}} W_2^2(\theta_\#\mu, \theta_\#\nu)\,d\sigma(\theta),
              \qquad \theta_\#\mu = \text{law of } \langle\theta, x\rangle \in [-1, 1],

    a Monte-Carlo mean over ``n_projections`` directions (the same for a given ``seed``), each 1-d
    :math:`W_2` exact (sorted projections). Unlike :func:`metrics.sliced_wasserstein_sphere`
    (spherical sliced :math:`SSW_2` of Bonet et al.: projections onto great circles, geodesic
    cost, in turns), it projects onto lines and measures chordal, Euclidean displacement; both
    are metrics with the :math:`n^{-1/2}` rate for i.i.d. samples, and this one costs
    O(L (n + m) log(n + m)) with no binary search.

    Returns
    -------
    (value, Monte-Carlo standard error over directions)

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    >>> sliced_wasserstein_embedded(x, x)[0]
    0.0
    >>> round(sliced_wasserstein_embedded(x[:1], x[1:], n_projections=4000)[0] ** 2, 1)  # E <theta, 2 e3>^2 = 4/3
    1.3
    """
    from .reference_transport import SlicedReference

    ref = SlicedReference(y[None], n_projections=n_projections, n_quantiles=len(y), seed=seed)
    return ref(x, 0)
