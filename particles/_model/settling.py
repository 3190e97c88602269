r"""An :class:`~particles.Ensemble` as a field whose settled systems stop moving.

``Ensemble(...).settling(diameter)`` is a field of the solve loop (:func:`particles.simulate`,
any stepper, fixed or adaptive): at t0 and after every accepted step the loop calls its
``after_step(t, x)``, which certifies systems settled with :meth:`particles.Ensemble.settled`
(all tokens in a forward-invariant cap of geodesic diameter below ``diameter``). From then on the
field returns a zero velocity for them without computing it, so a settled system stays where it
was certified (to round-off: a zero step is a retraction of x itself) and costs only the
stepper's O(nd) vector arithmetic. Every ε-cluster statistic with ε ≥ ``diameter`` (one cluster,
all pairs within ε) is then the one the full integration gives at any later time: a phase-diagram
workload where the low-β systems collapse early pays only for the time they take to collapse.
``running`` names the systems still moving: the field takes their states alone as well as the
whole stack (a state of ``running.size`` rows is theirs), so the solve loop's fixed steps step
only them (:mod:`particles._dynamics.loop`); the trajectory keeps the shape (S, n, d) and
``settled_at`` says when each system was certified.
"""

from __future__ import annotations

import numpy as np

from .._core.validation import InvalidParameterError, check_param
from .ensemble_kernels import WORK
from .merging import Groups

__all__ = ["SettlingEnsemble"]


class SettlingEnsemble:
    """Field of an :class:`~particles.Ensemble` whose certified-settled systems stop moving.

    Built by :meth:`particles.Ensemble.settling`. Attributes after (or during) a run:

    settled_at : ndarray (S,)
        Time each system was certified settled (inf: still running).
    system_evaluations : int
        (system, velocity evaluation) pairs computed: the work done (S times the number of
        evaluations without settling).

    Examples
    --------
    >>> from particles import Ensemble, simulate
    >>> th = np.array([[0.0, 0.2, 0.4], [0.0, 0.3, np.pi]])  # one cluster; a pair and a lone token
    >>> x0 = np.stack([np.cos(th), np.sin(th)], -1)
    >>> field = Ensemble(np.eye(2), beta=[0.5, 8.0]).settling(1e-3)
    >>> traj = simulate(x0, field, t1=20.0, dt=0.5)
    >>> field.settled_at.tolist(), field.system_evaluations // 4  # RK4: 4 evaluations per step
    ([6.5, inf], 53)
    """

    def __init__(self, ensemble, diameter: float, check_every: int = 1, merge: float = 0.0):
        caller = "Ensemble.settling"
        ensemble._check_settling(caller)  # the hypotheses of the certificate, before any work
        self.ensemble = ensemble
        self.diameter = check_param(diameter, "diameter", caller, low=0.0, high=np.pi, low_open=True)
        self.check_every = check_param(check_every, "check_every", caller, low=1, integer=True)
        self.merge = _check_merge(ensemble, merge, caller)
        S = ensemble.n_systems
        self.settled_at = np.full(S, np.inf)
        self.system_evaluations = 0
        self._running, self._sub, self._steps = np.arange(S), ensemble, 0
        self.groups = None  # merge > 0: the Groups of the tokens, from the first accepted state

    running = property(lambda self: self._running)
    running.__doc__ = ("Indices (increasing) of the systems still moving: the field also takes their states alone, "
                       "(len(running), n, d), as the solve loop passes them (particles/_dynamics/loop.py)")
    reads_state_only = True  # as the Ensemble's velocity
    writes_into = True
    geometry = property(lambda self: self.ensemble.geometry)
    geom = property(lambda self: self.ensemble.geom)

    def check_x(self, x, name: str = "x") -> np.ndarray:
        return self.ensemble.check_x(x, name)

    def __call__(self, t, x, out=None):
        run = self._running
        self.system_evaluations += run.size
        if run.size == x.shape[0]:
            return self._velocity(self._sub, run, x, out)
        v = np.empty_like(x) if out is None else out
        v.fill(0.0)  # the settled systems' rows
        if run.size:  # the running systems' states and velocities in this thread's buffers
            xs = np.take(x, run, axis=0, out=WORK.get("settling_x", (run.size,) + x.shape[1:]))
            v[run] = self._velocity(self._sub, run, xs, WORK.get("settling_v", xs.shape))
        return v

    def _rows(self, x: np.ndarray) -> np.ndarray:
        """The running systems' rows of x, a whole stack or (compacted by the solve loop) their rows alone."""
        return x if self._running.size == x.shape[0] else x[self._running]

    def _velocity(self, sub, idx, x, out=None):
        """The velocity of the systems ``idx`` (``sub`` holds exactly those), through their groups
        (into ``out`` if given and there are none)."""
        return sub._velocity(x, out=out) if self.groups is None else self.groups.velocity(sub, idx, x)

    def quotient(self, x: np.ndarray):
        """The running systems' state x (their rows alone) by their groups of merged tokens: a
        :class:`~particles._model.merging.Quotient` whose steps are those of x to the last bit, over the
        representatives alone (the rk4, heun and euler steppers take it), or None (no merging, or x is not the
        running systems' rows, or some system has no group yet)."""
        if self.groups is None or self._running.size != x.shape[0]:
            return None
        return self.groups.quotient(self._sub, self._running, x, tally=self._tally)

    def _tally(self) -> None:
        """One evaluation of the running systems (a quotient's, counted as the field's own)."""
        self.system_evaluations += self._running.size

    def systems(self, idx):
        """The velocity ``v(ts, xs)`` of the systems ``idx`` alone (zero for the settled ones, which are
        not computed), as :meth:`particles.Ensemble.systems`."""
        idx = np.asarray(idx)
        run = np.isin(idx, self._running)
        sub = self.ensemble._take(idx[run]) if run.any() else None
        n_run = int(run.sum())

        def velocity(ts, xs):
            self.system_evaluations += n_run
            if n_run == idx.size:
                return self._velocity(sub, idx, xs)
            v = np.zeros_like(xs)
            if sub is not None:
                v[run] = self._velocity(sub, idx[run], xs[run])
            return v

        return velocity

    def spectral_radius(self, t, x):
        """The running systems' :meth:`particles.Ensemble.spectral_radius` (settled ones do not move)."""
        if not self._running.size:
            return 0.0
        return self._sub.spectral_radius(t, self._rows(x))

    def consensus_rate(self):
        """The ensemble's :meth:`particles.Ensemble.consensus_rate` (the settled systems' included: a run
        checks its step once, before any settles)."""
        return self.ensemble.consensus_rate()

    def after_step(self, t: float, x: np.ndarray) -> None:
        """Certify the running systems of the accepted state x at t (every ``check_every`` steps)."""
        self._steps += 1
        if self.merge and self._running.size:
            if self.groups is None:
                self.groups = Groups(*x.shape[:2], self.merge)
            self.groups.update(self._running, self._rows(x))
        if (self._steps - 1) % self.check_every or not self._running.size:
            return
        done = self.ensemble._settled(self._rows(x), self.diameter)
        if done.any():
            self.settled_at[self._running[done]] = t
            self._running = self._running[~done]
            if self._running.size:
                self._sub = self.ensemble.subset(self._running)


def _check_merge(ensemble, merge, caller: str) -> float:
    """``merge`` of the settling field: 0, or a chordal distance in [1e-7, 0.1] for scalar heads
    with m_h >= 0 (the weighted pass of the merged groups)."""
    merge = check_param(merge, "merge", caller, low=0.0, high=0.1)
    if merge == 0:
        return 0.0
    if merge < 1e-7:
        raise InvalidParameterError(f"merge of {caller} must be 0 or in [1e-7, 0.1]; got {merge:g}: float64 "
                                    "Gram entries do not resolve smaller distances. Use merge=1e-6.")
    heads = ensemble._scalar_heads
    if heads is None or any(m < 0 for m, _ in heads):
        raise InvalidParameterError(f"merge of {caller} needs scalar heads M_h = m_h I, W_h = w_h I with m_h >= 0 "
                                    "and kind 'softmax' or 'usa'; this ensemble has other heads. Use merge=0.")
    return merge
