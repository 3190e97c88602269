r"""Which spectral route a measure calls for: an axisymmetric density on :math:`S^2` with scalar heads
is a zonal problem (one Gegenbauer coefficient per degree instead of 2l + 1 harmonics per degree).

A degree-l part :math:`\rho_l` of a density on :math:`S^2` obeys :math:`|\rho_l(e)|^2 \le (2l+1)\|\rho_l\|^2`
(the reproducing kernel of degree l at e is 2l + 1 in :math:`L^2(\sigma)`), with equality exactly when
:math:`\rho_l` is zonal about e: the part of degree l that is not zonal about e has the squared norm
:math:`\|\rho_l\|^2 - |\rho_l(e)|^2/(2l+1)`. The candidate axis is the direction of the degree-1 part
(:math:`\rho_1(x) = a\cdot x`), then the eigenvector of the degree-2 part (:math:`\rho_2(x) = x^\top Qx`)
whose eigenvalue stands apart from the other two, then the z axis.
"""

from __future__ import annotations

import numpy as np

from particles.extend import scalar_heads

from .legendre import legendre_column

#: the non-zonal part's norm, relative to the density's, below which a density read on a grid is zonal (its
#: square is a difference of squared norms: round-off leaves ~1e-8 of it)
ZONAL_RTOL = 1e-6


def _degree_values(C, e):
    """:math:`\\rho_l(e)`, l = 0..L, of the coefficients C[l, m] (m >= 0) of
    :func:`meanfield.sphere_harmonic_transform`."""
    L = C.shape[0] - 1
    z = np.array([np.clip(e[2], -1.0, 1.0)])
    phase = np.exp(1j * np.arctan2(e[1], e[0]))
    out = np.zeros(L + 1)
    for m in range(L + 1):
        P = legendre_column(L, m, z)[0]  # l = m..L
        term = C[m:, m] * P * phase**m
        out[m:] += term.real if m == 0 else 2.0 * term.real
    return out


def _quadrupole_axis(C) -> np.ndarray:
    """The eigenvector of Q, :math:`\rho_2(x) = x^\top Qx`, whose eigenvalue is farthest from the others'
    mean (for a part zonal about e, Q is proportional to :math:`ee^\top - I/3`)."""
    if C.shape[0] < 3:
        return np.zeros(3)
    eye = np.eye(3)
    Q = np.diag([_degree_values(C[:3, :3], eye[i])[2] for i in range(3)])
    for i, j in ((0, 1), (0, 2), (1, 2)):
        mixed = _degree_values(C[:3, :3], (eye[i] + eye[j]) / np.sqrt(2))[2]
        Q[i, j] = Q[j, i] = mixed - 0.5 * (Q[i, i] + Q[j, j])
    lam, vec = np.linalg.eigh(Q)
    k = int(np.argmax(np.abs(lam - (lam.sum() - lam) / 2)))
    return vec[:, k]


def zonal_axis(C) -> np.ndarray | None:
    """The axis e about which the density of the S^2 coefficients C is zonal (to ``ZONAL_RTOL``), or None."""
    C = np.asarray(C)
    if C.shape[0] < 2:
        return np.eye(3)[2]
    a = np.sqrt(6.0) * np.array([C[1, 1].real, -C[1, 1].imag, 0.0]) + np.array([0.0, 0.0, np.sqrt(3.0) * C[1, 0].real])
    k = np.tri(C.shape[0], dtype=bool)
    energy = np.sum(np.where(np.arange(C.shape[0])[None, :] == 0, 1.0, 2.0) * k * np.abs(C) ** 2, axis=1)
    for e in (a, _quadrupole_axis(C), np.eye(3)[2]):
        norm = np.linalg.norm(e)
        if norm < 1e-12 * np.sqrt(energy.sum()):
            continue
        e = e / norm
        l = np.arange(len(energy))
        off = energy - _degree_values(C, e) ** 2 / (2 * l + 1)
        if off[1:].sum() <= ZONAL_RTOL**2 * energy.sum():
            return e
    return None


def zonal_hint(model, coefficients) -> str:
    """The warning's text when a GridMeasure on S^2 with scalar heads is zonal, else ""."""
    if scalar_heads(model.M, model.W) is None or np.shape(coefficients)[1] == 1:
        return ""  # general heads; or zonal about the pole, which the solver advances as one column already
    e = zonal_axis(coefficients)
    if e is None:
        return ""
    axis = "(" + ", ".join(f"{v:.6g}" for v in np.round(e, 12) + 0.0) + ")"
    return (f"slow route: the initial density is axisymmetric about e = {axis} and the heads are scalar, so the "
            "flow stays zonal; the spherical-harmonic solver refines all 2l + 1 harmonics of every degree (measured "
            "> 1000x slower once the band limit reaches the hundreds). Pass meanfield.ZonalMeasure(density_fn, d=3, "
            f"axis={axis}) instead of the GridMeasure (density_fn: the density as a function of x), the same flow "
            "as a 1-D problem in Gegenbauer coefficients; or give a fixed L to keep this route.")
