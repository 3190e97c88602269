r"""What the spectral geometries share (module docstring of :mod:`meanfield.spectral`): the Gauss–Gegenbauer
rule and the orthonormal Gegenbauer polynomials (the Gauss–Legendre rule is its d = 3 case), the Funk–Hecke
coefficients of the exponential kernel at any d (log form) and of any zonal kernel (by quadrature), with the
potentials and energies they give, the
head structures the solvers accept, the spectral tail and the band limit to suggest. Every geometry
(:mod:`.circle`, :mod:`.zonal`, :mod:`.sphere`) and the stepping import these names from here."""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import eigh_tridiagonal
from scipy.special import gammaln, ive

from particles.extend import LOG_OVERFLOW, scalar_heads, scaled_rotation_of
from particles.validation import (
    Checked,
    Integer,
    Interval,
    InvalidParameterError,
    check_real_array,
    declare,
    keyword_only,
)

# ------------------------------------------------------------------ Gegenbauer polynomials and quadrature


def recurrence(L, d):
    """a_{l+1}, l = 0..L-1, of t q_l = a_{l+1} q_{l+1} + a_l q_{l-1} (orthonormal Gegenbauer on S^{d-1})."""
    nu = (d - 2) / 2
    l = np.arange(L, dtype=float)
    return np.sqrt((l + 1) * (l + 2 * nu) / (4 * (l + nu) * (l + nu + 1)))


def gegenbauer_orthonormal(L, t, d):
    """q_l(t), l = 0..L, orthonormal for the law of <x, e> under σ on S^{d-1}: shape (len(t), L+1).

    Three-term recurrence of the orthonormal polynomials, t q_l = a_{l+1} q_{l+1} + a_l q_{l-1},
    a_{l+1}² = (l+1)(l+2ν) / (4(l+ν)(l+ν+1)): no Gamma-function normalisation, no overflow at any d.
    """
    t = np.asarray(t, dtype=float)
    Q = np.zeros((len(t), L + 1))
    Q[:, 0] = 1.0
    if L == 0:
        return Q
    a = recurrence(L, d)
    Q[:, 1] = t / a[0]
    for l in range(1, L):
        Q[:, l + 1] = (t * Q[:, l] - a[l - 1] * Q[:, l - 1]) / a[l]
    return Q


def gauss_gegenbauer(n, d):
    r"""Nodes and weights (summing to 1) of the n-point Gauss rule of the law of <x, e> under σ on
    S^{d-1}, :math:`\propto (1-t^2)^{(d-3)/2}dt`, to relative round-off at any n.

    Golub–Welsch (eigenvalues of the Jacobi matrix of the orthonormal recurrence), one Newton step on
    :math:`q_n` and the Christoffel weights :math:`w_k = 1/\sum_{l<n} q_l(t_k)^2` (a sum of positive
    terms). numpy's ``leggauss`` and scipy's ``roots_gegenbauer`` lose relative accuracy in the weights
    with n (1e-10 at n = 1600): an error the degree factors of the flow then amplify.
    """
    a = recurrence(n, d)
    t = eigh_tridiagonal(np.zeros(n), a[: n - 1], eigvals_only=True)
    # Newton on q_n with the values and derivatives from the recurrence (vectors, no table)
    q0, q1, d0, d1 = np.ones(n), t / a[0], np.zeros(n), np.full(n, 1.0 / a[0])
    for l in range(1, n):
        q0, q1, d0, d1 = q1, (t * q1 - a[l - 1] * q0) / a[l], d1, (q1 + t * d1 - a[l - 1] * d0) / a[l]
    t = np.clip(t - q1 / d1, -1.0, 1.0)
    s, q0, q1 = 1.0 + (t / a[0]) ** 2, np.ones(n), t / a[0]
    for l in range(1, n - 1):
        q0, q1 = q1, (t * q1 - a[l - 1] * q0) / a[l]
        s += q1 * q1
    w = 1.0 / s
    return t, w / w.sum()


# ------------------------------------------------------------------ Funk–Hecke coefficients at any d


def _degrees(l, name, caller):
    l = np.atleast_1d(check_real_array(l, name, caller, ndim=(0, 1), expected="degrees l >= 0"))
    if np.any(l < 0) or np.any(l != np.round(l)):
        raise InvalidParameterError(f"{name} must hold non-negative integers; got {l}.")
    return l


@keyword_only("l", "d")
@declare(a=Interval(), l=Checked(_degrees, "non-negative integer degrees (a scalar or a 1-D array)",
                                 [-1, [0.5], [[1]], None, "l", [np.nan]]), d=Integer(2))
def funk_hecke_log(a: float, *, l, d: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Sign and log of the Funk–Hecke coefficients :math:`\hat g_a(l)` of :math:`e^{a t}` on
    :math:`S^{d-1}`, without overflow or underflow at any d.

    .. math:: \hat g_a(l) = \Gamma(\nu+1)\Big(\frac2a\Big)^{\nu} I_{l+\nu}(a)
       = \Gamma(\nu+1)\Big(\frac a2\Big)^{l}\sum_{k\ge0}\frac{(a/2)^{2k}}{k!\,\Gamma(l+\nu+k+1)},
       \qquad \nu = \frac{d-2}{2},

    from the scaled Bessel function ``ive`` where it does not underflow, else from the series in
    log-sum-exp form (positive terms: no cancellation), which covers d up to thousands.

    Examples
    --------
    >>> s, g = funk_hecke_log(1.0, l=[0, 1], d=3)
    >>> bool(np.allclose(s * np.exp(g), [np.sinh(1.0), np.cosh(1.0) - np.sinh(1.0)]))
    True
    """
    return fh_log(a, l, d)


def fh_log(a: float, l: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`funk_hecke_log` of arguments already checked (the solvers' own calls)."""
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


def funk_hecke_quadrature(G, L, d, nodes=None):
    r"""Funk–Hecke coefficients :math:`\hat G(l)`, l = 0..L, of an arbitrary zonal kernel G on
    :math:`S^{d-1}` (d ≥ 2), :math:`\int G(\langle x, y\rangle)Y_l(y)\,d\sigma(y) = \hat G(l)Y_l(x)`, by
    Gauss–Gegenbauer quadrature:

    .. math:: \hat G(l) = \int_{-1}^1 G(t)\,P_l(t)\,w(t)\,dt \approx \sum_k w_kG(t_k)P_l(t_k),

    w the law of :math:`\langle x, e\rangle` under σ and :math:`P_l = C_l^{(\nu)}/C_l^{(\nu)}(1)` (so
    :math:`P_l(1) = 1`) from :math:`P_{l+1} = ((2l+d-2)\,t\,P_l - l\,P_{l-1})/(l+d-2)`, bounded by 1 on
    [-1, 1] (no overflow at any d, O(nodes) memory). ``nodes`` defaults to L + 129: exact for a
    polynomial G of degree ≤ L + 257 and, for an analytic G, past its coefficients' decay below round-off.
    On S^1 (d = 2) :math:`P_l(\cos\psi) = \cos l\psi` and the rule is the trapezoidal one in ψ (the Gauss rule
    of the Chebyshev weight): the Fourier coefficients of :math:`G(\cos\psi)`, by one real FFT.
    The absolute error is about :math:`\varepsilon\int|G|\,w\,dt` (:math:`|P_l| \le 1`); coefficients from the
    first degree where they stay below 8 times that on are its round-off and returned as 0.
    """
    n = L + 129 if nodes is None else int(nodes)
    if d == 2:
        N = 2 * n
        f = np.asarray(G(np.cos(2 * np.pi * np.arange(N) / N)), dtype=float) / N
        out = np.fft.rfft(f).real[: L + 1]
        return _cut_round_off(out, f)
    t, w = gauss_gegenbauer(n, d)
    f = w * np.asarray(G(t), dtype=float)
    out = np.empty(L + 1)
    p0, p1 = np.ones(n), t
    out[0] = f.sum()
    for l in range(1, L + 1):
        out[l] = f @ p1
        p0, p1 = p1, ((2 * l + d - 2) * t * p1 - l * p0) / (l + d - 2)
    return _cut_round_off(out, f)


def _cut_round_off(out, f):
    """``out`` with 0 from the first degree past which every coefficient is below 8 ε Σ|f| (the quadrature's
    round-off, f its weighted values)."""
    above = np.flatnonzero(np.abs(out) > 8 * np.finfo(float).eps * float(np.abs(f).sum()))
    out[(above[-1] + 1 if len(above) else 0):] = 0.0
    return out


# ------------------------------------------------------------------ heads


def rotation_heads(model, caller):
    """(λ, α, μ, γ) per head when every M_h = λ R(α) and W_h = μ R(γ) on S^1."""
    out = []
    for M, W in zip(model.M, model.W):
        rotations = scaled_rotation_of(M), scaled_rotation_of(W)
        if None in rotations:
            raise InvalidParameterError(
                f"scheme 'spectral' on S^1 ({caller}) needs heads that are scaled rotations, "
                "M_h = lambda R(alpha) and W_h = mu R(gamma) (e.g. MultiHead.scalar): only then is the velocity a "
                "circular convolution; use scheme='fv_circle' for general 2 x 2 heads."
            )
        out.append(rotations[0] + rotations[1])
    return out


def usa_scale(model, a):
    """:math:`e^{|a| - c}`, the factor of a USA head's velocity in the model's time (c its ``log_time_scale``),
    refused past the float64 range."""
    scale = abs(a) - model.log_time_scale
    if scale > LOG_OVERFLOW:
        raise InvalidParameterError("USA velocity overflows: build the model with log_time_scale='auto'.")
    return math.exp(scale)


# ------------------------------------------------------------------ potentials and energies of scalar heads


def potential_multipliers(model, l, d):
    """Φ = Σ_l φ_l c_l Y_l for USA heads (and the a = 0 limit of any head, Φ = μ<x, m>) and for a kind
    with a zonal kernel (its potential G's Funk–Hecke coefficients by quadrature); for softmax heads the
    list of (μ/a, scaled Funk–Hecke coefficients ĝ_a(l) e^{-|a|}) of the partition function."""
    lam, mu = scalar_heads(model.M, model.W)
    c = model.attention.time_shift(model.log_time_scale)
    phi = np.zeros(len(l))
    zs = []
    for la, m in zip(lam, mu):
        a = model.beta * la
        if model.attention.exp_rule is None:  # a kind of its own zonal kernel: Φ = Σ_h μ_h ∫ G_h dμ
            phi += m * funk_hecke_quadrature(model.attention.zonal_kernel(a)[1], int(l[-1]), d)
            continue
        if a == 0:
            # G(1) -> 1/d, G(l >= 2) -> 0 as a -> 0 (USA and softmax alike)
            phi += m * math.exp(-c) * np.where(l == 1, 1.0 / d, 0.0)
            continue
        sgn, lg = fh_log(a, l, d)
        if not model.attention.normalised:
            # v = e^{-c} ∇_S (μ/a) ∫ e^{a<x,y>} dμ(y): multiplier μ ĝ_a(l) e^{-c} / a
            if np.max(lg) - c > LOG_OVERFLOW:
                raise InvalidParameterError("USA velocity overflows: build the model with log_time_scale='auto'.")
            phi += m * sgn * np.exp(lg - c) / a
        else:
            zs.append((m / a, sgn * np.exp(lg - abs(a))))
    return phi, zs


def funk_hecke_energy(model, l, d, energy_by_degree):
    """E_multi = Σ_h (1/2β) Σ_l ĝ_{a_h}(l) ||ρ_l||² for scalar heads (Funk–Hecke); for a kind with a zonal
    kernel, its energy (1/β) Σ_h Σ_l F̂_h(l) ||ρ_l||² (F_h its energy kernel, coefficients by quadrature)."""
    if model.beta == 0:
        return np.inf
    lam, _ = scalar_heads(model.M, model.W)
    e = 0.0
    if model.attention.exp_rule is None:
        for la in lam:
            F = model.attention.zonal_kernel(model.beta * la)[2]
            e += float(np.sum(funk_hecke_quadrature(F, int(l[-1]), d) * energy_by_degree))
        return e / model.beta
    for la in lam:
        sgn, lg = fh_log(model.beta * la, l, d)
        e += float(np.sum(sgn * np.exp(lg) * energy_by_degree))
    return e / (2 * model.beta)


# ------------------------------------------------------------------ spectral tails and band limits


def spectral_tail(disc, c):
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


def geometric_need(L, energy_by_degree, tail, tol):
    """Band limit at which the tail of a spectrum decaying like its top half would be ≤ tol / 10
    (a float), or None when the top half does not decay geometrically."""
    l = np.arange(len(energy_by_degree))
    top = l >= L // 2
    e = energy_by_degree[top]
    ok = e > 0
    slope = np.polyfit(l[top][ok], 0.5 * np.log(e[ok]), 1)[0] if ok.sum() >= 2 else 0.0
    if slope >= -1e-3 or not np.isfinite(slope):
        return None
    # tail ∝ e^{slope · (3/4) L}: solve for tol / 10
    return float(L + (4 / 3) * np.log(tol / 10 / max(tail, 1e-300)) / slope)


def suggest_L(L, energy_by_degree, tail, tol):
    """Band limit to refine to: the geometric need (:func:`geometric_need`) rounded up to a multiple of
    8, within [L + 4, 4L]; 2L when the spectrum does not decay geometrically."""
    need = geometric_need(L, energy_by_degree, tail, tol)
    if need is None:
        return 2 * L
    return int(min(4 * L, max(L + 4, 8 * math.ceil(need / 8))))
