"""The result object of :func:`meanfield.wasserstein_ascent`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .measure import EmpiricalMeasure

__all__ = ["MeanFieldResult"]


@dataclass(frozen=True)
class MeanFieldResult:
    """Output of :func:`wasserstein_ascent`.

    Attributes
    ----------
    t : ndarray (n_times,)
    points : ndarray (n_times, m, d) for Lagrangian runs, (m, d) for grid runs
    mass : ndarray (n_times, m)
        Atom weights (constant for Lagrangian runs) or cell masses.
    energy : ndarray (n_times,)
        :math:`E_{multi}[\\mu(t)]`.
    scheme : str
    n_steps : int
    info : dict
    status : {"finished", "failed"}
        "failed" (with ``on_failure="return"``): the run stopped at a non-finite state or at
        ``max_steps``; the arrays end at the last save reached and ``message`` says why.
    message : str
    """

    t: np.ndarray
    points: np.ndarray
    mass: np.ndarray
    energy: np.ndarray
    scheme: str
    n_steps: int = 0
    info: dict = field(default_factory=dict)
    status: str = "finished"
    message: str = ""

    def measure(self, k: int = -1):
        """The measure at save index k, as an EmpiricalMeasure (positive-mass atoms)."""
        pts = self.points[k] if self.points.ndim == 3 else self.points
        w = self.mass[k]
        keep = w > 0
        return EmpiricalMeasure(pts[keep], w[keep] / w[keep].sum())
