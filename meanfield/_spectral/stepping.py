r"""The embedded Dormand–Prince 5(4) pair in integrating-factor variables (exact noise), the first
step, the refinement of the band limit (module docstring of :mod:`meanfield.spectral`)."""

from __future__ import annotations

import logging
import math

import numpy as np

from particles import SaveAt, simulate, tqdm_class
from particles.extend import DORMAND_PRINCE, SchemeState, Stepper
from particles.validation import SolverError

from .shared import geometric_need

_LOG = logging.getLogger("meanfield.spectral")


# ------------------------------------------------------------------ embedded integrating-factor RK


class _SpectralField(SchemeState):
    """Spectral coefficients as a field of the particle solve loop (flat geometry).

    Calling it gives the nonlinear part N(c) of dc/dt = Λc + N(c) (Λ = Δ/κ, diagonal) at the band
    limit of c; the last evaluation is kept, so the first stage of a step reuses the last stage of
    the step before (first same as last), and :meth:`start` keeps the first stage across rejected
    attempts. :meth:`refined` checks the spectral tail of an accepted
    state and pads it to the band limit it needs (or raises :class:`SolverError`).
    """

    def __init__(self, disc, *, kappa, tol, refine, cap, solver_cap=None, t_end=np.inf):
        self.kappa, self.tol, self.refine, self.cap, self.t_end = kappa, tol, refine, cap, t_end
        self.solver_cap = cap if solver_cap is None else solver_cap
        self._discs = {disc.L: disc}
        self._last = self._start = (None, None)
        self.floor_tail = 0.0  # the largest tail left at a round-off floor (not refined)
        self.band_limits = []  # (t, L before, L after) of every refinement
        self.bar, self.t0 = None, 0.0  # the progress bar (progress=True) and the start time

    def after_step(self, t, c):
        """Called by the solve loop after every accepted step: the bar shows t and the band limit."""
        if self.bar is not None:
            self.bar.n = float(t) - self.t0
            self.bar.set_postfix_str(f"L = {c.shape[0] - 1}", refresh=True)

    def disc(self, c):
        """The discretisation at the band limit of c."""
        return self.disc_at(c.shape[0] - 1)

    def disc_at(self, L):
        """The discretisation at band limit L (built once per band limit)."""
        if L not in self._discs:
            self._discs[L] = next(iter(self._discs.values())).with_L(L)
        return self._discs[L]

    def lam(self, c):
        lap = self.disc(c).laplacian
        return lap / self.kappa if np.isfinite(self.kappa) else np.zeros_like(lap)

    def __call__(self, t, c):
        for state, value in (self._last, self._start):
            if state is c:
                return value
        self._last = (c, self.disc(c).rhs(c))
        return self._last[1]

    def start(self, c):
        """N(c) at the start of a step (kept until the step is accepted)."""
        self._start = (c, self(0.0, c))
        return self._start[1]

    def refined(self, c, t):
        disc = self.disc(c)
        tail = disc.tail(c)
        if tail <= self.tol:
            return c
        e = disc.energy_by_degree(c)
        if _is_floor(e, disc.L):
            # the top half is flat at round-off: a larger band limit would only hold more of it
            self.floor_tail = max(self.floor_tail, tail)
            return c
        L_new = disc.sufficient_L(c, self.tol)
        if not self.refine:
            raise SolverError(
                f"spectral solver: at t={t:.6g} the spectral tail (L2 norm of the top degrees relative to the "
                f"density) is {tail:.2e} > tol={self.tol:.1e} at band limit L={disc.L}, and the spectrum still "
                f"decays geometrically there: the density sharpened past the band limit. Rerun with L >= {L_new} "
                "(or L=None to refine automatically), or stop earlier."
            )
        need = geometric_need(disc.L, e, tail, self.tol)
        if (need is not None and need > self.cap) or (L_new > self.cap and disc.L >= self.cap):
            # refused at once: refining to the cap first costs minutes and gigabytes for the same refusal
            raise SolverError(self._cap_message(t, tail, disc.L, max(L_new, math.ceil(need or 0))))
        L_new = min(L_new, self.cap)
        change = (float(t), disc.L, int(L_new))
        crossing = self._cap_crossing(self.band_limits + [change])
        if crossing is not None:
            rate, t_cap = crossing
            raise SolverError(
                f"spectral solver: at t={t:.6g} the band limit L = {L_new} grows like e^({rate:.3g} t) (the last "
                f"refinements of a noiseless flow concentrating into clusters): at this rate it passes the cap "
                f"max_L={self.cap} at t ~ {t_cap:.4g}, before t1 = {self.t_end:.6g}; refused now rather than after "
                f"the costliest steps. {self._fixes(f'a t1 well before t ~ {t_cap:.3g}')}"
            )
        self.band_limits.append(change)
        _LOG.info("spectral solver: t = %.6g, band limit L %d -> %d (tail %.2e > tol %.1e)", t, disc.L, L_new, tail,
                  self.tol)
        return self.disc_at(L_new).pad(c)

    def _cap_crossing(self, changes):
        """(growth rate, time) at which the band limit, growing exponentially in t over the last four
        refinements ``changes`` (t, L before, L after), passes the cap, when that is before the end of the
        run; else None. Only for a noiseless flow past an eighth of the cap (noise bounds the band limit
        a flow needs)."""
        if np.isfinite(self.kappa) or len(changes) < 4 or changes[-1][2] < self.cap / 8:
            return None
        t, _, L = np.array(changes[-4:], dtype=float).T
        if np.ptp(t) <= 0:
            return None
        rate = float(np.polyfit(t, np.log(L), 1)[0])
        if not rate > 0:
            return None
        t_cap = t[-1] + np.log(self.cap / L[-1]) / rate
        return (rate, float(t_cap)) if t_cap < self.t_end else None

    def _fixes(self, stop="stop earlier (a smaller t1)"):
        """The fixes that exist for a run stopped by the cap (max_L only while below the solver's cap)."""
        fixes = [stop, "add noise (a finite kappa)", "or use particles"]
        if self.cap < self.solver_cap:
            fixes.insert(0, f"raise max_L (up to this solver's cap {self.solver_cap})")
        return (f"Fixes: {', '.join(fixes)}. With on_failure='return' the saves reached so far are returned "
                "(status 'failed', this reason in message).")

    def _cap_message(self, t, tail, L, need):
        """Why the run stops at the cap, and only the fixes that exist."""
        return (f"spectral solver: at t={t:.6g} the resolved spectrum (decaying geometrically, tail {tail:.2e} > "
                f"tol={self.tol:.1e} at L={L}) needs a band limit L >= {need}, above the cap max_L={self.cap}: it is "
                f"concentrating into clusters. {self._fixes()}")


#: amplitudes (relative to the norm of ρ) below which a flat top half of the spectrum is round-off
FLOOR_CEILING = 1e-8


def _is_floor(energy_by_degree, L):
    r"""True when the top half of the spectrum is a round-off floor, not a truncated density.

    A density resolved at band limit L has coefficients that decay geometrically there (an analytic
    density: :math:`|c_l| \sim e^{-\alpha l}`), so the RMS amplitude of the top quarter is well below
    that of the quarter before it. Round-off does not decay with l. The top half counts as floor
    when the top quarter's RMS amplitude is at least half the quarter before's and below
    ``FLOOR_CEILING`` (measured floors: 1e-15 to 1e-10; a flat spectrum of a truncated cluster sits
    at the cluster's mass, far above).
    """
    if L < 16:
        return False
    a2 = energy_by_degree / energy_by_degree.sum()
    lo, hi = a2[L // 2: (3 * L) // 4], a2[(3 * L) // 4: L + 1]
    r1, r2 = np.sqrt(lo.mean()), np.sqrt(hi.mean())
    return bool(r2 >= 0.5 * r1 and r2 <= FLOOR_CEILING)


def if_dopri5(field, t, c, h, geom, rng=None, sigma=0.0, *, rtol=1e-10, **_):
    """Dormand–Prince 5(4) in the integrating-factor variables of dc/dt = Λc + N(c).

    Stage i: Y_i = E(c_i h) c_n + h Σ_j a_ij E((c_i - c_j) h) k_j, k_i = N(Y_i), E(s) = e^{Λ s}
    (c_i non-decreasing, so every factor decays: exact and stable for any κ); the last stage is
    the 5th-order solution. ``err`` is |embedded difference| / (rtol |c_new|) in the norm of the
    discretisation; an acceptable step (err ≤ 1) comes back refined to the band limit it needs.
    """
    lam = field.lam(c)
    ks = [field.start(c)]
    tab = DORMAND_PRINCE  # the particle steppers' pair (first same as last: the last stage is the solution)
    for i in range(1, tab.stages):
        y = np.exp(lam * (tab.c[i] * h)) * c
        for j, aij in enumerate(tab.a[i]):
            if aij:
                y = y + (h * aij) * np.exp(lam * ((tab.c[i] - tab.c[j]) * h)) * ks[j]
        ks.append(field(t + tab.c[i] * h, y))
    err = h * sum(e * np.exp(lam * ((1 - tab.c[j]) * h)) * ks[j] for j, e in enumerate(tab.e) if e)
    ratio = _error_ratio(field.disc(c), err, c, y, rtol)
    if not np.isfinite(ratio):
        raise SolverError(f"spectral solver: the state stopped being finite at t={t:.6g}.")
    return (field.refined(y, t + h) if ratio <= 1.0 else y), float(ratio)


#: the absolute part of the per-degree error test, relative to ||c||: below it a degree is round-off
ATOL = 1e-4


def _error_ratio(disc, err, c, y, rtol):
    r"""max over degrees l of :math:`\|e_l\| / (\mathrm{rtol}\,\max(\|c_l\|, \|y_l\|) + a)`,
    :math:`a = \max(10^{-4}\mathrm{rtol}, 10^{-15})\|y\|`: every degree's local error is held to its own
    size down to a floor far below the tail tolerance. A global norm lets degrees at round-off,
    where the explicit pair is weakly unstable (|R(iy)| > 1 for advection rates y = h l |v| > 1),
    grow step after step to rtol ||c||: noise that then decides the band limit."""
    e = np.sqrt(disc.energy_by_degree(err))
    s_new = np.sqrt(disc.energy_by_degree(y))
    s_old = np.sqrt(disc.energy_by_degree(c))
    n = disc.norm(y)
    scale = rtol * np.maximum(s_old, s_new) + max(ATOL * rtol, 1e-15) * n
    return float(np.max(e / scale))


#: the integrating-factor Dormand–Prince step as a stepper of the particle solve loop (the PID
#: controller of :func:`particles.simulate` reads its error order)
IF_DOPRI5 = Stepper(if_dopri5, order=5, adaptive=True, error_order=4)


def ifrk45(disc, c0, ts, *, kappa, rtol, tol, refine, max_steps, cap, solver_cap=None, **run):
    """Integrate the coefficients over the save times in the particle solve loop (``run``:
    ``progress``, ``on_failure``); returns the saved coefficients (each at the band limit of its
    time), their tails, the field (its ``band_limits``), the trajectory (times, steps, status)."""
    field = _SpectralField(disc, kappa=kappa, tol=tol, refine=refine, cap=cap, solver_cap=solver_cap,
                           t_end=float(ts[-1]))
    if run.pop("progress", False):  # the scheme's own bar: the time reached and the band limit in use
        field.bar = tqdm_class()(total=float(ts[-1] - ts[0]), unit="time", desc="spectral",
                                 bar_format="{l_bar}{bar}| t = {n:.4g}/{total:.4g}{postfix} [{elapsed}<{remaining}]")
        field.t0 = float(ts[0])
    saves = []

    def keep(t, c):
        saves.append(c.copy())
        return {"tail": field.disc(c).tail(c)}

    h0 = _first_step(disc, c0, field(ts[0], c0), ts[-1] - ts[0], rtol)
    try:
        traj = simulate(c0, field, t0=float(ts[0]), t1=float(ts[-1]), dt=h0, method=IF_DOPRI5, rtol=rtol,
                        save=SaveAt(ts=ts, x=False, fn=keep), max_steps=max_steps, **run)
    finally:
        if field.bar is not None:
            field.bar.close()
    return saves, traj.saved["tail"], field, traj


def _first_step(disc, c, k1, span, rtol):
    scale = disc.norm(k1)
    h = 0.1 * rtol ** 0.2 * disc.norm(c) / scale if scale > 0 else span
    return float(min(span, max(h, 1e-12 * span)))
