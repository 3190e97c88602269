r"""Normalised associated Legendre functions by their three-term recurrence, and the spherical-harmonic
transform built on tables of them (the ``"tables"`` backend of
:func:`meanfield.sphere_harmonic_transform`: no dependency beyond numpy and scipy, memory ~ 0.4 L^3
doubles, so it serves up to moderate band limits and as the independent reference of the tests)."""

from __future__ import annotations

import numpy as np
from scipy import fft as sfft


class TableTransform:
    """Synthesis and analysis on the Gauss–Legendre grid (nodes ``z`` ascending, ``nlon = 2 nlat``) from
    tables of :func:`legendre_column` per order m, split by the parity of l + m on the northern nodes."""

    def __init__(self, L: int, z: np.ndarray, w: np.ndarray):
        self.L, self.nlat, self.w = L, len(z), w
        self.nlon = 2 * self.nlat
        # equatorial symmetry: the nodes come in pairs z, -z and P̄_lm(-z) = (-1)^{l+m} P̄_lm(z), so only
        # the northern rows are stored, split by the parity of l + m (half the flops and memory)
        nh = (self.nlat + 1) // 2
        self._north = np.arange(self.nlat - nh, self.nlat)
        self._south = self.nlat - 1 - self._north  # the mirror rows (the equator, odd nlat, is its own)
        self._mid = self.nlat % 2 == 1
        self.Pe, self.Po = [], []  # per m: (nh, ·) values of P̄_lm at the northern nodes, l - m even / odd
        zn = z[self._north]
        for m in range(L + 1):
            P = legendre_column(L, m, zn)
            self.Pe.append(np.ascontiguousarray(P[:, 0::2]))
            self.Po.append(np.ascontiguousarray(P[:, 1::2]))

    def synthesis(self, Cf: np.ndarray) -> np.ndarray:
        """(k, nlat, nlon) grid values of the coefficients Cf (k, L+1, L+1)."""
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
        return np.moveaxis(out, -1, 0)

    def analysis(self, ff: np.ndarray, L: int) -> np.ndarray:
        """(k, L+1, L+1) coefficients of the grid values ff (k, nlat, nlon), by the Gauss quadrature."""
        ff = np.moveaxis(ff, 0, -1)
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
        return C


def ring_synthesis_tables(C: np.ndarray, z: np.ndarray, nlon: int) -> np.ndarray:
    """Values (len(z), nlon) of the coefficients C (L+1, L+1) on rings of latitude z, φ_k = 2πk/nlon
    (nlon > 2L): one recurrence per order m over the rings, one inverse real FFT per ring."""
    L = C.shape[0] - 1
    A = np.zeros((len(z), nlon // 2 + 1), complex)
    for m in range(L + 1):
        A[:, m] = legendre_column(L, m, z) @ C[m:, m]
    return sfft.irfft(A, nlon, axis=1) * nlon


def legendre_column(L, m, z):
    """P̄_lm(z), l = m..L, normalised by ½∫P̄² dz = 1, without the Condon–Shortley phase."""
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
