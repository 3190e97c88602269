"""The entropic JKO scheme (Peyré 2015) with the energy linearised at each step (module
docstring of :mod:`meanfield.flow`)."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from particles import geodesic_distance
from particles.validation import InvalidParameterError, check_param

from ._result import MeanFieldResult
from .field import first_variation, measure_energy
from .measure import GridMeasure

__all__ = []


def _spacing(y: np.ndarray) -> float:
    """Median nearest-neighbour geodesic distance of a point set."""
    D = geodesic_distance(y[:, None, :], y[None, :, :])
    np.fill_diagonal(D, np.inf)
    return float(np.median(D.min(axis=1)))


def _jko(mu0, model, ts, *, dt, gamma=None, kappa=np.inf, **_):
    """Entropic JKO with the energy linearised at p_t (closed form), noise by Lie splitting."""
    if not isinstance(mu0, GridMeasure):
        raise InvalidParameterError("scheme 'jko' needs a GridMeasure.")
    if model.kind != "usa" or not (model.symmetric and model.aligned):
        raise InvalidParameterError(
            "scheme 'jko' is the Wasserstein gradient ascent of E_multi, which is the flow of USA heads "
            "under score symmetry and value alignment (M_h = M_h^T = W_h); use 'fv_circle' for softmax heads."
        )
    dt = check_param(dt, "dt", "wasserstein_ascent(jko)", low=0.0, low_open=True)
    tau = 2.0 * dt
    y = mu0.points
    h = _spacing(y)
    # the Gibbs kernel must reach the neighbouring cells (γ ≳ h²) and blur little (γ ≪ τ)
    gamma = max(tau / 50, 2 * h * h) if gamma is None else check_param(
        gamma, "gamma", "wasserstein_ascent(jko)", low=0.0, low_open=True)
    D2 = geodesic_distance(y[:, None, :], y[None, :, :]) ** 2
    logxi = -D2 / gamma
    sigma = tau / gamma
    logheat = None
    if np.isfinite(kappa):
        # JKO of the entropy is the heat flow (Jordan–Kinderlehrer–Otto): one heat step of
        # duration s = dt/κ, kernel ∝ ω_l exp(−d²/(4s)) row-normalised (mass exact, positive)
        s_heat = dt / kappa
        logK = -D2 / (4 * s_heat) + np.log(mu0.areas)[None, :]
        logheat = logK - logsumexp(logK, axis=1, keepdims=True)
    p = mu0.mass.copy()
    t = float(ts[0])
    masses, n_steps = [p.copy()], 0
    for target in ts[1:]:
        while t < target - 1e-12:
            w = -first_variation(model, y, p)
            with np.errstate(divide="ignore"):
                logp = np.log(p)  # empty cells: −inf, on purpose (they stay empty in the scalings)
            # p⁺ = e^{−σw} ⊙ ξᵀ(p ⊘ ξ e^{−σw}), in the log domain (POT's sinkhorn_log template)
            logb = -sigma * w
            loga = logp - logsumexp(logxi + logb[None, :], axis=1)
            logq = logb + logsumexp(logxi + loga[:, None], axis=0)
            if logheat is not None:
                logq = logsumexp(logheat + logq[:, None], axis=0)
            p = np.exp(logq - logsumexp(logq))  # mass is 1 up to round-off: renormalise it
            t += dt
            n_steps += 1
        masses.append(p.copy())
    masses = np.array(masses)
    energy = np.array([measure_energy(model, y, q) for q in masses])
    return MeanFieldResult(np.asarray(ts), y, masses, energy, "jko", n_steps, {"gamma": gamma, "tau": tau})


