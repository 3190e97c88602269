r"""Scalable pieces of the mean-field limit study: transport to a reference, clustering, rates.

Transport (all through POT; the method used is returned so the study can record it):

- **S^1, exact, O(N log N).** The reference :math:`\mu` is a circle-grid measure
  (piecewise-uniform density on m cells). It is replaced by its *quantile atoms*
  :math:`y_j = F^{-1}((j + 1/2)/M)`, :math:`j < M`, with :math:`M = \max(16 n, 4m)`; on the
  circle :math:`W_p(\mu, \hat\mu_M) \le 2\pi/M`, two orders below the :math:`n^{-1/2}` signal.
  :math:`W_p(\mu_n, \hat\mu_M)` is then exact: W1 by the closed form (median of F_n - F), W2 by ``ot.binary_search_circle``, in units of turns times 2π = radians.
  For small :math:`n\,M` the same atoms go through ``ot.emd2`` with the geodesic cost (the two
  agree to round-off, which the tests check). ``ot.wasserstein_circle(p=1)`` (the closed
  form) is not used: in POT 0.9.7 it returns wrong values when no atom lies near angle 0.
- **S^{d-1}, d ≥ 3, O(L (n log n + M)).** Sliced :math:`SW_2` of the embedded measures
  (:class:`SlicedReference`): a metric on measures, and a surrogate with the same
  :math:`n^{-1/2}` rate as :math:`W_2` for i.i.d. samples, because each projection
  :math:`\langle\theta, x\rangle` of a density bounded above and below on :math:`S^{d-1}` has a
  density on [-1, 1] comparable to :math:`(1-t^2)^{(d-3)/2}` (uniform on S^2, Archimedes), so
  :math:`J_2 = \int F(1-F)/f < \infty` and its empirical :math:`W_2` is :math:`O(n^{-1/2})`
  (Bobkov & Ledoux 2019). The spherical sliced distance of POT
  (``ot.sliced_wasserstein_sphere``) estimates the same rate but re-sorts the reference and runs a
  binary search per call: more than 15 minutes for one call against a 4·10^5-point reference
  with 200 projections, against seconds here.

Clustering in bounded memory (no n×n matrix):

- S^1: sort the angles; clusters are the arcs between gaps wider than ε (exact, O(n log n)).
- d ≥ 3: bin points into cubes of side h = chord(ε)/2, then DBSCAN (ball tree) over the
  occupied cubes with radius chord(ε) + √d h; memory is O(occupied cubes), and two points are
  linked when at chord distance ≤ chord(ε), possibly up to chord(ε) + 2√d h.

Rates: :func:`fit_rate` fits :math:`\log \bar g(n) = a + r \log n` to seed-averaged gaps and
bootstraps the seeds (resampled independently for each n) for a percentile interval of r.
"""

from __future__ import annotations

import numpy as np

from particles.validation import InvalidParameterError

from .clustering import _component_masses

__all__ = ["circle_quantile_atoms", "circle_wasserstein", "SlicedReference", "bounded_clusters",
           "fit_rate", "EMD_MAX_ELEMENTS"]

#: largest n·M for which the exact network simplex (``ot.emd2``) is used on S^1
EMD_MAX_ELEMENTS = 200_000
_TWO_PI = 2 * np.pi


def circle_quantile_atoms(mass: np.ndarray, M: int) -> np.ndarray:
    r"""Angles in [0, 2π) of the M quantile atoms :math:`F^{-1}((j+1/2)/M)` of the circle-grid
    measure with cell masses ``mass`` on the cells :math:`[2\pi k/m, 2\pi(k+1)/m)` (uniform inside)."""
    m = len(mass)
    cdf = np.concatenate([[0.0], np.cumsum(mass)])
    cdf /= cdf[-1]
    q = (np.arange(M) + 0.5) / M
    k = np.clip(np.searchsorted(cdf, q, side="right") - 1, 0, m - 1)
    frac = (q - cdf[k]) / np.where(mass[k] > 0, cdf[k + 1] - cdf[k], 1.0)
    return (k + np.clip(frac, 0.0, 1.0)) * _TWO_PI / m


def circle_wasserstein(theta: np.ndarray, atoms: np.ndarray, *, p: int, method: str = "auto") -> tuple[float, str]:
    r""":math:`W_p` (geodesic, radians) between the uniform measures on angles ``theta`` and ``atoms``.

    ``method`` is ``"emd2"`` (network simplex, O(nM) memory), ``"circle"``
    (W1 closed form, W2 by ``ot.binary_search_circle``, O((n+M) log(n+M))) or ``"auto"``
    (emd2 when n·M ≤ :data:`EMD_MAX_ELEMENTS`). Returns (value, method used).
    """
    import ot

    if method == "auto":
        method = "emd2" if len(theta) * len(atoms) <= EMD_MAX_ELEMENTS else "circle"
    u = np.mod(theta, _TWO_PI) / _TWO_PI
    v = np.mod(atoms, _TWO_PI) / _TWO_PI
    if method == "emd2":
        d = np.abs(u[:, None] - v[None, :])
        cost = (_TWO_PI * np.minimum(d, 1 - d)) ** p
        val = ot.emd2(np.full(len(u), 1 / len(u)), np.full(len(v), 1 / len(v)), cost, numItermax=10_000_000)
        return float(max(val, 0.0) ** (1 / p)), "ot.emd2"
    if method != "circle":
        raise InvalidParameterError(f"method of circle_wasserstein must be 'auto', 'emd2' or 'circle'; got {method!r}.")
    if p == 1:
        # POT 0.9.7's ot.wasserstein_circle and ot.binary_search_circle return wrong W1 values (up to a
        # full turn) when no atom lies near angle 0; W1 is the closed form below instead
        return _TWO_PI * _circle_w1(u, v), "circle W1 closed form (Rabin et al. 2011)"
    val = ot.binary_search_circle(u, v, p=p, eps=1e-12)
    name = "ot.binary_search_circle"
    val = max(float(np.asarray(val).reshape(-1)[0]), 0.0)  # W_1, or W_p^p for p > 1, in turns
    return _TWO_PI * (val if p == 1 else val ** (1 / p)), name


def _circle_w1(u: np.ndarray, v: np.ndarray) -> float:
    r""":math:`W_1 = \min_\alpha\int_0^1|F_u(s) - F_v(s) - \alpha|\,ds` on the circle of length 1
    (uniform weights): G = F_u - F_v is piecewise constant between the merged sorted atoms, and the
    optimal α is the median of G weighted by interval length."""
    z = np.concatenate([u, v])
    w = np.concatenate([np.full(len(u), 1 / len(u)), np.full(len(v), -1 / len(v))])
    order = np.argsort(z, kind="stable")
    z, G = z[order], np.cumsum(w[order])
    G = np.concatenate([[0.0], G])  # G on [0, z_0) is 0
    lengths = np.diff(np.concatenate([[0.0], z, [1.0]]))
    o = np.argsort(G, kind="stable")
    c = np.cumsum(lengths[o])
    alpha = G[o][np.searchsorted(c, 0.5 * c[-1])]
    return float(lengths @ np.abs(G - alpha))


class SlicedReference:
    r"""Sliced :math:`SW_2` to a large reference sample, with the reference projected once.

    :math:`SW_2^2(\mu, \nu) = \int_{S^{d-1}} W_2^2(\theta_\#\mu, \theta_\#\nu)\,d\sigma(\theta)`,
    :math:`\theta_\#\mu` the law of :math:`\langle\theta, x\rangle` (Bonneel et al. 2015), is
    estimated with L directions drawn once (``ot.sliced.get_random_projections``). Each projected
    reference (one per save time) is stored as its M quantile atoms
    :math:`q_j = Y_{(\lceil (j + 1/2) N / M\rceil)}`, so one call costs O(L (n log n + n + M)) and no
    reference sort; :math:`W_2(\theta_\#\nu, \hat q) \le` the atom spacing, about
    :math:`2/M`, far below the :math:`n^{-1/2}` signal. The 1-d :math:`W_2^2` between the sorted
    projections and the atoms is exact (both quantile functions are step functions on the merged
    grid :math:`\{i/n\} \cup \{j/M\}`).

    Parameters
    ----------
    ref_points : array (T, N, d)
        Reference samples at T save times.
    n_projections : int
        Directions L; the Monte-Carlo standard error of the estimate is returned with it.
    n_quantiles : int
        Atoms M per projected reference.
    seed : int
        Seed of the directions (the same for every call, so all rows share them).
    """

    def __init__(self, ref_points, *, n_projections: int = 256, n_quantiles: int = 16384, seed: int = 0):
        from ot.sliced import get_random_projections

        ref_points = np.asarray(ref_points, dtype=np.float64)
        if ref_points.ndim != 3:
            raise InvalidParameterError(f"ref_points of SlicedReference must have shape (T, N, d); got {ref_points.shape}.")
        T, N, d = ref_points.shape
        self.theta = np.ascontiguousarray(get_random_projections(d, int(n_projections), seed=seed).T)  # (L, d)
        M = min(int(n_quantiles), N)
        rank = np.minimum(((np.arange(M) + 0.5) * N / M).astype(np.int64), N - 1)
        self.atoms = np.empty((T, M, len(self.theta)))
        for k in range(T):
            for c in _chunks(N, len(self.theta)):
                self.atoms[k][:, c] = np.sort(ref_points[k] @ self.theta[c].T, axis=0)[rank]

    def per_projection(self, x: np.ndarray, k: int) -> np.ndarray:
        r""":math:`W_2^2(\theta_\#\mu_x, \theta_\#\nu_k)` for each direction (uniform weights on x)."""
        n, M = len(x), self.atoms.shape[1]
        t = np.union1d(np.arange(n + 1) / n, np.arange(M + 1) / M)
        mid, length = 0.5 * (t[1:] + t[:-1]), np.diff(t)
        i = np.minimum((mid * n).astype(np.int64), n - 1)
        j = np.minimum((mid * M).astype(np.int64), M - 1)
        out = np.empty(len(self.theta))
        for c in _chunks(n + M, len(self.theta)):
            xs = np.sort(x @ self.theta[c].T, axis=0)
            # index the chunk's columns first: gathering all L columns per chunk would cost (n+M) L
            out[c] = length @ (xs[i] - self.atoms[k, :, c][j]) ** 2
        return out

    def __call__(self, x: np.ndarray, k: int) -> tuple[float, float]:
        r"""(:math:`SW_2`, its Monte-Carlo standard error by the delta method over directions)."""
        w = self.per_projection(x, k)
        sw = float(np.sqrt(w.mean()))
        se = float(w.std(ddof=1) / np.sqrt(len(w)) / (2 * sw)) if sw > 0 and len(w) > 1 else float("nan")
        return sw, se


def _chunks(rows: int, L: int, budget: int = 4_000_000):
    """Slices of the L directions with rows x (slice length) <= budget (bounded temporaries)."""
    step = max(1, budget // max(rows, 1))
    return [slice(a, min(a + step, L)) for a in range(0, L, step)]


def bounded_clusters(x: np.ndarray, *, eps: float) -> np.ndarray:
    r"""Cluster masses (sorted decreasingly, summing to 1) of the ε-connected components of ``x``
    (geodesic ε): the one definition of :func:`metrics.cluster_sizes`, in O(n d) memory."""
    return _component_masses(np.asarray(x, dtype=np.float64), eps)


def fit_rate(n_values, gaps: np.ndarray, *, n_boot: int = 1000, level: float = 0.95,
             rng=0) -> tuple[float, float, float]:
    r"""Slope r of :math:`\log \bar g(n)` against :math:`\log n` (least squares over n) and its
    bootstrap percentile interval at ``level``, resampling the seeds of each n with replacement.

    ``gaps`` has shape (len(n_values), n_seeds); non-finite or non-positive means give NaN.
    """
    g = np.asarray(gaps, dtype=np.float64)
    logn = np.log(np.asarray(n_values, dtype=np.float64))
    if g.ndim != 2 or len(logn) < 2 or not np.all(np.isfinite(g)):
        return float("nan"), float("nan"), float("nan")
    with np.errstate(divide="ignore"):
        mean = np.log(g.mean(axis=1))
    if not np.all(np.isfinite(mean)):
        return float("nan"), float("nan"), float("nan")
    slope = float(np.polyfit(logn, mean, 1)[0])
    rng = np.random.default_rng(rng)
    S = g.shape[1]
    idx = rng.integers(0, S, size=(n_boot, g.shape[0], S))
    boot_means = np.take_along_axis(g[None, :, :], idx, axis=2).mean(axis=2)  # (B, N)
    with np.errstate(divide="ignore"):
        y = np.log(boot_means)
    ok = np.all(np.isfinite(y), axis=1)
    xc = logn - logn.mean()
    slopes = (y[ok] - y[ok].mean(axis=1, keepdims=True)) @ xc / (xc @ xc)
    a = (1 - level) / 2
    lo, hi = np.quantile(slopes, [a, 1 - a]) if len(slopes) else (np.nan, np.nan)
    return slope, float(lo), float(hi)
