r"""Spherical-harmonic transforms on the Gauss–Legendre grid and the S^2 discretisation (module
docstring of :mod:`meanfield.spectral`)."""

from __future__ import annotations

import math

import numpy as np
from scipy import fft as sfft

from particles.extend import scalar_heads
from particles.validation import (
    Integer,
    InvalidParameterError,
    Relation,
    check_param,
    declare,
)

from .circle import _tail
from .stepping import _suggest_L
from .zonal import _funk_hecke_energy, _gauss_gegenbauer, _potential_multipliers

# ------------------------------------------------------------------ S^2 transforms


@declare(L=Integer(0), nlat=Integer(2), relations=[Relation(
    ("nlat", "L"), lambda nlat, L: nlat > L, "must exceed L (Gauss-Legendre with nlat nodes resolves degree nlat - 1): "
    "use nlat >= L + 1, or ceil((3L+1)/2) to project products exactly", breaks={"nlat": 3, "L": 5})])
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
        self.L, self.nlat, self.nlon = int(L), int(nlat), 2 * int(nlat)
        # the Gauss-Legendre rule to relative round-off (numpy's leggauss weights drift by 1e-10 at 1600 nodes)
        z, w = _gauss_gegenbauer(self.nlat, 3)
        self.z, self.w = z, w
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
        if C.ndim < 2 or C.shape[-2:] != (self.L + 1, self.L + 1):
            raise InvalidParameterError(
                f"C of sphere_harmonic_transform.synthesis must have shape (..., {self.L + 1}, {self.L + 1}) "
                f"(degrees and orders 0..L={self.L}); got {C.shape}."
            )
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
        caller = "sphere_harmonic_transform.analysis"
        L = self.L if L is None else check_param(L, "L", caller, low=0, high=self.L, integer=True)
        f = np.asarray(f)
        if np.iscomplexobj(f) or f.ndim < 2 or f.shape[-2:] != (self.nlat, self.nlon):
            raise InvalidParameterError(
                f"f of {caller} must be real grid values of shape (..., nlat, nlon) = (..., {self.nlat}, {self.nlon}); "
                f"got {'complex ' if np.iscomplexobj(f) else ''}{f.shape}."
            )
        f = f.astype(float)
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
    r"""Spherical-harmonic coefficients C[l, m] (m ≥ 0) of ρ on S^2.

    The flow in weak form: :math:`\dot C_{lm} = -\langle\operatorname{div}F, Y_{lm}\rangle =
    \langle F, \nabla Y_{lm}\rangle`, F = ρv, by the quadrature of the grid (exact for the product
    when v = ∇Φ is band-limited). With :math:`\partial_\theta\bar P_{lm} = -(u_{lm}\bar P_{l-1,m} -
    v_{lm}\bar P_{l+1,m})/\sin\theta` (:func:`_gradient_weights`) this is
    :math:`\dot C_{lm} = -u_{lm}g^\theta_{l-1,m} + v_{lm}g^\theta_{l+1,m} - im\,g^\varphi_{lm}`, g the
    coefficients of :math:`F_\theta/\sin\theta` and :math:`F_\varphi/\sin\theta`: one factor ~ l meets
    the transform's round-off, where the strong form Δ(ρΦ) multiplied it by l(l+1).
    """

    geometry = "sphere"
    d = 3
    max_L = 512  # the Legendre tables hold ~ 0.4 L^3 doubles (0.4 GB at L = 512)

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

    def _up(self, c):
        """Coefficients at the transform's degree L + 1 (zero row/column)."""
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
        sht = self.sht
        if self.scalar:
            linear = bool(np.any(self.phi))  # USA heads, or softmax heads with a = 0
            parts = [self._up(c), *(self._gradient(self.phi[:, None] * c) if linear else ())]
            for _, zs in self.zs:
                parts += [self._up(zs[:, None] * c), *self._gradient(zs[:, None] * c)]
            vals = sht.synthesis(np.stack(parts))
            rho, St, Sp = (vals[0], vals[1], vals[2]) if linear else (vals[0], 0.0, 0.0)  # sinθ ∂_θΦ, ∂_φΦ
            for k, (amp, _) in enumerate(self.zs):
                # softmax: Φ = Σ (μ/a) log Z_a, so ∇Φ = Σ (μ/a) ∇Z_a / Z_a with Z_a band-limited (exact)
                Z, Zt, Zp = vals[1 + 2 * linear + 3 * k: 4 + 2 * linear + 3 * k]
                s = amp / np.maximum(Z, 1e-300)
                St, Sp = St + s * Zt, Sp + s * Zp
            q = rho * self.inv_s2
            return self._weak_divergence(q * St, q * Sp)
        rho = sht.synthesis(self._up(c))
        w = np.maximum(rho, 0.0).ravel() * np.repeat(sht.w, sht.nlon) / sht.nlon
        from ..field import _velocity

        v = _velocity(self.model, sht.points, w / w.sum(), sht.points).reshape(sht.nlat, sht.nlon, 3)
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
        k = c.shape[0]
        weight = np.where(np.arange(k)[None, :] == 0, 1.0, 2.0) * np.tri(k, dtype=bool)
        return np.sum(weight * np.abs(c) ** 2, axis=1)

    def tail(self, c):
        return _tail(self, c)

    def sufficient_L(self, c, tol):
        return _suggest_L(self.L, self.energy_by_degree(c), self.tail(c), tol)

    # ---- reading a solution (SpectralSolution asks its geometry's discretisation)
    @staticmethod
    def output_grid(mu0, L, d):
        """Points and weights of an exact quadrature of the band-limited density (the saved masses)."""
        from ..quadrature import sphere_quadrature

        return sphere_quadrature(3, max(int(round(np.sqrt(len(mu0.points) / 2))), L + 1))

    @staticmethod
    def density(sol, c, x):
        L = c.shape[0] - 1
        z = np.clip(x[:, 2], -1, 1)
        phi = np.arctan2(x[:, 1], x[:, 0])
        out = np.zeros(len(x))
        for m in range(L + 1):
            out += (1.0 if m == 0 else 2.0) * np.real((_legendre_column(L, m, z) @ c[m:, m]) * np.exp(1j * m * phi))
        return out

    @staticmethod
    def projected_cdf(sol, c, theta, x):
        return _sphere_projection(c, theta, x)

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
