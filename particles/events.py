"""Events of :func:`particles.simulate`: functions of the state whose zero crossings the solve loop locates.

``simulate(x0, field, ..., events=[...])`` takes callables ``g(t, x)`` with the attributes ``terminal``
and ``direction`` of :func:`scipy.integrate.solve_ivp`'s events (:class:`Event` sets them on any
callable); the times and states of each crossing are in ``Trajectory.events`` (``t_events``,
``x_events``). Ready-made: :func:`min_distance` (the smallest pairwise distance reaches ε) and
:func:`energy_reaches` (the energy reaches E).

>>> import numpy as np, particles
>>> model = particles.MultiHead(np.eye(2), beta=2.0, kind="softmax")
>>> x0 = np.array([[1.0, 0.0], [np.cos(2.0), np.sin(2.0)]])
>>> traj = particles.simulate(x0, model, t1=10.0, dt=0.05, events=min_distance(0.3, terminal=True))
>>> traj.status, round(float(traj.t_events[0][0]), 6)
('terminated', 6.039457)
"""

from ._dynamics.event_functions import Event, energy_reaches, min_distance, smallest_distance
from ._dynamics.events import EventRecord

__all__ = ["Event", "EventRecord", "min_distance", "energy_reaches", "smallest_distance"]
