"""The result object of :func:`particles.simulate`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trajectory", "SaveAt"]


@dataclass(frozen=True)
class SaveAt:
    """What :func:`particles.simulate` stores, and when.

    Parameters
    ----------
    ts : array_like of float, optional
        Save times, increasing, inside [t0, t1]; the solver lands on each exactly.
    every : int, optional
        Save every ``every`` steps (and at t1). Ignored when ``ts`` is given.
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
    status : {"finished", "failed"}
    message : str
    n_steps, n_rejected : int
        Accepted and rejected steps.
    x_final : ndarray of shape (n, d)
        Last finite state reached.
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

    @property
    def success(self) -> bool:
        return self.status == "finished"

    def __repr__(self) -> str:
        shape = None if self.x is None else self.x.shape
        return (f"Trajectory(status={self.status!r}, n_times={len(self.t)}, x.shape={shape}, "
                f"saved={sorted(self.saved)}, n_steps={self.n_steps}, method={self.method!r})")
