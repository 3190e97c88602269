"""The entropic JKO scheme (Peyré 2015) with the energy linearised at each step (module
docstring of :mod:`meanfield.flow`)."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from particles import SaveAt, geodesic_distance, simulate
from particles.extend import SchemeState, Stepper
from particles.validation import InvalidParameterError

from ._result import MeanFieldResult
from .field import first_variation, measure_energy
from .measure import GridMeasure

__all__ = []


def _spacing(y: np.ndarray) -> float:
    """Median nearest-neighbour geodesic distance of a point set."""
    D = geodesic_distance(y[:, None, :], y[None, :, :])
    np.fill_diagonal(D, np.inf)
    return float(np.median(D.min(axis=1)))


class _JKOField(SchemeState):
    r"""The entropic JKO step on a fixed point set, as a field of the particle solve loop.

    The state is the column of cell masses (flat geometry). :meth:`prox` is one step of length
    dt: with the energy linearised at p (first variation w = δE/δp, τ = 2 dt, σ = τ/γ),
    :math:`p^+ = e^{-\sigma w} \odot \xi^T (p \oslash \xi e^{-\sigma w})` in the log domain (POT's
    ``sinkhorn_log`` template), followed by one heat step of duration dt/κ when κ < ∞ (the JKO step
    of the entropy is the heat flow: Jordan–Kinderlehrer–Otto), kernel ∝ ω_l e^{−d²/(4s)}
    row-normalised so that mass stays exact and positive. Calling the field returns the discrete
    rate (p⁺ − p)/dt of the last step size.
    """

    def __init__(self, model, y, areas, gamma, dt, kappa):
        self.model, self.y, self.gamma, self.dt, self.kappa = model, y, gamma, dt, kappa
        D2 = geodesic_distance(y[:, None, :], y[None, :, :]) ** 2
        self._logxi = -D2 / gamma
        self._D2, self._logareas = D2, np.log(areas)[None, :]
        self._heat = {}  # log heat kernels by step length (the last step before a save is shorter)

    def _logheat(self, dt):
        if dt not in self._heat:
            logK = -self._D2 / (4 * dt / self.kappa) + self._logareas
            self._heat[dt] = logK - logsumexp(logK, axis=1, keepdims=True)
        return self._heat[dt]

    def prox(self, p, dt):
        w = -first_variation(self.model, self.y, p)
        with np.errstate(divide="ignore"):
            logp = np.log(p)  # empty cells: −inf, on purpose (they stay empty in the scalings)
        logb = -(2 * dt / self.gamma) * w
        loga = logp - logsumexp(self._logxi + logb[None, :], axis=1)
        logq = logb + logsumexp(self._logxi + loga[:, None], axis=0)
        if np.isfinite(self.kappa):
            logq = logsumexp(self._logheat(dt) + logq[:, None], axis=0)
        return np.exp(logq - logsumexp(logq))  # mass is 1 up to round-off: renormalise it

    def __call__(self, t, p):
        return (self.prox(p[:, 0], self.dt)[:, None] - p) / self.dt


def jko(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    """One entropic JKO step of length dt (:meth:`_JKOField.prox`) on the mass column x."""
    return field.prox(x[:, 0], dt)[:, None], None


#: the JKO step as a stepper of the particle solve loop (first order in time)
JKO = Stepper(jko, order=1)


def jko_ascent(mu0, model, ts, *, dt, gamma=None, kappa=np.inf, **run):
    """Entropic JKO with the energy linearised at p_t (closed form), noise by Lie splitting, run in
    the particle solve loop with constant steps dt (the last one before a save time shorter)."""
    if not isinstance(mu0, GridMeasure):
        raise InvalidParameterError("scheme 'jko' needs a GridMeasure.")
    if not model.gradient_flow:
        raise InvalidParameterError(
            "scheme 'jko' is the Wasserstein gradient ascent of E_multi, which is the flow of USA heads "
            "under score symmetry and value alignment (M_h = M_h^T = W_h, no causal mask, the standard update; "
            "MultiHead.gradient_flow); use 'fv_circle' for softmax heads."
        )
    y = mu0.points
    h = _spacing(y)
    # the Gibbs kernel must reach the neighbouring cells (γ ≳ h²) and blur little (γ ≪ τ = 2 dt)
    gamma = max(2 * dt / 50, 2 * h * h) if gamma is None else gamma  # (options checked by flow.SCHEME_OPTIONS)
    field = _JKOField(model, y, mu0.areas, gamma, dt, kappa)
    traj = simulate(mu0.mass.copy()[:, None], field, t0=float(ts[0]), t1=float(ts[-1]), dt=dt, method=JKO,
                    save=SaveAt(ts=ts), **run)
    masses = traj.x[..., 0]
    energy = np.array([measure_energy(model, y, q) for q in masses])
    return MeanFieldResult(traj.t, y, masses, energy, "jko", traj.n_steps, {"gamma": gamma, "tau": 2 * dt},
                           status=traj.status, message=traj.message)
