r"""The Fourier discretisation on S^1. (module docstring of :mod:`meanfield.spectral`)."""

from __future__ import annotations

import math

import numpy as np
from scipy import fft as sfft
from scipy.special import ive

from particles.validation import (
    InvalidParameterError,
)

from .kernels import _rotation_heads, _usa_scale
from .stepping import _suggest_L

# ------------------------------------------------------------------ S^1


class _Circle:
    """Fourier coefficients c_n, n = 0..L (c_{-n} = conj c_n) of ρ = Σ c_n e^{inθ}."""

    geometry = "circle"
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
            amp = mu_ * (1.0 if model.attention.normalised else _usa_scale(model, a))
            self.heads.append((amp, zh, nh, a))

    def with_L(self, L):
        return _Circle(self.model, L)

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
            "sphere_quadrature(2, n=m)): the density is read at the points."
        )
    rho = mu0.mass / mu0.areas
    rho = rho / (rho.mean())  # density w.r.t. σ
    C = sfft.rfft(rho) / m * np.exp(-1j * np.arange(m // 2 + 1) * th0)
    return C[: min(L_max, (m - 1) // 2) + 1]
