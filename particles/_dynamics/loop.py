r"""The step loop of :func:`particles.simulate`, and the running systems of a stack stepped alone.

``_advance`` steps the loop's state to the next target: a step of the stepper, the controller's
decision, the events, the field's ``after_step``, a finiteness check every ``check_every`` steps.

A field with ``running`` (the indices, increasing, of the systems of a stack (S, n, d) that still
move; every other system has velocity zero from then on: :meth:`particles.Ensemble.settling`)
takes the states of its running systems alone, (R, n, d), as well as the whole stack. With
fixed steps (the loop's :class:`~particles._dynamics.controllers.ConstantStep`, a deterministic
stepper, no events) the loop then keeps only the running rows in its state (:class:`Compaction`):
a step's stages, retraction and checks run over R systems instead of S. A settled system's
velocity is zero, so a whole-stack step moves it by a retraction of x itself, which leaves it
unchanged up to round-off; kept aside, it stays exactly where it was certified. The running rows
step as they do in the whole stack (every per-system operation sees the same numbers), and saves,
the last finite state and the result take the whole stack back.
"""

from __future__ import annotations

import numpy as np

from .._core.errors import SolverError
from .controllers import ConstantStep
from .events import EventLocator

__all__ = ["Compaction"]


class Compaction:
    """The rows of a stack that the loop steps (``rows``: the running systems of ``field``), and the
    settled ones kept aside at their last states (``full``; None while every system runs)."""

    def __init__(self, field, x: np.ndarray):
        self.field, self.rows, self.full = field, np.arange(x.shape[0]), None

    @classmethod
    def of(cls, field, stepper, controller, events, x):
        """The compaction of a run of ``field`` from the stack x, or None where the loop must step the whole
        state: a field without ``running``, an adaptive or noisy stepper (the step's error norm and the
        noise draws span the stack), another controller, events (their functions see the whole stack)."""
        if getattr(field, "running", None) is None or x.ndim != 3 or events is not None or stepper.adaptive \
                or stepper.stochastic or type(controller) is not ConstantStep:
            return None
        return cls(field, x)

    def expand(self, x: np.ndarray) -> np.ndarray:
        """The whole stack whose running rows are x (x itself while every system runs)."""
        if self.full is None:
            return x
        out = self.full.copy()
        out[self.rows] = x
        return out

    def idle(self, x: np.ndarray) -> bool:
        """Every system settled: a step moves nothing."""
        return x.shape[0] == 0

    def after_step(self, t: float, x: np.ndarray) -> np.ndarray:
        """The field's ``after_step`` at the accepted state x; the rows of the systems still running."""
        self.field.after_step(t, x)
        running = self.field.running
        if running.size == self.rows.size:
            return x
        keep = np.isin(self.rows, running, assume_unique=True)
        if self.full is None:
            self.full = x.copy()
        else:
            self.full[self.rows[~keep]] = x[~keep]
        self.rows = self.rows[keep]
        return x[keep]


class _State:
    """The loop's mutable state: time, tokens (the running rows of a compacted stack), the last
    checked-finite tokens (the whole stack), step counts."""

    def __init__(self, t, x, last_good, h):
        self.t, self.x, self.last_good, self.h = t, x, last_good, h
        self.n_steps = self.n_rejected = 0
        self.events = self.compact = None

    def begin(self, field, stepper, controller, saver, events, caller):
        """At t0: the events, the compaction of a stack of running systems (saves take the whole stack back)
        and the field's ``after_step``."""
        self.events = EventLocator.of(events, field, self.t, self.x, caller)
        self.compact = Compaction.of(field, stepper, controller, self.events, self.x)
        if self.compact is not None:
            saver.expand = self.compact.expand
            self.x = self.compact.after_step(self.t, self.x)
        elif callable(getattr(field, "after_step", None)):
            field.after_step(self.t, self.x)

    def whole(self, x):
        """The whole state of which x holds the rows the loop steps."""
        return x if self.compact is None else self.compact.expand(x)


def _advance(state, target, field, stepper, controller, saver, bar, *, rng, sigma, rtol, atol, max_steps,
             check_every):
    """Step from state.t to ``target`` exactly (accepted steps only move the state); True when a terminal
    event stopped the run (the state is then the event's)."""
    geom, after, compact = field.geom, getattr(field, "after_step", None), state.compact
    while state.t < target:
        remaining = target - state.t
        h = controller.propose(state.h, remaining, state.t, state.x)
        if state.n_steps + state.n_rejected >= max_steps:
            raise SolverError(f"max_steps={max_steps} reached at t={state.t:.6g}. "
                              "Increase max_steps, or loosen rtol/atol.")
        if compact is not None and compact.idle(state.x):
            x_new, err = state.x, None  # every system settled: nothing moves
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # an overflowing step is caught below, with its fix
                x_new, err = stepper(field, state.t, state.x, h, geom, rng=rng, sigma=sigma, rtol=rtol, atol=atol)
        accept, state.h = controller.decide(err, h, state.t, state.x, x_new, geom, state.n_steps)
        if not accept:
            state.n_rejected += 1
            continue
        t_new = target if h >= remaining else state.t + h
        if bar is not None:
            bar.update(t_new - state.t)
        t_old, x_old, state.t, state.x = state.t, state.x, t_new, x_new
        state.n_steps += 1
        stop = None if state.events is None else state.events.after_step(t_old, x_old, state, h, field, stepper)
        if stop is not None:  # a terminal event: the state moves back to it
            state.t, state.x = stop
            state.last_good = state.x
            return True
        if compact is not None:
            state.x = compact.after_step(state.t, state.x)
        elif after is not None:
            after(state.t, state.x)
        if state.n_steps % check_every == 0 or state.t >= target:
            if not np.isfinite(state.x.sum()):
                raise SolverError(
                    f"state stopped being finite at t={state.t:.6g} (step {state.n_steps}). "
                    "Reduce dt, or lower beta (or use log_time_scale='auto' for USA heads)."
                )
            state.last_good = state.whole(state.x)
        saver.after_step(state.n_steps, state.t, state.x)
    return False
