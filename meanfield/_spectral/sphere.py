r"""The S^2 discretisation of the spectral solver (module docstring of :mod:`meanfield.spectral`), on the
transforms of :mod:`meanfield._spectral.sht`."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from particles.extend import scalar_heads

from .circle import _tail
from .legendre import _legendre_column
from .sht import ring_synthesis, sht_backend, sphere_harmonic_transform
from .stepping import _suggest_L
from .zonal import _funk_hecke_energy, _gegenbauer_orthonormal, _potential_multipliers

#: orders m >= 1 below this fraction of the largest order-0 coefficient are the analysis' round-off of an
#: axially symmetric density (measured: 1e-17 of c_00 for a zonal start on sphere_quadrature(3, 40))
_AXIAL_ROUNDOFF = 1e-13


class _Sphere:
    r"""Spherical-harmonic coefficients C[l, m] (m ≥ 0) of ρ on S^2.

    The flow in weak form: :math:`\dot C_{lm} = -\langle\operatorname{div}F, Y_{lm}\rangle =
    \langle F, \nabla Y_{lm}\rangle`, F = ρv, by the quadrature of the grid (exact for the product
    when v = ∇Φ is band-limited). With :math:`\partial_\theta\bar P_{lm} = -(u_{lm}\bar P_{l-1,m} -
    v_{lm}\bar P_{l+1,m})/\sin\theta` (:func:`_gradient_weights`) this is
    :math:`\dot C_{lm} = -u_{lm}g^\theta_{l-1,m} + v_{lm}g^\theta_{l+1,m} - im\,g^\varphi_{lm}`, g the
    coefficients of :math:`F_\theta/\sin\theta` and :math:`F_\varphi/\sin\theta`: one factor ~ l meets
    the transform's round-off, where the strong form Δ(ρΦ) multiplied it by l(l+1).
    """

    d = 3
    # ducc0's grids at L = 2048 hold 1.9e7 points (150 MB a field); the Legendre tables ~ 0.4 L^3 doubles
    max_L = 2048 if sht_backend() == "ducc0" else 512

    def __init__(self, model, L):
        self.model, self.L = model, L
        self.scalar = scalar_heads(model.M, model.W) is not None
        # transforms to degree L + 1 (the gradient of degree L, the flux against ∇Y_lm, l ≤ L); the grid
        # integrates ρ ∇Φ·∇Y_lm (degree ≤ 3L + 1) exactly
        self.sht = sphere_harmonic_transform(L + 1, L + 1 + math.ceil((L + 2) / 2) + 1)
        l = np.arange(L + 1)
        self.laplacian = np.repeat(-(l * (l + 1)).astype(float)[:, None], L + 1, 1)
        self.mask = np.tril(np.ones((L + 1, L + 1), bool))
        self.weight = np.where(np.arange(L + 1)[None, :] == 0, 1.0, 2.0) * self.mask
        self.u, self.v = _gradient_weights(L + 1)
        self.im = 1j * np.arange(L + 2)[None, :]  # ∂_φ on order m
        self.inv_s2 = (1.0 / (1.0 - self.sht.z**2))[:, None]  # Gauss nodes avoid the poles
        if self.scalar:
            self.phi, self.zs = _potential_multipliers(model, l, 3)

    def with_L(self, L):
        return _Sphere(self.model, L)

    def pad(self, c):
        out = np.zeros((self.L + 1, self.L + 1), complex)
        k = min(len(c), self.L + 1)
        out[:k, :k] = c[:k, :k]
        return out

    def _up(self, c, k=None):
        """Coefficients at the transform's degree L + 1 (zero row), orders 0..k-1 (default all: zero column)."""
        k = self.L + 2 if k is None else k
        out = np.zeros((self.L + 2, k), complex)
        out[: self.L + 1, : min(k, self.L + 1)] = c[:, :k]
        return out

    def _gradient(self, a, k=None):
        """Coefficients (degree L + 1) of sinθ ∂_θ f and ∂_φ f for f of degree ≤ L (coefficients a at degree
        L + 1): sinθ ∂_θ f = -(1-z²)∂_z f maps degree l to l ± 1 only."""
        a = self._up(a, k)
        k = a.shape[1]
        D = np.zeros_like(a)
        D[:-1] -= self.u[1:, :k] * a[1:]
        D[1:] += self.v[:-1, :k] * a[:-1]
        return D, self.im[:, :k] * a

    def rhs(self, c):
        if not self.scalar:
            return self._rhs_general(c)
        # scalar heads keep an axially symmetric density so: when its orders m >= 1 are at round-off, the m = 0
        # column alone is advanced, by one Legendre matrix on the Gauss nodes (O(L nlat), as the zonal solver)
        axial = not np.any(np.abs(c[:, 1:]) > _AXIAL_ROUNDOFF * np.abs(c[:, 0]).max())
        k = 1 if axial else self.L + 2
        synthesis, analysis = (self._axial_synthesis, self._axial_analysis) if axial else (
            self.sht.synthesis, self.sht.analysis)
        linear = bool(np.any(self.phi))  # USA heads, or softmax heads with a = 0
        parts = [self._up(c, k), *(self._gradient(self.phi[:, None] * c, k) if linear else ())]
        for _, zs in self.zs:
            parts += [self._up(zs[:, None] * c, k), *self._gradient(zs[:, None] * c, k)]
        vals = synthesis(np.stack(parts))
        rho, St, Sp = (vals[0], vals[1], vals[2]) if linear else (vals[0], 0.0, 0.0)  # sinθ ∂_θΦ, ∂_φΦ
        for j, (amp, _) in enumerate(self.zs):
            # softmax: Φ = Σ (μ/a) log Z_a, so ∇Φ = Σ (μ/a) ∇Z_a / Z_a with Z_a band-limited (exact)
            Z, Zt, Zp = vals[1 + 2 * linear + 3 * j: 4 + 2 * linear + 3 * j]
            s = amp / np.maximum(Z, 1e-300)
            St, Sp = St + s * Zt, Sp + s * Zp
        q = rho * self.inv_s2
        out = self._weak_divergence(q * St, q * Sp, analysis, k)
        if axial:
            full = np.zeros((self.L + 1, self.L + 1), complex)
            full[:, :1] = out
            return full
        return out

    @property
    def _P0(self):
        """P̄_l0 (l = 0..L+1) at the Gauss nodes, (nlat, L + 2): the axially symmetric transforms."""
        if not hasattr(self, "_p0"):
            self._p0 = _legendre_column(self.L + 1, 0, self.sht.z)
        return self._p0

    def _axial_synthesis(self, P):
        """Grid values (k, nlat, 1) of order-0 coefficients P (k, L + 2, 1) (constant in φ)."""
        return (self._P0 @ P[:, :, 0].real.T).T[:, :, None]

    def _axial_analysis(self, F):
        """Order-0 coefficients (k, L + 2, 1) of values F (k, nlat, 1) constant in φ (Gauss quadrature)."""
        return (self._P0.T @ (F[:, :, 0] * self.sht.w).T).T[:, :, None].astype(complex)

    def _rhs_general(self, c):
        sht = self.sht
        rho = sht.synthesis(self._up(c))
        w = np.maximum(rho, 0.0).ravel() * np.repeat(sht.w, sht.nlon) / sht.nlon
        from ..field import _velocity

        v = _velocity(self.model, sht.points, w / w.sum(), sht.points).reshape(sht.nlat, sht.nlon, 3)
        F = rho[..., None] * v
        x = sht.points.reshape(sht.nlat, sht.nlon, 3)
        # F_θ sinθ = z (x F_x + y F_y) - (1 - z²) F_z and F_φ sinθ = x F_y - y F_x (e_θ, e_φ times sinθ)
        Ft = x[..., 2] * (x[..., 0] * F[..., 0] + x[..., 1] * F[..., 1]) - (1 - x[..., 2] ** 2) * F[..., 2]
        Fp = x[..., 0] * F[..., 1] - x[..., 1] * F[..., 0]
        return self._weak_divergence(Ft * self.inv_s2, Fp * self.inv_s2, sht.analysis, self.L + 2)

    def _weak_divergence(self, gt, gp, analysis, k):
        r"""⟨F, ∇Y_lm⟩, l ≤ L, orders below k, from grid values gt = F_θ/sinθ and gp = F_φ/sinθ (the class
        docstring)."""
        L = self.L
        Gt, Gp = analysis(np.stack([gt, gp]))
        down = np.zeros((L + 1, k), complex)  # g_{l-1}
        down[1:] = Gt[:L]
        out = -self.u[: L + 1, :k] * down + self.v[: L + 1, :k] * Gt[1:] - self.im[:, :k] * Gp[: L + 1]
        return out[:, : L + 1] * self.mask[:, :k]

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
        from ..field import measure_energy

        sht = sphere_harmonic_transform(self.L, self.L + 1)
        rho = sht.synthesis(c).ravel()
        w = np.maximum(rho, 0) * np.repeat(sht.w, sht.nlon) / sht.nlon
        return measure_energy(self.model, sht.points, w / w.sum()) if self.model.beta > 0 else np.inf


def _gradient_weights(n):
    r"""(u_lm, v_lm), l, m = 0..n, of :math:`(1-z^2)\bar P_{lm}' = u_{lm}\bar P_{l-1,m} - v_{lm}\bar P_{l+1,m}`:
    :math:`u_{lm} = (l+1)\alpha_{lm}`, :math:`v_{lm} = l\alpha_{l+1,m}` with :math:`\alpha_{lm} =
    \sqrt{(l^2-m^2)/(4l^2-1)}` the coefficient of :math:`z\bar P_{lm} = \alpha_{l+1,m}\bar P_{l+1,m} +
    \alpha_{lm}\bar P_{l-1,m}` (the orthonormal recurrence of :func:`_legendre_column`)."""
    l = np.arange(n + 2, dtype=float)[:, None]
    m = np.arange(n + 1, dtype=float)[None, :]
    alpha = np.sqrt(np.clip(l * l - m * m, 0, None) / np.maximum(4 * l * l - 1, 1))
    return (l[:-1] + 1) * alpha[:-1], l[:-1] * alpha[1:]


def _sphere_density(C, x):
    """ρ at points x (m, 3) from the coefficients C: by ring synthesis when x is a product grid of
    ``sphere_quadrature(3, n)`` (rings of equal z, longitudes πk/n), else one recurrence per order m."""
    L = C.shape[0] - 1
    nlat = int(round(np.sqrt(len(x) / 2)))
    if 2 * nlat * nlat == len(x) and nlat > L:
        g = x.reshape(nlat, 2 * nlat, 3)
        phi = np.pi * np.arange(2 * nlat) / nlat
        r = np.sqrt(np.clip(1 - g[:, :1, 2] ** 2, 0, None))
        if (np.all(g[:, :, 2] == g[:, :1, 2]) and np.allclose(g[..., 0], r * np.cos(phi), rtol=0, atol=1e-13)
                and np.allclose(g[..., 1], r * np.sin(phi), rtol=0, atol=1e-13)):
            return ring_synthesis(C, g[:, 0, 2], 2 * nlat).ravel()
    z = np.clip(x[:, 2], -1, 1)
    phi = np.arctan2(x[:, 1], x[:, 0])
    out = np.zeros(len(x))
    for m in range(L + 1):
        am = _legendre_column(L, m, z) @ C[m:, m]
        out += (1.0 if m == 0 else 2.0) * np.real(am * np.exp(1j * m * phi))
    return out


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
