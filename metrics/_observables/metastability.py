r"""Metastability: plateaus of the energy and of the cluster count, and the staircase identity.

At large β the flow forms clusters fast and merges them on time scales
:math:`e^{\beta(1-\cos\theta)}` (θ the angle between clusters), so E(t) and the cluster count
k(t) are staircases in log t. Plateau detection (:func:`plateaus`):

- a real series (energy) is flat where its slope in :math:`s = \log t` (or t), normalised by its
  total range, is below ``rtol``: :math:`|\Delta v/\Delta s| \le \mathrm{rtol}\,(\max v - \min v)`;
- an integer series (cluster count) is flat where it is constant;

and a plateau is a maximal flat stretch lasting at least ``min_duration`` (in s).

**Staircase identity.** If the tokens sit in k collapsed clusters at points :math:`p_c` with masses
:math:`m_c` (fractions of tokens), the energy is exactly

.. math:: E = \frac1{2\beta}\sum_h\sum_{c,c'} m_c m_{c'}\, e^{\beta\langle p_c, M_h p_{c'}\rangle}
   \qquad\text{(``cluster_energy``)},

and for scalar heads :math:`M_h = \lambda_h I` with well separated clusters the cross terms are
smaller by :math:`e^{-\beta\lambda_h(1-\cos\theta)}`, so the plateau values obey

.. math:: \frac{2\beta\,E}{\sum_h e^{\beta\lambda_h}} \approx \sum_c m_c^2
   \qquad\text{(``normalised_energy`` against ``sum_sq_masses``)}.

This is the library's normalisation :math:`E_h = \frac1{2\beta n^2}\sum_{ij}e^{\beta s^h_{ij}}`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from particles import MultiHead, Trajectory
from particles.validation import (
    NONE,
    POSITIVE_BETA,
    AnyOf,
    Boolean,
    Interval,
    InvalidParameterError,
    Model,
    Points,
    Weights,
    check_model,
    check_real_array,
    check_states,
    check_times,
    declare,
    fits_model,
    one_per,
)

from .clustering import cluster_labels

__all__ = ["Plateau", "plateaus", "StaircaseStep", "staircase", "cluster_energy"]


@dataclass(frozen=True)
class Plateau:
    """A flat stretch of a series: times ``start``..``end``, indices ``i0``..``i1`` (inclusive) into the
    input arrays, and the mean ``value`` there."""

    start: float
    end: float
    value: float
    i0: int
    i1: int


_RTOL = Interval(0, None, closed="neither", hint="rtol is the relative tolerance of a plateau, e.g. 0.02.")
_MIN_DURATION = AnyOf(NONE, Interval(0))


@declare(rtol=_RTOL, min_duration=_MIN_DURATION, log_time=Boolean())
def plateaus(t, values, *, rtol: float = 0.02, min_duration: float | None = None, log_time: bool = True) -> list:
    r"""Plateaus of a saved series (module docstring), in time order.

    Parameters
    ----------
    t : array_like (n_times,), strictly increasing (positive when ``log_time``; t <= 0 is dropped)
    values : array_like (n_times,)
        Integer-valued series (cluster counts) are split into constant runs.
    rtol : float
        Slope threshold relative to the range of the series (real series).
    min_duration : float, optional
        Shortest plateau, in log t (``log_time``) or t; default 5% of the span.
    log_time : bool

    Returns
    -------
    list of Plateau

    Examples
    --------
    >>> t = np.logspace(0, 4, 41)
    >>> v = np.where(t < 100, 1.0, 2.0)
    >>> [(round(p.value, 3), round(np.log10(p.start)), round(np.log10(p.end))) for p in plateaus(t, v)]
    [(1.0, 0, 2), (2.0, 2, 4)]
    """
    caller = "plateaus"
    v = check_real_array(values, "values", caller, min_size=0)
    if v.ndim != 1:
        raise InvalidParameterError(f"values of {caller} must be 1-D (one value per saved time); got shape {v.shape}.")
    t = check_times(t, len(v), "t", caller)
    orig = np.flatnonzero(t > 0) if log_time else np.arange(len(t))  # plateau indices refer to the input
    t, v = t[orig], v[orig]
    if len(v) < 3:
        raise InvalidParameterError(
            f"{caller} needs at least 3 saved times{' with t > 0' if log_time else ''}; got {len(v)}. "
            "Save more times, e.g. SaveAt(ts=np.logspace(...))."
        )
    s = np.log(t) if log_time else t
    min_duration = 0.05 * (s[-1] - s[0]) if min_duration is None else min_duration
    integer = bool(np.all(v == np.round(v)))
    if integer:
        flat = np.diff(v) == 0
    else:
        span = float(v.max() - v.min())
        flat = np.abs(np.diff(v)) <= rtol * span * np.diff(s) if span > 0 else np.ones(len(v) - 1, bool)
    out = []
    k = 0
    while k < len(flat):
        if not flat[k]:
            k += 1
            continue
        j = k
        while j < len(flat) and flat[j]:
            j += 1
        i0, i1 = k, j  # saves i0..i1 joined by flat intervals
        if s[i1] - s[i0] >= min_duration:
            out.append(Plateau(float(t[i0]), float(t[i1]), float(np.mean(v[i0: i1 + 1])), int(orig[i0]), int(orig[i1])))
        k = j
    return out


@declare(model=Model(), centres=Points(on_sphere=False, min_d=1), masses=Weights(probability=True),
         relations=[fits_model("centres"), one_per("masses", "centres"), POSITIVE_BETA])
def cluster_energy(model: MultiHead, centres, masses) -> float:
    r""":math:`\frac1{2\beta}\sum_h\sum_{c,c'}m_cm_{c'}e^{\beta\langle p_c, M_hp_{c'}\rangle}`: the energy of
    collapsed clusters at unit points ``centres`` (k, d) with ``masses`` (k,) summing to 1; +inf past the
    float64 range (β‖M‖ ≳ 700)."""
    p, m = centres, masses
    S = np.einsum("cd,hde,ke->hck", p, model.M, p)
    # summed in the log domain: +inf only when the energy itself is past the float64 range
    logE = logsumexp(model.beta * S, b=np.broadcast_to(np.outer(m, m), S.shape)) - np.log(2 * model.beta)
    with np.errstate(over="ignore"):
        return float(np.exp(logE))


@dataclass(frozen=True)
class StaircaseStep:
    """One energy plateau of :func:`staircase` and its cluster structure (at the plateau's middle save)."""

    start: float
    end: float
    energy: float
    n_clusters: int
    masses: tuple
    sum_sq_masses: float
    normalised_energy: float
    cluster_energy: float


@declare(eps=Interval(0, None, closed="neither"), rtol=_RTOL, min_duration=_MIN_DURATION, log_time=Boolean())
def staircase(model: MultiHead, traj, ts=None, *, eps: float = 1e-2, rtol: float = 0.02,
              min_duration: float | None = None, log_time: bool = True) -> list:
    r"""Energy plateaus of a run, with cluster masses and the staircase identity on each.

    Parameters
    ----------
    model : MultiHead
    traj : Trajectory (saved with positions) or ndarray (n_times, n, d)
    ts : array_like, optional
        Times when ``traj`` is an array.
    eps : float
        Geodesic linking distance of the clusters (:func:`metrics.cluster_labels`).
    rtol, min_duration, log_time
        As in :func:`plateaus`.

    Returns
    -------
    list of StaircaseStep
        ``normalised_energy`` = :math:`2\beta E/\sum_h e^{\beta\lambda_h}` with
        :math:`\lambda_h = \|M_h\|_{op}`, to compare with ``sum_sq_masses``;
        ``cluster_energy`` the exact energy of the collapsed clusters, to compare with ``energy``.
    """
    caller = "staircase"
    check_model(model, caller)
    if isinstance(traj, Trajectory):
        if ts is not None:
            raise InvalidParameterError(
                f"ts of {caller} is only for an array of states: a Trajectory carries its own times "
                "(traj.t). Drop ts, or pass traj.x with ts."
            )
        xs = check_states(traj.x, "traj.x", caller, d=model.d, min_times=3)
        t = np.asarray(traj.t, dtype=np.float64)
    else:
        xs = check_states(traj, "traj", caller, d=model.d, min_times=3)
        if ts is None:
            raise InvalidParameterError("staircase needs the save times ts when traj is an array.")
        t = check_times(ts, len(xs), "ts", caller)
    if model.beta == 0:
        raise InvalidParameterError("staircase needs beta > 0 (the energy is +inf at beta = 0).")
    E = np.array([model.energy(x) for x in xs])
    lam = np.array([np.linalg.norm(M, 2) for M in model.M])
    top = float(np.sum(np.exp(model.beta * lam)))
    steps = []
    for p in plateaus(t, E, rtol=rtol, min_duration=min_duration, log_time=log_time):
        mid = (p.i0 + p.i1) // 2
        x = xs[mid]
        labels = cluster_labels(x, eps=eps)
        k = int(labels.max() + 1)
        masses = np.bincount(labels, minlength=k) / len(x)
        centres = np.stack([x[labels == c].sum(0) for c in range(k)])
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        order = np.argsort(-masses, kind="stable")
        steps.append(StaircaseStep(p.start, p.end, p.value, k, tuple(float(m) for m in masses[order]),
                                   float(np.sum(masses**2)), 2 * model.beta * p.value / top,
                                   cluster_energy(model, centres, masses)))
    return steps
