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

:class:`SpectralSlicedReference` stores M quantile atoms per direction and save time from these
CDFs and is called like :class:`metrics.limit.SlicedReference`; ``error[k]`` bounds the
quantisation :math:`SW_2(\nu, \hat\nu_M)` at save k.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from particles.validation import InvalidParameterError, check_instance, check_param

from .limit import SlicedReference, circle_wasserstein

__all__ = ["circle_spectral_quantiles", "circle_spectral_wasserstein", "circle_spectral_sample",
           "SpectralSlicedReference", "StudyReference"]

_TWO_PI = 2 * np.pi


def _hermite_inverse(x, G, g, s):
    """Solve G(t) = s on the grid x with the cubic Hermite interpolant of (G, g = G'), Newton in each cell."""
    k = np.clip(np.searchsorted(G, s, side="right") - 1, 0, len(x) - 2)
    h = x[k + 1] - x[k]
    G0, G1, d0, d1 = G[k], G[k + 1], h * g[k], h * g[k + 1]
    span = np.where(G1 > G0, G1 - G0, 1.0)
    tau = np.clip((s - G0) / span, 0.0, 1.0)
    for _ in range(6):
        t2, t3 = tau * tau, tau * tau * tau
        H = (2 * t3 - 3 * t2 + 1) * G0 + (t3 - 2 * t2 + tau) * d0 + (-2 * t3 + 3 * t2) * G1 + (t3 - t2) * d1
        dH = (6 * t2 - 6 * tau) * G0 + (3 * t2 - 4 * tau + 1) * d0 + (-6 * t2 + 6 * tau) * G1 + (3 * t2 - 2 * tau) * d1
        tau = np.clip(tau - (H - s) / np.where(dH > 0, dH, span), 0.0, 1.0)
    return x[k] + h * tau


def _quantisation_sq(edges, mids):
    r"""Bound on :math:`W_2^2` between a 1-d law and its mid-quantile atoms: Q is monotone, so on the
    lower (upper) half of cell j, :math:`|Q(s) - q_j| \le q_j - Q_j` (:math:`Q_{j+1} - q_j`)."""
    return float(np.mean(0.5 * ((mids - edges[:-1]) ** 2 + (edges[1:] - mids) ** 2)))


def _solution(solution, geometries, caller):
    from meanfield import SpectralSolution

    check_instance(solution, SpectralSolution, "solution", caller,
                   hint="pass res.info['solution'] of a wasserstein_ascent(..., scheme='spectral') run")
    if solution.geometry not in geometries:
        raise InvalidParameterError(
            f"{caller} needs a spectral solution on {' or '.join(geometries)}; got geometry {solution.geometry!r}."
        )
    return solution


def circle_spectral_quantiles(solution, k: int, M: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Angles (radians, in [0, 2π)) of the M mid-quantile atoms :math:`F^{-1}((j + 1/2)/M)` of the
    spectral density at save index k, and the lengths (radians) of the M quantile cells.

    Examples
    --------
    >>> import meanfield as mf, particles
    >>> pts, areas = mf.circle_grid(32)
    >>> mu0 = mf.GridMeasure.from_density(pts, areas, lambda x: 1 + 0 * x[:, 0])
    >>> res = mf.wasserstein_ascent(mu0, particles.MultiHead.scalar([1.0], d=2), t1=0.1, scheme="spectral", L=8)
    >>> q, cells = circle_spectral_quantiles(res.info["solution"], 0, 4)
    >>> bool(np.allclose(q, np.pi / 4 * np.array([1, 3, 5, 7])))  # uniform: quantiles are equally spaced
    True
    """
    caller = "circle_spectral_quantiles"
    sol = _solution(solution, ("circle",), caller)
    k = check_param(k, "k", caller, low=-len(sol.coefficients), high=len(sol.coefficients) - 1, integer=True)
    M = check_param(M, "M", caller, low=1, integer=True)
    u, G, g = _circle_cdf(sol, k)
    edges = _hermite_inverse(u, G, g, np.arange(M + 1) / M)
    mids = _hermite_inverse(u, G, g, (np.arange(M) + 0.5) / M)
    return _TWO_PI * mids, _TWO_PI * np.diff(edges)


def _circle_cdf(sol, k):
    """Grid u = j/K (turns) with the exact CDF F(u) and the density, K = max(2^16, 8(L+1))."""
    c = np.asarray(sol.coefficients[k])
    L = len(c) - 1
    K = max(2**16, 8 * (L + 1))
    n = np.arange(1, L + 1)
    X = np.zeros(K // 2 + 1, complex)
    X[1:L + 1] = c[1:] / (_TWO_PI * 1j * n)
    P = np.fft.irfft(X, K) * K
    R = np.zeros(K // 2 + 1, complex)
    R[:L + 1] = c
    rho = np.fft.irfft(R, K) * K
    u = np.arange(K + 1) / K
    return u, u + np.append(P, P[0]) - P[0], np.append(rho, rho[0])


def circle_spectral_wasserstein(theta, solution, k: int, *, p: int = 2, n_quantiles: int | None = None
                                ) -> tuple[float, float]:
    r""":math:`W_p` (geodesic, radians) between the uniform measure on the angles ``theta`` and the
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
    caller = "circle_spectral_wasserstein"
    theta = np.asarray(theta, dtype=float).ravel()
    if theta.size == 0 or not np.all(np.isfinite(theta)):
        raise InvalidParameterError(f"theta of {caller} must be a non-empty array of finite angles.")
    p = check_param(p, "p", caller, low=1, integer=True)
    M = max(16 * theta.size, 4096) if n_quantiles is None else check_param(n_quantiles, "n_quantiles", caller,
                                                                            low=1, integer=True)
    atoms, cells = circle_spectral_quantiles(solution, k, M)
    value, _ = circle_wasserstein(theta, atoms, p=p, method="circle")
    return value, float(np.mean(cells ** p) ** (1 / p))


class SpectralSlicedReference(SlicedReference):
    r"""Sliced :math:`SW_2` to a spectral solution on S^2 or a zonal one on :math:`S^{d-1}`.

    The same directions (``ot.sliced.get_random_projections(d, n_projections, seed)``) and call as
    :class:`metrics.limit.SlicedReference`, but each projected reference is the M mid-quantile atoms
    of the exact projected CDF (module docstring) instead of a particle sample.

    Attributes
    ----------
    error : ndarray (T,)
        Bound on :math:`SW_2(\nu_k, \hat\nu_{k,M})` (quantisation), per save time.

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

    def __init__(self, solution, *, n_projections: int = 256, n_quantiles: int = 16384, seed: int = 0,
                 n_cells: int = 4096):
        from ot.sliced import get_random_projections

        caller = "SpectralSlicedReference"
        sol = _solution(solution, ("sphere", "zonal"), caller)
        n_projections = check_param(n_projections, "n_projections", caller, low=1, integer=True)
        M = check_param(n_quantiles, "n_quantiles", caller, low=1, integer=True)
        K = check_param(n_cells, "n_cells", caller, low=16, integer=True)
        d = sol.d
        self.theta = np.ascontiguousarray(get_random_projections(d, n_projections, seed=seed).T)  # (L, d)
        T = len(sol.coefficients)
        self.atoms = np.empty((T, M, n_projections))
        self.error = np.empty(T)
        x = np.linspace(-1.0, 1.0, K + 1)
        levels = (np.arange(M) + 0.5) / M
        edges_s = np.arange(M + 1) / M
        cdf = self._sphere_cdf if sol.geometry == "sphere" else self._zonal_cdf
        for k in range(T):
            G, g = cdf(sol, k, x)  # (K+1, L) each
            sq = np.empty(n_projections)
            for j in range(n_projections):
                q = _hermite_inverse(x, G[:, j], g[:, j], levels)
                self.atoms[k][:, j] = q
                sq[j] = _quantisation_sq(_hermite_inverse(x, G[:, j], g[:, j], edges_s), q)
            self.error[k] = float(np.sqrt(sq.mean()))

    def _sphere_cdf(self, sol, k, x):
        from meanfield.spectral import _legendre_column

        C = sol.coefficients[k]
        L = C.shape[0] - 1
        z = np.clip(self.theta[:, 2], -1, 1)
        phi = np.arctan2(self.theta[:, 1], self.theta[:, 0])
        f = np.zeros((len(self.theta), L + 1))  # ρ_l(θ_j)
        for m in range(L + 1):
            P = _legendre_column(L, m, z)  # (dirs, L+1-m), P̄_lm
            f[:, m:] += (1.0 if m == 0 else 2.0) * np.real(P * C[m:, m][None, :] * np.exp(1j * m * phi)[:, None])
        # Legendre P_l(x), l = 0..L+1 (P_l(1) = 1)
        Pl = np.empty((len(x), L + 2))
        Pl[:, 0] = 1.0
        Pl[:, 1] = x
        for l in range(1, L + 1):
            Pl[:, l + 1] = ((2 * l + 1) * x * Pl[:, l] - l * Pl[:, l - 1]) / (l + 1)
        I = np.empty((len(x), L + 1))
        I[:, 0] = x + 1
        for l in range(1, L + 1):
            I[:, l] = (Pl[:, l + 1] - Pl[:, l - 1]) / (2 * l + 1)
        return 0.5 * I @ f.T, 0.5 * Pl[:, :L + 1] @ f.T

    def _zonal_cdf(self, sol, k, x):
        from meanfield.spectral import _gegenbauer_orthonormal

        c = sol.coefficients[k]
        L, d = len(c) - 1, sol.d
        q_theta = _gegenbauer_orthonormal(L, self.theta @ sol.axis, d)  # (dirs, L+1)
        q_one = _gegenbauer_orthonormal(L, np.ones(1), d)[0]
        coef = (q_theta * (c / q_one)[None, :]).T  # (L+1, dirs)
        logB = gammaln(0.5) + gammaln((d - 1) / 2) - gammaln(d / 2)

        def density(t):
            base = np.clip(1 - t * t, 0, None)
            # (1-t²)^{(d-3)/2}/B in logs (no underflow of B at large d); the end points: 1 at d = 3, else 0
            with np.errstate(divide="ignore", invalid="ignore"):
                w = np.where(base > 0, np.exp((d - 3) / 2 * np.log(base) - logB), np.exp(-logB) if d == 3 else 0.0)
            return w[:, None] * (_gegenbauer_orthonormal(L, t, d) @ coef)

        g = density(x)
        gl, gw = np.polynomial.legendre.leggauss(6)
        h = np.diff(x)
        nodes = (x[:-1, None] + 0.5 * h[:, None] * (gl[None, :] + 1)).ravel()
        vals = density(nodes).reshape(len(h), len(gl), -1)
        cell = np.einsum("j,kjd->kd", gw, vals) * (0.5 * h)[:, None]
        G = np.vstack([np.zeros((1, cell.shape[1])), np.cumsum(cell, axis=0)])
        return G, g




def circle_spectral_sample(solution, k: int, n: int, rng) -> np.ndarray:
    """n i.i.d. points (n, 2) on S^1 from the spectral density at save k, by inverting its exact CDF."""
    caller = "circle_spectral_sample"
    sol = _solution(solution, ("circle",), caller)
    n = check_param(n, "n", caller, low=1, integer=True)
    u, G, g = _circle_cdf(sol, k)
    theta = _TWO_PI * _hermite_inverse(u, G, g, np.random.default_rng(rng).uniform(size=n))
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


class StudyReference:
    r"""The spectral mean-field reference of :func:`metrics.mean_field_limit_study`, where it applies.

    :meth:`build` returns ``None`` unless the problem is one the spectral scheme solves: S^1 (heads
    that are scaled rotations), S^2 (any heads), or d ≥ 4 with scalar heads and a density zonal about
    the last axis. Otherwise the study keeps its grid or Lagrangian reference.

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
        from meanfield.spectral import _rotation_heads, _scalar_heads

        d = model.d
        t1, n_saves = float(ts[-1]), len(ts)
        opts = {"scheme": "spectral", "kappa": kappa, "tol": tol, "rtol": 1e-12}
        if d == 2:
            try:
                _rotation_heads(model, "mean_field_limit_study")
            except InvalidParameterError:
                return None
            pts, areas = mf.circle_grid(int(m_grid))
            mu0 = mf.GridMeasure.from_density(pts, areas, lambda y: density_fn(np.arctan2(y[:, 1], y[:, 0])))
        elif d == 3:
            n = max(int(np.sqrt(m_grid / 2)), 16)
            pts, w = mf.sphere_quadrature(3, n)
            mu0 = mf.GridMeasure.from_density(pts, 4 * np.pi * w, density_fn)
        else:
            if _scalar_heads(model, "") is None:
                return None
            try:
                mu0 = mf.ZonalMeasure(density_fn, d=d)
            except InvalidParameterError:
                return None
        res = mf.wasserstein_ascent(mu0, model, t1=t1, n_saves=n_saves, t0=float(ts[0]), **opts)
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
            "bound on SW_2 between the spectral reference and its quantile atoms (per save time in the data "
            "variable reference_error), plus 2 sqrt(spectral tail) for the truncation (SW_2 <= W_2 <= "
            "2 sqrt(TV) on the unit sphere, TV <= ||rho - rho_L||_2 / 2)"))
        return cls(sol, np.asarray(res.energy), entropy, sliced, attrs)


def _zonal_entropy(model, sol, k):
    r"""Head-averaged attention entropy of a zonal density (scalar heads): per head
    :math:`\int(\log Z_a - a\,\partial_a\log Z_a)\rho\,d\sigma` with :math:`Z_a(t) = \sum_l\hat g_a(l)c_lq_l(t)`
    (Funk–Hecke) and :math:`\langle x, m(x)\rangle = \partial_a\log Z_a` by a central difference in a."""
    from meanfield.spectral import _fh_log, _gauss_gegenbauer, _gegenbauer_orthonormal, _scalar_heads

    c = np.asarray(sol.coefficients[k])
    L, d = len(c) - 1, sol.d
    t, w = _gauss_gegenbauer(2 * L + 8, d)
    Q = _gegenbauer_orthonormal(L, t, d)
    rho = Q @ c
    l = np.arange(L + 1)
    lam, _ = _scalar_heads(model, "")
    out = 0.0
    for la in lam:
        a = model.beta * la

        def logZ(b):
            if b == 0:
                return np.zeros_like(t)
            sgn, lg = _fh_log(b, l, d)
            return np.log(np.maximum(Q @ (sgn * np.exp(lg - abs(b)) * c), 1e-300)) + abs(b)

        h = 1e-4 * max(1.0, abs(a))
        dlog = (logZ(a + h) - logZ(a - h)) / (2 * h)
        out += w @ ((logZ(a) - a * dlog) * rho)
    return float(out / len(lam))
