r"""The spherical-harmonic geometry of S^2 (module docstring of :mod:`meanfield.spectral`), on the transforms of
:mod:`meanfield._spectral.sht`."""

from __future__ import annotations

import math

import numpy as np

from particles.extend import scalar_heads
from particles.validation import InvalidParameterError

from ..field import measure_energy, weighted_velocity
from ..measure import GridMeasure
from ..quadrature import sphere_quadrature
from .legendre import legendre_column
from .route import zonal_hint
from .shared import funk_hecke_energy, potential_multipliers, spectral_tail, suggest_L
from .sht import ring_synthesis, sht_backend, sphere_harmonic_transform

#: orders m >= 1 below this fraction of the largest order-0 coefficient are the analysis' round-off of an
#: axially symmetric density (measured: 5e-18 of c_00 for a zonal start on sphere_quadrature(3, n=40))
AXIAL_ROUNDOFF = 1e-13


class Sphere:
    r"""Spherical-harmonic coefficients C[l, m] (m ≥ 0) of ρ on S^2.

    The flow in weak form: :math:`\dot C_{lm} = -\langle\operatorname{div}F, Y_{lm}\rangle =
    \langle F, \nabla Y_{lm}\rangle`, F = ρv, by the quadrature of the grid (exact for the product
    when v = ∇Φ is band-limited). With :math:`\partial_\theta\bar P_{lm} = -(u_{lm}\bar P_{l-1,m} -
    v_{lm}\bar P_{l+1,m})/\sin\theta` (:func:`_gradient_weights`) this is
    :math:`\dot C_{lm} = -u_{lm}g^\theta_{l-1,m} + v_{lm}g^\theta_{l+1,m} - im\,g^\varphi_{lm}`, g the
    coefficients of :math:`F_\theta/\sin\theta` and :math:`F_\varphi/\sin\theta`: one factor ~ l meets
    the transform's round-off, where the strong form Δ(ρΦ) multiplied it by l(l+1).

    ``axial=True`` (scalar heads, a density symmetric about the pole): the coefficients are the order-0
    column (L + 1, 1), which scalar heads keep alone, and the transforms one Legendre matrix on the Gauss
    nodes: O(L) memory and O(L^2) work per step, as the zonal solver.

    ``Sphere(model, L, axial)`` is the discretisation at band limit L; :meth:`read` gives the geometry of a
    measure on the Gauss–Legendre grid (its coefficients ``data``, no band limit yet), whose :meth:`with_L` and
    :meth:`initial` give the discretisation and the initial coefficients at any band limit.
    """

    name = "sphere"
    d = 3
    # ducc0's grids at L = 2048 hold 1.9e7 points (150 MB a field); the Legendre tables ~ 0.4 L^3 doubles
    max_L = 2048 if sht_backend() == "ducc0" else 512

    def __init__(self, model, L=None, axial=False, data=None):
        self.model, self.L, self.axial, self.data = model, L, bool(axial), data
        self.scalar = scalar_heads(model.M, model.W) is not None
        if self.axial and not self.scalar:
            raise ValueError("the axially symmetric S^2 discretisation needs scalar heads")
        if L is None:
            return  # the geometry of a measure, before a band limit is chosen
        K = 1 if self.axial else L + 1  # orders held
        # transforms to degree L + 1 (the gradient of degree L, the flux against ∇Y_lm, l ≤ L); the grid
        # integrates ρ ∇Φ·∇Y_lm (degree ≤ 3L + 1) exactly
        self.sht = sphere_harmonic_transform(L + 1, L + 1 + math.ceil((L + 2) / 2) + 1)
        l = np.arange(L + 1)
        self.laplacian = np.repeat(-(l * (l + 1)).astype(float)[:, None], K, 1)
        self.mask = np.tril(np.ones((L + 1, K), bool))
        self.weight = np.where(np.arange(K)[None, :] == 0, 1.0, 2.0) * self.mask
        self.u, self.v = _gradient_weights(L + 1)
        self.im = 1j * np.arange(L + 2)[None, :]  # ∂_φ on order m
        self.inv_s2 = (1.0 / (1.0 - self.sht.z**2))[:, None]  # Gauss nodes avoid the poles
        if self.scalar:
            self.phi, self.zs = potential_multipliers(model, l, 3)

    # ---- reading a measure (discretisation() asks the geometry that reads it)
    @staticmethod
    def reads(mu0):
        """Whether mu0 is this geometry's data (a GridMeasure on S^2; :meth:`read` checks the rest)."""
        return isinstance(mu0, GridMeasure) and mu0.points.shape[1] == 3

    @classmethod
    def read(cls, mu0, model):
        """The geometry of a GridMeasure on the Gauss–Legendre grid of S^2 (its spherical harmonic coefficients;
        axial when the heads are scalar and the density symmetric about the pole), or a clear refusal."""
        if model.d != 3:
            raise InvalidParameterError(f"the GridMeasure lives on S^2 but the model has d = {model.d}.")
        nlat = int(round(np.sqrt(len(mu0.points) / 2)))
        if 2 * nlat * nlat != len(mu0.points) or not np.allclose(sphere_quadrature(3, n=nlat)[0], mu0.points,
                                                                  atol=1e-12):
            raise InvalidParameterError(
                "scheme 'spectral' on S^2 needs a GridMeasure on the Gauss-Legendre grid sphere_quadrature(3, n=n) "
                "(areas 4*pi*weights): the density is read at its points."
            )
        rho = mu0.mass / mu0.areas * (4 * np.pi)  # density w.r.t. σ (areas sum to 4π)
        full = sphere_harmonic_transform(nlat - 1, nlat).analysis(rho.reshape(nlat, 2 * nlat))
        full /= full[0, 0].real
        # scalar heads keep a density symmetric about the pole so: its order-0 column alone is advanced
        axial = scalar_heads(model.M, model.W) is not None and not np.any(
            np.abs(full[:, 1:]) > AXIAL_ROUNDOFF * np.abs(full[:, 0]).max())
        return cls(model, None, axial, full)

    @property
    def L_max(self):
        """The largest band limit the data resolves (nlat - 1 on the grid of nlat latitudes)."""
        return self.data.shape[0] - 1

    def initial(self, L):
        """The data's coefficients at band limit L (the order-0 column alone when axial)."""
        full, axial = self.data, self.axial
        c = np.zeros((L + 1, 1), float) if axial else np.zeros((L + 1, L + 1), complex)
        k = min(L, self.L_max) + 1
        K = min(k, c.shape[1])
        c[:k, :K] = full[:k, :K].real if axial else full[:k, :K]
        return c

    def route_hint(self):
        """The warning's text when the data is zonal about an axis under scalar heads (:func:`zonal_hint`)."""
        return zonal_hint(self.model, self.initial(self.L_max))

    def with_L(self, L):
        return Sphere(self.model, L, self.axial, self.data)

    def pad(self, c, square=False):
        """c at this band limit, with this discretisation's orders (all of them with ``square``)."""
        K = 1 if self.axial and not square else self.L + 1
        out = np.zeros((self.L + 1, K), complex if square else c.dtype)  # the axial column stays real
        k = min(len(c), self.L + 1)
        out[:k, : min(k, c.shape[1], K)] = c[:k, : min(k, c.shape[1], K)]
        return out

    def _up(self, c):
        """Coefficients at the transform's degree L + 1 (zero row and column)."""
        out = np.zeros((self.L + 2, self.L + 2), complex)
        out[: self.L + 1, : self.L + 1] = c
        return out

    def _gradient(self, a):
        """Coefficients (degree L + 1) of sinθ ∂_θ f and ∂_φ f for f of degree ≤ L (coefficients a at degree
        L + 1): sinθ ∂_θ f = -(1-z²)∂_z f maps degree l to l ± 1 only."""
        a = self._up(a)
        D = np.zeros_like(a)
        D[:-1] -= self.u[1:] * a[1:]
        D[1:] += self.v[:-1] * a[:-1]
        return D, self.im * a

    def rhs(self, c):
        if not self.scalar:
            return self._rhs_general(c)
        if self.axial:
            return self._rhs_axial(c)
        sht = self.sht
        linear = bool(np.any(self.phi))  # USA heads, or softmax heads with a = 0
        parts = [self._up(c), *(self._gradient(self.phi[:, None] * c) if linear else ())]
        for _, zs in self.zs:
            parts += [self._up(zs[:, None] * c), *self._gradient(zs[:, None] * c)]
        vals = sht.synthesis(np.stack(parts))
        rho, St, Sp = (vals[0], vals[1], vals[2]) if linear else (vals[0], 0.0, 0.0)  # sinθ ∂_θΦ, ∂_φΦ
        for j, (amp, _) in enumerate(self.zs):
            # softmax: Φ = Σ (μ/a) log Z_a, so ∇Φ = Σ (μ/a) ∇Z_a / Z_a with Z_a band-limited (exact)
            Z, Zt, Zp = vals[1 + 2 * linear + 3 * j: 4 + 2 * linear + 3 * j]
            s = amp / np.maximum(Z, 1e-300)
            St, Sp = St + s * Zt, Sp + s * Zp
        q = rho * self.inv_s2
        return self._weak_divergence(q * St, q * Sp)

    def _rhs_axial(self, c):
        """The flow of the order-0 column (real, (L + 1, 1)): the scalar path of :meth:`rhs` at m = 0, its
        transforms one Legendre matrix on the Gauss nodes."""
        L, a = self.L, c[:, 0].real
        u, v = self.u[:, 0], self.v[:, 0]
        if not hasattr(self, "_p0"):
            self._p0 = legendre_column(L + 1, 0, self.sht.z)  # P̄_l0 (l = 0..L+1), (nlat, L + 2)

        def gradient(b):  # sinθ ∂_θ of degree-L coefficients b, at degree L + 1
            D = np.zeros(L + 2)
            D[:L] -= u[1: L + 1] * b[1:]
            D[1:] += v[: L + 1] * b
            return D

        linear = bool(np.any(self.phi))
        cols = [np.append(a, 0.0), *((gradient(self.phi * a),) if linear else ())]
        for _, zs in self.zs:
            cols += [np.append(zs * a, 0.0), gradient(zs * a)]
        vals = self._p0 @ np.stack(cols, 1)
        St = vals[:, 1] if linear else 0.0
        for j, (amp, _) in enumerate(self.zs):
            Z, Zt = vals[:, 1 + linear + 2 * j], vals[:, 2 + linear + 2 * j]
            St = St + amp / np.maximum(Z, 1e-300) * Zt
        G = self._p0.T @ (self.sht.w * vals[:, 0] * self.inv_s2[:, 0] * St)
        out = v[: L + 1] * G[1:]
        out[1:] -= u[1: L + 1] * G[:L]
        return out[:, None]

    def _rhs_general(self, c):
        sht = self.sht
        rho = sht.synthesis(self._up(c))
        w = np.maximum(rho, 0.0).ravel() * np.repeat(sht.w, sht.nlon) / sht.nlon
        v = weighted_velocity(self.model, sht.points, w / w.sum(), sht.points).reshape(sht.nlat, sht.nlon, 3)
        F = rho[..., None] * v
        x = sht.points.reshape(sht.nlat, sht.nlon, 3)
        # F_θ sinθ = z (x F_x + y F_y) - (1 - z²) F_z and F_φ sinθ = x F_y - y F_x (e_θ, e_φ times sinθ)
        Ft = x[..., 2] * (x[..., 0] * F[..., 0] + x[..., 1] * F[..., 1]) - (1 - x[..., 2] ** 2) * F[..., 2]
        Fp = x[..., 0] * F[..., 1] - x[..., 1] * F[..., 0]
        return self._weak_divergence(Ft * self.inv_s2, Fp * self.inv_s2)

    def _weak_divergence(self, gt, gp):
        r"""⟨F, ∇Y_lm⟩, l ≤ L, from grid values gt = F_θ/sinθ and gp = F_φ/sinθ (the class docstring)."""
        L = self.L
        Gt, Gp = self.sht.analysis(np.stack([gt, gp]))
        down = np.zeros((L + 1, L + 2), complex)  # g_{l-1}
        down[1:] = Gt[:L]
        out = -self.u[: L + 1] * down + self.v[: L + 1] * Gt[1:] - self.im * Gp[: L + 1]
        return out[:, : L + 1] * self.mask

    def norm(self, c):
        return float(np.sqrt(np.sum(self.weight * np.abs(c) ** 2)))

    @staticmethod
    def energy_by_degree(c):
        k, K = c.shape
        weight = np.where(np.arange(K)[None, :] == 0, 1.0, 2.0) * np.tri(k, K, dtype=bool)
        return np.sum(weight * np.abs(c) ** 2, axis=1)

    def tail(self, c):
        return spectral_tail(self, c)

    def sufficient_L(self, c, tol):
        return suggest_L(self.L, self.energy_by_degree(c), self.tail(c), tol)

    # ---- reading a solution (SpectralSolution asks its geometry's discretisation)
    @staticmethod
    def output_grid(mu0, L, d):
        """Points and weights of an exact quadrature of the band-limited density (the saved masses)."""
        return sphere_quadrature(3, n=max(int(round(np.sqrt(len(mu0.points) / 2))), L + 1))

    @staticmethod
    def density(sol, c, x):
        return _sphere_density(np.asarray(c), x)

    @staticmethod
    def projected_cdf(sol, c, theta, x):
        return _sphere_projection(c, theta, x)

    def energy(self, c):
        if self.scalar:
            return funk_hecke_energy(self.model, np.arange(self.L + 1), 3, self.energy_by_degree(c))
        sht = sphere_harmonic_transform(self.L, self.L + 1)
        rho = sht.synthesis(c).ravel()
        w = np.maximum(rho, 0) * np.repeat(sht.w, sht.nlon) / sht.nlon
        return measure_energy(self.model, sht.points, w / w.sum()) if self.model.beta > 0 else np.inf


def _gradient_weights(n):
    r"""(u_lm, v_lm), l, m = 0..n, of :math:`(1-z^2)\bar P_{lm}' = u_{lm}\bar P_{l-1,m} - v_{lm}\bar P_{l+1,m}`:
    :math:`u_{lm} = (l+1)\alpha_{lm}`, :math:`v_{lm} = l\alpha_{l+1,m}` with :math:`\alpha_{lm} =
    \sqrt{(l^2-m^2)/(4l^2-1)}` the coefficient of :math:`z\bar P_{lm} = \alpha_{l+1,m}\bar P_{l+1,m} +
    \alpha_{lm}\bar P_{l-1,m}` (the orthonormal recurrence of :func:`legendre_column`)."""
    l = np.arange(n + 2, dtype=float)[:, None]
    m = np.arange(n + 1, dtype=float)[None, :]
    alpha = np.sqrt(np.clip(l * l - m * m, 0, None) / np.maximum(4 * l * l - 1, 1))
    return (l[:-1] + 1) * alpha[:-1], l[:-1] * alpha[1:]


def _sphere_density(C, x):
    """ρ at points x (m, 3) from the coefficients C: by ring synthesis when x is a product grid of
    ``sphere_quadrature(3, n=n)`` (rings of equal z, longitudes πk/n), else one recurrence per order m."""
    L = C.shape[0] - 1
    nlat = int(round(np.sqrt(len(x) / 2)))
    if 2 * nlat * nlat == len(x) and nlat > L:
        g = x.reshape(nlat, 2 * nlat, 3)
        phi = np.pi * np.arange(2 * nlat) / nlat
        r = np.sqrt(np.clip(1 - g[:, :1, 2] ** 2, 0, None))
        if (np.all(g[:, :, 2] == g[:, :1, 2]) and np.abs(g[..., 0] - r * np.cos(phi)).max() <= 1e-13
                and np.abs(g[..., 1] - r * np.sin(phi)).max() <= 1e-13):
            if not np.any(C[:, 1:]):  # axially symmetric: one value per ring
                values = legendre_column(L, 0, g[:, 0, 2]) @ C[:, 0].real
                return np.repeat(values, 2 * nlat)
            return ring_synthesis(C, g[:, 0, 2], 2 * nlat).ravel()
    z = np.clip(x[:, 2], -1, 1)
    phi = np.arctan2(x[:, 1], x[:, 0])
    out = np.zeros(len(x))
    for m in range(L + 1):
        am = legendre_column(L, m, z) @ C[m:, m]
        out += (1.0 if m == 0 else 2.0) * np.real(am * np.exp(1j * m * phi))
    return out


def _sphere_projection(C, theta, x):
    L = C.shape[0] - 1
    z = np.clip(theta[:, 2], -1, 1)
    phi = np.arctan2(theta[:, 1], theta[:, 0])
    f = np.zeros((len(theta), L + 1))  # ρ_l(θ_j)
    for m in range(L + 1):
        P = legendre_column(L, m, z)
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
