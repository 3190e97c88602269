"""The one solve loop for particle flows on the sphere (and in flat space).

``simulate(x0, field, t1=..., dt=..., method=...)``: each step runs a stepper from
:data:`~particles._steppers.STEPPERS` (which retracts onto the manifold), a cheap
finiteness check every ``check_every`` steps, then the saves requested by :class:`SaveAt`.
"""

from __future__ import annotations

import numpy as np

from ._steppers import STEPPERS
from .attention import MultiHead
from .sphere import GEOMETRIES
from .trajectory import SaveAt, Trajectory
from .validation import (
    InvalidParameterError,
    SolverError,
    check_bool,
    check_choice,
    check_instance,
    check_param,
    check_points,
    check_real_array,
    check_returned,
    check_rng,
)

__all__ = ["simulate"]


def _save_times(save: SaveAt, t0: float, t1: float):
    """SaveAt.ts (validated by SaveAt) checked against the interval [t0, t1]."""
    if save.ts is None:
        return None
    ts = save.ts
    if ts[0] < t0 or ts[-1] > t1 + 1e-12 * max(1.0, abs(t1)):
        raise InvalidParameterError(
            f"SaveAt.ts must lie in [t0, t1] = [{t0:g}, {t1:g}]; got [{ts[0]:g}, {ts[-1]:g}]."
        )
    return ts


def _check_row(row, first, caller="simulate"):
    """A row returned by ``SaveAt.fn``: a dict of str to real arrays, with the keys and
    shapes of the first row (so that rows stack along time)."""
    fix = "SaveAt.fn must return a dict mapping names to arrays of fixed shape, e.g. {'energy': model.energy(x)}."
    if not isinstance(row, dict) or not row or not all(isinstance(k, str) for k in row):
        raise InvalidParameterError(f"SaveAt.fn of {caller} returned {type(row).__name__}; {fix}")
    shapes = {}
    for key, val in row.items():
        shapes[key] = check_real_array(val, f"SaveAt.fn()[{key!r}]", caller, finite=False, min_size=0).shape
    if first is not None and shapes != first:
        raise InvalidParameterError(
            f"SaveAt.fn of {caller} returned keys/shapes {shapes} after {first} at the first save; {fix}"
        )
    return shapes


# a fixed step that moves a token by more than this (radians) does not resolve the flow
_MAX_MOVE = 1.0


def _check_resolved(x, x_new, t, n_steps, h):
    """Refuse a step that jumps a token by more than _MAX_MOVE radians: the retraction keeps
    such a state on the sphere, but it is no longer a solution (e.g. USA heads at large
    beta without log_time_scale, where |v| ~ e^beta)."""
    with np.errstate(invalid="ignore"):
        # a non-finite x_new is reported by the finiteness check instead
        chord2 = np.einsum("...i,...i->...", x_new - x, x_new - x)
        worst = float(np.max(chord2)) if chord2.size else 0.0
    if np.isfinite(worst) and worst > (2.0 * np.sin(_MAX_MOVE / 2.0)) ** 2:
        angle = 2.0 * np.arcsin(min(1.0, np.sqrt(worst) / 2.0))
        raise SolverError(
            f"step {n_steps} at t={t:.6g} moved a token by {angle:.3g} rad > {_MAX_MOVE:g} rad with dt={h:g}: "
            "the step does not resolve the flow. Reduce dt, use method='dopri5', or lower beta "
            "(or use log_time_scale='auto' for USA heads)."
        )


def simulate(
    x0,
    field,
    *,
    t1: float,
    dt: float | None = None,
    t0: float = 0.0,
    method: str = "rk4",
    save: SaveAt | None = None,
    kappa: float = np.inf,
    rng=None,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    max_steps: int = 10_000_000,
    check_every: int = 10,
    on_failure: str = "raise",
    geometry: str | None = None,
    progress: bool = False,
) -> Trajectory:
    r"""Integrate :math:`dX_i = \dot x_i(X)\,dt + \sqrt{2/\kappa}\,P_{X_i} dB_i` from t0 to t1.

    Main arguments
    --------------
    x0 : array_like of shape (n, d)
        Initial tokens (unit rows on the sphere).
    field : MultiHead, Ensemble or callable ``field(t, x) -> (n, d)``
        The velocity. A :class:`MultiHead` fixes the geometry; an :class:`Ensemble`
        integrates a stack x0 of shape (S, n, d) at once; a plain callable runs on
        ``geometry`` (default "sphere") and must return tangent vectors there.
    t1 : float
        Final time.
    dt : float
        Step (fixed-step methods) or initial step (``"dopri5"``; default (t1 − t0)/100).
    method : {"euler", "rk4", "dopri5", "euler_maruyama"}
        ``"euler_maruyama"`` is required when ``kappa`` is finite.

    Other arguments
    ---------------
    save : SaveAt
        What to store (default: t0 and t1 positions).
    kappa : float in (0, inf]
        Inverse noise strength; the noise is Brownian motion with generator κ⁻¹Δ_S.
    rng : Generator, int or None
        Randomness for the noise.
    rtol, atol : float
        Tolerances of the adaptive method.
    max_steps : int
        Accepted + rejected steps allowed.
    check_every : int
        Steps between finiteness checks (an O(nd) sum).
    on_failure : {"raise", "return"}
        On a non-finite state, raise :class:`SolverError`, or return a Trajectory with
        ``status="failed"`` cut at the last finite save.
    progress : bool
        Show a tqdm progress bar (needs tqdm).

    Returns
    -------
    Trajectory

    Examples
    --------
    >>> model = MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    >>> x0 = np.eye(3)
    >>> traj = simulate(x0, model, t1=1.0, dt=0.1)
    >>> traj.x.shape, bool(np.allclose(np.linalg.norm(traj.x, axis=-1), 1))
    ((2, 3, 3), True)
    """
    caller = "simulate"
    check_choice(method, "method", STEPPERS, caller)
    progress = check_bool(progress, "progress", caller)
    check_choice(on_failure, "on_failure", {"raise", "return"}, caller)
    stepper = STEPPERS[method]
    if isinstance(field, MultiHead):
        if geometry is not None and geometry != field.geometry:
            raise InvalidParameterError(
                f"geometry={geometry!r} conflicts with the model's geometry {field.geometry!r}; omit it."
            )
        geom = field.geom
        x = field.check_x(x0, "x0")
    elif getattr(field, "batched", False):
        if geometry is not None and geometry != field.geometry:
            raise InvalidParameterError(
                f"geometry={geometry!r} conflicts with the ensemble's geometry {field.geometry!r}; omit it."
            )
        geom = field.geom
        x = field.check_x(x0, "x0")
    elif callable(field):
        geom = GEOMETRIES[check_choice(geometry or "sphere", "geometry", GEOMETRIES, caller)]
        x = check_points(x0, "x0", caller, on_sphere=geom.on_sphere, min_d=1)
    else:
        raise InvalidParameterError(
            f"field must be a MultiHead or a callable field(t, x); got {type(field).__name__}."
        )
    plain_callable = not isinstance(field, MultiHead) and not getattr(field, "batched", False)
    t0 = check_param(t0, "t0", caller)
    t1 = check_param(t1, "t1", caller)
    if t1 <= t0:
        raise InvalidParameterError(f"t1 must be greater than t0 = {t0:g}; got t1 = {t1:g}.")
    if dt is None:
        if not stepper.adaptive:
            raise InvalidParameterError(f"method {method!r} is fixed-step: pass dt.")
        dt = (t1 - t0) / 100
    dt = check_param(dt, "dt", caller, low=0.0, low_open=True)
    kappa = check_param(kappa, "kappa", caller, low=0.0, low_open=True, allow_inf=True)
    if np.isfinite(kappa) and not stepper.stochastic:
        raise InvalidParameterError(
            f"kappa={kappa:g} adds noise: use method='euler_maruyama' (got {method!r})."
        )
    sigma = float(np.sqrt(2.0 / kappa)) if np.isfinite(kappa) else 0.0
    rtol = check_param(rtol, "rtol", caller, low=0.0, low_open=True)
    atol = check_param(atol, "atol", caller, low=0.0, low_open=True)
    max_steps = check_param(max_steps, "max_steps", caller, low=1, integer=True)
    check_every = check_param(check_every, "check_every", caller, low=1, integer=True)
    save = SaveAt() if save is None else save
    check_instance(save, SaveAt, "save", caller, hint="Use particles.SaveAt(ts=..., every=..., fn=...).")
    ts = _save_times(save, t0, t1)
    every = save.every if ts is None else None
    rng = check_rng(rng, "rng", caller)
    if plain_callable:
        # checked once, on a probe call: a (1, d) or (n,) return would be broadcast silently
        check_returned(field(t0, x), "field(t0, x0)", x.shape, caller,
                       fix="The field must return one velocity row per token.")

    times, xs, rows = [], [], []
    row_shapes = [None]

    def record(t, state):
        times.append(t)
        if save.x:
            xs.append(state.copy())
        if save.fn is not None:
            row = save.fn(t, state)
            row_shapes[0] = _check_row(row, row_shapes[0], caller)
            rows.append(row)

    if ts is None:
        if save.t0:
            record(t0, x)
        targets = np.array([t1])
    else:
        if ts[0] == t0:
            record(t0, x)
            ts = ts[1:]
        targets = ts if ts.size and ts[-1] >= t1 - 1e-12 * max(1.0, abs(t1)) else np.append(ts, t1)
        save_final = ts.size > 0 and ts[-1] >= t1 - 1e-12 * max(1.0, abs(t1))

    bar = None
    if progress:
        from tqdm.auto import tqdm

        # time advances by float steps: show n and total rounded (not 9.299999999999999/10.0)
        bar = tqdm(total=t1 - t0, unit="time", desc=f"simulate[{method}]",
                   bar_format="{l_bar}{bar}| t = {n:.4g}/{total:.4g} [{elapsed}<{remaining}]")

    t = t0
    n_steps = n_rejected = 0
    last_good = x
    status, message = "finished", "reached t1"
    h = dt
    try:
        for k_target, target in enumerate(targets):
            while t < target:
                remaining = target - t
                if not stepper.adaptive:
                    # land exactly on the target; a round-off sliver is merged into this step
                    h = remaining if remaining <= dt * (1 + 1e-9) else dt
                else:
                    h = min(h, remaining)
                if n_steps + n_rejected >= max_steps:
                    raise SolverError(
                        f"max_steps={max_steps} reached at t={t:.6g} before t1={t1:g}. "
                        "Increase max_steps, or loosen rtol/atol."
                    )
                x_new, err = stepper(field, t, x, h, geom, rng=rng, sigma=sigma, rtol=rtol, atol=atol)
                if stepper.adaptive:
                    if not np.isfinite(err):
                        err = np.inf
                    # standard controller: safety 0.9, exponent 1/(q+1) with q = 4
                    fac = 0.2 if err == np.inf else min(5.0, max(0.2, 0.9 * err ** (-0.2) if err > 0 else 5.0))
                    if err > 1.0:
                        n_rejected += 1
                        h *= fac
                        if h < 1e-14 * max(1.0, abs(t)):
                            raise SolverError(
                                f"step size underflow at t={t:.6g} (step {n_steps}): the flow is too stiff "
                                "or not finite here. Lower beta or use log_time_scale='auto'."
                            )
                        continue
                    t_new = target if h >= remaining else t + h
                    h_next = h * fac
                else:
                    t_new = target if h == remaining else t + h
                if not stepper.adaptive and geom.on_sphere:
                    _check_resolved(x, x_new, t, n_steps, h)
                x = x_new
                n_steps += 1
                if bar is not None:
                    bar.update(t_new - t)
                t = t_new
                if stepper.adaptive:
                    h = h_next
                if n_steps % check_every == 0 or t >= target:
                    if not np.isfinite(x.sum()):
                        raise SolverError(
                            f"state stopped being finite at t={t:.6g} (step {n_steps}). "
                            "Reduce dt, or lower beta (or use log_time_scale='auto' for USA heads)."
                        )
                    last_good = x
                if every is not None and n_steps % every == 0 and t < t1:
                    record(t, x)
            if ts is not None and (k_target < len(ts) or save_final):
                record(t, x)
        if ts is None:
            record(t, x)
    except SolverError as exc:
        if on_failure == "raise":
            raise
        status, message = "failed", str(exc)
    finally:
        if bar is not None:
            bar.close()

    saved = {}
    if rows:
        for key in rows[0]:
            saved[key] = np.stack([np.asarray(r[key]) for r in rows])
    return Trajectory(
        t=np.asarray(times),
        x=np.stack(xs) if save.x and xs else None,
        saved=saved,
        status=status,
        message=message,
        n_steps=n_steps,
        n_rejected=n_rejected,
        x_final=last_good if status == "failed" else x,
        method=method,
    )
