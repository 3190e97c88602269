"""The result object of :func:`particles.simulate`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._core.arrays import check_real_array
from .._core.declarations import Relation, declare
from .._core.params import NONE, AnyOf, Boolean, Function, Instance, Integer, Options
from .._core.params_data import Array
from .._core.validation import InvalidParameterError, check_bool, check_callable, check_choice, check_param

__all__ = ["Trajectory", "SaveAt", "Saver"]


@declare(ts=AnyOf(NONE, Array((0, 1), what="a 1-D array of save times")), every=AnyOf(NONE, Integer(1)),
         t0=Boolean(), x=Boolean(), fn=AnyOf(NONE, Function("a callable fn(t, x) -> dict")), relations=[
    Relation(("every", "ts"), lambda every, ts: every is None or ts is None, "and ts cannot both be given (ts: land on "
             "given times; every: a fixed stride of steps)", breaks={"every": 2, "ts": [0.5]}),
    Relation(("x", "fn"), lambda x, fn: x or fn is not None, "False without fn saves nothing: pass fn=... or keep "
             "x=True", breaks={"x": False})])
@dataclass(frozen=True)
class SaveAt:
    """What :func:`particles.simulate` stores, and when.

    Parameters
    ----------
    ts : array_like of float, optional
        Save times, increasing, inside [t0, t1]; the solver lands on each exactly.
    every : int, optional
        Save every ``every`` steps (and at t1). Not together with ``ts``.
    t0 : bool
        Also save the initial state (when ``ts`` is not given).
    x : bool
        Store positions (shape (n_times, n, d)); set False to keep only ``fn`` output.
    fn : callable ``fn(t, x) -> dict``, optional
        Statistics saved at each save time (diffrax's ``SaveAt(fn=...)``): values are
        stacked along a leading time axis in ``Trajectory.saved``.
    """

    ts: object = None
    every: int | None = None
    t0: bool = True
    x: bool = True
    fn: object = None

    def __post_init__(self):
        caller = "SaveAt"
        if self.ts is not None:
            ts = check_real_array(self.ts, "ts", caller, ndim=(0, 1), expected="a 1-D array of save times")
            ts = np.atleast_1d(ts)
            if np.any(np.diff(ts) <= 0):
                raise InvalidParameterError(f"SaveAt.ts must be strictly increasing; got {ts.tolist()[:6]}.")
            object.__setattr__(self, "ts", ts)
        if self.every is not None:
            object.__setattr__(self, "every", check_param(self.every, "every", caller, low=1, integer=True))
            if self.ts is not None:
                raise InvalidParameterError(
                    "SaveAt takes ts (save times) or every (save every k steps), not both; got both. "
                    "Keep ts to land on given times, or every for a fixed step stride."
                )
        object.__setattr__(self, "t0", check_bool(self.t0, "t0", caller))
        object.__setattr__(self, "x", check_bool(self.x, "x", caller))
        check_callable(self.fn, "fn", caller, signature="fn(t, x) -> dict", allow_none=True)
        if not self.x and self.fn is None:
            raise InvalidParameterError("SaveAt(x=False) without fn saves nothing; pass fn=... or keep x=True.")


@declare(t=Array((0, 1), min_size=0, what="a 1-D array of times"),
         x=AnyOf(NONE, Array(finite=False, min_size=0, what="an array of shape (n_times, n, d)")),
         x_final=AnyOf(NONE, Instance(np.ndarray, what="the final state (an array: tokens, or a scheme's own state)")),
         saved=Instance(dict), status=Options("finished", "terminated", "failed"), message=Instance(str),
         n_steps=Integer(0), n_rejected=Integer(0), method=Instance(str), events=Instance(tuple))
@dataclass(frozen=True)
class Trajectory:
    """A solved (or failed) run.

    Attributes
    ----------
    t : ndarray of shape (n_times,)
    x : ndarray of shape (n_times, n, d) or None
        Positions at ``t`` (None when ``SaveAt(x=False)``).
    saved : dict of str to ndarray of shape (n_times, ...)
        Output of ``SaveAt.fn``.
    status : {"finished", "terminated", "failed"}
        "terminated": a terminal event stopped the run before t1 (its last row is the event's time and state).
    message : str
    n_steps, n_rejected : int
        Accepted and rejected steps.
    x_final : ndarray of shape (n, d)
        Last finite state reached.
    fingerprint : str
        The :func:`~particles.extend.field_fingerprint` of the field that was simulated ("" when
        unknown): :func:`metrics.trajectory_to_dataset` refuses to label the run with another model.
    noise_entropy : str
        A noisy run given ``rng=None``: the entropy of the fresh SeedSequence it drew its noise
        from ("" otherwise); ``simulate(..., rng=int(noise_entropy))`` repeats the run.
    events : tuple of EventRecord
        The occurrences of each event of ``simulate(events=...)`` (name, terminal, direction, times
        ``t`` and states ``x``); ``t_events`` and ``x_events`` list them as solve_ivp does.
    summation : dict
        What the sums of a :class:`~particles.MultiHead` did along the run: ``route``, one str per
        head (``"exact"``, a fast route of :mod:`particles.summation`, or several joined by ``+``
        when the run changed route), and ``bound_max``, the largest a-posteriori bound on the
        relative error of a partition function (0 for exact sums); ``{}`` for other fields.
    """

    t: np.ndarray
    x: np.ndarray | None
    saved: dict = field(default_factory=dict)
    status: str = "finished"
    message: str = ""
    n_steps: int = 0
    n_rejected: int = 0
    x_final: np.ndarray | None = None
    method: str = ""
    fingerprint: str = ""
    noise_entropy: str = ""
    events: tuple = ()
    summation: dict = field(default_factory=dict)

    def __post_init__(self):
        caller = "Trajectory"
        t = np.atleast_1d(check_real_array(self.t, "t", caller, ndim=(0, 1), min_size=0))
        object.__setattr__(self, "t", t)
        if self.x is not None:
            x = check_real_array(self.x, "x", caller, finite=False, min_size=0,
                                 expected="an array of shape (n_times, n, d)")
            if x.ndim < 3 or x.shape[0] != t.size:
                raise InvalidParameterError(
                    f"x of Trajectory must have shape (n_times, n, d) with n_times = len(t) = {t.size}; "
                    f"got shape {x.shape}."
                )
        if not isinstance(self.saved, dict):
            raise InvalidParameterError(f"saved of Trajectory must be a dict; got {type(self.saved).__name__}.")
        for key, value in self.saved.items():
            # one row per save time, as simulate records them (a failed run: up to its last saved time)
            if np.ndim(value) == 0 or np.shape(value)[0] != t.size:
                raise InvalidParameterError(
                    f"saved[{key!r}] of Trajectory must be stacked along a leading time axis of length "
                    f"len(t) = {t.size}; got shape {np.shape(value)}."
                )
        check_choice(self.status, "status", ("finished", "terminated", "failed"), caller)
        check_param(self.n_steps, "n_steps", caller, low=0, integer=True)
        check_param(self.n_rejected, "n_rejected", caller, low=0, integer=True)
        if not all(isinstance(v, str) for v in (self.message, self.method, self.fingerprint)):
            raise InvalidParameterError("message, method and fingerprint of Trajectory must be strings.")

    @property
    def success(self) -> bool:
        """The run reached t1, or a terminal event (solve_ivp's ``status >= 0``)."""
        return self.status != "failed"

    @property
    def t_events(self) -> list:
        """The times of each event: shape (k,) for one system, (S, k) for a stack (NaN-padded)."""
        return [rec.t for rec in self.events]

    @property
    def x_events(self) -> list:
        """The states at each event's times: (k, n, d) or (S, k, n, d)."""
        return [rec.x for rec in self.events]

    def __repr__(self) -> str:
        shape = None if self.x is None else self.x.shape
        return (f"Trajectory(status={self.status!r}, n_times={len(self.t)}, x.shape={shape}, "
                f"saved={sorted(self.saved)}, n_steps={self.n_steps}, method={self.method!r})")


def _row_shapes(row, first, caller):
    """A row returned by ``SaveAt.fn``: a dict of str to real arrays, with the keys and
    shapes of the first row (so that rows stack along time)."""
    fix = "SaveAt.fn must return a dict mapping names to arrays of fixed shape, e.g. {'energy': model.energy(x)}."
    if not isinstance(row, dict) or not row or not all(isinstance(k, str) for k in row):
        raise InvalidParameterError(f"SaveAt.fn of {caller} returned {type(row).__name__}; {fix}")
    shapes = {key: check_real_array(val, f"SaveAt.fn()[{key!r}]", caller, finite=False, min_size=0).shape
              for key, val in row.items()}
    if first is not None and shapes != first:
        raise InvalidParameterError(
            f"SaveAt.fn of {caller} returned keys/shapes {shapes} after {first} at the first save; {fix}"
        )
    return shapes


def _whole(x):
    return x


class Saver:
    """What the solve loop stores: the target times it must land on, and the saved rows.

    ``targets``: the save times after t0 (and t1); ``at_target(k, t, x)`` after landing on
    ``targets[k]``, ``after_step(n_steps, t, x)`` after every accepted step (``SaveAt.every``),
    ``trajectory(...)`` the result.
    """

    def __init__(self, save: SaveAt, t0: float, t1: float, x0: np.ndarray, caller: str = "simulate"):
        self.save, self.caller, self.t1 = save, caller, t1
        self.times, self.xs, self.rows, self._shapes = [], [], [], None
        self.expand = _whole  # the whole state of the loop's (a compacted stack's running rows: loop.Compaction)
        tol = 1e-12 * max(1.0, abs(t1))
        ts = save.ts
        if ts is None:
            if save.t0:
                self.record(t0, x0)
            self.targets, self._save_targets = np.array([t1]), 1
            self.every = save.every
            return
        if ts[0] < t0 or ts[-1] > t1 + tol:
            raise InvalidParameterError(
                f"SaveAt.ts must lie in [t0, t1] = [{t0:g}, {t1:g}]; got [{ts[0]:g}, {ts[-1]:g}]."
            )
        if ts[0] == t0:
            self.record(t0, x0)
            ts = ts[1:]
        lands_on_t1 = ts.size > 0 and ts[-1] >= t1 - tol
        self.targets = ts if lands_on_t1 else np.append(ts, t1)
        self._save_targets = len(ts)  # the appended t1 is a target, not a save time
        self.every = None

    def record(self, t, x):
        x = self.expand(x)
        self.times.append(t)
        if self.save.x:
            self.xs.append(x.copy())
        if self.save.fn is not None:
            row = self.save.fn(t, x)
            self._shapes = _row_shapes(row, self._shapes, self.caller)
            self.rows.append(row)

    def after_step(self, n_steps, t, x):
        if self.every is not None and n_steps % self.every == 0 and t < self.t1:
            self.record(t, x)

    def at_target(self, k, t, x):
        if k < self._save_targets:
            self.record(t, x)

    def stop(self, t, x):
        """A terminal event at t: the run's last row (unless t was just recorded)."""
        if not self.times or self.times[-1] != t:
            self.record(t, x)

    def trajectory(self, **info) -> Trajectory:
        saved = {key: np.stack([np.asarray(r[key]) for r in self.rows]) for key in (self.rows[0] if self.rows else ())}
        x = np.stack(self.xs) if self.save.x and self.xs else None
        return Trajectory(t=np.asarray(self.times), x=x, saved=saved, **info)
