r"""Integrate an :class:`~particles.Ensemble` to t1, letting systems that can no longer change leave.

:func:`simulate_ensemble` takes the fixed steps of :func:`particles.simulate` (same stepper,
same steps landing on t1, same resolution check) on the stack of systems still running, and,
every ``check_every`` steps, removes the systems that :meth:`particles.Ensemble.settled`
certifies: all their tokens lie in a forward-invariant cap of geodesic diameter below
``settle_diameter``, so every ε-cluster statistic with ε >= ``settle_diameter`` (one cluster,
every pair within ε) is the same at t1 as at the time they left. Their cost stops there:
a phase-diagram workload where the low-β systems collapse early pays only for the time they
take to collapse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.errors import InvalidParameterError, SolverError
from .._core.validation import check_choice, check_instance, check_param
from .._model.ensemble import Ensemble
from .._model.ensemble_kernels import WORK
from .controllers import ConstantStep
from .steppers import STEPPERS

__all__ = ["simulate_ensemble", "EnsembleRun"]

_FIXED_STEPPERS = ("euler", "heun", "rk4")


@dataclass(frozen=True)
class EnsembleRun:
    """Result of :func:`simulate_ensemble`.

    ``x`` (S, n, d): each system's state at ``t[s]``; ``t`` (S,): t1, or the time at which the
    system was certified settled (then ``settled[s]`` is True and its tokens stay within
    ``settle_diameter`` of each other up to t1); ``system_steps``: the number of (system, step)
    pairs integrated, the work done (S · steps without settling).
    """

    x: np.ndarray
    t: np.ndarray
    settled: np.ndarray
    system_steps: int


def simulate_ensemble(x0, ensemble, *, t1: float, dt: float, t0: float = 0.0, method: str = "rk4",
                      settle_diameter: float | None = None, check_every: int = 1) -> EnsembleRun:
    r"""Integrate the S systems of ``ensemble`` from t0 to t1; settled systems stop early.

    Parameters
    ----------
    x0 : array_like of shape (S, n, d)
        Initial tokens of the S systems.
    ensemble : Ensemble
        The field; with ``settle_diameter`` its value matrices must be :math:`\mu_h I`,
        :math:`\mu_h \ge 0`, on the sphere (the hypotheses of :meth:`Ensemble.settled`).
    t1, dt, t0 : float
        Final time, fixed step, initial time (the last step is shortened to land on t1, as in
        :func:`particles.simulate`).
    method : {"euler", "heun", "rk4"}
        Fixed-step stepper of :data:`particles.STEPPERS`.
    settle_diameter : float in (0, π], optional
        Systems whose tokens are certified to stay within this geodesic diameter forever leave
        the batch (None: every system runs to t1, as :func:`particles.simulate` would).
    check_every : int
        Steps between settlement tests (and finiteness checks).

    Returns
    -------
    EnsembleRun

    Examples
    --------
    >>> ens = Ensemble(np.eye(2), beta=[0.5, 8.0])
    >>> th = np.array([[0.0, 0.2, 0.4], [0.0, 0.3, np.pi]])  # one cluster; a pair and a lone token
    >>> x0 = np.stack([np.cos(th), np.sin(th)], -1)
    >>> run = simulate_ensemble(x0, ens, t1=20.0, dt=0.5, settle_diameter=1e-3)
    >>> run.settled.tolist(), run.t.tolist(), run.system_steps  # 13 + 40 steps instead of 2 x 40
    ([True, False], [6.5, 20.0], 53)
    """
    caller = "simulate_ensemble"
    check_instance(ensemble, Ensemble, "ensemble", caller, hint="Build one with particles.Ensemble(M, beta=...).")
    check_choice(method, "method", _FIXED_STEPPERS, caller)
    x = ensemble.check_x(x0, "x0")
    t0 = check_param(t0, "t0", caller)
    t1 = check_param(t1, "t1", caller)
    if t1 <= t0:
        raise InvalidParameterError(f"t1 of {caller} must be greater than t0 = {t0:g}; got t1 = {t1:g}.")
    dt = check_param(dt, "dt", caller, low=0.0, low_open=True)
    check_every = check_param(check_every, "check_every", caller, low=1, integer=True)
    if settle_diameter is not None:
        settle_diameter = check_param(settle_diameter, "settle_diameter", caller, low=0.0, high=np.pi,
                                      low_open=True)
        ensemble._check_settling(caller)  # the hypotheses of the certificate, before any work
    stepper, geom, control = STEPPERS[method], ensemble.geom, ConstantStep(dt)
    S = ensemble.n_systems
    out, t_end, settled = np.empty_like(x), np.full(S, t1), np.zeros(S, dtype=bool)
    active, field, t, k, work = np.arange(S), ensemble, t0, 0, 0
    while t < t1 and active.size:
        if settle_diameter is not None and k % check_every == 0:
            done = field._settled(x, settle_diameter)
            if done.any():
                idx = active[done]
                out[idx], t_end[idx], settled[idx] = x[done], t, True
                active, x = active[~done], x[~done]
                if not active.size:
                    break
                field = field.subset(~done)
        h = control.propose(dt, t1 - t, t, x)
        x_new = _rk4_in_place(field, t, x, h, geom) if method == "rk4" else stepper(field, t, x, h, geom)[0]
        control.decide(None, h, t, x, x_new, geom, k)
        t, x, k, work = (t1 if h >= t1 - t else t + h), x_new, k + 1, work + active.size
        if (k % check_every == 0 or t >= t1) and not np.isfinite(x.sum()):
            raise SolverError(f"{caller}: the state stopped being finite at t={t:.6g} (step {k}). Reduce dt.")
    out[active] = x
    return EnsembleRun(x=out, t=t_end, settled=settled, system_steps=work)


def _rk4_in_place(field, t, x, h, geom):
    """The step of ``STEPPERS["rk4"]``, the same operations in the same order (so the same
    numbers), with its stage state, accumulator and scratch in reused per-thread buffers
    (a stack of thousands of systems otherwise allocates a dozen fresh arrays per step)."""
    y, acc, tmp = (WORK.get(name, x.shape) for name in ("rk4_stage", "rk4_sum", "rk4_tmp"))
    k = field(t, x)
    np.copyto(acc, k)
    for stage, (c, tc) in enumerate(((h / 2, t + h / 2), (h / 2, t + h / 2), (h, t + h))):
        np.multiply(k, c, out=y)  # x + (h/2) k1, x + (h/2) k2, x + h k3
        y += x
        k = field(tc, y)
        if stage < 2:  # k2, k3 enter the sum twice: k1 + 2 k2 + 2 k3 + k4
            np.multiply(k, 2.0, out=tmp)
            acc += tmp
        else:
            acc += k
    acc *= h / 6
    return geom.retract(x, acc)
