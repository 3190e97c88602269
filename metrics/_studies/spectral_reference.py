r"""Transport between particles and a spectral mean-field solution (``scheme="spectral"``).

- **S^1.** The CDF of :math:`\rho = \sum_n c_n e^{in\theta}` (density with respect to σ) is, in turns
  :math:`u = \theta/2\pi`, :math:`F(u) = u + \sum_{n\ge1} 2\,\mathrm{Re}\,[c_n(e^{2\pi inu} - 1)/(2\pi in)]`
  in closed form; it is evaluated by one inverse FFT on K ≥ 8L points together with ρ, and its
  quantiles are found by Newton's method on the cubic Hermite interpolant of (F, ρ) (interpolation
  error :math:`h^4\max|\rho'''|/384`, below round-off at K = 2^16). The reference is then the M
  mid-quantile atoms of the *exact* CDF; :math:`W_p(\nu, \hat\nu_M) \le (\frac1M\sum_j \ell_j^p)^{1/p}`
  with :math:`\ell_j` the lengths of the quantile cells (≈ 2π/M for W1), returned as the bound.
- **S^2.** The projection :math:`t = \langle\theta, x\rangle` of :math:`\rho\,d\sigma` has density
  :math:`g_\theta(t) = \frac12\sum_l \rho_l(\theta) P_l(t)` on [-1, 1], :math:`\rho_l` the degree-l part
  of ρ (addition theorem: the average of a degree-l harmonic over the circle
  :math:`\langle\theta, x\rangle = t` is its value at θ times :math:`P_l(t)`), and CDF
  :math:`G_\theta(t) = \frac12[\rho_0(t + 1) + \sum_{l\ge1}\rho_l(\theta)(P_{l+1}(t) - P_{l-1}(t))/(2l+1)]`,
  exact.
- **Zonal S^{d-1}.** :math:`g_\theta(t) = w(t)\sum_l c_l\, q_l(\langle\theta, e\rangle)\, q_l(t)/q_l(1)`,
  w the law of a coordinate under σ; G by 6-point Gauss–Legendre on each of K cells.

:class:`SpectralSlicedReference` stores the quantile function at M + 1 nodes per direction and save
time from these CDFs (piecewise linear in between: :math:`O(M^{-2})`) and is called like
:class:`metrics.SlicedReference`; ``error[k]`` estimates the interpolation error
:math:`SW_2(\nu, \hat\nu_M)` at save k from the quantiles at the cell midpoints.
"""

from __future__ import annotations

import warnings

import numpy as np

from particles import validation as pv
from particles.extend import scaled_rotation_of
from particles.validation import InvalidParameterError, check_instance, check_param

from .._observables.quantiles import hermite_inverse, interpolation_sq
from .._observables.reference_transport import SlicedReference, circle_wasserstein

__all__ = ["circle_spectral_quantiles", "circle_spectral_wasserstein", "circle_spectral_sample",
           "SpectralSlicedReference", "StudyReference"]

_TWO_PI = 2 * np.pi


def _solution(solution, geometries, caller):
    from meanfield import SpectralSolution

    check_instance(solution, SpectralSolution, "solution", caller,
                   hint="pass res.info['solution'] of a wasserstein_ascent(..., scheme='spectral') run")
    if solution.geometry not in geometries:
        raise InvalidParameterError(
            f"{caller} needs a spectral solution on {' or '.join(geometries)}; got geometry {solution.geometry!r}."
        )
    return solution


def _angles(value, name, caller):
    """Angles (n,) in radians, or points (n, 2) on S^1 turned into their angles (never flattened)."""
    arr = pv.check_real_array(value, name, "", ndim=(1, 2), expected="angles (n,) or points (n, 2)")
    if arr.ndim == 2:
        if arr.shape[1] != 2:
            raise InvalidParameterError(
                f"The {name!r} parameter must be angles of shape (n,) or points on S^1 of shape (n, 2); got shape "
                f"{arr.shape}. Pass np.arctan2(x[:, 1], x[:, 0]) for points x on the circle.")
        x = pv.check_points(arr, name, "", on_sphere=True, min_d=2, d=2)
        return np.arctan2(x[:, 1], x[:, 0])
    return arr


_THETA = pv.Checked(_angles, "angles of shape (n,) or points on S^1 of shape (n, 2)",
                 [None, "abc", np.zeros(0), np.array([np.nan]), np.ones((3, 3)), 2.0 * np.eye(2), [1j]])


@pv.keyword_only("M")
@pv.declare(k=pv.Integer(), M=pv.Integer(1))
def circle_spectral_quantiles(solution, k: int, *, M: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Angles (radians, in [0, 2π)) of the M mid-quantile atoms :math:`F^{-1}((j + 1/2)/M)` of the
    spectral density at save index k, and the lengths (radians) of the M quantile cells.

    Examples
    --------
    >>> import meanfield as mf, particles
    >>> pts, areas = mf.circle_grid(32)
    >>> mu0 = mf.GridMeasure.from_density(pts, areas, lambda x: 1 + 0 * x[:, 0])
    >>> res = mf.wasserstein_ascent(mu0, particles.MultiHead.scalar([1.0], d=2), t1=0.1, scheme="spectral", L=8)
    >>> q, cells = circle_spectral_quantiles(res.info["solution"], 0, M=4)
    >>> bool(np.allclose(q, np.pi / 4 * np.array([1, 3, 5, 7])))  # uniform: quantiles are equally spaced
    True
    """
    caller = "circle_spectral_quantiles"
    sol = _solution(solution, ("circle",), caller)
    k = check_param(k, "k", caller, low=-len(sol.coefficients), high=len(sol.coefficients) - 1, integer=True)
    u, G, g = sol.circle_cdf(k)
    edges = hermite_inverse(u, G, g, np.arange(M + 1) / M)
    mids = hermite_inverse(u, G, g, (np.arange(M) + 0.5) / M)
    return _TWO_PI * mids, _TWO_PI * np.diff(edges)


@pv.declare(theta=_THETA, k=pv.Integer(), p=pv.Integer(1), n_quantiles=pv.AnyOf(pv.NONE, pv.Integer(1)))
def circle_spectral_wasserstein(theta, solution, k: int, *, p: int = 2, n_quantiles: int | None = None
                                ) -> tuple[float, float]:
    r""":math:`W_p` (geodesic, radians) between the uniform measure on the angles ``theta`` (or on
    points of shape (n, 2) on :math:`S^1`, never flattened into angles) and the
    spectral density at save k, and a bound on the error of the value (quantisation of the exact
    CDF into ``n_quantiles`` atoms, default :math:`\max(16n, 4096)`).

    Examples
    --------
    >>> import meanfield as mf, particles
    >>> pts, areas = mf.circle_grid(32)
    >>> mu0 = mf.GridMeasure.from_density(pts, areas, lambda x: 1 + 0 * x[:, 0])
    >>> res = mf.wasserstein_ascent(mu0, particles.MultiHead.scalar([1.0], d=2), t1=0.1, scheme="spectral", L=8)
    >>> w1, err = circle_spectral_wasserstein(np.array([0.0]), res.info["solution"], 0, p=1)
    >>> bool(abs(w1 - np.pi / 2) <= err)  # one atom against the uniform measure: mean distance π/2
    True
    """
    M = max(16 * theta.size, 4096) if n_quantiles is None else n_quantiles
    atoms, cells = circle_spectral_quantiles(solution, k, M=M)
    value, _ = circle_wasserstein(theta, atoms, p=p, method="circle")
    return value, float(np.mean(cells ** p) ** (1 / p))


class SpectralSlicedReference(SlicedReference):
    r"""Sliced :math:`SW_2` to a spectral solution on S^2 or a zonal one on :math:`S^{d-1}`.

    The same directions (``ot.sliced.get_random_projections(d, n_projections, seed)``) and call as
    :class:`metrics.SlicedReference`, but each projected reference is the exact projected
    quantile function (module docstring) at the M + 1 nodes j/M, linear in between
    (:meth:`metrics.SlicedReference.from_quantile_nodes`), instead of a particle sample: with
    M = 16384 its error is ~1e-9 where M mid-quantile atoms would give ~5e-5.

    Attributes
    ----------
    error : ndarray (T,)
        Estimate of :math:`SW_2(\nu_k, \hat\nu_{k,M})`, :math:`\hat\nu_{k,M}` the interpolated
        reference, per save time, from the midpoint deviations of each cell (with a factor 2).

    Examples
    --------
    >>> import meanfield as mf, particles
    >>> model = particles.MultiHead.scalar([1.0], d=5, kind="softmax")
    >>> res = mf.wasserstein_ascent(mf.ZonalMeasure(lambda x: 1 + 0 * x[:, 0], d=5), model, t1=0.1,
    ...                             scheme="spectral", L=4)
    >>> ref = SpectralSlicedReference(res.info["solution"], n_projections=8, n_quantiles=1024)
    >>> bool(ref.error.max() < 0.01)
    True
    """

    @pv.declare(n_projections=pv.Integer(1), n_quantiles=pv.Integer(1), n_cells=pv.Integer(16))
    def __init__(self, solution, *, n_projections: int = 256, n_quantiles: int = 16384, seed: int = 0,
                 n_cells: int = 4096):
        from ot.sliced import get_random_projections

        sol = _solution(solution, ("sphere", "zonal"), "SpectralSlicedReference")
        M, K, d = n_quantiles, n_cells, sol.d
        self.theta = np.ascontiguousarray(get_random_projections(d, n_projections, seed=seed).T)  # (L, d)
        T = len(sol.coefficients)
        self.levels = _graded_levels(M, d)
        mids = 0.5 * (self.levels[1:] + self.levels[:-1])
        self.atoms = np.empty((T, len(self.levels), n_projections))  # the quantile function at the levels
        self.error = np.empty(T)
        x = np.linspace(-1.0, 1.0, K + 1)
        for k in range(T):
            G, g = sol.projected_cdf(k, self.theta, x)  # (K+1, L) each
            sq = np.empty(n_projections)
            for j in range(n_projections):
                q = hermite_inverse(x, G[:, j], g[:, j], self.levels)
                self.atoms[k][:, j] = q
                sq[j] = interpolation_sq(self.levels, q, hermite_inverse(x, G[:, j], g[:, j], mids))
            self.error[k] = float(np.sqrt(sq.mean()))


def _graded_levels(M: int, d: int, grade: float = 4.0) -> np.ndarray:
    r"""Levels of the M + 1 quantile nodes: j/M on S^2, whose projected densities are bounded below; for
    d ≥ 4, where the quantile function behaves like :math:`s^\alpha`, :math:`\alpha = 2/(d-1)`, at the
    ends, :math:`u = v^\gamma/(v^\gamma + (1-v)^\gamma)` of v = j/M with γ = 4: the interpolation error
    (cells :math:`h_v`, weight :math:`du \sim v^{\gamma-1}dv`) sums to :math:`O(M^{-4})` in :math:`L^2`
    squared whenever :math:`\gamma(2\alpha + 1) > 4`, i.e. for every d."""
    v = np.arange(M + 1) / M
    if d == 3:
        return v
    a, b = v**grade, (1.0 - v) ** grade
    return a / (a + b)


@pv.keyword_only("n", "rng")
@pv.declare(k=pv.Integer(), n=pv.Integer(1), rng=pv.Seed())
def circle_spectral_sample(solution, k: int, *, n: int, rng) -> np.ndarray:
    """n i.i.d. points (n, 2) on S^1 from the spectral density at save k, by inverting its exact CDF."""
    sol = _solution(solution, ("circle",), "circle_spectral_sample")
    u, G, g = sol.circle_cdf(k)
    theta = _TWO_PI * hermite_inverse(u, G, g, np.random.default_rng(rng).uniform(size=n))
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


def _default_max_L(d, m_grid):
    """The reference's band-limit cap: S^1 m_grid / 2, S^2 1024 on ducc0's transforms (128 on the Legendre
    tables), zonal 512."""
    from meanfield.spectral import sht_backend

    return {2: max(16, int(m_grid) // 2), 3: 1024 if sht_backend() == "ducc0" else 128}.get(d, 512)


class StudyReference:
    r"""The spectral mean-field reference of :func:`metrics.mean_field_limit_study`, where it applies.

    :meth:`build` returns ``None`` unless the problem is one the spectral scheme solves: S^1 (heads
    that are scaled rotations), S^2 (any heads), or d ≥ 4 with scalar heads and a density zonal about
    the last axis. Otherwise the study keeps its grid or Lagrangian reference. It also gives up (an
    instance with ``solution=None`` and the reason in ``attrs["reference_note"]``) when the flow
    concentrates past the band limit ``max_L`` (by default m_grid/2 on S^1, 1024 on S^2 with ducc0's
    transforms and 128 without, 512 for zonal runs: the cost of a grid reference of m_grid cells, and of
    the S^2 transforms).

    Attributes
    ----------
    solution : meanfield.SpectralSolution
    energy, entropy : ndarray (T,)
        :math:`E_{multi}[\mu(t)]` (Funk–Hecke or quadrature) and the head-averaged attention entropy.
    sliced : SpectralSlicedReference or None
        For d ≥ 3.
    attrs : dict
        ``reference``, ``reference_band_limit``, ``reference_tail``, ``reference_error`` and a note.
    """

    def __init__(self, solution, energy, entropy, sliced, attrs):
        self.solution, self.energy, self.entropy, self.sliced, self.attrs = solution, energy, entropy, sliced, attrs

    @classmethod
    def build(cls, model, density_fn, ts, *, kappa, m_grid, n_projections, n_quantiles, seed, entropy_fn,
              tol: float = 1e-10):
        import meanfield as mf

        d = model.d
        t1, n_saves = float(ts[-1]), len(ts)
        from particles.validation import SolverError

        max_L = _default_max_L(d, m_grid)
        opts = {"scheme": "spectral", "kappa": kappa, "tol": tol, "rtol": 1e-12, "max_L": max_L}
        if d == 2 and not all(scaled_rotation_of(A) is not None for A in np.concatenate([model.M, model.W])):
            return None
        if d >= 4:
            if not all(np.array_equal(A, A[0, 0] * np.eye(d)) for A in np.concatenate([model.M, model.W])):
                return None
            try:
                mu0 = mf.ZonalMeasure(density_fn, d=d)
            except InvalidParameterError:
                return None

        def grid_measure(level):
            # the density is read on a grid: 4^level times finer when the data needs a higher band limit
            if d == 2:
                pts, areas = mf.circle_grid(int(m_grid) * 4**level)
                return mf.GridMeasure.from_density(pts, areas, density_fn)
            pts, w = mf.sphere_quadrature(3, n=min(max(int(np.sqrt(m_grid / 2)), 16) * 2**level, max_L + 1))
            return mf.GridMeasure.from_density(pts, 4 * np.pi * w, density_fn)

        res = None
        for level in range(3 if d <= 3 else 1):
            try:
                res = _grid_route(mu0 if d >= 4 else grid_measure(level), model, t1=t1, n_saves=n_saves,
                                  t0=float(ts[0]), **opts)
                break
            except SolverError as exc:
                return cls(None, None, None, None, {"reference_note": f"spectral reference not used: {exc}"})
            except InvalidParameterError as exc:
                if "too small for the initial density" not in str(exc):
                    raise
                note = str(exc)
        if res is None:
            return cls(None, None, None, None, {"reference_note": f"spectral reference not used: {note}"})
        sol = res.info["solution"]
        tail = float(np.max(res.info["tail"]))
        attrs = {"reference": "meanfield.wasserstein_ascent(scheme='spectral')",
                 "reference_band_limit": int(sol.L), "reference_tail": tail,
                 "reference_steps": int(res.n_steps)}
        if d == 2:
            entropy = np.array([entropy_fn(model, res.points, np.maximum(q, 0)) for q in res.mass])
            # quantile atoms M >= 4 m_grid: W_p(ν, ν̂_M) <= mean cell length 2π/M; truncation: W1 <= π ||ρ - ρ_L||_1
            err = _TWO_PI / (4 * int(m_grid)) + np.pi * tail
            attrs.update(reference_error=float(err), reference_error_note=(
                "bound on W_p between the spectral reference and its quantile atoms (2*pi/M, M >= 4 m_grid) "
                "plus pi times the spectral tail (W1 <= pi ||rho - rho_L||_1 on the circle)"))
            return cls(sol, np.asarray(res.energy), entropy, None, attrs)
        sliced = SpectralSlicedReference(sol, n_projections=int(n_projections), n_quantiles=int(n_quantiles),
                                         seed=seed)
        if d == 3:
            entropy = np.array([entropy_fn(model, res.points, np.maximum(q, 0)) for q in res.mass])
        else:
            entropy = np.array([_zonal_entropy(model, sol, k) for k in range(len(ts))])
        attrs.update(reference_error=float(sliced.error.max() + 2 * np.sqrt(tail)), reference_error_note=(
            "estimate of SW_2 between the spectral reference and its piecewise-linear quantile functions (per "
            "save time in the data variable reference_error), plus 2 sqrt(spectral tail) for the truncation "
            "(SW_2 <= W_2 <= 2 sqrt(TV) on the unit sphere, TV <= ||rho - rho_L||_2 / 2)"))
        return cls(sol, np.asarray(res.energy), entropy, sliced, attrs)


def _grid_route(mu0, model, **options):
    """The spectral solution of the study's reference, on the grid it was given."""
    import meanfield as mf

    with warnings.catch_warnings():
        # the study reads the reference's masses on the S^2 grid (its entropy): the zonal route, which
        # the solver suggests for an axisymmetric density, does not give them
        warnings.filterwarnings("ignore", message="slow route", category=UserWarning)
        return mf.wasserstein_ascent(mu0, model, **options)


def _zonal_entropy(model, sol, k):
    r"""Head-averaged attention entropy of a zonal density (scalar heads :math:`M_h = \lambda_h I`): per
    head :math:`\int(\log Z_a - a\,\partial_a\log Z_a)\,d\mu` with :math:`\log Z_a` from Funk–Hecke
    (``SpectralSolution.log_partition``) and :math:`\beta\langle x, M m(x)\rangle = a\,\partial_a\log Z_a`
    by a central difference in a; the spectral solver's Gauss–Gegenbauer rule in :math:`t = \langle x, e\rangle`
    (weights to relative round-off at any number of nodes, summing to 1)."""
    from meanfield.extend import gauss_gegenbauer

    d, L = sol.d, sol.L
    t, w = gauss_gegenbauer(2 * L + 8, d)
    e = sol.axis
    perp = np.eye(d)[int(np.argmin(np.abs(e)))]
    perp = perp - (perp @ e) * e
    perp /= np.linalg.norm(perp)
    rho = sol.density(k, t[:, None] * e + np.sqrt(1 - t * t)[:, None] * perp)
    out = 0.0
    for lam in model.M[:, 0, 0]:
        a = model.beta * lam
        h = 1e-4 * max(1.0, abs(a))
        dlog = (sol.log_partition(k, a=a + h, t=t) - sol.log_partition(k, a=a - h, t=t)) / (2 * h)
        out += w @ ((sol.log_partition(k, a=a, t=t) - a * dlog) * rho)
    return float(out / model.n_heads)
