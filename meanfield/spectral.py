r"""Spectral solvers of the mean-field equation on :math:`S^1`, :math:`S^2` and zonal :math:`S^{d-1}`
(docs/theory.md §7).

:math:`\partial_t\rho + \operatorname{div}(\rho\, v[\rho]) = \kappa^{-1}\Delta_S\rho`, with ρ the density
of μ with respect to the normalised uniform measure σ (so the mean of ρ is 1), is solved for the
coefficients of ρ in an orthonormal basis of :math:`L^2(\sigma)` truncated at degree L:

- :math:`S^1`: Fourier modes :math:`e^{in\theta}`, :math:`|n| \le L`; heads that are scaled rotations
  :math:`M_h = \lambda_h R(\alpha_h)`, :math:`W_h = \mu_h R(\gamma_h)` (scalar heads: α = γ = 0) have
  the convolution velocity :math:`v(\theta) = \sum_h s_h[(k_h*\rho)(\theta)]` with the exact Fourier
  coefficients of :math:`e^{a\cos(\delta-\alpha)}` (:math:`I_n(a)e^{-in\alpha}`) and of
  :math:`e^{a\cos(\delta-\alpha)}\sin(\gamma-\delta)`;
- :math:`S^2`: spherical harmonics on a Gauss–Legendre × uniform-longitude grid (FFT in longitude,
  normalised associated Legendre matrices per order m); scalar heads through Funk–Hecke, general
  3 × 3 heads through the summation layer evaluated on the quadrature grid;
- zonal :math:`S^{d-1}`, any d ≥ 3: ρ depends on :math:`t = \langle x, e\rangle` only and is expanded in
  the orthonormal Gegenbauer polynomials :math:`q_l \propto C_l^{(d-2)/2}(t)` with Gauss–Gegenbauer
  quadrature; scalar heads keep the flow zonal.

For a gradient velocity :math:`v = \nabla_S\Phi` the flux divergence needs scalar transforms only:
:math:`\operatorname{div}(\rho\nabla\Phi) = \tfrac12[\Delta(\rho\Phi) + \rho\Delta\Phi - \Phi\Delta\rho]`; for
a general tangent field F, :math:`\operatorname{div}_S F = -\tfrac12\sum_i x_i\,\Delta F_i` (apply
:math:`\Delta(gf) = g\Delta f + f\Delta g + 2\nabla g\cdot\nabla f` to :math:`g = x_i` and use
:math:`x\cdot F = 0`). Products are formed on a grid with 3/2 as many points as needed for degree L
(no aliasing into degrees ≤ L for polynomial products). The Laplacian is diagonal
(:math:`-l(l+d-2)`), so the noise is integrated exactly by an integrating factor, and the nonlinear
term by the embedded Dormand–Prince 5(4) pair in the integrating-factor variables with an adaptive
step (local error ≤ ``rtol`` in the :math:`L^2(\sigma)` norm). The degree-0 coefficient never
changes: mass is exact.

Honest error: after every step the *spectral tail*, the :math:`L^2(\sigma)` norm of the degrees
above :math:`L - \max(\lceil L/4\rceil, k)` relative to the norm of ρ (k the gcd of the excited
degrees, for symmetric spectra), is compared with ``tol``. With a fixed
``L`` the solver raises, naming the time and a sufficient band limit (from the fitted exponential
decay of the spectrum); with ``L=None`` it pads the coefficients with zeros (exact) and continues
at the larger L. Negative densities on the output grid beyond round-off are reported.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft
from scipy.special import gammaln, ive, roots_gegenbauer

from particles import MultiHead
from particles.validation import (
    ConvergenceWarning,
    InvalidParameterError,
    SolverError,
    check_callable,
    check_param,
    check_real_array,
    check_returned,
)

__all__ = ["ZonalMeasure", "SpectralSolution", "funk_hecke_log", "sphere_harmonic_transform"]

_DP_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])
_DP_A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
# 5th-order weights minus the embedded 4th-order ones
_DP_E = np.array([71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40])
_EPS = np.finfo(float).eps


# ------------------------------------------------------------------ Funk–Hecke coefficients at any d


def funk_hecke_log(a: float, l, d: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Sign and log of the Funk–Hecke coefficients :math:`\hat g_a(l)` of :math:`e^{a t}` on
    :math:`S^{d-1}`, without overflow or underflow at any d.

    .. math:: \hat g_a(l) = \Gamma(\nu+1)\Big(\frac2a\Big)^{\nu} I_{l+\nu}(a)
       = \Gamma(\nu+1)\Big(\frac a2\Big)^{l}\sum_{k\ge0}\frac{(a/2)^{2k}}{k!\,\Gamma(l+\nu+k+1)},
       \qquad \nu = \frac{d-2}{2},

    from the scaled Bessel function ``ive`` where it does not underflow, else from the series in
    log-sum-exp form (positive terms: no cancellation), which covers d up to thousands.

    Examples
    --------
    >>> s, g = funk_hecke_log(1.0, [0, 1], 3)
    >>> bool(np.allclose(s * np.exp(g), [np.sinh(1.0), np.cosh(1.0) - np.sinh(1.0)]))
    True
    """
    caller = "funk_hecke_log"
    a = check_param(a, "a", caller)
    l = np.atleast_1d(check_real_array(l, "l", caller, ndim=(0, 1), expected="degrees l >= 0"))
    if np.any(l < 0) or np.any(l != np.round(l)):
        raise InvalidParameterError(f"The 'l' parameter of {caller} must hold non-negative integers; got {l}.")
    d = check_param(d, "d", caller, low=2, integer=True)
    return _fh_log(a, l, d)


def _fh_log(a: float, l: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    l = np.asarray(l, dtype=float)
    nu = (d - 2) / 2
    b = abs(a)
    sign = np.where((a < 0) & (l % 2 == 1), -1.0, 1.0)
    if b == 0:
        return sign, np.where(l == 0, 0.0, -np.inf)
    with np.errstate(divide="ignore"):
        direct = gammaln(nu + 1) + nu * np.log(2 / b) + np.log(ive(l + nu, b)) + b
    bad = ~np.isfinite(direct) | (ive(l + nu, b) < 1e-250)
    if np.any(bad):
        # Σ_k (b/2)^{2k}/(k! Γ(l+ν+k+1)): the terms peak near k ~ b/2; enough terms past the peak
        K = int(b / 2 + 12 * np.sqrt(b + 1) + 40)
        k = np.arange(K)[:, None]
        lb = l[bad][None, :]
        terms = 2 * k * np.log(b / 2) - gammaln(k + 1) - gammaln(lb + nu + k + 1)
        top = terms.max(0)
        series = top + np.log(np.exp(terms - top).sum(0))
        direct[bad] = gammaln(nu + 1) + lb[0] * np.log(b / 2) + series
    return sign, direct


# ------------------------------------------------------------------ embedded integrating-factor RK


def _ifrk45(disc, c0, ts, *, kappa, rtol, tol, refine, max_steps, cap):
    """Dormand–Prince 5(4) in the integrating-factor variables of dc/dt = Λc + N(c), Λ = Δ/κ diagonal.

    Stage i: Y_i = E(c_i h) c_n + h Σ_j a_ij E((c_i - c_j) h) k_j, k_i = N(Y_i), E(s) = e^{Λ s}
    (c_i non-decreasing, so every factor decays: exact and stable for any κ). Returns the saved
    coefficients (each at the band limit of its time), the final discretisation, steps, rejections.
    """
    t = float(ts[0])
    c = c0
    saves, tails = [c.copy()], [disc.tail(c)]
    lam = disc.laplacian / kappa if np.isfinite(kappa) else np.zeros_like(disc.laplacian)
    k1 = disc.rhs(c)
    h = _first_step(disc, c, k1, ts[-1] - ts[0], rtol)
    n_steps = n_rejected = 0
    for target in ts[1:]:
        while t < target - 1e-13 * max(1.0, abs(target)):
            hs = min(h, target - t)
            ks = [k1]
            for i in range(1, 7):
                y = np.exp(lam * (_DP_C[i] * hs)) * c
                for j, aij in enumerate(_DP_A[i]):
                    if aij:
                        y = y + (hs * aij) * np.exp(lam * ((_DP_C[i] - _DP_C[j]) * hs)) * ks[j]
                ks.append(disc.rhs(y))  # the last stage is the 5th-order solution (FSAL)
            c_new = y
            err = hs * sum(e * np.exp(lam * ((1 - _DP_C[j]) * hs)) * ks[j] for j, e in enumerate(_DP_E) if e)
            ratio = disc.norm(err) / (rtol * disc.norm(c_new))
            if not np.isfinite(ratio):
                raise SolverError(f"spectral solver: the state stopped being finite at t={t:.6g}.")
            if ratio <= 1.0:
                t += hs
                c, k1 = c_new, ks[6]
                n_steps += 1
                tail = disc.tail(c)
                if tail > tol:
                    L_new = disc.sufficient_L(c, tol)
                    if refine and L_new > cap:
                        if disc.L >= cap:
                            raise SolverError(
                                f"spectral solver: at t={t:.6g} the density needs a band limit L >= {L_new}, above "
                                f"the cap max_L={cap} (tail {tail:.2e} > tol={tol:.1e} at L={disc.L}): it is "
                                "concentrating into clusters. Stop earlier, add noise, raise max_L, or use particles."
                            )
                        L_new = cap
                    if not refine:
                        raise SolverError(
                            f"spectral solver: at t={t:.6g} the spectral tail (L2 norm of the top degrees "
                            f"relative to the density) is {tail:.2e} > tol={tol:.1e} at band limit L={disc.L}: "
                            f"the density sharpened past the band limit. Rerun with L >= {L_new} (or L=None "
                            "to refine automatically), or stop earlier."
                        )
                    disc = disc.with_L(L_new)
                    c = disc.pad(c)
                    lam = disc.laplacian / kappa if np.isfinite(kappa) else np.zeros_like(disc.laplacian)
                    k1 = disc.rhs(c)
            else:
                n_rejected += 1
            h = hs * min(5.0, max(0.2, 0.9 * max(ratio, 1e-10) ** -0.2))
            if n_steps + n_rejected > max_steps:
                raise SolverError(f"spectral solver: max_steps={max_steps} reached at t={t:.6g}; raise max_steps "
                                  "or loosen rtol.")
        saves.append(c.copy())
        tails.append(disc.tail(c))
    return saves, np.array(tails), disc, n_steps, n_rejected


def _first_step(disc, c, k1, span, rtol):
    scale = disc.norm(k1)
    h = 0.1 * rtol ** 0.2 * disc.norm(c) / scale if scale > 0 else span
    return float(min(span, max(h, 1e-12 * span)))


def _suggest_L(L, energy_by_degree, tail, tol):
    """Band limit at which the tail of a spectrum decaying like its top half would be ≤ tol / 10."""
    l = np.arange(len(energy_by_degree))
    top = l >= L // 2
    e = energy_by_degree[top]
    ok = e > 0
    slope = np.polyfit(l[top][ok], 0.5 * np.log(e[ok]), 1)[0] if ok.sum() >= 2 else 0.0
    if slope >= -1e-3 or not np.isfinite(slope):
        return 2 * L
    # tail ∝ e^{slope · (3/4) L}: solve for tol / 10
    need = L + (4 / 3) * np.log(tol / 10 / max(tail, 1e-300)) / slope
    return int(min(4 * L, max(L + 4, 8 * math.ceil(need / 8))))


# ------------------------------------------------------------------ heads


def _scalar_heads(model):
    d = model.d
    eye = np.eye(d)
    lam, mu = model.M[:, 0, 0], model.W[:, 0, 0]
    scale = max(1.0, float(np.abs(model.M).max()), float(np.abs(model.W).max()))
    if (np.allclose(model.M, lam[:, None, None] * eye, rtol=0, atol=1e-14 * scale)
            and np.allclose(model.W, mu[:, None, None] * eye, rtol=0, atol=1e-14 * scale)):
        return lam, mu
    return None


def _rotation_heads(model, caller):
    """(λ, α, μ, γ) per head when every M_h = λ R(α) and W_h = μ R(γ) on S^1."""
    out = []
    for M, W in zip(model.M, model.W):
        ok = True
        pars = []
        for A in (M, W):
            p, q = A[0, 0], A[1, 0]
            scale = max(1.0, float(np.abs(A).max()))
            ok &= abs(A[1, 1] - p) <= 1e-14 * scale and abs(A[0, 1] + q) <= 1e-14 * scale
            pars += [math.hypot(p, q), math.atan2(q, p)]
        if not ok:
            raise InvalidParameterError(
                f"scheme 'spectral' on S^1 ({caller}) needs heads that are scaled rotations, "
                "M_h = lambda R(alpha) and W_h = mu R(gamma) (e.g. MultiHead.scalar): only then is the velocity a "
                "circular convolution; use scheme='fv_circle' for general 2 x 2 heads."
            )
        out.append(tuple(pars))
    return out


def _usa_scale(model, a):
    scale = abs(a) - model.log_time_scale
    if scale > 700:
        raise InvalidParameterError("USA velocity overflows: build the model with log_time_scale='auto'.")
    return math.exp(scale)


# ------------------------------------------------------------------ S^1


class _Circle:
    """Fourier coefficients c_n, n = 0..L (c_{-n} = conj c_n) of ρ = Σ c_n e^{inθ}."""

    d = 2
    max_L = 2**16

    def __init__(self, model, L):
        self.model, self.L = model, L
        n = np.arange(L + 1)
        self.laplacian = -(n.astype(float) ** 2)
        self.weight = np.where(n == 0, 1.0, 2.0)  # ||ρ||²_σ = Σ_n |c_n|² over n ∈ Z
        self.M = sfft.next_fast_len(3 * L + 2, real=True)
        self.n = n
        self.heads = []
        for lam_, alpha, mu_, gamma in _rotation_heads(model, "wasserstein_ascent"):
            a = model.beta * lam_
            # e^{a cos(δ-α)} e^{-|a|} = Σ_n ive(n, a) e^{in(δ-α)}; the sin(γ-δ) factor shifts n by ±1
            m = np.arange(-1, L + 2)
            z = ive(np.abs(m), a) * np.exp(-1j * m * alpha)
            zh = z[1:-1]
            nh = (np.exp(1j * gamma) * z[2:] - np.exp(-1j * gamma) * z[:-2]) / 2j
            amp = mu_ * (_usa_scale(model, a) if model.kind == "usa" else 1.0)
            self.heads.append((amp, zh, nh, a))

    def with_L(self, L):
        return _Circle(self.model, L)

    def pad(self, c):
        out = np.zeros(self.L + 1, complex)
        out[:len(c)] = c[:self.L + 1]
        return out

    def _grid(self, c):
        return sfft.irfft(c, self.M) * self.M

    def rhs(self, c):
        rho = self._grid(c)
        v = np.zeros(self.M)
        for amp, zh, nh, _ in self.heads:
            num = self._grid(nh * c)
            if self.model.kind == "softmax":
                v += amp * num / self._grid(zh * c)
            else:
                v += amp * num
        F = sfft.rfft(rho * v)[: self.L + 1] / self.M
        return -1j * self.n * F

    def norm(self, c):
        return float(np.sqrt(np.sum(self.weight * np.abs(c) ** 2)))

    @staticmethod
    def energy_by_degree(c):
        return np.where(np.arange(len(c)) == 0, 1.0, 2.0) * np.abs(c) ** 2

    def tail(self, c):
        return _tail(self, c)

    def sufficient_L(self, c, tol):
        return _suggest_L(self.L, self.energy_by_degree(c), self.tail(c), tol)

    def energy(self, c):
        if self.model.beta == 0:
            return np.inf
        e = 0.0
        for _, zh, _, a in self.heads:
            # ∫∫ e^{a cos(θ-φ-α)} dμ dμ = Σ_{n∈Z} ẑ_n |c_n|² (real for real kernels)
            e += math.exp(abs(a)) * float(np.real(np.sum(self.weight * zh * np.abs(c) ** 2)))
        return e / (2 * self.model.beta)

    @staticmethod
    def grid_points(m):
        th = 2 * np.pi * (np.arange(m) + 0.5) / m
        return np.stack([np.cos(th), np.sin(th)], 1), np.full(m, 1.0 / m)


def _tail(disc, c):
    """L2(σ) norm of the top degrees (c may extend past L) relative to the norm of ρ.

    The top band is (L - w, L] with w = max(ceil(L/4), k), k the gcd of the degrees holding energy
    above round-off: a k-fold symmetric density (energy at multiples of k only) always has a degree
    in the band, so an empty top quarter cannot hide a truncated spectrum.
    """
    e = disc.energy_by_degree(c)
    total = e.sum()
    live = np.flatnonzero(e[1:] > 1e-26 * total) + 1
    k = int(np.gcd.reduce(live)) if len(live) else 1
    width = max(1, math.ceil(disc.L / 4), k)
    return float(np.sqrt(e[max(1, disc.L + 1 - width):].sum() / total))


def _circle_coefficients(mu0, L_max):
    """Fourier coefficients n = 0..L_max of the density sampled at a uniform S^1 grid."""
    pts = mu0.points
    m = len(pts)
    th = np.arctan2(pts[:, 1], pts[:, 0])
    th0 = th[0] % (2 * np.pi)
    grid = th0 + 2 * np.pi * np.arange(m) / m
    if not np.allclose(np.exp(1j * th), np.exp(1j * grid), atol=1e-12):
        raise InvalidParameterError(
            "scheme 'spectral' on S^1 needs a GridMeasure on a uniform grid (meanfield.circle_grid(m) or "
            "sphere_quadrature(2, m)): the density is read at the points."
        )
    rho = mu0.mass / mu0.areas
    rho = rho / (rho.mean())  # density w.r.t. σ
    C = sfft.rfft(rho) / m * np.exp(-1j * np.arange(m // 2 + 1) * th0)
    return C[: min(L_max, (m - 1) // 2) + 1]


# ------------------------------------------------------------------ zonal S^{d-1}


def _gegenbauer_orthonormal(L, t, d):
    """q_l(t), l = 0..L, orthonormal for the law of <x, e> under σ on S^{d-1}: shape (len(t), L+1).

    Three-term recurrence of the orthonormal polynomials, t q_l = a_{l+1} q_{l+1} + a_l q_{l-1},
    a_{l+1}² = (l+1)(l+2ν) / (4(l+ν)(l+ν+1)): no Gamma-function normalisation, no overflow at any d.
    """
    nu = (d - 2) / 2
    Q = np.zeros((len(t), L + 1))
    Q[:, 0] = 1.0
    if L == 0:
        return Q
    a = np.sqrt((np.arange(L) + 1) * (np.arange(L) + 2 * nu) / (4 * (np.arange(L) + nu) * (np.arange(L) + nu + 1)))
    Q[:, 1] = t / a[0]
    for l in range(1, L):
        Q[:, l + 1] = (t * Q[:, l] - a[l - 1] * Q[:, l - 1]) / a[l]
    return Q


class _Zonal:
    """Coefficients c_l, l = 0..L, of ρ(<x, e>) = Σ c_l q_l(<x, e>) on S^{d-1} (scalar heads)."""

    max_L = 4096

    def __init__(self, model, L, d):
        self.model, self.L, self.d = model, L, d
        l = np.arange(L + 1)
        self.laplacian = -(l * (l + d - 2)).astype(float)
        self.nq = L + math.ceil(L / 2) + 2  # exact projection of degree-2L products onto degree ≤ L
        t, w = _gauss_gegenbauer(self.nq, d)
        self.t, self.w = t, w
        self.Q = _gegenbauer_orthonormal(L, t, d)
        self.A = (self.Q * w[:, None]).T
        self.phi, self.zs = _potential_multipliers(model, l, d)

    def with_L(self, L):
        return _Zonal(self.model, L, self.d)

    def pad(self, c):
        out = np.zeros(self.L + 1)
        out[:len(c)] = c[:self.L + 1]
        return out

    def rhs(self, c):
        Q, A, lap = self.Q, self.A, self.laplacian
        rho, lrho = Q @ c, Q @ (lap * c)
        if self.model.kind == "usa":
            pc = self.phi * c
            Phi, lPhi = Q @ pc, Q @ (lap * pc)
        else:
            Phi = self._log_potential(c)
            lPhi = Q @ (lap * (A @ Phi))
        return 0.5 * (lap * (A @ (rho * Phi)) + A @ (rho * lPhi - Phi * lrho)) * -1.0

    def _log_potential(self, c):
        Phi = np.zeros(len(self.t))
        for amp, zs in self.zs:
            Z = self.Q @ (zs * c)
            Phi += amp * np.log(np.maximum(Z, 1e-300))
        return Phi + self.Q @ (self.phi * c)

    def norm(self, c):
        return float(np.sqrt(np.sum(c * c)))

    def energy_by_degree(self, c):
        return c * c

    def tail(self, c):
        return _tail(self, c)

    def sufficient_L(self, c, tol):
        return _suggest_L(self.L, self.energy_by_degree(c), self.tail(c), tol)

    def energy(self, c):
        return _funk_hecke_energy(self.model, np.arange(self.L + 1), self.d, c * c)


def _gauss_gegenbauer(n, d):
    """Nodes and weights (summing to 1) of the law of <x, e> under σ on S^{d-1}: ∝ (1-t²)^{(d-3)/2} dt."""
    if d == 3:
        t, w = np.polynomial.legendre.leggauss(n)
    else:
        t, w = roots_gegenbauer(n, (d - 2) / 2)
    return t, w / w.sum()


def _potential_multipliers(model, l, d):
    """Φ = Σ_l φ_l c_l Y_l for USA heads (and the a = 0 limit of any head, Φ = μ<x, m>); for softmax
    heads the list of (μ/a, scaled Funk–Hecke coefficients ĝ_a(l) e^{-|a|}) of the partition function."""
    lam, mu = _scalar_heads(model)
    c = model.log_time_scale if model.kind == "usa" else 0.0
    phi = np.zeros(len(l))
    zs = []
    for la, m in zip(lam, mu):
        a = model.beta * la
        if a == 0:
            # G(1) -> 1/d, G(l >= 2) -> 0 as a -> 0 (USA and softmax alike)
            phi += m * math.exp(-c) * np.where(l == 1, 1.0 / d, 0.0)
            continue
        sgn, lg = _fh_log(a, l, d)
        if model.kind == "usa":
            # v = e^{-c} ∇_S (μ/a) ∫ e^{a<x,y>} dμ(y): multiplier μ ĝ_a(l) e^{-c} / a
            if np.max(lg) - c > 700:
                raise InvalidParameterError("USA velocity overflows: build the model with log_time_scale='auto'.")
            phi += m * sgn * np.exp(lg - c) / a
        else:
            zs.append((m / a, sgn * np.exp(lg - abs(a))))
    return phi, zs


def _funk_hecke_energy(model, l, d, energy_by_degree):
    """E_multi = Σ_h (1/2β) Σ_l ĝ_{a_h}(l) ||ρ_l||² for scalar heads (Funk–Hecke)."""
    if model.beta == 0:
        return np.inf
    lam, _ = _scalar_heads(model)
    e = 0.0
    for la in lam:
        sgn, lg = _fh_log(model.beta * la, l, d)
        e += float(np.sum(sgn * np.exp(lg) * energy_by_degree))
    return e / (2 * model.beta)


# ------------------------------------------------------------------ S^2 transforms


class sphere_harmonic_transform:  # noqa: N801 - a small callable-object API, named like a function
    r"""Spherical-harmonic transforms to degree L on the Gauss–Legendre grid of ``nlat`` latitudes.

    Grid: Gauss–Legendre nodes :math:`z_j = \cos\theta_j` (``nlat``) × ``nlon = 2 nlat`` longitudes
    :math:`\varphi_k = \pi k/\text{nlat}` (the points of ``sphere_quadrature(3, nlat)``). Coefficients
    ``C[l, m]``, m ≥ 0, of :math:`f = \sum_l [C_{l0}\bar P_{l0} + 2\operatorname{Re}\sum_{m\ge1}
    C_{lm}\bar P_{lm}(z) e^{im\varphi}]` with :math:`\bar P_{lm}` normalised by
    :math:`\tfrac12\int_{-1}^1\bar P_{lm}^2dz = 1` (so :math:`\|f\|^2_{L^2(\sigma)} = \sum_l|C_{l0}|^2 +
    2\sum_{m\ge1}|C_{lm}|^2`), from the stable three-term recurrence in l at fixed m. Synthesis is one
    matrix product per order m and parity of l + m on the northern nodes (equatorial symmetry) and an
    inverse real FFT per latitude; analysis the reverse with the
    Gauss weights; both are exact for band-limited functions when ``nlat > L`` (analysis of a
    product of degree ≤ 2L projected on degree ≤ L needs ``nlat ≥ (3L + 1)/2``).

    Examples
    --------
    >>> sht = sphere_harmonic_transform(4, 6)
    >>> z = sht.points[:, 2].reshape(sht.nlat, sht.nlon)
    >>> C = sht.analysis(z)
    >>> bool(np.isclose(abs(C[1, 0]), 1 / np.sqrt(3)))  # z = Y_10 / √3 in the σ-normalisation
    True
    >>> bool(np.allclose(sht.synthesis(C), z))
    True
    """

    def __init__(self, L: int, nlat: int):
        caller = "sphere_harmonic_transform"
        L = check_param(L, "L", caller, low=0, integer=True)
        nlat = check_param(nlat, "nlat", caller, low=2, integer=True)
        if nlat <= L:
            raise InvalidParameterError(
                f"nlat of {caller} must exceed L (Gauss-Legendre with nlat nodes resolves degree nlat - 1); "
                f"got L={L}, nlat={nlat}: use nlat >= {L + 1}, or ceil((3L+1)/2) to project products exactly."
            )
        self.L, self.nlat, self.nlon = int(L), int(nlat), 2 * int(nlat)
        z, w = np.polynomial.legendre.leggauss(self.nlat)
        self.z, self.w = z, w / 2
        phi = np.pi * np.arange(self.nlon) / self.nlat
        Z, PHI = np.meshgrid(z, phi, indexing="ij")
        r = np.sqrt(1 - Z * Z)
        self.points = np.stack([r * np.cos(PHI), r * np.sin(PHI), Z], -1).reshape(-1, 3)
        L = self.L
        # equatorial symmetry: the nodes come in pairs z, -z and P̄_lm(-z) = (-1)^{l+m} P̄_lm(z), so only
        # the northern rows are stored, split by the parity of l + m (half the flops and memory)
        nh = (self.nlat + 1) // 2
        self._north = np.arange(self.nlat - nh, self.nlat)
        self._south = self.nlat - 1 - self._north  # the mirror rows (the equator, odd nlat, is its own)
        self._mid = self.nlat % 2 == 1
        self.Pe, self.Po = [], []  # per m: (nh, ·) values of P̄_lm at the northern nodes, l - m even / odd
        zn = z[self._north]
        for m in range(L + 1):
            P = _legendre_column(L, m, zn)
            self.Pe.append(np.ascontiguousarray(P[:, 0::2]))
            self.Po.append(np.ascontiguousarray(P[:, 1::2]))
        l = np.arange(L + 1)
        self.laplacian = -(l * (l + 1)).astype(float)

    def synthesis(self, C: np.ndarray) -> np.ndarray:
        """Grid values (nlat, nlon) from coefficients C (L+1, L+1) (or stacked (..., L+1, L+1))."""
        C = np.asarray(C, dtype=complex)
        lead = C.shape[:-2]
        Cf = C.reshape(-1, self.L + 1, self.L + 1)
        k = Cf.shape[0]
        A = np.zeros((self.nlat, self.nlon // 2 + 1, k), complex)
        for m in range(self.L + 1):
            # real Legendre matrices times (re, im) pairs: real GEMMs, no complex upcast of P
            Cm = Cf[:, m:, m]
            E = (self.Pe[m] @ np.ascontiguousarray(Cm[:, 0::2].T).view(float)).view(complex)
            O = (self.Po[m] @ np.ascontiguousarray(Cm[:, 1::2].T).view(float)).view(complex)
            A[self._south, m, :] = E - O
            A[self._north, m, :] = E + O  # last: the equator row keeps E (O vanishes there)
        # the Hermitian extension of irfft adds the conjugate orders: f = a_0 + 2 Re Σ_{m≥1} a_m e^{imφ}
        out = sfft.irfft(A, self.nlon, axis=1) * self.nlon
        return np.moveaxis(out, -1, 0).reshape(*lead, self.nlat, self.nlon)

    def analysis(self, f: np.ndarray, L: int | None = None) -> np.ndarray:
        """Coefficients (L+1, L+1) (default the transform's L) of grid values f (nlat, nlon)."""
        L = self.L if L is None else L
        f = np.asarray(f, dtype=float)
        lead = f.shape[:-2]
        ff = np.moveaxis(f.reshape(-1, self.nlat, self.nlon), 0, -1)
        A = sfft.rfft(ff, axis=1) * (self.w / self.nlon)[:, None, None]  # Gauss weights folded in
        k = A.shape[-1]
        An, As = A[self._north], A[self._south]
        S, D = An + As, An - As
        if self._mid:
            S[0] *= 0.5  # the equator was counted twice
        C = np.zeros((k, L + 1, L + 1), complex)
        for m in range(L + 1):
            ne, no = (L - m) // 2 + 1, (L - m + 1) // 2
            Cm = C[:, m:, m]
            Cm[:, 0::2] = (self.Pe[m][:, :ne].T @ np.ascontiguousarray(S[:, m, :]).view(float)).view(complex).T
            if no:
                Cm[:, 1::2] = (self.Po[m][:, :no].T @ np.ascontiguousarray(D[:, m, :]).view(float)).view(complex).T
        return C.reshape(*lead, L + 1, L + 1)


class _Sphere:
    """Spherical-harmonic coefficients C[l, m] (m ≥ 0) of ρ on S^2."""

    d = 3
    max_L = 512  # the Legendre tables hold ~ 0.4 L^3 doubles (0.4 GB at L = 512)

    def __init__(self, model, L):
        self.model, self.L = model, L
        self.scalar = _scalar_heads(model) is not None
        # general heads: F_i is analysed to degree L + 1 (x_i ΔF_i then has degree L + 2 ≥ L)
        self.sht = sphere_harmonic_transform(L + 1, L + 1 + math.ceil((L + 2) / 2) + 1)
        l = np.arange(L + 1)
        self.laplacian = np.repeat(-(l * (l + 1)).astype(float)[:, None], L + 1, 1)
        self.mask = np.tril(np.ones((L + 1, L + 1), bool))
        self.weight = np.where(np.arange(L + 1)[None, :] == 0, 1.0, 2.0) * self.mask
        if self.scalar:
            self.phi, self.zs = _potential_multipliers(model, l, 3)
        self.xyz = self.sht.points.reshape(self.sht.nlat, self.sht.nlon, 3)

    def with_L(self, L):
        return _Sphere(self.model, L)

    def pad(self, c):
        out = np.zeros((self.L + 1, self.L + 1), complex)
        k = min(len(c), self.L + 1)
        out[:k, :k] = c[:k, :k]
        return out

    def _up(self, c):
        """Coefficients at the transform's degree L + 1 (zero row/column)."""
        out = np.zeros((self.L + 2, self.L + 2), complex)
        out[: self.L + 1, : self.L + 1] = c
        return out

    def rhs(self, c):
        sht, lap = self.sht, self.laplacian
        if self.scalar:
            if self.model.kind == "usa":
                pc = self.phi[:, None] * c
                rho, lrho, Phi, lPhi = sht.synthesis(np.stack([self._up(c), self._up(lap * c), self._up(pc),
                                                               self._up(lap * pc)]))
            else:
                parts = [self._up(c), self._up(lap * c), self._up(self.phi[:, None] * c)]
                parts += [self._up(zs[:, None] * c) for _, zs in self.zs]
                vals = sht.synthesis(np.stack(parts))
                rho, lrho, Phi = vals[0], vals[1], vals[2].copy()
                for (amp, _), Z in zip(self.zs, vals[3:]):
                    Phi += amp * np.log(np.maximum(Z, 1e-300))
                Pc = sht.analysis(Phi)
                lap1 = np.repeat(sht.laplacian[:, None], self.L + 2, 1)
                lPhi = sht.synthesis(lap1 * Pc)
            G = sht.analysis(np.stack([rho * Phi, rho * lPhi - Phi * lrho]), self.L)
            return -0.5 * (lap * G[0] + G[1]) * self.mask
        rho = sht.synthesis(self._up(c))
        w = np.maximum(rho, 0.0).ravel() * np.repeat(sht.w, sht.nlon) / sht.nlon
        from .field import _velocity

        v = _velocity(self.model, sht.points, w / w.sum(), sht.points).reshape(sht.nlat, sht.nlon, 3)
        F = rho[..., None] * v
        Fc = sht.analysis(np.moveaxis(F, -1, 0))  # degree L + 1
        lap1 = np.repeat(sht.laplacian[:, None], self.L + 2, 1)
        lF = sht.synthesis(lap1[None] * Fc)
        div = -0.5 * np.einsum("ijk,kij->ij", self.xyz, lF)
        return -sht.analysis(div, self.L) * self.mask

    def norm(self, c):
        return float(np.sqrt(np.sum(self.weight * np.abs(c) ** 2)))

    @staticmethod
    def energy_by_degree(c):
        k = c.shape[0]
        weight = np.where(np.arange(k)[None, :] == 0, 1.0, 2.0) * np.tri(k, dtype=bool)
        return np.sum(weight * np.abs(c) ** 2, axis=1)

    def tail(self, c):
        return _tail(self, c)

    def sufficient_L(self, c, tol):
        return _suggest_L(self.L, self.energy_by_degree(c), self.tail(c), tol)

    def energy(self, c):
        if self.scalar:
            return _funk_hecke_energy(self.model, np.arange(self.L + 1), 3, self.energy_by_degree(c))
        from .field import measure_energy

        sht = sphere_harmonic_transform(self.L, self.L + 1)
        rho = sht.synthesis(c).ravel()
        w = np.maximum(rho, 0) * np.repeat(sht.w, sht.nlon) / sht.nlon
        return measure_energy(self.model, sht.points, w / w.sum()) if self.model.beta > 0 else np.inf


# ------------------------------------------------------------------ zonal measures


@dataclass(frozen=True, eq=False)
class ZonalMeasure:
    r"""A measure on :math:`S^{d-1}` whose density with respect to σ depends on
    :math:`\langle x, e\rangle` only: :math:`d\mu = \rho(\langle x, e\rangle)\,d\sigma`.

    Parameters
    ----------
    density_fn : callable
        ``density_fn(points (m, d)) -> (m,)``, non-negative (normalised here); it is checked to
        be zonal about ``axis`` (rotating points about the axis must not change it).
    d : int ≥ 3
    axis : array_like (d,), optional
        The axis e (normalised); default the last basis vector.

    Examples
    --------
    >>> mu = ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=8)
    >>> mu.profile(np.array([0.0, 1.0])).round(3)
    array([1. , 1.5])
    """

    density_fn: object
    d: int
    axis: np.ndarray | None = None

    def __post_init__(self):
        caller = "ZonalMeasure"
        check_callable(self.density_fn, "density_fn", caller, signature="density_fn(points (m, d)) -> (m,)")
        d = check_param(self.d, "d", caller, low=3, integer=True)
        e = np.eye(d)[-1] if self.axis is None else check_real_array(self.axis, "axis", caller, ndim=1)
        if e.shape != (d,) or np.linalg.norm(e) == 0:
            raise InvalidParameterError(f"axis of {caller} must be a non-zero vector of shape ({d},); got {e.shape}.")
        e = e / np.linalg.norm(e)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "axis", e)
        # zonality: the density at x and at a rotation of x about e (same <x, e>) must agree
        rng = np.random.default_rng(0)
        x = rng.standard_normal((64, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        t = x @ e
        u = rng.standard_normal((64, d))
        u -= np.outer(u @ e, e)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        y = t[:, None] * e + np.sqrt(1 - t * t)[:, None] * u
        fx, fy = self._eval(x), self._eval(y)
        scale = max(float(np.abs(fx).max()), 1e-300)
        if np.max(np.abs(fx - fy)) > 1e-10 * scale:
            raise InvalidParameterError(
                f"density_fn of {caller} is not zonal about the axis: it changed by "
                f"{np.max(np.abs(fx - fy)) / scale:.1e} (relative) between points with the same <x, e>. "
                "Pass a density that depends on x only through <x, axis> (e.g. lambda x: f(x @ axis)), "
                "or use a GridMeasure on S^1 or S^2."
            )

    def _eval(self, x):
        rho = check_returned(self.density_fn(x), "density_fn(points)", (len(x),), "ZonalMeasure")
        if np.any(rho < 0):
            raise InvalidParameterError("density_fn of ZonalMeasure must return non-negative values.")
        return rho

    def _points(self, t):
        """Points with <x, e> = t on one meridian."""
        e = self.axis
        perp = np.eye(self.d)[int(np.argmin(np.abs(e)))]
        perp = perp - (perp @ e) * e
        perp /= np.linalg.norm(perp)
        return t[:, None] * e + np.sqrt(np.clip(1 - t * t, 0, None))[:, None] * perp

    def profile(self, t) -> np.ndarray:
        """The (unnormalised) density as a function of t = <x, e> ∈ [-1, 1]."""
        t = check_real_array(t, "t", "ZonalMeasure.profile", ndim=1)
        return self._eval(self._points(np.clip(t, -1, 1)))


# ------------------------------------------------------------------ the solver


@dataclass(frozen=True)
class SpectralSolution:
    r"""Coefficients of a spectral solution and what they mean.

    Attributes
    ----------
    geometry : {"circle", "sphere", "zonal"}
    d : int
    L : int
        Final band limit.
    coefficients : list of ndarray
        Per save time: Fourier c_n (n = 0..L) on S^1, C[l, m] (m ≥ 0) on S^2, Gegenbauer c_l
        (orthonormal :math:`q_l`) for zonal runs; ρ is the density with respect to σ.
    tail : ndarray (n_times,)
        Spectral tail at each save time.
    axis : ndarray (d,) or None
        The axis of a zonal run.
    """

    geometry: str
    d: int
    L: int
    coefficients: list
    tail: np.ndarray
    axis: np.ndarray | None = None

    def density(self, k: int, points) -> np.ndarray:
        """ρ(x) (with respect to σ) at save index k at points (m, d) on the sphere.

        Examples
        --------
        >>> import particles
        >>> from meanfield import GridMeasure, circle_grid, wasserstein_ascent
        >>> pts, areas = circle_grid(32)
        >>> mu0 = GridMeasure.from_density(pts, areas, lambda x: 1 + 0.3 * x[:, 0])
        >>> res = wasserstein_ascent(mu0, particles.MultiHead.scalar([1.0], d=2, kind="softmax"), t1=0.1,
        ...                          n_saves=2, scheme="spectral", L=16)
        >>> round(float(res.info["solution"].density(0, np.array([[1.0, 0.0]]))[0]), 10)
        1.3
        """
        x = np.asarray(points, dtype=float)
        c = self.coefficients[k]
        if self.geometry == "circle":
            th = np.arctan2(x[:, 1], x[:, 0])
            n = np.arange(len(c))
            return np.real(np.exp(1j * np.outer(th, n)) @ (np.where(n == 0, 1.0, 2.0) * c))
        if self.geometry == "zonal":
            return _gegenbauer_orthonormal(len(c) - 1, x @ self.axis, self.d) @ c
        L = c.shape[0] - 1
        z = np.clip(x[:, 2], -1, 1)
        phi = np.arctan2(x[:, 1], x[:, 0])
        out = np.zeros(len(x))
        for m in range(L + 1):
            P = _legendre_column(L, m, z)
            am = P @ c[m:, m]
            out += (1.0 if m == 0 else 2.0) * np.real(am * np.exp(1j * m * phi))
        return out

    def circle_cdf(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""S^1: the grid :math:`u_j = j/K` (turns, K = max(2^16, 8(L+1))), the exact CDF
        :math:`F(u) = u + \sum_{n\ge1}2\,\mathrm{Re}[c_n(e^{2\pi inu} - 1)/(2\pi in)]` and ρ on it (one
        inverse FFT each), shape (K + 1,) each.

        Examples
        --------
        >>> sol = SpectralSolution("circle", 2, 1, [np.array([1.0, 0.25])], np.zeros(1))  # ρ = 1 + cos(θ)/2
        >>> u, F, rho = sol.circle_cdf(0)
        >>> bool(np.isclose(F[len(u) // 4], 0.25 + 0.5 / (2 * np.pi)))  # F(u) = u + sin(2πu)/(4π)
        True
        """
        if self.geometry != "circle":
            raise InvalidParameterError(f"circle_cdf needs a solution on S^1; this one is {self.geometry!r}.")
        c = np.asarray(self.coefficients[k])
        L = len(c) - 1
        K = max(2**16, 8 * (L + 1))
        n = np.arange(1, L + 1)
        X = np.zeros(K // 2 + 1, complex)
        X[1:L + 1] = c[1:] / (2j * np.pi * n)
        P = np.fft.irfft(X, K) * K
        R = np.zeros(K // 2 + 1, complex)
        R[:L + 1] = c
        rho = np.fft.irfft(R, K) * K
        u = np.arange(K + 1) / K
        return u, u + np.append(P, P[0]) - P[0], np.append(rho, rho[0])

    def projected_cdf(self, k: int, directions, t) -> tuple[np.ndarray, np.ndarray]:
        r"""S^2 or zonal: CDF and density (with respect to dt) of :math:`\langle\theta, x\rangle` under
        :math:`\rho\,d\sigma` at the increasing points ``t`` of [-1, 1] (t[0] = -1), for each direction
        θ; shapes (len(t), len(directions)).

        S^2: :math:`g_\theta(t) = \frac12\sum_l\rho_l(\theta)P_l(t)` (ρ_l the degree-l part: the average of
        a degree-l harmonic over :math:`\langle\theta, x\rangle = t` is its value at θ times :math:`P_l(t)`)
        and :math:`G_\theta = \frac12[\rho_0(t+1) + \sum_{l\ge1}\rho_l(\theta)(P_{l+1}-P_{l-1})/(2l+1)]`,
        exact. Zonal: :math:`g_\theta(t) = w(t)\sum_l c_l q_l(\langle\theta, e\rangle)q_l(t)/q_l(1)`, w the law
        of a coordinate under σ, G by 6-point Gauss–Legendre on each interval of ``t``.

        Examples
        --------
        >>> sol = SpectralSolution("sphere", 3, 1, [np.array([[1.0, 0], [0, 0]], complex)], np.zeros(1))
        >>> G, g = sol.projected_cdf(0, np.eye(3)[:1], np.array([-1.0, 0.0, 1.0]))
        >>> G[:, 0].tolist(), g[:, 0].tolist()  # uniform on S^2: uniform projections (Archimedes)
        ([0.0, 0.5, 1.0], [0.5, 0.5, 0.5])
        """
        if self.geometry not in ("sphere", "zonal"):
            raise InvalidParameterError(f"projected_cdf needs a solution on S^2 or a zonal one; got {self.geometry!r}.")
        theta = np.atleast_2d(np.asarray(directions, dtype=float))
        x = np.asarray(t, dtype=float)
        if self.geometry == "sphere":
            return _sphere_projection(self.coefficients[k], theta, x)
        return _zonal_projection(np.asarray(self.coefficients[k]), self.d, theta @ self.axis, x)

    def log_partition(self, k: int, a: float, t) -> np.ndarray:
        r"""Zonal: :math:`\log\int e^{a\langle x, y\rangle}\rho(y)\,d\sigma(y)` at points with
        :math:`\langle x, e\rangle = t`, by Funk–Hecke: :math:`\log\sum_l\hat g_a(l)c_lq_l(t)`.

        Examples
        --------
        >>> sol = SpectralSolution("zonal", 3, 1, [np.array([1.0, 0.0])], np.zeros(1), np.eye(3)[2])
        >>> bool(np.isclose(sol.log_partition(0, 1.0, np.array([0.3]))[0], np.log(np.sinh(1.0))))
        True
        """
        if self.geometry != "zonal":
            raise InvalidParameterError(f"log_partition needs a zonal solution; got {self.geometry!r}.")
        c = np.asarray(self.coefficients[k])
        L = len(c) - 1
        Q = _gegenbauer_orthonormal(L, np.asarray(t, dtype=float), self.d)
        if a == 0:
            return np.log(np.maximum(Q @ (c * (np.arange(L + 1) == 0)), 1e-300))
        sgn, lg = _fh_log(float(a), np.arange(L + 1), self.d)
        return np.log(np.maximum(Q @ (sgn * np.exp(lg - abs(a)) * c), 1e-300)) + abs(a)


def _sphere_projection(C, theta, x):
    L = C.shape[0] - 1
    z = np.clip(theta[:, 2], -1, 1)
    phi = np.arctan2(theta[:, 1], theta[:, 0])
    f = np.zeros((len(theta), L + 1))  # ρ_l(θ_j)
    for m in range(L + 1):
        P = _legendre_column(L, m, z)
        f[:, m:] += (1.0 if m == 0 else 2.0) * np.real(P * C[m:, m][None, :] * np.exp(1j * m * phi)[:, None])
    Pl = np.empty((len(x), L + 2))  # Legendre P_l(x), P_l(1) = 1
    Pl[:, 0] = 1.0
    Pl[:, 1] = x
    for l in range(1, L + 1):
        Pl[:, l + 1] = ((2 * l + 1) * x * Pl[:, l] - l * Pl[:, l - 1]) / (l + 1)
    I = np.empty((len(x), L + 1))
    I[:, 0] = x + 1
    for l in range(1, L + 1):
        I[:, l] = (Pl[:, l + 1] - Pl[:, l - 1]) / (2 * l + 1)
    return 0.5 * I @ f.T, 0.5 * Pl[:, :L + 1] @ f.T


def _zonal_projection(c, d, s, x):
    L = len(c) - 1
    q_dir = _gegenbauer_orthonormal(L, s, d)  # (dirs, L+1)
    q_one = _gegenbauer_orthonormal(L, np.ones(1), d)[0]
    coef = (q_dir * (c / q_one)[None, :]).T
    logB = gammaln(0.5) + gammaln((d - 1) / 2) - gammaln(d / 2)

    def density(t):
        base = np.clip(1 - t * t, 0, None)
        # (1-t²)^{(d-3)/2}/B in logs (no underflow of B at large d); the end points: 1/B at d = 3, else 0
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(base > 0, np.exp((d - 3) / 2 * np.log(base) - logB), np.exp(-logB) if d == 3 else 0.0)
        return w[:, None] * (_gegenbauer_orthonormal(L, t, d) @ coef)

    gl, gw = np.polynomial.legendre.leggauss(6)
    h = np.diff(x)
    nodes = (x[:-1, None] + 0.5 * h[:, None] * (gl[None, :] + 1)).ravel()
    cell = np.einsum("j,kjd->kd", gw, density(nodes).reshape(len(h), len(gl), -1)) * (0.5 * h)[:, None]
    return np.vstack([np.zeros((1, cell.shape[1])), np.cumsum(cell, axis=0)]), density(x)


def _legendre_column(L, m, z):
    """P̄_lm(z), l = m..L (same recurrence and normalisation as sphere_harmonic_transform)."""
    s = np.sqrt(np.clip(1 - z * z, 0, None))
    pmm = np.ones_like(z)
    for k in range(1, m + 1):
        pmm = pmm * np.sqrt((2 * k + 1) / (2 * k)) * s
    cols = [pmm]
    if m < L:
        cols.append(np.sqrt(2 * m + 3) * z * pmm)
    for l in range(m + 2, L + 1):
        a = np.sqrt((4 * l * l - 1) / (l * l - m * m))
        b = np.sqrt(((l - 1) ** 2 - m * m) / (4 * (l - 1) ** 2 - 1))
        cols.append(a * (z * cols[-1] - b * cols[-2]))
    return np.stack(cols, 1)



def spectral_ascent(mu0, model: MultiHead, ts, *, L=None, tol: float = 1e-10, rtol: float = 1e-10,
                    kappa=np.inf, max_steps: int = 1_000_000, max_L=None):
    """The ``"spectral"`` scheme of :func:`~meanfield.wasserstein_ascent` (module docstring)."""
    from ._result import MeanFieldResult
    from .measure import GridMeasure

    caller = "wasserstein_ascent(scheme='spectral')"
    tol = check_param(tol, "tol", caller, low=0.0, high=1.0, low_open=True, high_open=True)
    rtol = check_param(rtol, "rtol", caller, low=1e-15, high=1e-2)
    max_steps = check_param(max_steps, "max_steps", caller, low=1, integer=True)
    if L is not None:
        L = check_param(L, "L", caller, low=2, integer=True)
    if max_L is not None:
        max_L = check_param(max_L, "max_L", caller, low=2, integer=True)
    if model.kind not in ("usa", "softmax"):
        raise InvalidParameterError(f"scheme 'spectral' supports kinds 'usa' and 'softmax'; got {model.kind!r}.")
    if isinstance(mu0, ZonalMeasure):
        if mu0.d != model.d:
            raise InvalidParameterError(f"the ZonalMeasure lives on S^{mu0.d - 1} but the model has d = {model.d}.")
        if _scalar_heads(model) is None:
            raise InvalidParameterError(
                "scheme 'spectral' with a ZonalMeasure needs scalar heads M_h = lambda_h I, W_h = mu_h I "
                "(only these keep a zonal density zonal); build the model with MultiHead.scalar."
            )
        geometry, d = "zonal", mu0.d
        L_max = 4096
        make = lambda L_: _Zonal(model, L_, d)  # noqa: E731

        def initial(L_):
            n = max(2 * L_ + 2, 64)
            t, w = _gauss_gegenbauer(n, d)
            rho = mu0.profile(t)
            Q = _gegenbauer_orthonormal(L_, t, d)
            c = (Q * w[:, None]).T @ rho
            return c / c[0]
    elif isinstance(mu0, GridMeasure) and mu0.points.shape[1] == 2:
        geometry, d = "circle", 2
        if model.d != 2:
            raise InvalidParameterError(f"the GridMeasure lives on S^1 but the model has d = {model.d}.")
        full = _circle_coefficients(mu0, 10**9)
        L_max = len(full) - 1
        make = lambda L_: _Circle(model, L_)  # noqa: E731

        def initial(L_):
            c = np.zeros(L_ + 1, complex)
            c[: min(L_, L_max) + 1] = full[: L_ + 1]
            return c
    elif isinstance(mu0, GridMeasure) and mu0.points.shape[1] == 3:
        geometry, d = "sphere", 3
        if model.d != 3:
            raise InvalidParameterError(f"the GridMeasure lives on S^2 but the model has d = {model.d}.")
        nlat = int(round(np.sqrt(len(mu0.points) / 2)))
        from .quadrature import sphere_quadrature

        if 2 * nlat * nlat != len(mu0.points) or not np.allclose(sphere_quadrature(3, nlat)[0], mu0.points,
                                                                   atol=1e-12):
            raise InvalidParameterError(
                "scheme 'spectral' on S^2 needs a GridMeasure on the Gauss-Legendre grid sphere_quadrature(3, n) "
                "(areas 4*pi*weights): the density is read at its points."
            )
        rho = mu0.mass / mu0.areas
        rho = rho * (4 * np.pi)  # density w.r.t. σ (areas sum to 4π)
        sht_in = sphere_harmonic_transform(nlat - 1, nlat)
        full = sht_in.analysis(rho.reshape(nlat, 2 * nlat))
        full /= full[0, 0].real
        L_max = nlat - 1
        make = lambda L_: _Sphere(model, L_)  # noqa: E731

        def initial(L_):
            c = np.zeros((L_ + 1, L_ + 1), complex)
            k = min(L_, L_max) + 1
            c[:k, :k] = full[:k, :k]
            return c
    else:
        if isinstance(mu0, GridMeasure):
            raise InvalidParameterError(
                f"scheme 'spectral' on S^{mu0.points.shape[1] - 1} needs zonal data: pass a "
                "meanfield.ZonalMeasure (density a function of <x, e>) with scalar heads; GridMeasures are "
                "read on S^1 and S^2 only."
            )
        raise InvalidParameterError(
            "scheme 'spectral' needs a GridMeasure (uniform S^1 grid or sphere_quadrature(3, n) on S^2) or a "
            f"ZonalMeasure; got {type(mu0).__name__}."
        )
    refine = L is None
    if refine:
        cap = min(make(2).max_L, max_L or np.inf)
        L = min(8, cap)
        while True:
            disc = make(L)
            c0 = initial(L)
            if disc.tail(c0) <= tol / 10 or L >= min(L_max, cap):
                break
            L = int(min(2 * L, L_max, cap))
    else:
        disc = make(L)
        c0 = initial(L)
    # the tail of the data itself, degrees past L included (truncating them would hide it)
    tail0 = disc.tail(initial(min(2 * L, L_max)) if L_max > L else c0)
    if tail0 > tol:
        hint = f"L >= {2 * L}" if L < L_max else "a finer input grid"
        raise InvalidParameterError(
            f"L={L} is too small for the initial density of {caller}: its spectral tail is {tail0:.2e} > "
            f"tol={tol:.1e}. Use {hint} (or L=None to choose it)."
        )
    saves, tails, disc, n_steps, n_rej = _ifrk45(disc, c0, ts, kappa=kappa, rtol=rtol, tol=tol, refine=refine,
                                                 max_steps=max_steps, cap=int(cap) if refine else disc.max_L)
    coeffs = [disc.pad(c) for c in saves]
    energy = np.array([disc.energy(c) for c in coeffs])
    sol = SpectralSolution(geometry, d, disc.L, coeffs, tails, mu0.axis if geometry == "zonal" else None)
    # output grid: exact quadrature of the band-limited density
    if geometry == "circle":
        pts, w = _Circle.grid_points(max(len(mu0.points), 2 * disc.L + 2))
    elif geometry == "sphere":
        from .quadrature import sphere_quadrature

        pts, w = sphere_quadrature(3, max(int(round(np.sqrt(len(mu0.points) / 2))), disc.L + 1))
    else:
        t, w = _gauss_gegenbauer(disc.L + 1, d)
        pts = mu0._points(t)
    rho = np.array([sol.density(k, pts) for k in range(len(coeffs))])
    mass = rho * w[None, :]
    min_density = rho.min(axis=1)
    roundoff = 1e3 * _EPS * np.abs(rho).max(axis=1)
    negative = ts[min_density < -roundoff]
    if len(negative):
        warnings.warn(f"spectral solution negative beyond round-off at t = {np.round(negative, 6).tolist()} "
                      f"(min density {min_density.min():.2e}); raise L or lower tol.", ConvergenceWarning,
                      stacklevel=3)
    info = {"L": disc.L, "tail": tails, "min_density": min_density, "negative_times": negative,
            "mass_error": float(np.abs(mass.sum(1) - 1).max()), "n_rejected": n_rej, "geometry": geometry,
            "rtol": rtol, "tol": tol, "solution": sol}
    return MeanFieldResult(np.asarray(ts), pts, mass, energy, "spectral", n_steps, info)
