r"""The embedded Dormand–Prince 5(4) pair in integrating-factor variables (exact noise), the first step, the band limit to suggest. (module docstring of :mod:`meanfield.spectral`)."""

from __future__ import annotations

import math

import numpy as np

from particles._dynamics.steppers import _A, _C, _E
from particles.validation import (
    SolverError,
)

# the Dormand–Prince 5(4) tableau of the particle stepper (nodes, stages, 5th minus embedded 4th order)
_DP_C, _DP_A, _DP_E = _C, _A, _E
_EPS = np.finfo(float).eps


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
