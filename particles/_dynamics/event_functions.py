"""Event functions of the solve loop (:mod:`particles.events`): :class:`Event` (a callable with the
``terminal`` and ``direction`` attributes of ``solve_ivp``'s events) and the ready-made ones,
:func:`min_distance` (the smallest pairwise distance reaches ε, in bounded memory) and
:func:`energy_reaches` (the energy reaches E). The solve loop locates them (:mod:`.events`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.blocking import row_blocks
from .._core.declarations import declare
from .._core.params import AnyOf, Boolean, Function, Instance, Integer, Interval, Options
from .._core.params_data import Array

__all__ = ["Event", "min_distance", "energy_reaches", "smallest_distance"]

_TERMINAL = AnyOf(Boolean(), Integer(0))


@declare(fn=Function("an event function g(t, x) -> float (an array of shape (S,) for a stack)"),
         terminal=_TERMINAL, direction=Interval(), name=Instance(str), per_system=Boolean())
@dataclass(frozen=True)
class Event:
    """An event function with its attributes: ``Event(lambda t, x: ..., terminal=True, direction=-1)``.

    Parameters
    ----------
    fn : callable ``fn(t, x)``
        A float for a state (n, d); an array of shape (S,) for a stack (S, n, d). The event occurs
        where it crosses zero.
    terminal : bool or int
        False: record every crossing; True: stop at the first; k: stop at the k-th.
    direction : float
        > 0: only crossings from negative to positive; < 0: only from positive to negative; 0: both.
    name : str
        The event's name in the trajectory and the dataset (default: ``fn``'s name).
    per_system : bool
        ``fn`` maps any stack (k, n, d) to the k values of its systems alone, so that the root of one
        system of an :class:`particles.Ensemble` run is searched on that system only (else every
        evaluation is of the whole stack). The ready-made events are.
    """

    fn: object
    terminal: bool | int = False
    direction: float = 0.0
    name: str = ""
    per_system: bool = False

    def __call__(self, t, x):
        return self.fn(t, x)


def _closest_pairs(x):
    """Per system of x (..., n, d): the indices (i, j), i < j, of the pair with the smallest Euclidean
    distance, from blocks of rows of the squared distances |x_i|^2 + |x_j|^2 - 2 x_i.x_j."""
    n = x.shape[-2]
    lead = x.shape[:-2]
    sq = np.einsum("...nd,...nd->...n", x, x)
    best, arg = np.full(lead, np.inf), np.zeros(lead + (2,), dtype=int)
    xt = np.swapaxes(x, -1, -2)
    for rows in row_blocks(n, n * max(1, int(np.prod(lead)))):
        d2 = x[..., rows, :] @ xt  # in place from here: (a sum of temporaries costs more than the product)
        d2 *= -2.0
        d2 += sq[..., rows, None]
        d2 += sq[..., None, :]
        d2 += np.where(np.arange(n)[None, :] > np.arange(rows.start, rows.stop)[:, None], 0.0, np.inf)
        flat = d2.reshape(lead + (-1,))
        k = np.argmin(flat, axis=-1)
        val = np.take_along_axis(flat, k[..., None], axis=-1)[..., 0]
        better = val < best
        best = np.where(better, val, best)
        arg[..., 0] = np.where(better, rows.start + k // n, arg[..., 0])
        arg[..., 1] = np.where(better, k % n, arg[..., 1])
    return arg


@declare(x=Array((2, 3), what="tokens (n, d) or a stack (S, n, d)"), metric=Options("geodesic", "chordal"))
def smallest_distance(x, metric: str = "geodesic"):
    """The smallest pairwise distance of the tokens x (n, d), or of each system of a stack (S, n, d):
    the closest pair is found in row blocks of the Gram matrix (bounded memory), its distance computed
    from the difference of the two rows (accurate for close pairs, where arccos of the inner product is not);
    ``"geodesic"``: :math:`2\\arcsin(|x_i - x_j|/2)` (unit rows), ``"chordal"``: :math:`|x_i - x_j|`.
    One token has no pair: +inf."""
    return _smallest(x, metric)


def _smallest(x, metric):
    if x.shape[-2] < 2:
        return np.full(x.shape[:-2], np.inf) if x.ndim > 2 else np.inf
    arg = _closest_pairs(x)
    xi = np.take_along_axis(x, arg[..., 0, None, None], axis=-2)[..., 0, :]
    xj = np.take_along_axis(x, arg[..., 1, None, None], axis=-2)[..., 0, :]
    chord = np.linalg.norm(xi - xj, axis=-1)
    dist = 2 * np.arcsin(np.minimum(chord / 2, 1.0)) if metric == "geodesic" else chord
    return float(dist) if np.ndim(dist) == 0 else dist


@declare(eps=Interval(0, None, closed="neither"), metric=Options("geodesic", "chordal"), terminal=_TERMINAL,
         direction=Interval())
def min_distance(eps: float, *, metric: str = "geodesic", terminal: bool | int = False,
                 direction: float = -1.0) -> Event:
    r"""The event "the smallest pairwise distance reaches ε": :math:`g(t, x) = \min_{i<j} d(x_i, x_j) - \varepsilon`.

    Parameters
    ----------
    eps : float > 0
        The distance.
    metric : {"geodesic", "chordal"}
        :math:`d = 2\arcsin(|x_i - x_j|/2)` (the angle between unit rows) or :math:`|x_i - x_j|`.
    terminal : bool or int
        Stop the run at the first (or k-th) occurrence.
    direction : float
        Default -1: the distance falls to ε (two tokens approach); 0: both ways.

    Returns
    -------
    Event
        Named ``min_distance``; on a stack (S, n, d) it returns one value per system. The closest pair
        is found in row blocks (memory O(block · n), not O(n²)).

    Examples
    --------
    >>> ev = min_distance(0.1)
    >>> round(float(ev(0.0, np.array([[1.0, 0.0], [0.0, 1.0]]))), 6)
    1.470796
    """
    return Event(lambda t, x: _smallest(np.asarray(x, dtype=float), metric) - eps, terminal, direction,
                 "min_distance", True)


@declare(model=Instance(object, what="a model with energy(x) (a MultiHead)",
                        test=lambda m: callable(getattr(m, "energy", None)), bad=(3, "softmax")),
         E=Interval(), terminal=_TERMINAL, direction=Interval())
def energy_reaches(model, E: float, *, terminal: bool | int = False, direction: float = 0.0) -> Event:
    r"""The event "the energy reaches E": :math:`g(t, x) = \mathrm{model.energy}(x) - E`.

    Parameters
    ----------
    model : MultiHead
        Any object with ``energy(x)``; on a stack (S, n, d) (an :class:`Ensemble` run of one model, e.g.
        over seeds) the energy of each system.
    E : float
        The level.
    terminal, direction
        As for :class:`Event` (the energy of a gradient flow rises: ``direction=1``).

    Returns
    -------
    Event
        Named ``energy``.
    """
    def g(t, x):
        x = np.asarray(x)
        if x.ndim == 3:
            return np.array([model.energy(xs) for xs in x]) - E
        return model.energy(x) - E

    return Event(g, terminal, direction, "energy", True)
