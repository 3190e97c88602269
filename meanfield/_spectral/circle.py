r"""The Fourier geometry of S^1 (module docstring of :mod:`meanfield.spectral`)."""

from __future__ import annotations

import math

import numpy as np
from scipy import fft as sfft
from scipy.special import ive

from particles.validation import InvalidParameterError

from ..measure import GridMeasure
from .shared import funk_hecke_quadrature, rotation_heads, spectral_tail, suggest_L, usa_scale


class Circle:
    """Fourier coefficients c_n, n = 0..L (c_{-n} = conj c_n) of ρ = Σ c_n e^{inθ}.

    ``Circle(model, L)`` is the discretisation at band limit L; :meth:`read` gives the geometry of a
    measure (its Fourier coefficients ``data``, no band limit yet), whose :meth:`with_L` and :meth:`initial`
    give the discretisation and the initial coefficients at any band limit.
    """

    name = "circle"
    d = 2
    max_L = 2**16

    def __init__(self, model, L=None, data=None):
        self.model, self.L, self.data = model, L, data
        if L is None:
            return  # the geometry of a measure, before a band limit is chosen
        n = np.arange(L + 1)
        self.laplacian = -(n.astype(float) ** 2)
        self.weight = np.where(n == 0, 1.0, 2.0)  # ||ρ||²_σ = Σ_n |c_n|² over n ∈ Z
        self.M = sfft.next_fast_len(3 * L + 2, real=True)
        self.n = n
        self.heads, self.energies = [], []
        kernel = model.attention.exp_rule is None  # a kind of its own zonal kernel (g, G, F)
        for lam_, alpha, mu_, gamma in rotation_heads(model, "wasserstein_ascent"):
            a = model.beta * lam_
            # e^{a cos(δ-α)} e^{-|a|} = Σ_n ive(n, a) e^{in(δ-α)}; the sin(γ-δ) factor shifts n by ±1
            m = np.arange(-1, L + 2)
            if kernel:  # the weight g(cos(δ-α)) = Σ_n ĝ(n) e^{in(δ-α)}, ĝ by quadrature; its energy kernel F
                g, _, F = model.attention.zonal_kernel(a)
                z = funk_hecke_quadrature(g, L + 1, 2)[np.abs(m)] * np.exp(-1j * m * alpha)
                self.energies.append(funk_hecke_quadrature(F, L, 2) * np.exp(-1j * n * alpha))
                self.heads.append((mu_, z[1:-1], (np.exp(1j * gamma) * z[2:] - np.exp(-1j * gamma) * z[:-2]) / 2j, a))
                continue
            z = ive(np.abs(m), a) * np.exp(-1j * m * alpha)
            zh = z[1:-1]
            nh = (np.exp(1j * gamma) * z[2:] - np.exp(-1j * gamma) * z[:-2]) / 2j
            amp = mu_ * (1.0 if model.attention.normalised else usa_scale(model, a))
            self.heads.append((amp, zh, nh, a))

    # ---- reading a measure (discretisation() asks the geometry that reads it)
    @staticmethod
    def reads(mu0):
        """Whether mu0 is this geometry's data (a GridMeasure on S^1; :meth:`read` checks the rest)."""
        return isinstance(mu0, GridMeasure) and mu0.points.shape[1] == 2

    @classmethod
    def read(cls, mu0, model):
        """The geometry of a GridMeasure on S^1: its Fourier coefficients, or a clear refusal."""
        if model.d != 2:
            raise InvalidParameterError(f"the GridMeasure lives on S^1 but the model has d = {model.d}.")
        return cls(model, data=_circle_coefficients(mu0, 10**9))

    @property
    def L_max(self):
        """The largest band limit the data resolves."""
        return len(self.data) - 1

    def initial(self, L):
        """The data's coefficients at band limit L."""
        c = np.zeros(L + 1, complex)
        c[: min(L, self.L_max) + 1] = self.data[: L + 1]
        return c

    def route_hint(self):
        """No faster route for Fourier data."""
        return ""

    def with_L(self, L):
        return Circle(self.model, L, self.data)

    def pad(self, c, square=False):  # (``square`` matters only for S^2's axial discretisation)
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
            if self.model.attention.normalised:
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
        return spectral_tail(self, c)

    def sufficient_L(self, c, tol):
        return suggest_L(self.L, self.energy_by_degree(c), self.tail(c), tol)

    def energy(self, c):
        if self.model.beta == 0:
            return np.inf
        if self.energies:  # (1/β) Σ_h ∬ F_h dμ dμ = (1/β) Σ_h Σ_{n∈Z} F̂_h(n) |c_n|²
            e = sum(float(np.real(np.sum(self.weight * f * np.abs(c) ** 2))) for f in self.energies)
            return e / self.model.beta
        e = 0.0
        for _, zh, _, a in self.heads:
            # ∫∫ e^{a cos(θ-φ-α)} dμ dμ = Σ_{n∈Z} ẑ_n |c_n|² (real for real kernels)
            e += math.exp(abs(a)) * float(np.real(np.sum(self.weight * zh * np.abs(c) ** 2)))
        return e / (2 * self.model.beta)

    @staticmethod
    def grid_points(m):
        th = 2 * np.pi * (np.arange(m) + 0.5) / m
        return np.stack([np.cos(th), np.sin(th)], 1), np.full(m, 1.0 / m)

    # ---- reading a solution (SpectralSolution asks its geometry's discretisation)
    @classmethod
    def output_grid(cls, mu0, L, d):
        """Points and weights of an exact quadrature of the band-limited density (the saved masses)."""
        return cls.grid_points(max(len(mu0.points), 2 * L + 2))

    @staticmethod
    def density(sol, c, x):
        th = np.arctan2(x[:, 1], x[:, 0])
        n = np.arange(len(c))
        return np.real(np.exp(1j * np.outer(th, n)) @ (np.where(n == 0, 1.0, 2.0) * c))

    @staticmethod
    def circle_cdf(sol, c):
        """(u, F(u), ρ(u)) on the grid u_j = j/K (:meth:`SpectralSolution.circle_cdf`)."""
        c = np.asarray(c)
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
            "sphere_quadrature(2, n=m)): the density is read at the points."
        )
    rho = mu0.mass / mu0.areas
    rho = rho / (rho.mean())  # density w.r.t. σ
    C = sfft.rfft(rho) / m * np.exp(-1j * np.arange(m // 2 + 1) * th0)
    return C[: min(L_max, (m - 1) // 2) + 1]
