"""Events of the solve loop: times where a function of the state crosses zero (``solve_ivp(events=...)``).

An event is a callable ``g(t, x)`` returning a float for a state (n, d), or one value per system, shape
(S,), for a stack (S, n, d) of independent systems (a field with ``systems``: :class:`particles.Ensemble`).
Its attributes ``terminal`` (False, True or a count: stop at that occurrence) and ``direction`` (> 0: only
upward crossings, < 0: only downward, 0: both) are read as :func:`scipy.integrate.solve_ivp` reads them;
:class:`Event` sets them on any callable. After every accepted step the loop evaluates each event; where
one changes sign it builds the step's interpolant (the stepper's dense output where it has one: Shampine's
quartic for Dormand–Prince; else the cubic Hermite interpolant of the two endpoint states and velocities;
linear for a stochastic step), finds the root with :func:`scipy.optimize.brentq` (``xtol = rtol = 4 eps``,
as solve_ivp) and retracts the interpolated state onto the sphere. A zero at the start counts as a
crossing, as in solve_ivp (so a terminal event that is zero at t0 stops the run at t0).

A stack records each system's own crossings. It cannot stop one system alone (the systems share the
steps): a system's terminal event ends its record (later crossings of that system are not kept, its
state keeps moving in the stack), and the run stops when every system has met its terminal event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from .._core.errors import InvalidParameterError
from .event_functions import Event
from .tableaux import onto

__all__ = ["EventRecord", "EventLocator", "check_events", "interpolant"]

_TOL = 4 * np.finfo(float).eps


@dataclass(frozen=True)
class EventRecord:
    """The occurrences of one event in a run.

    ``t``: shape (k,) for one system, (S, k) for a stack (NaN past a system's last occurrence);
    ``x``: the states there, (k, n, d) or (S, k, n, d) (NaN-padded alike)."""

    name: str
    terminal: int
    direction: float
    t: np.ndarray
    x: np.ndarray


def check_events(events, name: str = "events", caller: str = "simulate") -> tuple:
    """``events`` (None, one callable or a sequence of them) as a tuple of :class:`Event` with unique
    names, their ``terminal`` and ``direction`` read as solve_ivp reads them (a plain callable's attributes)."""
    if events is None:
        return ()
    where = f" of {caller}" if caller else ""
    items = (events,) if callable(events) else events
    if isinstance(items, (str, bytes, dict)) or not hasattr(items, "__iter__"):
        raise InvalidParameterError(f"{name}{where} must be an event function g(t, x) or a sequence of them; got "
                                    f"{type(events).__name__}.")
    out, seen = [], set()
    for i, ev in enumerate(items):
        if not callable(ev) or isinstance(ev, type):
            raise InvalidParameterError(f"{name}[{i}]{where} must be a callable g(t, x) -> float; got "
                                        f"{type(ev).__name__}.")
        terminal, direction = getattr(ev, "terminal", False), getattr(ev, "direction", 0.0)
        if isinstance(terminal, (bool, np.bool_)):
            terminal = int(bool(terminal))
        elif not (isinstance(terminal, (int, np.integer)) and terminal >= 0):
            raise InvalidParameterError(f"{name}[{i}].terminal{where} must be True, False or a count >= 0 (stop at "
                                        f"that occurrence); got {terminal!r}.")
        if isinstance(direction, (bool, np.bool_)) or not isinstance(direction, (int, float, np.number)) \
                or not np.isfinite(direction):
            raise InvalidParameterError(f"{name}[{i}].direction{where} must be a finite number (> 0: upward "
                                        f"crossings, < 0: downward, 0: both); got {direction!r}.")
        label = getattr(ev, "name", "") or getattr(ev, "__name__", "")
        label = label if isinstance(label, str) and label.isidentifier() else "event"
        label = f"{label}_{i}" if label in seen or label == "event" else label  # unique: the dataset's coordinate
        seen.add(label)
        out.append(Event(getattr(ev, "fn", ev) if isinstance(ev, Event) else ev, int(terminal),
                         float(np.sign(direction)), label, bool(getattr(ev, "per_system", False))))
    return tuple(out)


class EventLocator:
    """The solve loop's events: their values at the last accepted state, and each system's occurrences.

    ``after_step(t0, x0, state, h, field, stepper)`` after each accepted step (from (t0, x0) with step h
    to ``state.t, state.x``) returns None, or ``(t, x)`` where the run stops."""

    @classmethod
    def of(cls, events, field, t0, x0, caller: str = "simulate"):
        """The locator of ``events`` (checked) for a run of ``field`` from (t0, x0); None without events."""
        return cls(events, t0, x0, callable(getattr(field, "systems", None)), caller) if events else None

    def __init__(self, events, t0, x0, stack: bool, caller: str = "simulate"):
        self.events, self.stack, self.caller = events, stack, caller
        self.S = x0.shape[0] if stack else 1
        self.g = self._values(t0, x0, first=True)
        E = len(events)
        self.limit = np.array([ev.terminal if ev.terminal else np.inf for ev in events], dtype=float)[:, None]
        self.direction = np.array([ev.direction for ev in events])[:, None]
        self.count = np.zeros((E, self.S), dtype=int)
        self.stopped = np.zeros(self.S, dtype=bool)
        self.last = np.full((E, self.S), np.nan)  # time of each event's last occurrence (a zero is counted once)
        self.found = [[[] for _ in range(self.S)] for _ in range(E)]
        self.shape = x0.shape[1:] if stack else x0.shape

    def _value(self, k, t, x, first=False):
        with np.errstate(all="ignore"):
            val = np.asarray(self.events[k](t, x), dtype=float)
        want = (self.S,) if self.stack else ()
        if first and val.shape != want and not (not self.stack and val.size == 1):
            form = f"an array of shape ({self.S},), one value per system of the stack" if self.stack else "a float"
            raise InvalidParameterError(f"The 'events' parameter of {self.caller}: events[{k}] "
                                        f"({self.events[k].name!r}) must return {form}; got shape {val.shape} at t0.")
        return val.reshape(self.S)

    def _values(self, t, x, first=False):
        return np.stack([self._value(k, t, x, first) for k in range(len(self.events))])

    def after_step(self, t0, x0, state, h, field, stepper):
        t1, x1 = state.t, state.x
        g0, g1 = self.g, self._values(t1, x1)
        self.g = g1
        up, down = (g0 <= 0) & (g1 >= 0), (g0 >= 0) & (g1 <= 0)
        active = (up & (self.direction >= 0)) | (down & (self.direction <= 0))
        active &= ~((g0 == 0) & (self.last == t0)) & ~self.stopped[None, :]
        if not active.any():
            return None
        interp = _Cached(lambda: interpolant(field, stepper, t0, x0, h, t1, x1), t0, x0, t1, x1)
        ends = []
        for s in np.nonzero(active.any(axis=0))[0]:
            roots = sorted((self._root(k, s, t0, t1, g0[k, s], g1[k, s], interp), k)
                           for k in np.nonzero(active[:, s])[0])
            for root, k in roots:
                self.found[k][s].append((root, interp(root, [s])[0] if self.stack else interp(root)))
                self.count[k, s] += 1
                self.last[k, s] = root
                if self.count[k, s] >= self.limit[k, 0]:
                    self.stopped[s] = True
                    ends.append(root)
                    break
        if ends and self.stopped.all():
            t_stop = max(ends)
            return t_stop, interp(t_stop)
        return None

    def _root(self, k, s, t0, t1, g0, g1, interp):
        if g0 == 0:
            return t0
        if g1 == 0:
            return t1

        alone = self.stack and getattr(self.events[k], "per_system", False)

        def g(tau):
            if tau <= t0:
                return g0
            if tau >= t1:
                return g1
            if alone:  # the event maps a sub-stack to its systems' values: evaluate system s alone
                return float(np.asarray(self.events[k](tau, interp(tau, [s])), dtype=float).reshape(-1)[0])
            return float(self._value(k, tau, interp(tau))[s])

        return brentq(g, t0, t1, xtol=_TOL, rtol=_TOL)

    def records(self) -> tuple:
        """The occurrences as :class:`EventRecord` s (NaN-padded per system for a stack)."""
        out = []
        for k, ev in enumerate(self.events):
            kmax = max(len(f) for f in self.found[k])
            t = np.full((self.S, kmax), np.nan)
            x = np.full((self.S, kmax) + tuple(self.shape), np.nan)
            for s, occ in enumerate(self.found[k]):
                for j, (root, state) in enumerate(occ):
                    t[s, j], x[s, j] = root, state
            if not self.stack:
                t, x = t[0], x[0]
            out.append(EventRecord(ev.name, ev.terminal, ev.direction, t, x))
        return tuple(out)


class _Cached:
    """A step's interpolant, built on first use, exact at the step's two ends."""

    def __init__(self, build, t0, x0, t1, x1):
        self.build, self.t0, self.x0, self.t1, self.x1, self.fn = build, t0, x0, t1, x1, None

    def __call__(self, tau, idx=None):
        if tau <= self.t0 or tau >= self.t1:
            x = self.x0 if tau <= self.t0 else self.x1
            return x if idx is None else x[idx]
        if self.fn is None:
            self.fn = self.build()
        return self.fn(tau, idx)


def interpolant(field, stepper, t0, x0, h, t1, x1):
    """The step's ``(tau, idx=None) -> x(tau)`` (of the systems ``idx`` of a stack alone when given): the
    stepper's dense output, else the cubic Hermite interpolant (the chord for a stochastic step)."""
    if stepper.dense is not None:
        return stepper.dense(field, t0, x0, h, field.geom)
    if stepper.stochastic:
        return linear(field.geom, t0, x0, t1, x1)
    return hermite(field, field.geom, t0, x0, t1, x1)


def hermite(field, geom, t0, x0, t1, x1):
    """The cubic Hermite interpolant of a step from (t0, x0) to (t1, x1) with the field's velocities at
    both ends, retracted onto the manifold: ``(tau, idx=None) -> x(tau)``."""
    h = t1 - t0
    v0, v1 = field(t0, x0), field(t1, x1)

    def at(tau, idx=None):
        a, b, c, e = (x0, v0, x1, v1) if idx is None else (x0[idx], v0[idx], x1[idx], v1[idx])
        s = (tau - t0) / h
        y = (2 * s**3 - 3 * s**2 + 1) * a + (s**3 - 2 * s**2 + s) * h * b + (3 * s**2 - 2 * s**3) * c \
            + (s**3 - s**2) * h * e
        return onto(geom, y)

    return at


def linear(geom, t0, x0, t1, x1):
    """The chord of a step (a stochastic step's path is not resolved between its ends), retracted."""
    def at(tau, idx=None):
        a, b = (x0, x1) if idx is None else (x0[idx], x1[idx])
        return onto(geom, a + ((tau - t0) / (t1 - t0)) * (b - a))

    return at
